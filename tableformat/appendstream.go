package tableformat

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// indexReader reads the index column of canonical batches as raw values.
type indexReader struct {
	typ IndexType
	// unitsPerSecond of a timestamp column.
	unitsPerSecond int64
	col            int
}

func newIndexReader(st *State, schema *Schema) indexReader {
	ix := st.Index()
	r := indexReader{typ: ix.Kind.Type}
	for i := range schema.Columns {
		if schema.Columns[i].Name == ix.Column {
			r.col = i
			if ix.Kind.Type == IndexTimestamp {
				r.unitsPerSecond = map[TimeUnit]int64{Millis: 1e3, Micros: 1e6, Nanos: 1e9}[schema.Columns[i].Type.Unit]
			}
		}
	}
	return r
}

// value turns a raw index value into an IndexValue.
func (r indexReader) value(signed int64, unsigned uint64) IndexValue {
	switch r.typ {
	case IndexTimestamp:
		sec, frac := floorDiv(signed, r.unitsPerSecond)
		return TimeValue(time.Unix(sec, frac*(1e9/r.unitsPerSecond)))
	case IndexInt64:
		return Int64Value(signed)
	default:
		return Uint64Value(unsigned)
	}
}

func floorDiv(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

// entityReader reads one identity per row from the entity columns.
type entityReader struct {
	cols  []int
	types []EntityType
	names []string
}

func newEntityReader(st *State, schema *Schema) entityReader {
	var r entityReader
	for _, name := range st.Index().EntityColumns {
		for i := range schema.Columns {
			if schema.Columns[i].Name == name {
				r.cols = append(r.cols, i)
				r.names = append(r.names, name)
				r.types = append(r.types, map[TypeKind]EntityType{TypeUtf8: EntityUtf8, TypeInt32: EntityInt32, TypeInt64: EntityInt64, TypeUInt64: EntityUInt64}[schema.Columns[i].Type.Kind])
			}
		}
	}
	return r
}

// streamStats accumulates what the commit needs while batches stream by.
type streamStats struct {
	rows       uint64
	minS, maxS int64
	minU, maxU uint64
	cov        *segmentCoverage
	// firstDup records the first duplicate (identity, interval) inside the
	// stream; dups counts them.
	dups     uint64
	firstDup string
}

func (s *streamStats) observe(ctx context.Context, ir indexReader, er entityReader, rec arrow.RecordBatch) error {
	n := int(rec.NumRows())
	idx := rec.Column(ir.col)
	if idx.NullN() > 0 {
		for i := 0; i < n; i++ {
			if idx.IsNull(i) {
				return invalidf("index column %q is null at row %d of the batch; every row needs an index value", rec.Schema().Field(ir.col).Name, i)
			}
		}
	}
	for k, c := range er.cols {
		if col := rec.Column(c); col.NullN() > 0 {
			for i := 0; i < n; i++ {
				if col.IsNull(i) {
					return invalidf("entity column %q is null at row %d of the batch; entity values are required", er.names[k], i)
				}
			}
		}
	}
	ids, err := s.cov.ids(idx, ir, rec.Schema().Field(ir.col).Name)
	if err != nil {
		return err
	}
	switch ir.typ {
	case IndexUInt64:
		vals := idx.(*array.Uint64).Uint64Values()
		for _, v := range vals {
			if s.rows == 0 || v < s.minU {
				s.minU = v
			}
			if s.rows == 0 || v > s.maxU {
				s.maxU = v
			}
			s.rows++
		}
	default:
		var vals []int64
		if ir.typ == IndexTimestamp {
			// arrow.Timestamp is an int64: view the values without copying.
			vals = arrow.Int64Traits.CastFromBytes(idx.Data().Buffers()[1].Bytes())[idx.Data().Offset():][:idx.Len()]
		} else {
			vals = idx.(*array.Int64).Int64Values()
		}
		for _, v := range vals {
			if s.rows == 0 || v < s.minS {
				s.minS = v
			}
			if s.rows == 0 || v > s.maxS {
				s.maxS = v
			}
			s.rows++
		}
	}
	dups, example, err := s.cov.add(er, rec, ids)
	if err != nil {
		return err
	}
	if dups > 0 {
		if s.dups == 0 {
			s.firstDup = example
		}
		s.dups += dups
	}
	return ctx.Err()
}

func (s *streamStats) bounds(ir indexReader) (IndexValue, IndexValue) {
	if ir.typ == IndexUInt64 {
		return ir.value(0, s.minU), ir.value(0, s.maxU)
	}
	return ir.value(s.minS, 0), ir.value(s.maxS, 0)
}

// appendAttempt owns the files one append creates until it commits.
type appendAttempt struct {
	t       *Table
	opts    *AppendOptions
	mem     memory.Allocator
	attempt uuid.UUID

	segPath, segCovPath, tblCovPath string
	segCov                          *segmentCoverage
	committed                       bool
}

// writeSegment consumes the stream into a new Parquet segment and writes
// its coverage sidecar.
func (a *appendAttempt) writeSegment(ctx context.Context, st *State, rdr array.RecordReader, norm *normalizer) (SegmentMeta, error) {
	schema := st.Schema()
	if schema == nil {
		s, err := LogicalFromArrow(rdr.Schema())
		if err != nil {
			return SegmentMeta{}, err
		}
		schema = s
	}
	ir, er := newIndexReader(st, schema), newEntityReader(st, schema)
	stats := &streamStats{cov: newSegmentCoverage(st.Index(), len(er.cols) > 0)}
	a.segPath = path.Join(appendDir, uuid.NewString()+".parquet")
	w, err := newSegmentWriter(a.t.fs, a.segPath, norm.canonical, a.opts, a.allocator())
	if err != nil {
		return SegmentMeta{}, err
	}
	defer func() {
		if !w.closed {
			w.abort()
		}
	}()
	// Coverage first, then the batch is handed to the writer, which
	// encodes it in the background (parallel across columns) while the
	// next batch is received and its coverage computed. Once a duplicate
	// is known, encoding stops (the append will fail) but coverage goes on
	// counting.
	err = consumeStream(ctx, rdr, norm, a.allocator(), stats, ir, er, w.writeAsync)
	if err != nil {
		return SegmentMeta{}, err
	}
	// The coverage is complete: its sidecar is encoded and written
	// (fsynced) on its own goroutine while the segment's last batch is
	// encoded, its footer written and the file fsynced. The commit that
	// names both follows only once both files, and their directory
	// entries, are durable.
	a.segCov = stats.cov
	early := len(st.Segments) > 0 // a new table's directories are made after the files
	side := goJob(func() error { return a.writeSegmentSidecar(early) })
	defer side.wait() // on every return: no goroutine outlives the append
	size, err := w.flush()
	if err == nil {
		err = w.syncClose()
	}
	if err == nil && early {
		if err = a.t.fs.SyncDir(appendDir); err != nil {
			err = storageErr("sync "+appendDir, err)
		}
	}
	if serr := side.wait(); err == nil {
		err = serr
	}
	if err != nil {
		return SegmentMeta{}, err
	}
	if !early {
		if err := makeTableDirs(a.t.fs); err != nil {
			return SegmentMeta{}, err
		}
		var appErr, covErr error
		both(func() { appErr = a.t.fs.SyncDir(appendDir) }, func() { covErr = a.t.fs.SyncDir(segmentCoverageDir) })
		if appErr != nil {
			return SegmentMeta{}, storageErr("sync "+appendDir, appErr)
		}
		if covErr != nil {
			return SegmentMeta{}, storageErr("sync "+segmentCoverageDir, covErr)
		}
	}
	lo, hi := stats.bounds(ir)
	return SegmentMeta{
		Path:         a.segPath,
		Format:       FormatParquet,
		Layout:       stats.cov.layout(),
		IndexMin:     lo,
		IndexMax:     hi,
		RowCount:     stats.rows,
		FileSize:     &size,
		CoveragePath: a.segCovPath,
	}, nil
}

// writeSegmentSidecar writes the coverage sidecar of a.segCov durably and
// records its path for cleanup; with syncDir it also syncs its directory
// (a new table's directories are made and synced after its files).
func (a *appendAttempt) writeSegmentSidecar(syncDir bool) error {
	name, data := a.segCov.encodeSegment(a.attempt)
	p := path.Join(segmentCoverageDir, name+".roar")
	if err := a.t.log.writeDurable(p, data); err != nil {
		return err
	}
	a.segCovPath = p
	if syncDir {
		if err := a.t.fs.SyncDir(segmentCoverageDir); err != nil {
			return storageErr("sync "+segmentCoverageDir, err)
		}
	}
	return nil
}

// consumeStream reads rdr to its end, computing each batch's coverage
// into stats and handing the canonical batch to write (nil: check only)
// until a duplicate is found. It returns the stream's first fault: a
// batch of another schema, a null key, a read error, no rows, duplicate
// intervals.
func consumeStream(ctx context.Context, rdr array.RecordReader, norm *normalizer, mem memory.Allocator, stats *streamStats, ir indexReader, er entityReader, write func(arrow.RecordBatch) error) error {
	in := rdr.Schema()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		if !rec.Schema().Equal(in) {
			return invalidf("a batch's schema differs from the stream's schema: %s", rec.Schema())
		}
		canon := norm.apply(mem, rec)
		err := stats.observe(ctx, ir, er, canon)
		if err == nil && stats.dups == 0 && write != nil {
			err = write(canon)
		}
		canon.Release()
		if err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr // the client went away
		}
		return fmt.Errorf("%w: reading the input stream: %w", ErrInvalidInput, err)
	}
	if stats.rows == 0 {
		return invalidf("the input stream has no rows")
	}
	if stats.dups > 0 {
		return &OverlapError{Within: true, Count: stats.dups, Example: stats.firstDup}
	}
	return nil
}

// checkStream is Append with CheckOnly: the stream's checks and the
// overlap with st, nothing written.
func (t *Table) checkStream(ctx context.Context, st *State, rdr array.RecordReader, norm *normalizer, mem memory.Allocator) (*AppendResult, error) {
	schema := st.Schema()
	if schema == nil {
		s, err := LogicalFromArrow(rdr.Schema())
		if err != nil {
			return nil, err
		}
		schema = s
	}
	ir, er := newIndexReader(st, schema), newEntityReader(st, schema)
	stats := &streamStats{cov: newSegmentCoverage(st.Index(), len(er.cols) > 0)}
	if err := consumeStream(ctx, rdr, norm, mem, stats, ir, er, nil); err != nil {
		return nil, err
	}
	if len(st.Segments) > 0 {
		table, err := t.loadCoverage(ctx, st)
		if err != nil {
			return nil, err
		}
		if n, example := table.overlap(stats.cov); n > 0 {
			return nil, &OverlapError{Count: n, Example: example, Version: st.Version}
		}
	}
	return &AppendResult{Version: st.Version, Rows: stats.rows}, nil
}

func (a *appendAttempt) allocator() memory.Allocator { return a.mem }

// makeTableDirs is for the first segment of a table: the segment's writer
// created the directories, and their entries are made durable too, up to
// the table root.
func makeTableDirs(fsys storage.FS) error {
	for _, d := range []string{"data/_managed", "data", "_coverage/segments", "_coverage/table", "_coverage", "."} {
		if err := fsys.MkdirAll(d); err != nil {
			return storageErr("create "+d, err)
		}
	}
	for _, d := range []string{"data/_managed", "data", "_coverage", "."} {
		if err := fsys.SyncDir(d); err != nil {
			return storageErr("sync "+d, err)
		}
	}
	return nil
}

// writeSidecar writes a coverage file exclusively and durably; prefix is
// "<version>-" for table snapshots.
func (a *appendAttempt) writeSidecar(dir, prefix string, name string, data []byte) (string, error) {
	return writeDurableSidecar(a.t, dir, prefix+name, data)
}

// checkOverlap loads the table coverage of st, refuses an overlap with the
// new segment, and returns the table coverage with the segment added: the
// coverage of the version the append commits.
func (a *appendAttempt) checkOverlap(ctx context.Context, st *State) (*segmentCoverage, error) {
	table, err := a.t.loadCoverage(ctx, st)
	if err != nil {
		return nil, err
	}
	if n, example := table.overlap(a.segCov); n > 0 {
		return nil, &OverlapError{Count: n, Example: example, Version: st.Version}
	}
	return table.extended(a.segCov)
}

// writeTableSnapshot writes cov, the table coverage of the version the
// append commits, as that version's table coverage snapshot.
func (a *appendAttempt) writeTableSnapshot(st *State, cov *segmentCoverage) (CoveragePointer, error) {
	name, data := cov.encodeTable(a.attempt)
	p, err := a.writeSidecar(tableCoverageDir, fmt.Sprintf("%d-", st.Version+1), name, data)
	if err != nil {
		return CoveragePointer{}, err
	}
	a.tblCovPath = p
	return CoveragePointer{IndexKind: st.Index().Kind, Path: p}, nil
}

func (a *appendAttempt) dropTableSnapshot() {
	if a.tblCovPath != "" {
		a.t.log.removeQuietly(a.tblCovPath)
		a.tblCovPath = ""
	}
}

// checkFiles makes sure the attempt's files still exist just before it
// commits: a commit must never name a file that is gone (a vacuum run with
// a cutoff younger than this append could have taken it). The append then
// fails, retryable, and commits nothing.
func (a *appendAttempt) checkFiles() error {
	return filesStillThere(a.t, a.segPath, a.segCovPath, a.tblCovPath)
}

// filesStillThere is checkFiles for any list of files ("" skipped).
func filesStillThere(t *Table, paths ...string) error {
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := t.fs.Stat(p); err != nil {
			return storageErr("the append's file "+p+" disappeared before its commit (was a vacuum run with a cutoff younger than the append?); nothing was committed", err)
		}
	}
	return nil
}

// cleanup removes every file of an attempt that did not commit.
func (a *appendAttempt) cleanup() {
	if a.committed {
		return
	}
	for _, p := range []string{a.segPath, a.segCovPath, a.tblCovPath} {
		if p != "" {
			a.t.log.removeQuietly(p)
		}
	}
}
