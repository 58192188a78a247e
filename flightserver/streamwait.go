package flightserver

// Pacing DoGet scans by the stream budget: the queue of streams waiting
// for budget, their turns, and the eviction of stalled clients (the rules
// are at the top of streammem.go).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// signal tells the first waiting stream to look again (bytes came back,
// a message was written, a turn ended).
func (b *byteBudget) signal() {
	b.mu.Lock()
	b.pokeHead()
	b.mu.Unlock()
}

// pokeHead wakes the first waiter; b.mu is held.
func (b *byteBudget) pokeHead() {
	if h := b.head(); h != nil {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
}

// head is the waiter first in line (b.mu is held): the first whose client
// has read everything it was sent, so waits for data; streams that gRPC
// holds unread messages for let it pass (their clients are not reading,
// their next message can wait). With none such, the first in the queue.
func (b *byteBudget) head() *budgetWaiter {
	for _, w := range b.queue {
		if w.s.nothingInFlight() {
			return w
		}
	}
	if len(b.queue) > 0 {
		return b.queue[0]
	}
	return nil
}

// endTurn ends s's turn, if it has one; b.mu is held.
func (b *byteBudget) endTurn(s *streamMem) {
	if r, ok := b.turns[s]; ok {
		delete(b.turns, s)
		b.reserved -= r
		b.pokeHead()
	}
}

// budgetWaiter is one stream's place in the queue for budget.
type budgetWaiter struct {
	s     *streamMem
	ch    chan struct{} // a poke: look again
	since time.Time     // when it began to wait
	in    bool          // in the queue (b.mu)
}

// enqueue puts w at the back of the queue; b.mu is held.
func (b *byteBudget) enqueue(w *budgetWaiter) {
	w.in = true
	b.queue = append(b.queue, w)
}

// dequeue removes w from the queue; the next waiter is poked when w led.
// b.mu is held.
func (b *byteBudget) dequeue(w *budgetWaiter) {
	for i, q := range b.queue {
		if q == w {
			w.in = false
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.pokeHead()
			return
		}
	}
}

// stalledStream is a stream whose client is not reading, as the first
// waiter sees it.
type stalledStream struct {
	s     *streamMem
	quiet time.Duration // how long gRPC has held its messages, none written
	held  int64
}

// victims picks the connections to close for the first waiter, which has
// waited waited and would bring the streams to want bytes (b.mu is
// held). Every stream stalled for the stall timeout goes. And once the
// first waiter has itself waited the stall timeout, the streams that have
// gone longest without their client reading (at least stallMin) go too,
// until the budget has room for it: so no stream waits much more than the
// stall timeout at the head of the queue, however the stalled streams'
// clocks are spread.
func (b *byteBudget) victims(stalled []stalledStream, waited time.Duration, want int64) []*streamMem {
	if b.stall <= 0 {
		return nil
	}
	slices.SortFunc(stalled, func(x, y stalledStream) int { return cmp.Compare(y.quiet, x.quiet) })
	var out []*streamMem
	room := b.limit - b.reserved
	for _, st := range stalled {
		if st.quiet < b.stall && (waited < b.stall || want <= room) {
			break
		}
		out = append(out, st.s)
		want -= st.held
	}
	return out
}

// stallOf returns how long gRPC has held the stream's messages without
// writing any, how many it holds, the bytes on the account, and whether
// its connection is being closed already (nothing once detached).
func (s *streamMem) stallOf(now time.Time) (d time.Duration, n int, held int64, closing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return 0, 0, 0, false
	}
	if s.inFlight > 0 {
		d, n = now.Sub(s.progress), s.inFlight
	}
	return d, n, s.held, s.evicted
}

// Ready reports whether the stream's scan may decode now: under the
// budget with nobody waiting, or on its turn while the stream asks for
// rows (under pressure a scan decodes on demand, not ahead, so that a
// stream whose turn ends holds no batch decoded ahead of its next
// message).
func (s *streamMem) Ready() bool {
	b := s.b
	if b.limit <= 0 || (b.held.Load() < b.limit && b.waiters.Load() == 0) {
		return true
	}
	if !s.wanting.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, on := b.turns[s]
	return on
}

// want tells the account whether the stream is waiting for rows from its
// scan (DoGet sets it around each call of the reader's Next).
func (s *streamMem) want(on bool) {
	s.wanting.Store(on)
	if on && s.b.waiters.Load() > 0 {
		s.b.mu.Lock()
		for w := range s.waits {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
		s.b.mu.Unlock()
	}
}

// Wait blocks until the stream's scan may decode: until its turn, while
// it asks for rows (see the rules at the top of this file). The first in
// the queue also closes the connections of stalled streams.
func (s *streamMem) Wait(ctx context.Context) error {
	b := s.b
	w := &budgetWaiter{s: s, ch: make(chan struct{}, 1), since: time.Now()}
	b.mu.Lock()
	if _, on := b.turns[s]; !on {
		b.enqueue(w)
	}
	if s.waits == nil {
		s.waits = map[*budgetWaiter]struct{}{}
	}
	s.waits[w] = struct{}{}
	b.mu.Unlock()
	b.waiters.Add(1)
	defer func() {
		b.mu.Lock()
		b.dequeue(w)
		delete(s.waits, w)
		b.mu.Unlock()
		b.waiters.Add(-1)
	}()
	timer := time.NewTimer(waitPoll)
	defer timer.Stop()
	for {
		now := time.Now()
		b.mu.Lock()
		if _, on := b.turns[s]; on {
			b.dequeue(w) // its turn (maybe won by another of its workers)
			if s.wanting.Load() || b.limit <= 0 || (b.held.Load() < b.limit && len(b.queue) == 0) {
				b.mu.Unlock()
				return nil
			}
			b.mu.Unlock()
			select {
			case <-w.ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if !w.in {
			b.enqueue(w) // its turn ended before it decoded: to the back
		}
		head := b.head() == w
		var evict []*streamMem
		if head {
			need := max(b.estimate.Load(), 1)
			if b.limit <= 0 || b.held.Load()+b.reserved+need <= b.limit || (len(b.turns) == 0 && b.held.Load() < b.limit) {
				b.turns[s] = need
				b.reserved += need
				b.mu.Unlock()
				continue
			}
			inFlight := false
			var stalled []stalledStream
			closing := int64(0) // held by streams whose connection is closing
			for o := range b.streams {
				d, n, held, gone := o.stallOf(now)
				inFlight = inFlight || n > 0
				switch {
				case gone:
					closing += held
				case n > 0 && d >= stallMin && o.closeConn != nil:
					stalled = append(stalled, stalledStream{o, d, held})
				}
			}
			if len(b.turns) == 0 && !inFlight {
				b.turns[s] = need
				b.reserved += need
				b.mu.Unlock()
				continue
			}
			// Only a stream whose client waits for data closes others'
			// connections: a stalled one waiting for room to build a
			// message its client would not read gains nothing by it.
			if s.nothingInFlight() {
				evict = b.victims(stalled, now.Sub(w.since), b.held.Load()-closing+need)
			}
		}
		b.mu.Unlock()
		for _, o := range evict {
			o.evict(now)
		}
		var tick <-chan time.Time
		if head {
			timer.Reset(waitPoll)
			tick = timer.C
		}
		select {
		case <-w.ch:
		case <-tick:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// evict closes the stream's connection: its client has read nothing for
// the stall timeout while other streams wait for the budget.
func (s *streamMem) evict(now time.Time) {
	s.mu.Lock()
	if s.evicted {
		s.mu.Unlock()
		return
	}
	s.evicted = true
	held, since := s.held, now.Sub(s.progress)
	s.mu.Unlock()
	s.b.evicted.Add(1)
	s.b.log.Warn("closing a connection whose client stopped reading while other streams wait for the stream budget (--stream-budget, --stream-stall-timeout)",
		"peer", s.peer, "stalled", since.Round(time.Millisecond), "held_bytes", held, "budget_held_bytes", s.b.held.Load(), "waiting", s.b.waiters.Load())
	if s.b.log.IsDebug() {
		s.b.log.Debug("stream budget at the eviction", "streams", s.b.census())
	}
	s.closeConn()
}

// census sums the accounts by state, for the debug log.
func (b *byteBudget) census() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var inFlight, queued, other, ended int64
	var nIn, nQ, nO, nE int
	waiting := map[*streamMem]bool{}
	for _, w := range b.queue {
		waiting[w.s] = true
	}
	for o := range b.streams {
		o.mu.Lock()
		h, in, e := o.held, o.inFlight, o.ended
		o.mu.Unlock()
		switch {
		case e:
			ended, nE = ended+h, nE+1
		case in > 0:
			inFlight, nIn = inFlight+h, nIn+1
		case waiting[o]:
			queued, nQ = queued+h, nQ+1
		default:
			other, nO = other+h, nO+1
		}
	}
	return fmt.Sprintf("in flight %d streams %d B; queued %d streams %d B; ended %d streams %d B; others %d streams %d B; turns %d reserved %d B estimate %d B",
		nIn, inFlight, nQ, queued, nE, ended, nO, other, len(b.turns), b.reserved, b.estimate.Load())
}

// nothingInFlight reports whether gRPC holds no message of the stream.
func (s *streamMem) nothingInFlight() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight == 0
}
