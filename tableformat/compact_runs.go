package tableformat

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// Reading a group within the memory bound: the sources' rows are decoded
// in batches sized by the budget and buffered; a buffer that reaches the
// budget's fill level writes its complete buckets to the output
// (compact_stream.go), or is sorted and spilled as a run. A group whose
// rows all fit is sorted and written at once, as before the bound;
// otherwise the runs are merged (compact_merge.go), at most compactFanIn
// at once.

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

	// Writing complete buckets while reading (compact_stream.go).
	out       *groupOutput
	version   uint64 // of the state read, for errors
	stream    bool   // complete buckets may be written while reading
	watermark uint64 // no row still to come lies in a bucket before it
	flushed   bool   // rows were written while reading
	frontier  uint64 // every row of the buckets before it was written

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
	c.stream = c.stream && canStream(c.ir, c.r.opts.SortBucket)
	var perSourceByte float64 // decoded bytes per source file byte
	for i := 0; i < len(g.sources); {
		// The first source alone; then, while complete buckets may be
		// written, parts of about a compactStreamPartFraction of the
		// buffer; then every other source at once.
		j := len(g.sources)
		rows := c.budget.scanRows
		switch {
		case i == 0:
			j, rows = 1, min(rows, 4096)
		case c.streamable():
			var est float64
			for j = i; j < len(g.sources) && (j == i || est < float64(c.budget.streamFill/compactStreamPartFraction)); j++ {
				est += float64(*g.sources[j].FileSize) * perSourceByte
			}
		}
		if c.stream {
			c.watermark = bucketOfValue(g.sources[i].IndexMin, c.r.opts.SortBucket)
		}
		if err := c.readPart(ctx, st, g, g.sources[i:j], rows); err != nil {
			return err
		}
		if i == 0 && *g.sources[0].FileSize > 0 {
			perSourceByte = float64(c.seenBytes) / float64(*g.sources[0].FileSize)
		}
		i = j
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

func (c *compactRuns) readPart(ctx context.Context, st *State, g *compactGroup, sources []SegmentMeta, batchRows int) error {
	paths := make([]string, len(sources))
	for i := range sources {
		paths[i] = sources[i].Path
	}
	rdr, err := c.r.t.scanOnly(ctx, st, paths, ScanOptions{Alloc: c.r.acct, BatchRows: batchRows, Parallelism: compactScanWorkers})
	if err != nil {
		return err
	}
	defer rdr.Release()
	if c.schema == nil {
		c.schema = rdr.Schema()
		c.buf.schema = c.schema
		c.out.schema = c.schema
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
		if c.bufBytes+sortIndexBytes(c.bufRows, c.idents) >= c.fillLevel() {
			if err := c.full(ctx); err != nil {
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
	if !c.r.swept {
		sweepSpillFiles(c.r.opts.SpillDir)
		c.r.swept = true
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

// sharedBucketRuns returns the runs that hold rows of the bucket the most
// runs do.
func sharedBucketRuns(runs []*spillRun) []*spillRun {
	type edge struct {
		at    uint64
		delta int
	}
	edges := make([]edge, 0, 2*len(runs))
	for _, r := range runs {
		edges = append(edges, edge{r.lo, 1})
		if r.hi < math.MaxUint64 {
			edges = append(edges, edge{r.hi + 1, -1})
		}
	}
	// At equal points, runs end before others begin.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta)
	})
	var bucket uint64
	most, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		if cur > most {
			most, bucket = cur, e.at
		}
	}
	var out []*spillRun
	for _, r := range runs {
		if r.lo <= bucket && bucket <= r.hi {
			out = append(out, r)
		}
	}
	return out
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
	if err := c.sortBuffer(); err != nil {
		return err
	}
	if run, ok := sink.(*spillRun); ok && len(c.buf.order) > 0 {
		run.lo, run.hi = c.buf.order[0].bucket, c.buf.order[len(c.buf.order)-1].bucket
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
	// The last merge opens a run when it reaches the run's first bucket
	// and closes it once read, so it holds at once the runs that share a
	// bucket. While more than compactFanIn runs share one, some of them
	// are merged into one first: the smallest, as few as bring that bucket
	// down to compactFanIn, so that a row is rewritten as few times as
	// can be. (Runs of a table fed in time order each cover a stretch of
	// time, and few share a bucket; every run of an integer index, which
	// has no buckets, shares the one.)
	for {
		shared := sharedBucketRuns(c.runs)
		if len(shared) <= compactFanIn {
			break
		}
		k := min(compactFanIn, len(shared)-compactFanIn+1)
		slices.SortStableFunc(shared, func(a, b *spillRun) int { return cmp.Compare(a.rows, b.rows) })
		merged := shared[:k]
		run, err := newSpillRun(c.r.opts.SpillDir, c.schema, c.r.acct)
		if err != nil {
			return err
		}
		run.lo, run.hi = merged[0].lo, merged[0].hi
		for _, in := range merged[1:] {
			run.lo, run.hi = min(run.lo, in.lo), max(run.hi, in.hi)
		}
		c.runs = append(c.runs, run)
		if err := m.merge(ctx, merged, run); err != nil {
			return err
		}
		if err := run.finish(); err != nil {
			return err
		}
		c.runs = slices.DeleteFunc(c.runs, func(r *spillRun) bool { return slices.Contains(merged, r) })
		for _, done := range merged {
			c.r.spilled(done)
			done.close()
		}
	}
	m.chunkRows = c.budget.chunkRows
	return m.merge(ctx, c.runs, out)
}
