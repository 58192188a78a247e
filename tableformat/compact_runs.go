package tableformat

import (
	"cmp"
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// Reading a group within the memory bound: the sources' rows are decoded
// in batches sized by the budget and buffered; a buffer that reaches the
// budget's fill level is sorted and spilled as a run. A group whose rows
// all fit is sorted and written at once, as before the bound; otherwise
// the runs are merged (compact_merge.go), in passes of at most
// compactFanIn runs.

// compactRuns is the buffered rows and the spilled runs of one group.
type compactRuns struct {
	r      *compactRun
	budget *compactBudget
	ir     indexReader
	er     entityReader
	idents int64 // distinct identities of the group (its coverage)
	schema *arrow.Schema

	buf      compactRows
	bufRows  int64
	bufBytes int64
	runs     []*spillRun

	// Observed widths, for sizing the batches of later scans and runs.
	seenRows, seenBytes int64
}

// release frees the buffer and closes every run.
func (c *compactRuns) release() {
	c.buf.release()
	c.buf.order = nil
	c.bufRows, c.bufBytes = 0, 0
	for _, run := range c.runs {
		c.r.spilled(run)
		run.close()
	}
	c.runs = nil
}

// read decodes every row of g's sources through the scan path, aligned to
// the current schema, spilling sorted runs as the buffer fills. The first
// source is read alone in small batches, to learn how wide the rows are
// before the batches of the others are sized.
func (c *compactRuns) read(ctx context.Context, st *State, g *compactGroup) error {
	paths := g.paths()
	parts := [][]string{paths[:1], paths[1:]}
	for i, part := range parts {
		if len(part) == 0 {
			continue
		}
		rows := c.budget.scanRows
		if i == 0 {
			rows = min(rows, 4096)
		}
		if err := c.readPart(ctx, st, g, part, rows); err != nil {
			return err
		}
		if c.seenRows > 0 {
			// The rows read so far say how wide rows are; a sample of a
			// few rows only may say they are wider than estimated.
			w := (c.seenBytes + c.seenRows - 1) / c.seenRows
			if c.seenRows < compactWidthSample {
				w = max(w, c.budget.width)
			}
			c.budget.setWidth(w, c.r.opts.MaxRowsPerRowGroup)
		}
	}
	return nil
}

func (c *compactRuns) readPart(ctx context.Context, st *State, g *compactGroup, paths []string, batchRows int) error {
	rdr, err := c.r.t.Scan(ctx, st, ScanOptions{Segments: paths, Alloc: c.r.acct, BatchRows: batchRows, Parallelism: compactScanWorkers})
	if err != nil {
		return err
	}
	defer rdr.Release()
	if c.schema == nil {
		c.schema = rdr.Schema()
		c.buf.schema = c.schema
	}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		n := rec.NumRows()
		if n == 0 {
			continue
		}
		rec.Retain()
		size := compactBatchBytes(rec)
		c.buf.batches = append(c.buf.batches, rec)
		c.bufRows += n
		c.bufBytes += size
		c.seenRows += n
		c.seenBytes += size
		g.rowsRead += uint64(n)
		if c.bufBytes+sortIndexBytes(c.bufRows, c.idents) >= c.budget.fill {
			if err := c.spill(ctx); err != nil {
				return err
			}
		}
	}
	return rdr.Err()
}

// spill sorts the buffer and writes it to a new run.
func (c *compactRuns) spill(ctx context.Context) error {
	if c.bufRows == 0 {
		return nil
	}
	run, err := newSpillRun(c.r.opts.SpillDir, c.schema, c.r.acct)
	if err != nil {
		return err
	}
	c.runs = append(c.runs, run)
	if err := c.sortInto(ctx, run, c.budget.runRows); err != nil {
		return err
	}
	if err := run.finish(); err != nil {
		return err
	}
	if h := testHookCompactSpilled; h != nil {
		h(len(c.runs))
	}
	return ctx.Err()
}

// compactWidthSample is the fewest rows whose average width replaces the
// schema's estimate.
const compactWidthSample = 1024

// testHookCompactSpilled, when set by a test, runs after each run of
// buffered rows is spilled (runs counts them).
var testHookCompactSpilled func(runs int)

// sortInto sorts the buffer and puts its rows, in batches of at most
// chunkRows, into sink; the buffer is empty afterwards.
func (c *compactRuns) sortInto(ctx context.Context, sink compactSink, chunkRows int) error {
	defer func() {
		c.buf.release()
		c.buf.order = nil
		c.bufRows, c.bufBytes = 0, 0
	}()
	idx := sortIndexBytes(c.bufRows, c.idents)
	c.r.acct.reserve(idx)
	defer c.r.acct.reserve(-idx)
	if err := c.buf.sort(c.ir, c.er, compactBuckets(c.ir, c.r.opts.SortBucket)); err != nil {
		return err
	}
	for lo := 0; lo < len(c.buf.order); {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, n := c.buf.take(c.r.acct, c.buf.order[lo:min(lo+chunkRows, len(c.buf.order))])
		err := sink.put(rec)
		rec.Release()
		if err != nil {
			return err
		}
		lo += n
	}
	return nil
}

// write puts every row of the group, sorted, into out: at once when no
// run was spilled, else by merging the runs.
func (c *compactRuns) write(ctx context.Context, out compactSink) error {
	if len(c.runs) == 0 {
		return c.sortInto(ctx, out, c.budget.chunkRows)
	}
	if err := c.spill(ctx); err != nil {
		return err
	}
	m := &compactMerger{mem: c.r.acct, acct: c.r.acct, ir: c.ir, bucketOf: compactBuckets(c.ir, c.r.opts.SortBucket), er: c.er, schema: c.schema, chunkRows: c.budget.runRows}
	// Merge passes while there are more runs than one merge reads: the
	// smallest runs first, as few as leave exactly compactFanIn for the
	// last merge, so that a row is rewritten as few times as can be.
	for len(c.runs) > compactFanIn {
		k := min(compactFanIn, len(c.runs)-compactFanIn+1)
		slices.SortStableFunc(c.runs, func(a, b *spillRun) int { return cmp.Compare(a.rows, b.rows) })
		run, err := newSpillRun(c.r.opts.SpillDir, c.schema, c.r.acct)
		if err != nil {
			return err
		}
		c.runs = append(c.runs, run)
		if err := m.merge(ctx, c.runs[:k], run); err != nil {
			return err
		}
		if err := run.finish(); err != nil {
			return err
		}
		for _, done := range c.runs[:k] {
			c.r.spilled(done)
			done.close()
		}
		c.runs = c.runs[k:]
	}
	m.chunkRows = c.budget.chunkRows
	return m.merge(ctx, c.runs, out)
}
