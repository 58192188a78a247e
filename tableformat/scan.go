package tableformat

import (
	"context"
	"fmt"

	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// ScanOptions describe a range scan. The zero value scans every row and
// column of the table.
type ScanOptions struct {
	// Start and End bound the index half-open, [Start, End); nil leaves
	// that side unbounded. Both must be of the table's index type, and
	// Start < End when both are set. A timestamp bound is converted to
	// the index column's unit by flooring, as the reference does; a row
	// whose index is null never matches a bound (with both bounds nil no
	// range filter applies and such rows are returned).
	Start, End *IndexValue
	// Columns are the output columns, in this order; nil means every
	// column of the logical schema, and an empty non-nil slice none (the
	// batches then only carry row counts).
	Columns []string
	// Entities keeps the rows whose entity columns equal these values (a
	// partial identity is allowed). Each key must be an entity column and
	// each value of the column's type: Utf8 takes EntityUtf8, Int32
	// EntityInt32, Int64 EntityInt64 and UInt64 EntityUInt64. A null
	// entity value never matches.
	Entities map[string]EntityValue
	// BatchRows is the target number of rows per output batch; 0 means
	// 65536.
	BatchRows int
	// Parallelism is the number of segments decoded at once; 0 means
	// min(4, GOMAXPROCS).
	Parallelism int
	// Slots, when not nil, is a semaphore shared by concurrent scans: a
	// worker holds one slot (a value sent into the channel) while it
	// decodes a segment. A server gives all its scans one channel with
	// capacity ≈ GOMAXPROCS, so that parallel streams share the CPU
	// instead of multiplying the memory in flight.
	Slots chan struct{}
	// Alloc allocates every Arrow buffer the scan returns. nil means a
	// package-wide pool of recycled Go memory (zeroed like the Go
	// allocator's), which keeps a long scan's heap, and so its RSS, near
	// the data in flight: with memory.DefaultAllocator every decoded batch
	// becomes garbage, and the heap grows to about twice the live data
	// between collections. Batches from the pool must not be used after
	// their release (with the Go allocator that mistake goes unnoticed).
	Alloc memory.Allocator
	// Pacer, when not nil, paces the scan by memory: before a worker
	// decodes each batch it asks Pacer.Ready, and when that is false it
	// gives its decode slot back and waits in Pacer.Wait (whose error
	// stops the scan). A server that bounds the memory of its streams
	// passes one per stream.
	Pacer ScanPacer
	// Cache, when not nil, keeps the decoded columns of segments read
	// whole and serves them to later scans instead of decoding again
	// (scan_cache.go); the answers are the same.
	Cache *ScanCache
}

// ScanPacer paces a scan's decoding (ScanOptions.Pacer). Ready must be
// cheap: it is asked once per decoded batch. Both are called from several
// workers at once.
type ScanPacer interface {
	// Ready reports whether the scan may decode its next batch now.
	Ready() bool
	// Wait blocks until the scan may decode its next batch, or returns
	// an error (ctx's, or the pacer's own) that stops the scan.
	Wait(ctx context.Context) error
}

// Scan streams the rows of st that match opts (st nil means the handle's
// current snapshot): it plans the scan once ([State.Plan]) and reads the
// plan ([Table.ReadPlan]). The reader's schema is the canonical Arrow
// schema of the logical schema ([ArrowSchema]) projected to opts.Columns; a
// table without a schema yet (no appends) yields an empty stream with a
// schema of zero fields.
//
// Option errors are returned at once (ErrInvalidInput, as State.Plan
// returns them); the reader is ReadPlan's.
func (t *Table) Scan(ctx context.Context, st *State, opts ScanOptions) (array.RecordReader, error) {
	if st == nil {
		st = t.State()
	}
	if st == nil {
		return nil, invalidf("scan: the table has no state")
	}
	p, err := st.Plan(opts)
	if err != nil {
		return nil, err
	}
	return t.ReadPlan(ctx, p)
}

// ReadPlan streams the rows of a plan made by [State.Plan] on one of the
// table's snapshots, or of a part of one ([ScanPlan.Split]): exactly its
// segments, filtered as its options say, without planning again. The
// reader's schema is the plan's ([ScanPlan.Schema]).
//
// Each segment is read with only the columns needed (the output columns
// plus those the filters use), and only the row groups whose Parquet
// statistics of the index column and of the filtered entity columns can
// match. When the range may cut into those row groups, the index column is
// decoded first to find the span of rows in range, and the other columns
// are decoded only from there. Rows are then filtered exactly.
//
// Segments written before columns were added (schema_add_columns) return
// nulls for them. Up to the plan's Parallelism segments are decoded at
// once; the memory in flight is about two batches per segment being
// decoded (the batch being decoded or handed over, and a partial output
// batch) plus the reader's current batch and the Parquet page buffers,
// whatever the table size.
//
// Batches hold at most the plan's BatchRows rows: selected rows are
// gathered into batches of exactly BatchRows rows, except that whole row
// groups are decoded in equal batches of up to min(BatchRows, 16K) rows,
// which are passed on without copying when all their rows match, and that
// the last batches may be shorter. Neither batches nor rows come in any
// particular order.
//
// Errors met while reading (a missing or undecodable segment file is a
// *CorruptionError naming the file; an I/O failure wraps ErrStorage) stop
// the scan and are reported by the reader's Err. Cancelling ctx or
// releasing the reader stops all work promptly; Release waits for the
// scan's goroutines to exit and frees every batch not yet consumed.
func (t *Table) ReadPlan(ctx context.Context, plan *ScanPlan) (array.RecordReader, error) {
	if plan == nil {
		return nil, invalidf("scan: no plan")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, p := plan.state, plan.scan
	runCtx, cancel := context.WithCancel(ctx)
	run := &scanRun{
		ctx:    runCtx,
		cancel: cancel,
		fs:     t.fs,
		plan:   p,
		stats:  new(scanStats),
		done:   make(chan struct{}),
	}
	rd := &scanReader{run: run, parent: ctx}
	rd.refs.Store(1)
	if len(p.segments) == 0 || (p.rng != nil && p.rng.empty) {
		run.out = make(chan arrow.RecordBatch)
		close(run.out)
		close(run.done)
		return rd, nil
	}
	ix := st.Meta.Index
	run.cacheTable = st.Meta.CreatedAt.UnixNano()
	if p.cache != nil {
		run.cacheSince = p.cache.epoch()
	}
	run.indexName, run.indexType = ix.Column, ix.Kind.Type
	if col, ok := st.Meta.Schema.Column(ix.Column); ok {
		run.indexUnit = col.Type.Unit
	}
	workers := min(p.parallelism, len(p.segments))
	// The channel is unbuffered: a worker that finished a batch waits for
	// the reader to take it before it decodes the next one, so at most
	// one decoded batch per worker (plus its partial output batch, and the
	// reader's current batch) is alive at a time.
	run.out = make(chan arrow.RecordBatch)
	run.wg.Add(workers)
	for range workers {
		go run.worker()
	}
	go run.closer()
	return rd, nil
}

// scanStats counts what a scan did (for tests and diagnostics).
type scanStats struct {
	segments      atomic.Int64 // segment files opened
	rowGroups     atomic.Int64 // row groups in those files
	rowGroupsRead atomic.Int64 // row groups left after pruning
	rowsDecoded   atomic.Int64 // rows decoded from Parquet (all read columns)
	rowsLocated   atomic.Int64 // index values decoded to locate a range
	rowsCached    atomic.Int64 // rows served from the scan cache (all read columns)
	passThrough   atomic.Int64 // decoded batches handed on without copying
	directString  atomic.Int64 // string column chunks read by the direct decoder
	batchesOut    atomic.Int64 // batches sent to the reader
	rowsOut       atomic.Int64 // rows sent to the reader
}

// scanRun is the shared state of one scan's goroutines.
type scanRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	fs     storage.FS
	plan   *scanPlan
	stats  *scanStats

	indexName string
	indexType IndexType
	indexUnit TimeUnit
	// cacheTable names the table in the scan cache's keys (its creation
	// time).
	cacheTable int64
	// cacheSince is the scan cache's clock when the scan started: its
	// fills evict no entry used since.
	cacheSince uint64

	out  chan arrow.RecordBatch
	next atomic.Int64 // next segment to claim
	wg   sync.WaitGroup
	done chan struct{} // closed once out is closed and every worker exited

	mu  sync.Mutex
	err error // first failure
}

// fail records the first failure and stops the scan.
func (r *scanRun) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *scanRun) firstErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// emit sends a finished batch to the reader, or releases it when the scan
// was stopped. A worker that must wait for the reader gives its decode
// slot (nil: it holds none) back while it waits, so that a slow or
// stalled reader never keeps other scans from decoding.
func (r *scanRun) emit(rec arrow.RecordBatch, slot *decodeSlot) error {
	select {
	case <-r.ctx.Done():
		rec.Release()
		return r.ctx.Err()
	default:
	}
	rows := rec.NumRows()
	select {
	case r.out <- rec:
		r.stats.batchesOut.Add(1)
		r.stats.rowsOut.Add(rows)
		return nil
	default:
	}
	slot.release()
	select {
	case r.out <- rec:
		r.stats.batchesOut.Add(1)
		r.stats.rowsOut.Add(rows)
	case <-r.ctx.Done():
		rec.Release()
		return r.ctx.Err()
	}
	return slot.acquire(r.ctx)
}

// pace asks the scan's pacer whether the worker may decode its next batch
// and, when it must wait, gives its decode slot to other scans meanwhile.
func (r *scanRun) pace(slot *decodeSlot) error {
	pc := r.plan.pacer
	if pc == nil || pc.Ready() {
		return nil
	}
	held := slot != nil && slot.held
	slot.release()
	if err := pc.Wait(r.ctx); err != nil {
		return err
	}
	if held {
		return slot.acquire(r.ctx)
	}
	return nil
}

// unwrapsTo reports whether a is a wrapper (an Unwrap method, as a
// counting allocator has) around base.
func unwrapsTo(a, base memory.Allocator) bool {
	for {
		u, ok := a.(interface{ Unwrap() memory.Allocator })
		if !ok {
			return false
		}
		if a = u.Unwrap(); a == base {
			return true
		}
	}
}

// decodeSlot is one worker's claim on the shared decode semaphore
// (ScanOptions.Slots; a nil channel means no limit). Methods on a nil
// *decodeSlot do nothing.
type decodeSlot struct {
	ch   chan struct{}
	held bool
}

func (d *decodeSlot) acquire(ctx context.Context) error {
	if d == nil || d.held {
		return nil
	}
	if d.ch != nil {
		select {
		case d.ch <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.held = true
	return nil
}

func (d *decodeSlot) release() {
	if d == nil || !d.held {
		return
	}
	if d.ch != nil {
		<-d.ch
	}
	d.held = false
}

// worker claims segments one at a time and reads them, gathering partial
// batches across its segments.
func (r *scanRun) worker() {
	defer r.wg.Done()
	acc := newScanCoalescer(r.plan.output, r.plan.batchRows, r.plan.alloc)
	defer acc.release()
	slot := &decodeSlot{ch: r.plan.slots}
	defer slot.release()
	err := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("tableformat: scan failed: panic: %v", v)
			}
		}()
		for {
			if err := r.ctx.Err(); err != nil {
				return err
			}
			i := int(r.next.Add(1)) - 1
			if i >= len(r.plan.segments) {
				break
			}
			if err := slot.acquire(r.ctx); err != nil {
				return err
			}
			err := r.readSegment(&r.plan.segments[i], acc, slot)
			slot.release()
			if err != nil {
				return err
			}
		}
		if acc.rows > 0 {
			return r.emit(acc.flush(), nil)
		}
		return nil
	}()
	if err != nil {
		r.fail(err)
	}
}

// closer closes the output once every worker has exited. If the scan was
// stopped, it first frees the batches nobody will read.
func (r *scanRun) closer() {
	r.wg.Wait()
	if r.ctx.Err() != nil {
	drain:
		for {
			select {
			case rec := <-r.out:
				rec.Release()
			default:
				break drain
			}
		}
	}
	close(r.out)
	close(r.done)
}

// scanReader is the array.RecordReader a scan returns.
type scanReader struct {
	refs   atomic.Int64
	run    *scanRun
	parent context.Context
	cur    arrow.RecordBatch

	finished bool
	endOnce  sync.Once
	err      error // set when the reader stopped on cancellation
}

func (rd *scanReader) Retain() { rd.refs.Add(1) }

// Release drops a reference; the last one stops the scan, waits for its
// goroutines and frees every unread batch.
func (rd *scanReader) Release() {
	if rd.refs.Add(-1) != 0 {
		return
	}
	if rd.cur != nil {
		rd.cur.Release()
		rd.cur = nil
	}
	rd.end()
}

func (rd *scanReader) Schema() *arrow.Schema { return rd.run.plan.output }

// Next waits for the next batch. It returns false at the end of the scan,
// after a failure (see Err) and once ctx is cancelled.
func (rd *scanReader) Next() bool {
	if rd.cur != nil {
		rd.cur.Release()
		rd.cur = nil
	}
	if rd.finished {
		return false
	}
	select {
	case rec, ok := <-rd.run.out:
		if !ok {
			rd.stop(false)
			return false
		}
		if rd.run.ctx.Err() != nil {
			rec.Release()
			rd.stop(true)
			return false
		}
		rd.cur = rec
		return true
	case <-rd.run.ctx.Done():
		rd.stop(true)
		return false
	}
}

// stop ends iteration; stopped says the scan was cut short, in which case
// a cancelled ctx is the reason when no worker failed.
func (rd *scanReader) stop(stopped bool) {
	rd.finished = true
	if stopped && rd.run.firstErr() == nil && rd.parent.Err() != nil {
		rd.err = rd.parent.Err()
	}
	rd.end()
}

// end stops the workers, frees unread batches and waits for the scan's
// goroutines to exit.
func (rd *scanReader) end() {
	rd.endOnce.Do(func() {
		rd.run.cancel()
		for rec := range rd.run.out {
			rec.Release()
		}
		<-rd.run.done
	})
}

func (rd *scanReader) RecordBatch() arrow.RecordBatch { return rd.cur }

// Record returns the current batch.
//
// Deprecated: use RecordBatch.
func (rd *scanReader) Record() arrow.RecordBatch { return rd.cur }

// Err returns the error that ended the scan, if any.
func (rd *scanReader) Err() error {
	if err := rd.run.firstErr(); err != nil {
		return err
	}
	return rd.err
}

var _ array.RecordReader = (*scanReader)(nil)
