package tableformat

import (
	"cmp"
	"container/heap"
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/coverage"
)

// The k-way merge of sorted runs: each run is read a batch at a time, the
// run whose next row comes first gives all its rows that come before the
// next row of any other run at once (time series runs interleave in long
// stretches: a whole series at a time), and the rows so chosen are
// gathered into batches of chunkRows for the sink.

// compactSink takes the sorted batches of a merge or of a sorted buffer:
// the group's output, or another spilled run.
type compactSink interface {
	put(rec arrow.RecordBatch) error
}

// mergeInput is one run being merged.
type mergeInput struct {
	run *spillRun
	rd  *ipc.Reader
	seq int // tie-break: rows equal in (identity, index) keep run order

	rec     arrow.RecordBatch // current batch (our reference)
	pos     int
	keys    []uint64
	buckets []uint64 // per row, compactBuckets of its key
	ident   []int32  // per row, its identity in idents
	idents  []coverage.Identity
	// src is rec's index in the chunk being gathered, -1 when the chunk
	// holds no row of it yet.
	src int
}

// compactMerger merges runs into a sink.
type compactMerger struct {
	mem       memory.Allocator
	acct      *compactAccount
	ir        indexReader
	bucketOf  func(uint64) uint64 // compactBuckets(ir, SortBucket)
	er        entityReader
	schema    *arrow.Schema
	chunkRows int

	inputs mergeHeap
	// The chunk being gathered: the batches it takes rows from (one
	// reference each) and its rows.
	srcs []arrow.RecordBatch
	refs []compactRef
	key  []byte
	rows compactRows // the gather's scratch space
}

// merge reads runs in order of their rows and puts them into sink; it
// closes nothing (the caller owns the runs).
//
// A run is opened only when the merge reaches its first bucket (the rows
// it puts out before then come from earlier buckets), and is closed once
// read: of runs that cover different stretches of time, as the runs of a
// table fed in time order do, only those that share a bucket are open at
// once (compactRuns.write keeps that at most compactFanIn).
func (m *compactMerger) merge(ctx context.Context, runs []*spillRun, sink compactSink) (err error) {
	m.inputs = m.inputs[:0]
	defer m.release()
	pending := make([]int, len(runs))
	for i := range pending {
		pending[i] = i
	}
	slices.SortStableFunc(pending, func(a, b int) int { return cmp.Compare(runs[a].lo, runs[b].lo) })
	m.refs = make([]compactRef, 0, m.chunkRows)
	m.acct.reserve(int64(cap(m.refs)) * 24)
	defer m.acct.reserve(-int64(cap(m.refs)) * 24)
	for len(m.inputs) > 0 || len(pending) > 0 {
		// Open the runs whose first bucket the merge has reached.
		if len(pending) > 0 && (len(m.inputs) == 0 || m.inputs[0].buckets[m.inputs[0].pos] >= runs[pending[0]].lo) {
			i := pending[0]
			pending = pending[1:]
			rd, err := runs[i].open(m.mem)
			if err != nil {
				return err
			}
			in := &mergeInput{run: runs[i], rd: rd, seq: i, src: -1}
			m.inputs = append(m.inputs, in) // released with m, even when empty
			ok, err := m.next(in)
			if err != nil {
				return err
			}
			if !ok {
				m.inputs = m.inputs[:len(m.inputs)-1]
				in.rd.Release()
				continue
			}
			heap.Fix(&m.inputs, len(m.inputs)-1)
			continue
		}
		top := m.inputs[0]
		n := int(top.rec.NumRows())
		end := n
		if len(m.inputs) > 1 {
			next := m.inputs[1]
			if len(m.inputs) > 2 && m.inputs.Less(2, 1) {
				next = m.inputs[2]
			}
			end = m.before(top, next)
		}
		if len(pending) > 0 {
			// Not into the first bucket of a run not yet open.
			lo := runs[pending[0]].lo
			for row := top.pos + 1; row < end; row++ {
				if top.buckets[row] >= lo {
					end = row
					break
				}
			}
		}
		end = min(end, top.pos+m.chunkRows-len(m.refs))
		if top.src < 0 {
			top.rec.Retain()
			m.srcs = append(m.srcs, top.rec)
			top.src = len(m.srcs) - 1
		}
		for row := top.pos; row < end; row++ {
			m.refs = append(m.refs, compactRef{batch: uint32(top.src), row: uint32(row)})
		}
		top.pos = end
		if top.pos == n {
			ok, err := m.next(top)
			if err != nil {
				return err
			}
			if !ok {
				heap.Pop(&m.inputs)
				top.rd.Release()
				top.rd = nil
			} else {
				heap.Fix(&m.inputs, 0)
			}
		} else {
			heap.Fix(&m.inputs, 0)
		}
		if len(m.refs) >= m.chunkRows {
			if err := m.flush(ctx, sink); err != nil {
				return err
			}
		}
	}
	return m.flush(ctx, sink)
}

// before returns the end of the rows of top, from its position, that come
// before next's current row (at least one row).
func (m *compactMerger) before(top, next *mergeInput) int {
	n := int(top.rec.NumRows())
	var nid coverage.Identity
	if len(next.idents) > 0 {
		nid = next.idents[next.ident[next.pos]]
	}
	nkey, nbucket := next.keys[next.pos], next.buckets[next.pos]
	lastIdent, identCmp := int32(-1), 0
	for row := top.pos + 1; row < n; row++ {
		if b := top.buckets[row]; b != nbucket {
			if b > nbucket {
				return row
			}
			lastIdent = -1 // an earlier bucket: before next whatever the identity
			continue
		}
		if id := top.ident[row]; id != lastIdent {
			lastIdent, identCmp = id, 0
			if nid != nil {
				identCmp = top.idents[id].Compare(nid)
			}
		}
		if identCmp > 0 || (identCmp == 0 && (top.keys[row] > nkey || (top.keys[row] == nkey && top.seq > next.seq))) {
			return row
		}
	}
	return n
}

// next moves in to its run's next non-empty batch; false at the end.
func (m *compactMerger) next(in *mergeInput) (bool, error) {
	if in.rec != nil {
		in.rec.Release()
		in.rec = nil
	}
	m.acct.reserve(-int64(cap(in.keys))*8 - int64(cap(in.ident))*4 - int64(cap(in.buckets))*8)
	in.keys, in.buckets, in.ident, in.idents, in.pos, in.src = nil, nil, nil, nil, 0, -1
	for in.rd.Next() {
		rec := in.rd.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		rec.Retain()
		in.rec = rec
		in.keys = compactIndexKeys(rec.Column(m.ir.col), m.ir.typ)
		in.buckets = compactBucketKeys(m.bucketOf, in.keys)
		in.ident = make([]int32, rec.NumRows())
		m.acct.reserve(int64(cap(in.keys))*8 + int64(cap(in.ident))*4 + int64(cap(in.buckets))*8)
		if len(m.er.cols) > 0 {
			cols := make([]arrow.Array, len(m.er.cols))
			for k, c := range m.er.cols {
				cols[k] = rec.Column(c)
			}
			var prev []byte
			for row := range int(rec.NumRows()) {
				m.key = compactIdentityKey(m.key[:0], cols, m.er.types, row)
				if len(in.idents) == 0 || string(m.key) != string(prev) {
					in.idents = append(in.idents, compactIdentity(cols, m.er.types, row))
					prev = append(prev[:0], m.key...)
				}
				in.ident[row] = int32(len(in.idents) - 1)
			}
		}
		return true, nil
	}
	if err := in.rd.Err(); err != nil {
		return false, storageErr("read a compaction spill file", err)
	}
	return false, nil
}

// flush gathers the chunk's rows into batches for sink.
func (m *compactMerger) flush(ctx context.Context, sink compactSink) error {
	defer m.dropChunk()
	if len(m.refs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.rows.schema, m.rows.batches = m.schema, m.srcs
	defer func() { m.rows.batches = nil }()
	for lo := 0; lo < len(m.refs); {
		rec, n := m.rows.take(m.mem, m.refs[lo:])
		err := sink.put(rec)
		rec.Release()
		if err != nil {
			return err
		}
		lo += n
	}
	return nil
}

// dropChunk releases the chunk's batches.
func (m *compactMerger) dropChunk() {
	for _, b := range m.srcs {
		b.Release()
	}
	m.srcs, m.refs = m.srcs[:0], m.refs[:0]
	for _, in := range m.inputs {
		in.src = -1
	}
}

// release frees everything the merge holds.
func (m *compactMerger) release() {
	m.dropChunk()
	for _, in := range m.inputs {
		if in.rec != nil {
			in.rec.Release()
			in.rec = nil
		}
		m.acct.reserve(-int64(cap(in.keys))*8 - int64(cap(in.ident))*4 - int64(cap(in.buckets))*8)
		in.keys, in.ident, in.buckets = nil, nil, nil
		if in.rd != nil {
			in.rd.Release()
			in.rd = nil
		}
	}
	m.inputs = m.inputs[:0]
}

// mergeHeap orders the inputs by their current row.
type mergeHeap []*mergeInput

func (h mergeHeap) Len() int { return len(h) }

func (h mergeHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if ba, bb := a.buckets[a.pos], b.buckets[b.pos]; ba != bb {
		return ba < bb
	}
	if len(a.idents) > 0 {
		if c := a.idents[a.ident[a.pos]].Compare(b.idents[b.ident[b.pos]]); c != 0 {
			return c < 0
		}
	}
	if ka, kb := a.keys[a.pos], b.keys[b.pos]; ka != kb {
		return ka < kb
	}
	return a.seq < b.seq
}

func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

func (h *mergeHeap) Push(x any) { *h = append(*h, x.(*mergeInput)) }

func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
