// The segments of a group commit: which members share a segment, encoding
// it with its coverage sidecar while the table's coverage is extended, and
// making the files durable before the commit that names them
// (appendgroup.go has the queue and the commit).

package tableformat

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

// groupSegment is one segment of a group commit: the members whose batches
// it holds (same schema and write options) and its files.
type groupSegment struct {
	members []*groupMember
	cov     *segmentCoverage // union of the members' coverage
	lo, hi  IndexValue       // the members' index bounds
	rows    uint64
	seg     SegmentMeta
	files   []string

	// Between encodeGroupSegment and syncGroupSegments: the flushed
	// segment's writer, the sidecar (written by side, which sets
	// covDone) and the early fsync of the segment's directory entry.
	w       *segmentWriter
	covPath string
	covData []byte
	covDone bool
	side    *job
	dirSync *job
}

// settle waits for the part's early jobs and takes the sidecar among its
// files if side wrote it; it returns the first error of the jobs.
func (p *groupSegment) settle() error {
	serr, derr := p.side.wait(), p.dirSync.wait()
	p.side, p.dirSync = nil, nil
	if p.covDone {
		p.files = append(p.files, p.covPath)
		p.covDone = false
	}
	return cmp.Or(serr, derr)
}

// partition groups members whose batches can share a segment: the same
// canonical schema and the same segment-writing options.
func partition(members []*groupMember) []*groupSegment {
	var parts []*groupSegment
outer:
	for _, m := range members {
		for _, p := range parts {
			o, q := p.members[0], m
			if o.arrow.Equal(q.arrow) && o.opts.GroupCompression == q.opts.GroupCompression &&
				o.opts.MaxRowsPerRowGroup == q.opts.MaxRowsPerRowGroup && o.opts.MaxBytesPerRowGroup == q.opts.MaxBytesPerRowGroup {
				p.members = append(p.members, m)
				continue outer
			}
		}
		parts = append(parts, &groupSegment{members: []*groupMember{m}})
	}
	return parts
}

// encodeGroupSegments writes each part's segment and flushes it; the
// segments are not durable yet (syncGroupSegments).
func (t *Table) encodeGroupSegments(ctx context.Context, st *State, parts []*groupSegment, attempt uuid.UUID) error {
	for _, p := range parts {
		if err := t.encodeGroupSegment(ctx, st, p, attempt); err != nil {
			return err
		}
	}
	return nil
}

// coverGroupSegments computes each part's coverage, bounds and rows from
// its members' statistics.
func coverGroupSegments(st *State, parts []*groupSegment) error {
	for _, p := range parts {
		first := p.members[0]
		p.cov = newSegmentCoverage(st.Index(), first.stats.cov.set.IsEntity())
		p.rows = 0
		p.lo, p.hi = first.stats.bounds(first.ir)
		for _, m := range p.members {
			if err := p.cov.set.Absorb(m.stats.cov.set); err != nil {
				return corruptf("", st.Version, err, "append coverage does not match the table's entity columns")
			}
			p.rows += m.stats.rows
			mlo, mhi := m.stats.bounds(m.ir)
			if mlo.Compare(p.lo) < 0 {
				p.lo = mlo
			}
			if mhi.Compare(p.hi) > 0 {
				p.hi = mhi
			}
		}
	}
	return nil
}

// extendWithParts returns table's coverage extended by every part's.
func extendWithParts(st *State, table *segmentCoverage, parts []*groupSegment) (*segmentCoverage, error) {
	union := table
	for _, p := range parts {
		var err error
		if union, err = union.extended(p.cov); err != nil {
			return nil, corruptf("", st.Version, err, "segment coverage does not match the table's entity columns")
		}
	}
	return union, nil
}

// encodeGroupSegment writes part p's segment (its coverage computed by
// coverGroupSegments) and starts its sidecar.
func (t *Table) encodeGroupSegment(ctx context.Context, st *State, p *groupSegment, attempt uuid.UUID) error {
	first := p.members[0]
	mem := first.opts.Alloc
	if mem == nil {
		mem = scanPool
	}
	// The sidecar is encoded and written on its own goroutine while the
	// segment is encoded here; its name (from its content) is needed only
	// for the segment's entry in the log.
	// A new table's directories are made and synced after the files
	// (syncGroupSegments); an existing table's entries are synced as soon
	// as the files exist.
	early := len(st.Segments) > 0
	named := make(chan struct{})
	p.side = goJob(func() error {
		name, data := p.cov.encodeSegment(attempt)
		p.covPath, p.covData = path.Join(segmentCoverageDir, name+".roar"), data
		close(named)
		if err := t.log.writeDurable(p.covPath, p.covData); err != nil {
			return err
		}
		p.covDone = true
		if p.cov.set.IsEntity() {
			// What the last-value index needs of this sidecar, known
			// here: it need not be read back (sidecar names follow their
			// content, so the entry is right whether or not the commit
			// lands).
			t.newest.put(p.covPath, newestOf(p.cov.set))
		}
		if early {
			if err := t.fs.SyncDir(segmentCoverageDir); err != nil {
				return storageErr("sync "+segmentCoverageDir, err)
			}
		}
		return nil
	})

	segPath := path.Join(appendDir, uuid.NewString()+".parquet")
	p.files = append(p.files, segPath)
	file := createAsync(t.fs, segPath)
	if early {
		p.dirSync = goJob(func() error {
			if file.wait() != nil {
				return nil // the writer reports it
			}
			if err := t.fs.SyncDir(appendDir); err != nil {
				return storageErr("sync "+appendDir, err)
			}
			return nil
		})
	}
	wopts := *first.opts
	wopts.Compression = first.opts.GroupCompression
	wopts.noDictionary = first.opts.GroupPlainRows > 0 && p.rows <= uint64(first.opts.GroupPlainRows)
	w, err := newSegmentWriterOn(t.fs, segPath, file, first.arrow, &wopts, mem)
	if err != nil {
		return err
	}
	// The members' batches are written as one: the column writers pay
	// their setup per batch (a 100-row batch costs nearly what an 800-row
	// one does), so eight members' batches cost almost eight times one.
	var recs []arrow.RecordBatch
	for _, m := range p.members {
		recs = append(recs, m.recs...)
	}
	if len(recs) > 1 && p.rows <= uint64(max(wopts.MaxRowsPerRowGroup, 0)) {
		one, err := ConcatBatches(recs, mem)
		if err != nil {
			w.abort()
			return fmt.Errorf("%w: gather the group's batches: %w", ErrStorage, err)
		}
		defer one.Release()
		recs = []arrow.RecordBatch{one}
	}
	for _, rec := range recs {
		if err := w.write(rec); err != nil {
			w.abort()
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		w.abort()
		return err
	}
	size, err := w.flush()
	if err != nil {
		return err
	}
	p.w = w
	<-named
	p.seg = SegmentMeta{
		Path:         segPath,
		Format:       FormatParquet,
		Layout:       p.cov.layout(),
		IndexMin:     p.lo,
		IndexMax:     p.hi,
		RowCount:     p.rows,
		FileSize:     &size,
		CoveragePath: p.covPath,
	}
	return nil
}

// syncGroupSegments makes the encoded segments durable, every segment's
// fsync at once and with stage (the staged commit), and waits for the
// sidecars and directory syncs encodeGroupSegment started; a new table's
// directories are made durable last. On this kind of disk several fsyncs
// at once take about two thirds of the time of the same fsyncs in a row.
func (t *Table) syncGroupSegments(st *State, parts []*groupSegment, stage func() error) error {
	var wg sync.WaitGroup
	errs := make([]error, 2*len(parts)+1)
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[2*i] = p.w.syncClose()
			p.w = nil
		}()
	}
	errs[len(errs)-1] = stage()
	wg.Wait()
	for i, p := range parts {
		errs[2*i+1] = p.settle()
	}
	if err := cmp.Or(errs...); err != nil {
		return err
	}
	if len(st.Segments) > 0 {
		return nil // the directories were synced after the files were made
	}
	if err := makeTableDirs(t.fs); err != nil {
		return err
	}
	var appErr, covErr error
	both(func() { appErr = t.fs.SyncDir(appendDir) }, func() { covErr = t.fs.SyncDir(segmentCoverageDir) })
	if appErr != nil {
		return storageErr("sync "+appendDir, appErr)
	}
	if covErr != nil {
		return storageErr("sync "+segmentCoverageDir, covErr)
	}
	return nil
}

// both runs f and g at once and returns when both are done.
func both(f, g func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		g()
	}()
	f()
	<-done
}

// writeDurableSidecar writes a coverage file exclusively and durably.
func writeDurableSidecar(t *Table, dir, name string, data []byte) (string, error) {
	p := path.Join(dir, name+".roar")
	if err := t.log.writeDurable(p, data); err != nil {
		return "", err
	}
	if err := t.fs.SyncDir(dir); err != nil {
		t.log.removeQuietly(p)
		return "", storageErr("sync "+dir, err)
	}
	return p, nil
}

// checkGroupFiles is checkFiles for a group's files.
func (t *Table) checkGroupFiles(parts []*groupSegment) error {
	for _, p := range parts {
		if err := filesStillThere(t, p.files...); err != nil {
			return err
		}
	}
	return nil
}

// ConcatBatches copies batches of one schema into one batch allocated from
// mem. A group commit writes its appends' batches with it; packages
// flightserver and flightsql merge short scan and DuckDB batches with it.
func ConcatBatches(batches []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	schema := batches[0].Schema()
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(batches))
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	for i := range cols {
		for j, rec := range batches {
			parts[j] = rec.Column(i)
		}
		col, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, err
		}
		cols[i] = col
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}
