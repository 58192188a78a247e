package tableformat

import (
	"context"
	"fmt"
	"path"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"
)

// compactChunkRows is the most rows gathered into one batch: for the
// writer at most a row group, so that the writer's byte count is up to
// date after each batch; and a bound on every batch of the compaction.
const compactChunkRows = 1 << 16

// compactRun owns the files one Compact call writes until they are
// committed.
type compactRun struct {
	t         *Table
	opts      *CompactOptions
	written   []string // every file created, for cleanup
	committed bool

	// acct counts the call's memory (the bound is per group; the peak is
	// the call's).
	acct *compactAccount
	// spillRuns and spillBytes count the temporary runs written.
	spillRuns  int
	spillBytes uint64
	// swept: the spill directory was cleared of files left by killed
	// processes (sweepSpillFiles), once per call.
	swept bool
}

// cleanup removes every file of a call that did not commit.
func (r *compactRun) cleanup() {
	if r.committed {
		return
	}
	for _, p := range r.written {
		r.t.log.removeQuietly(p)
	}
}

// drop removes the files of a group that will not be committed.
func (r *compactRun) drop(g *compactGroup) {
	for i := range g.outputs {
		r.t.log.removeQuietly(g.outputs[i].Path)
		r.t.log.removeQuietly(g.outputs[i].CoveragePath)
	}
}

// checkFiles makes sure the outputs still exist just before the commit (a
// vacuum with a cutoff younger than this call could have taken them), as
// appends do.
func (r *compactRun) checkFiles(groups []*compactGroup) error {
	for _, g := range groups {
		for i := range g.outputs {
			for _, p := range []string{g.outputs[i].Path, g.outputs[i].CoveragePath} {
				if _, err := r.t.fs.Stat(p); err != nil {
					return storageErr("the compaction's file "+p+" disappeared before its commit (was a vacuum run with a cutoff younger than the compaction?); nothing was committed", err)
				}
			}
		}
	}
	return nil
}

// syncParents makes the entries of the directories the outputs live in
// durable, up to the table root (they exist already on a table with
// segments, unless every segment lives elsewhere).
func (r *compactRun) syncParents() error {
	for _, d := range []string{"data/_managed", "data", "_coverage", "."} {
		if err := r.t.fs.SyncDir(d); err != nil {
			return storageErr("sync "+d, err)
		}
	}
	return nil
}

// writeGroup reads, sorts, writes and verifies one group, holding at most
// about MemoryBytes of its rows at a time (see compactBudget).
func (r *compactRun) writeGroup(ctx context.Context, st *State, g *compactGroup) error {
	if r.acct == nil {
		r.acct = newCompactAccount(r.opts.Alloc)
	}
	schema, err := ArrowSchema(st.Schema())
	if err != nil {
		return err
	}
	budget := newCompactBudget(r.opts.MemoryBytes, int64(schema.NumFields()), compactSchemaWidth(schema), r.opts.MaxRowsPerRowGroup)
	ir, er := newIndexReader(st, st.Schema()), newEntityReader(st, st.Schema())
	out := &groupOutput{ctx: ctx, r: r, st: st, g: g, ir: ir, er: er, budget: budget,
		union: newSegmentCoverage(st.Index(), len(er.cols) > 0)}
	defer out.abort()
	runs := &compactRuns{r: r, budget: budget, ir: ir, er: er, idents: int64(max(g.cov.set.Len(), 1)),
		out: out, version: st.Version, stream: true}
	defer runs.release()
	if err := runs.read(ctx, st, g); err != nil {
		return err
	}
	if g.rowsRead != g.rows {
		return corruptf("", st.Version, nil, "compaction read %d rows from %d segments (%s, …) whose log records %d; nothing was committed",
			g.rowsRead, len(g.sources), g.sources[0].Path, g.rows)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := runs.write(ctx, out); err != nil {
		return err
	}
	if err := out.finish(); err != nil {
		return err
	}
	// Verify before anything can be committed.
	if g.rowsWritten != g.rowsRead {
		return corruptf("", st.Version, nil, "compaction wrote %d rows of the %d it read from %d segments (%s, …); nothing was committed",
			g.rowsWritten, g.rowsRead, len(g.sources), g.sources[0].Path)
	}
	if !out.union.set.Equal(g.cov.set) || out.union.set.Cardinality() != g.rowsWritten {
		return corruptf("", st.Version, nil, "the coverage of the %d compacted segments (%d pairs for %d rows) differs from the union of the %d sources' sidecars (%d pairs; first source %s); nothing was committed",
			len(g.outputs), out.union.set.Cardinality(), g.rowsWritten, len(g.sources), g.cov.set.Cardinality(), g.sources[0].Path)
	}
	return nil
}

// groupOutput is the sink of a group's sorted rows: output segments,
// each closed once it reaches TargetBytes.
type groupOutput struct {
	ctx    context.Context
	r      *compactRun
	st     *State
	g      *compactGroup
	ir     indexReader
	er     entityReader
	schema *arrow.Schema // set once the first rows are read
	budget *compactBudget
	union  *segmentCoverage
	out    *compactOutput
}

func (o *groupOutput) put(rec arrow.RecordBatch) error {
	if o.out != nil && compactWrittenBytes(o.out.w) >= o.r.opts.TargetBytes {
		if err := o.finish(); err != nil {
			return err
		}
	}
	if o.out == nil {
		// Sized by the budget as it is now: rows may be written while
		// the group is read, once the width of its rows is known.
		wopts := &AppendOptions{Compression: o.r.opts.Compression, MaxRowsPerRowGroup: o.budget.rowGroupRows,
			MaxBytesPerRowGroup: min(o.budget.rgBytes, DefaultCompactTargetBytes), Alloc: o.r.acct}
		out, err := o.r.newOutput(o.st, o.schema, wopts, len(o.er.cols) > 0)
		if err != nil {
			return err
		}
		o.out = out
	}
	err := o.out.stats.observe(o.ctx, o.ir, o.er, rec)
	if err == nil && o.out.stats.dups == 0 {
		err = o.out.w.write(rec)
	}
	return err
}

// finish closes the open output, if any, and records it.
func (o *groupOutput) finish() error {
	if o.out == nil {
		return nil
	}
	seg, err := o.r.finishOutput(o.st, o.out, o.ir)
	o.out = nil
	if err != nil {
		return err
	}
	o.g.addOutput(seg, o.union)
	return nil
}

// abort removes the open output, if any.
func (o *groupOutput) abort() {
	if o.out != nil {
		o.out.w.abort()
		o.out = nil
	}
}

// addOutput records a finished output and adds its coverage to union.
func (g *compactGroup) addOutput(seg compactSegment, union *segmentCoverage) {
	g.outputs = append(g.outputs, seg.meta)
	g.outputBytes += *seg.meta.FileSize
	g.rowsWritten += seg.meta.RowCount
	if err := union.set.Union(seg.cov.set); err != nil {
		panic(fmt.Sprintf("union of same-kind coverage sets failed: %v", err)) // unreachable
	}
}

// spilled adds a closed run to the call's spill totals.
func (r *compactRun) spilled(run *spillRun) {
	r.spillRuns++
	r.spillBytes += uint64(run.bytes)
}

// compactOutput is one output segment being written.
type compactOutput struct {
	path    string
	attempt uuid.UUID
	w       *segmentWriter
	stats   *streamStats
}

// compactSegment is a finished output: its log entry and its coverage.
type compactSegment struct {
	meta SegmentMeta
	cov  *segmentCoverage
}

func (r *compactRun) newOutput(st *State, schema *arrow.Schema, wopts *AppendOptions, entity bool) (*compactOutput, error) {
	p := path.Join(appendDir, uuid.NewString()+".parquet")
	w, err := newSegmentWriter(r.t.fs, p, schema, wopts, wopts.Alloc)
	if err != nil {
		return nil, err
	}
	r.written = append(r.written, p)
	return &compactOutput{path: p, attempt: uuid.New(), w: w, stats: &streamStats{cov: newSegmentCoverage(st.Index(), entity)}}, nil
}

// finishOutput closes the file durably, derives its SegmentMeta as an
// append does, and writes its coverage sidecar.
func (r *compactRun) finishOutput(st *State, out *compactOutput, ir indexReader) (compactSegment, error) {
	if out.stats.dups > 0 {
		return compactSegment{}, corruptf("", st.Version, nil, "the compacted rows hold more than one row in %d (identity, index interval) pairs, e.g. %s: the source segments overlap; nothing was committed",
			out.stats.dups, out.stats.firstDup)
	}
	size, err := out.w.finish()
	if err != nil {
		return compactSegment{}, err
	}
	if err := r.t.fs.SyncDir(appendDir); err != nil {
		return compactSegment{}, storageErr("sync "+appendDir, err)
	}
	lo, hi := out.stats.bounds(ir)
	seg := SegmentMeta{
		Path:     out.path,
		Format:   FormatParquet,
		Layout:   out.stats.cov.layout(),
		IndexMin: lo,
		IndexMax: hi,
		RowCount: out.stats.rows,
		FileSize: &size,
	}
	name, data := out.stats.cov.encodeSegment(out.attempt)
	p := path.Join(segmentCoverageDir, name+".roar")
	if err := r.t.log.writeDurable(p, data); err != nil {
		return compactSegment{}, err
	}
	r.written = append(r.written, p)
	if err := r.t.fs.SyncDir(segmentCoverageDir); err != nil {
		return compactSegment{}, storageErr("sync "+segmentCoverageDir, err)
	}
	seg.CoveragePath = p
	return compactSegment{meta: seg, cov: out.stats.cov}, nil
}

// compactWrittenBytes is about the size of the segment so far: the bytes
// handed to the file plus the open row group's encoded bytes.
func compactWrittenBytes(w *segmentWriter) int64 {
	n := w.count.n
	switch {
	case w.rgw != nil:
		n += w.rgw.TotalBytesWritten()
	case w.fw != nil:
		n += w.fw.RowGroupTotalBytesWritten()
	}
	return n
}
