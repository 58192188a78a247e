package flightserver

// The stream budget (Options.StreamBudget): one bound on the memory that
// all DoGet streams hold together, whatever their number and however
// slowly their clients read.
//
// Every stream has an account (streamMem). It is the allocator of the
// stream's scan and of the messages it builds, so it knows every byte the
// stream holds: decoded batches waiting in the scan, the group being
// merged, and the batches gRPC still holds because the client has not read
// them (zero-copy messages point into those batches). The budget is the
// sum of the accounts.
//
// The budget is enforced where memory is taken: the scan asks the account
// before it decodes each batch (tableformat.ScanPacer). Under the budget,
// with nobody waiting, scans decode freely. Otherwise:
//
//   - Turns: streams queue for budget, first come first (while anyone
//     waits, a stream under way queues too, so nobody overtakes), except
//     that streams whose clients have unread messages let those whose
//     clients wait for data go first. A turn
//     lasts until the stream hands its next message to gRPC, so the
//     budget goes to streams finishing messages, not spread over many
//     half-built ones; on its turn a stream decodes only while DoGet asks
//     it for rows (no batch decoded ahead is left over when the turn
//     ends). The first in the queue gets its turn when the
//     budget less what the streams already on their turn are expected to
//     take (what a stream held when it last sent a message, averaged)
//     leaves room for it.
//   - Progress: when no stream is on its turn and gRPC holds no message of
//     any stream (so no client reading can return budget), the first in
//     the queue gets its turn beyond the budget. Streams that all hold
//     partial batches thus never wait for each other forever, and the
//     budget is exceeded by at most one stream's next message.
//   - While gRPC holds messages, their clients return budget as they
//     read; a client that stopped reading does not, and streams wait.
//   - Eviction: a stream whose messages gRPC has held, none written, for
//     Options.StallTimeout while a stream whose client waits for data
//     waits for the budget has its
//     connection closed (the only way to make gRPC let go of what it
//     holds for a client that does not read). The budget then returns.
//     And once the first in the queue has waited the stall timeout, the
//     streams that have gone longest without their client reading (a
//     second at least) are closed until it has room: nobody waits much
//     longer than the stall timeout at the head of the queue, however the
//     stalled streams' clocks are spread.
//
// What streams decoded ahead before the budget was spent stays on their
// accounts while they queue (one decoded batch a stream at most); it
// counts against the budget like the rest.
//
// A stream that ends while gRPC still holds its last messages (its
// deadline passed while its client was stalled) keeps them on its account
// until gRPC writes them or the connection closes; gRPC does not free what
// it held for a connection that closed, so the account forgets those bytes
// then (the garbage collector frees them).

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
)

const (
	// DefaultStallTimeout is the default Options.StallTimeout.
	DefaultStallTimeout = 15 * time.Second
	// releaseBytes and releaseDelay: once every stream has ended, after
	// the streams together held releaseBytes or more, the server returns
	// its free memory to the system when releaseDelay has passed with no
	// stream. Go would keep the heap it grew to until its next garbage
	// collection, which an idle server does not start.
	releaseBytes = 128 << 20
	releaseDelay = 2 * time.Second
	// stallMin is the least time without its client reading for which a
	// stream's connection may be closed to make room for a stream that has
	// waited the stall timeout.
	stallMin = time.Second
	// waitPoll is how often a stream waiting for budget looks for stalled
	// streams to evict (it also wakes whenever bytes are returned).
	waitPoll = 250 * time.Millisecond
)

// byteBudget is the shared bound of all DoGet streams' accounts.
type byteBudget struct {
	limit int64         // <= 0: no limit (the accounts still count)
	stall time.Duration // eviction after this long stalled; <= 0: never
	log   hclog.Logger

	held    atomic.Int64 // bytes on all accounts
	peak    atomic.Int64
	high    atomic.Int64 // the most held since the streams were last idle
	release *time.Timer  // returns memory once idle (nil: not pending)
	freed   atomic.Int64 // times memory was returned (for tests)
	waiters atomic.Int32 // streams in wait
	evicted atomic.Int64 // connections closed for stalling

	mu       sync.Mutex
	queue    []*budgetWaiter // streams waiting for budget, first come first
	streams  map[*streamMem]struct{}
	turns    map[*streamMem]int64 // streams on their turn, with what each is expected to take
	reserved int64                // the sum of those
	estimate atomic.Int64         // what a stream holds when it sends a message (averaged)
}

func newByteBudget(limit int64, stall time.Duration, log hclog.Logger) *byteBudget {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &byteBudget{limit: limit, stall: stall, log: log, streams: map[*streamMem]struct{}{}, turns: map[*streamMem]int64{}}
}

// add moves the total by n and wakes the waiting streams when bytes come
// back.
func (b *byteBudget) add(n int64) {
	h := b.held.Add(n)
	if n > 0 {
		raise(&b.peak, h)
		raise(&b.high, h)
		return
	}
	if n < 0 && b.waiters.Load() > 0 {
		b.signal()
	}
}

func raise(v *atomic.Int64, to int64) {
	for {
		p := v.Load()
		if to <= p || v.CompareAndSwap(p, to) {
			return
		}
	}
}

// idle is called with b.mu held when the last account is gone: after a
// large burst it schedules returning the memory to the system.
func (b *byteBudget) idle() {
	if b.high.Load() < releaseBytes || b.release != nil {
		return
	}
	b.high.Store(0)
	b.release = time.AfterFunc(releaseDelay, func() {
		b.mu.Lock()
		b.release = nil
		quiet := len(b.streams) == 0
		b.mu.Unlock()
		if quiet {
			b.freed.Add(1)
			debug.FreeOSMemory()
		}
	})
}

// open starts the account of a stream whose call came with ctx; base
// allocates its memory.
func (b *byteBudget) open(ctx context.Context, base memory.Allocator) *streamMem {
	s := &streamMem{b: b, base: base, progress: time.Now()}
	s.closeConn, s.peer = guard.ConnCloser(ctx)
	s.conn, _ = guard.ConnContext(ctx)
	b.mu.Lock()
	b.streams[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// forget drops a detached account.
func (b *byteBudget) forget(s *streamMem) {
	b.mu.Lock()
	delete(b.streams, s)
	b.endTurn(s)
	if len(b.streams) == 0 {
		b.idle()
	}
	b.mu.Unlock()
}

// streamMem is one DoGet stream's account: a memory.Allocator that
// charges the budget, the pacer of the stream's scan, and the record of
// the messages gRPC holds for it.
type streamMem struct {
	b         *byteBudget
	base      memory.Allocator
	conn      context.Context // the connection's life (nil: unknown)
	closeConn func()          // closes the connection (nil: cannot)
	peer      string

	wanting atomic.Bool                // DoGet waits for rows from the scan
	waits   map[*budgetWaiter]struct{} // its workers waiting (b.mu)

	mu         sync.Mutex
	held       int64
	inFlight   int       // messages handed to gRPC and not written yet
	progress   time.Time // when gRPC last took or wrote a message
	ended      bool      // the call returned
	detached   bool      // held no longer counts against the budget
	evicted    bool
	stopDetach func() bool
}

func (s *streamMem) Allocate(n int) []byte {
	buf := s.base.Allocate(n)
	s.charge(int64(len(buf)))
	return buf
}

// AllocateUninit is Allocate without clearing recycled memory, for the
// scan's decoders that overwrite the whole buffer
// (tableformat.UninitAllocator).
func (s *streamMem) AllocateUninit(n int) []byte {
	buf := tableformat.AllocateUninit(s.base, n)
	s.charge(int64(len(buf)))
	return buf
}

func (s *streamMem) Reallocate(n int, old []byte) []byte {
	was := len(old)
	buf := s.base.Reallocate(n, old)
	s.charge(int64(len(buf) - was))
	return buf
}

func (s *streamMem) Free(buf []byte) {
	n := len(buf)
	s.base.Free(buf)
	s.charge(-int64(n))
}

// Hold charges (n > 0) or returns (n < 0) bytes the stream holds but did
// not allocate: the scan cache's arrays in the batches it sends
// (tableformat.SharedHolder).
func (s *streamMem) Hold(n int64) { s.charge(n) }

// Unwrap returns the allocator the account draws on.
func (s *streamMem) Unwrap() memory.Allocator { return s.base }

// charge moves the account by n bytes (and the budget with it, until the
// account is detached). The last byte of an ended stream detaches it.
func (s *streamMem) charge(n int64) {
	s.mu.Lock()
	s.held += n
	counted := !s.detached
	var stop func() bool
	last := counted && s.ended && s.held == 0
	if last {
		s.detached = true
		stop = s.stopDetach
	}
	s.mu.Unlock()
	if counted {
		s.b.add(n)
	}
	if last {
		if stop != nil {
			stop()
		}
		s.b.forget(s)
	}
}

// sent records a message handed to gRPC; it ends the stream's turn.
func (s *streamMem) sent() {
	s.mu.Lock()
	if s.inFlight == 0 {
		s.progress = time.Now()
	}
	s.inFlight++
	held := s.held
	s.mu.Unlock()
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.estimate.Load(); e > 0 {
		held = (7*e + held) / 8
	}
	b.estimate.Store(held)
	b.endTurn(s)
}

// written records that gRPC wrote (or dropped) one of the stream's
// messages.
func (s *streamMem) written() {
	s.mu.Lock()
	s.inFlight--
	s.progress = time.Now()
	s.mu.Unlock()
	if s.b.waiters.Load() > 0 {
		s.b.signal()
	}
}

// end is called when the stream's call returns. What gRPC still holds for
// it stays on the account until it is written or the connection closes.
func (s *streamMem) end() {
	s.b.mu.Lock()
	s.b.endTurn(s)
	s.b.mu.Unlock()
	s.mu.Lock()
	s.ended = true
	if s.held != 0 && s.conn != nil && !s.detached {
		s.stopDetach = context.AfterFunc(s.conn, s.detach)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.detach()
}

// detach stops counting the account against the budget.
func (s *streamMem) detach() {
	s.mu.Lock()
	if s.detached {
		s.mu.Unlock()
		return
	}
	s.detached = true
	n := s.held
	s.mu.Unlock()
	s.b.add(-n)
	s.b.forget(s)
}
