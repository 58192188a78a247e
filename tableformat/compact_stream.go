package tableformat

import (
	"context"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Writing complete buckets while reading: the sources of a group are read
// in order of their index_min, so while a source is being read, no row
// still to come lies in a bucket before that of the source's index_min
// (its watermark). When the buffer fills, the buffered rows of the buckets
// before the watermark are complete: they are sorted and written to the
// output at once instead of being spilled, and the rest stays buffered. A
// table fed in time order whose buckets each fit the bound is so compacted
// without spilling at all, however many buckets the group spans.
//
// This holds only as long as no run was spilled (a run may hold rows of
// any bucket from the first buffered on). When the complete buckets are
// less than half of a full buffer (a bucket larger than the bound, or a
// source that spans many buckets), the buffer is spilled as before and
// the group goes on as an external sort: what was written holds the
// buckets before every row of the runs, so the merge's output follows it.
//
// While this may happen the output is open while reading, so the buffer is
// smaller (compactBudget.streamFill): the output's open row group and the
// batches being gathered for it are held beside it.

// compactStreamPartFraction: while complete buckets may be written, the
// sources after the first are read in parts of about 1/4 of the buffer
// (their decoded size estimated from the first source's), so that the
// watermark follows the reading closely; each part is a scan of its own.
const compactStreamPartFraction = 4

// streamable reports whether complete buckets may still be written while
// reading.
func (c *compactRuns) streamable() bool { return c.stream && len(c.runs) == 0 }

// fillLevel is the buffered bytes (rows and sort index) that start a
// flush or a spill.
func (c *compactRuns) fillLevel() int64 {
	if c.flushed || c.streamable() {
		return c.budget.streamFill
	}
	return c.budget.fill
}

// canStream reports whether rows of an index of ir, in buckets of the
// given length, can be written by complete buckets: a timestamp index,
// whose log bounds give the watermark.
func canStream(ir indexReader, bucket time.Duration) bool {
	secs := int64(bucket / time.Second)
	return ir.typ == IndexTimestamp && ir.unitsPerSecond > 0 && secs >= 1 && secs <= math.MaxInt64/ir.unitsPerSecond
}

// bucketOfValue is the bucket key (as compactBuckets makes them) of a
// timestamp index value.
func bucketOfValue(v IndexValue, bucket time.Duration) uint64 {
	n, _ := floorDiv(v.Time.Unix(), int64(bucket/time.Second))
	return uint64(n) ^ 1<<63
}

// full handles a buffer that reached its fill level: it writes the
// complete buckets, or spills the buffer when they are too few.
func (c *compactRuns) full(ctx context.Context) error {
	if c.streamable() {
		done, err := c.flushComplete(ctx)
		if err != nil || done {
			return err
		}
		c.stream = false
	}
	return c.spill(ctx)
}

// flushComplete writes the buffered rows of the buckets before the
// watermark to the output, sorted, and keeps the others buffered. It does
// nothing and reports false when they are fewer than half the buffer.
func (c *compactRuns) flushComplete(ctx context.Context) (bool, error) {
	wm := c.watermark
	bucketOf := compactBuckets(c.ir, c.r.opts.SortBucket)
	below := make([]int64, len(c.buf.batches))
	var total int64
	for i, b := range c.buf.batches {
		for _, k := range compactIndexKeys(b.Column(c.ir.col), c.ir.typ) {
			if bucketOf(k) < wm {
				below[i]++
			}
		}
		total += below[i]
	}
	if total*2 < c.bufRows {
		return false, nil
	}
	idx := sortIndexBytes(c.bufRows, c.idents)
	c.r.acct.reserve(idx)
	defer c.r.acct.reserve(-idx)
	if err := c.sortBuffer(); err != nil {
		return false, err
	}
	for lo := 0; lo < int(total); {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		rec, n := c.buf.take(c.r.acct, c.buf.order[lo:min(lo+c.budget.chunkRows, int(total))])
		err := c.out.put(rec)
		rec.Release()
		if err != nil {
			return false, err
		}
		lo += n
	}
	c.buf.order = nil
	// Keep the rows of the later buckets: whole batches as they are, the
	// rows of a batch that also held written rows gathered anew.
	kept := c.buf.batches[:0:0]
	var refs []compactRef
	for i, b := range c.buf.batches {
		n := b.NumRows()
		switch below[i] {
		case 0:
			kept = append(kept, b)
			continue
		case n:
			b.Release()
			continue
		}
		refs = refs[:0]
		for row, k := range compactIndexKeys(b.Column(c.ir.col), c.ir.typ) {
			if bucketOf(k) >= wm {
				refs = append(refs, compactRef{row: uint32(row)})
			}
		}
		one := compactRows{schema: c.schema, batches: []arrow.RecordBatch{b}}
		for lo := 0; lo < len(refs); {
			rec, taken := one.take(c.r.acct, refs[lo:])
			kept = append(kept, rec)
			lo += taken
		}
		b.Release()
	}
	c.buf.batches = kept
	c.bufRows, c.bufBytes = 0, 0
	for _, b := range kept {
		c.bufRows += b.NumRows()
		c.bufBytes += compactBatchBytes(b)
	}
	c.frontier, c.flushed = wm, true
	if h := testHookCompactFlushed; h != nil {
		h()
	}
	return true, nil
}

// testHookCompactFlushed, when set by a test, runs after each write of
// complete buckets while reading.
var testHookCompactFlushed func()

// sortBuffer sorts the buffer; rows of a bucket already written (a source
// holding rows before its recorded index_min) are an error, since the
// output could no longer be in order.
func (c *compactRuns) sortBuffer() error {
	if err := c.buf.sort(c.ir, c.er, compactBuckets(c.ir, c.r.opts.SortBucket)); err != nil {
		return err
	}
	if c.flushed && len(c.buf.order) > 0 && c.buf.order[0].bucket < c.frontier {
		return corruptf("", c.version, nil, "a compacted segment holds rows before the index_min its log entry records (a bucket already written); nothing was committed")
	}
	return nil
}
