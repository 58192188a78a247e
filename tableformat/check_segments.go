// Check, the data files: every live segment against its commit, its
// coverage sidecar against its rows, the table coverage snapshot against
// the sidecars.

package tableformat

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// checkSegments checks every live segment and its sidecar.
func (r *checkRun) checkSegments(ctx context.Context) error {
	entity := len(r.st.Index().EntityColumns) > 0
	for i := range r.st.Segments {
		if err := ctx.Err(); err != nil {
			return err
		}
		seg := &r.st.Segments[i]
		added := r.addedAt[seg.Path]
		segOK := true
		_, statErr := r.fsys.Stat(seg.Path)
		err := statErr
		if err == nil {
			err = verifySegmentFile(r.fsys, *seg)
		}
		if err != nil {
			segOK = false
			if storage.IsNotExist(statErr) {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentMissing, Path: seg.Path, Version: added,
					Problem: fmt.Sprintf("commit %d added this segment (%d rows%s) but the file is missing; scans fail", added, seg.RowCount, sizeNote(seg)),
					Action:  "restore the file from a backup; its rows are not anywhere else"})
			} else {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentDamaged, Path: seg.Path, Version: added,
					Problem: fmt.Sprintf("the file is not the segment commit %d recorded: %s", added, problemOf(err)),
					Action:  "restore the file from a backup (a file swapped or truncated by hand cannot be told from damage)"})
			}
		}
		var rows *segmentRows
		if segOK {
			var err error
			if rows, err = segmentRowsCoverage(ctx, r.fsys, r.st, seg); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				segOK = false
				r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentDamaged, Path: seg.Path, Version: added,
					Problem: fmt.Sprintf("the index and entity columns of the segment commit %d recorded cannot be read: %s", added, problemOf(err)),
					Action:  "restore the file from a backup"})
			} else if rows.rows > 0 && (rows.lo.Compare(seg.IndexMin) != 0 || rows.hi.Compare(seg.IndexMax) != 0) {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentDamaged, Path: seg.Path, Version: added,
					Problem: fmt.Sprintf("the file is not the segment commit %d recorded: the log records index %s..%s, the rows hold %s..%s", added, seg.IndexMin, seg.IndexMax, rows.lo, rows.hi),
					Action:  "restore the file from a backup (a file swapped by hand cannot be told from damage)"})
				segOK, rows = false, nil
			}
		}
		if seg.CoveragePath == "" {
			r.sidecarsBad = true
			r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentNoSidecar, Path: seg.Path, Version: added,
				Problem: fmt.Sprintf("commit %d added this segment without a coverage sidecar; appends refuse the table", added),
				Action:  "the segment was written by a writer that does not record coverage; rewrite the table with a current writer"})
			continue
		}
		set, err := readCheckCoverage(r.fsys, seg.CoveragePath, entity)
		if err != nil {
			r.sidecarsBad = true
			if storage.IsNotExist(err) {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSidecarMissing, Path: seg.CoveragePath, Version: added,
					Problem: fmt.Sprintf("commit %d recorded this coverage sidecar of %s but the file is missing; appends and coverage rebuilds fail", added, seg.Path),
					Action:  "restore the file from a backup"})
			} else {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSidecarCorrupt, Path: seg.CoveragePath, Version: added,
					Problem: fmt.Sprintf("the coverage sidecar of %s (commit %d) cannot be decoded: %s", seg.Path, added, problemOf(err)),
					Action:  "restore the file from a backup"})
			}
			continue
		}
		if msg := r.compareSidecar(seg, set, rows); msg != "" {
			r.sidecarsBad = true
			r.add(CheckFinding{Severity: CheckError, Code: CheckSidecarMismatch, Path: seg.CoveragePath, Version: added,
				Problem: fmt.Sprintf("the coverage sidecar of %s (commit %d) disagrees with the segment: %s", seg.Path, added, msg),
				Action:  "restore the file from a backup; until then appends may accept duplicates or refuse valid rows, and coverage answers are wrong"})
			continue
		}
		r.sidecars[seg.Path] = set
	}
	return nil
}

func sizeNote(seg *SegmentMeta) string {
	if seg.FileSize == nil {
		return ""
	}
	return fmt.Sprintf(", %d bytes", *seg.FileSize)
}

func readCheckCoverage(fsys storage.FS, p string, entity bool) (*coverage.Set, error) {
	data, err := fsys.ReadFile(p)
	if err != nil {
		if storage.IsNotExist(err) {
			return nil, err
		}
		return nil, storageErr("read "+p, err)
	}
	set, err := coverage.Decode(data, entity)
	if err != nil {
		return nil, fmt.Errorf("%d bytes: %w", len(data), err)
	}
	return set, nil
}

// compareSidecar returns "" when set is the coverage of seg's rows (when
// they could be read) or lies within its index bounds (when not).
func (r *checkRun) compareSidecar(seg *SegmentMeta, set *coverage.Set, rows *segmentRows) string {
	spec := r.st.Index()
	if rows != nil {
		if set.Equal(rows.cov) {
			return ""
		}
		return describeSetDiff(spec, set, rows.cov)
	}
	d := indexDomain(spec)
	lo, err1 := intervalID(d, seg.IndexMin, false)
	hi, err2 := intervalID(d, seg.IndexMax, false)
	if err1 != nil || err2 != nil {
		return ""
	}
	check := func(who string, bm interface {
		IsEmpty() bool
		Minimum() uint64
		Maximum() uint64
	}) string {
		if bm == nil || bm.IsEmpty() {
			return ""
		}
		if bm.Minimum() < lo || bm.Maximum() > hi {
			return fmt.Sprintf("%sits intervals run from %s to %s, outside the segment's index range %s..%s", who,
				describeInterval(spec, d, bm.Minimum()), describeInterval(spec, d, bm.Maximum()), seg.IndexMin, seg.IndexMax)
		}
		return ""
	}
	if !set.IsEntity() {
		return check("", set.Bitmap(nil))
	}
	for _, id := range set.Identities() {
		if msg := check(describeIdentity(spec, id)+": ", set.Bitmap(id)); msg != "" {
			return msg
		}
	}
	return ""
}

func describeIdentity(spec *IndexSpec, id coverage.Identity) string {
	parts := make([]string, len(id))
	for i, c := range id {
		name := "?"
		if i < len(spec.EntityColumns) {
			name = spec.EntityColumns[i]
		}
		parts[i] = name + "=" + c.String()
	}
	return strings.Join(parts, ", ")
}

// describeSetDiff says how got (a file) differs from want (what it should
// hold), with one example pair each way.
func describeSetDiff(spec *IndexSpec, got, want *coverage.Set) string {
	d := indexDomain(spec)
	msg := fmt.Sprintf("the file holds %d (identity, interval) pairs, the expected coverage %d", got.Cardinality(), want.Cardinality())
	if ex := firstMissing(spec, d, got, want); ex != "" {
		msg += "; e.g. " + ex + " is in the file only"
	}
	if ex := firstMissing(spec, d, want, got); ex != "" {
		msg += "; e.g. " + ex + " is missing from the file"
	}
	return msg
}

// firstMissing returns a pair of a that b lacks, described, or "".
func firstMissing(spec *IndexSpec, d coverage.Domain, a, b *coverage.Set) string {
	idents := []coverage.Identity{nil}
	if a.IsEntity() {
		idents = a.Identities()
	}
	for _, id := range idents {
		abm := a.Bitmap(id)
		bbm := b.Bitmap(id)
		who := ""
		if id != nil {
			who = describeIdentity(spec, id) + " "
		}
		if bbm == nil {
			if abm == nil || abm.IsEmpty() {
				return "identity " + strings.TrimSpace(who)
			}
			return who + describeInterval(spec, d, abm.Minimum())
		}
		if abm == nil {
			continue
		}
		diff := abm.Clone()
		diff.AndNot(bbm)
		if !diff.IsEmpty() {
			return who + describeInterval(spec, d, diff.Minimum())
		}
	}
	return ""
}

// segmentRows is what the rows of a segment hold: their coverage and the
// bounds of their (non-null) index values.
type segmentRows struct {
	cov    *coverage.Set
	rows   uint64
	lo, hi IndexValue
}

// segmentRowsCoverage reads the index and entity columns of seg and
// returns the coverage and index bounds of its rows.
func segmentRowsCoverage(ctx context.Context, fsys storage.FS, st *State, seg *SegmentMeta) (out *segmentRows, err error) {
	f, err := fsys.Open(seg.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("decoding the segment failed: %v", v)
		}
	}()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	mem := memory.DefaultAllocator
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, mem)
	if err != nil {
		return nil, err
	}
	ix := st.Index()
	names := append([]string{ix.Column}, ix.EntityColumns...)
	leaves := make([]int, len(names))
	for k, name := range names {
		leaves[k] = -1
		for i := range fr.Manifest.Fields {
			if fr.Manifest.Fields[i].Field.Name == name && fr.Manifest.Fields[i].IsLeaf() {
				leaves[k] = fr.Manifest.Fields[i].ColIndex
			}
		}
		if leaves[k] < 0 {
			return nil, fmt.Errorf("the segment has no column %q", name)
		}
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	entity := len(ix.EntityColumns) > 0
	out = &segmentRows{cov: coverage.NewGlobal()}
	cov := newSegmentCoverage(ix, entity)
	for rr.Next() {
		rec := rr.RecordBatch()
		// Columns come back in schema order; find them by name.
		cols := make([]arrow.Array, len(names))
		for k, name := range names {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				return nil, fmt.Errorf("column %q not read", name)
			}
			cols[k] = rec.Column(idx[0])
		}
		if err := addRowsCoverage(cov, out, cols); err != nil {
			return nil, err
		}
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	out.cov = cov.set
	return out, nil
}

// addRowsCoverage adds (identity, interval) of each row whose index is not
// null: cols[0] is the index, the rest the entity columns.
func addRowsCoverage(cov *segmentCoverage, out *segmentRows, cols []arrow.Array) error {
	idx := cols[0]
	ident := make(coverage.Identity, len(cols)-1)
	for row := 0; row < idx.Len(); row++ {
		if idx.IsNull(row) {
			continue
		}
		var id uint64
		var v IndexValue
		var err error
		switch a := idx.(type) {
		case *array.Timestamp:
			ups := map[arrow.TimeUnit]int64{arrow.Second: 1, arrow.Millisecond: 1e3, arrow.Microsecond: 1e6, arrow.Nanosecond: 1e9}[a.DataType().(*arrow.TimestampType).Unit]
			raw := int64(a.Value(row))
			id, err = cov.domain.TimestampID(raw, ups)
			sec, frac := floorDiv(raw, ups)
			v = TimeValue(time.Unix(sec, frac*(1e9/ups)))
		case *array.Int64:
			id, err = cov.domain.Int64ID(a.Value(row))
			v = Int64Value(a.Value(row))
		case *array.Uint64:
			id, err = cov.domain.UInt64ID(a.Value(row))
			v = Uint64Value(a.Value(row))
		default:
			return fmt.Errorf("index column has type %s", idx.DataType())
		}
		if err != nil {
			return err
		}
		if out.rows == 0 || v.Compare(out.lo) < 0 {
			out.lo = v
		}
		if out.rows == 0 || v.Compare(out.hi) > 0 {
			out.hi = v
		}
		out.rows++
		if len(ident) == 0 {
			_, _ = cov.set.Add(nil, id)
			continue
		}
		if !rowIdentity(cols[1:], row, ident) {
			for _, col := range cols[1:] {
				if col.IsNull(row) {
					return fmt.Errorf("entity column is null at a row")
				}
			}
			return fmt.Errorf("an entity column has an unsupported type")
		}
		if _, err := cov.set.Add(ident, id); err != nil {
			return err
		}
	}
	return nil
}

// checkTableCoverage compares the table coverage snapshot with the union
// of the sidecars.
func (r *checkRun) checkTableCoverage() {
	st := r.st
	ptr := st.Coverage
	repairable := r.logIntact && !r.sidecarsBad
	how := "tsflight check --repair rebuilds it from the segment sidecars (the next append would too)"
	if !repairable {
		how = "fix the findings above first; then tsflight check --repair rebuilds it from the segment sidecars"
	}
	if ptr == nil {
		if len(st.Segments) == 0 {
			return
		}
		r.add(CheckFinding{Severity: CheckWarning, Code: CheckTableCoverageNoPointer, Path: tableCoverageDir, Version: st.Version,
			Problem:    fmt.Sprintf("the table has %d segments but no commit records a table coverage snapshot; readers rebuild it from the sidecars on every load", len(st.Segments)),
			Action:     how,
			Repairable: repairable})
		return
	}
	if st.coverageIsUnion() {
		r.checkUnionMarker()
		return
	}
	set, err := readCheckCoverage(r.fsys, ptr.Path, len(st.Index().EntityColumns) > 0)
	if err != nil {
		code, what := CheckTableCoverageCorrupt, "cannot be decoded: "+problemOf(err)
		if storage.IsNotExist(err) {
			code, what = CheckTableCoverageMissing, "is missing"
		}
		r.add(CheckFinding{Severity: CheckWarning, Code: code, Path: ptr.Path, Version: st.CoverageVersion,
			Problem:    fmt.Sprintf("commit %d recorded this table coverage snapshot but the file %s; readers rebuild it from the sidecars on every load", st.CoverageVersion, what),
			Action:     how,
			Repairable: repairable})
		return
	}
	if r.sidecarsBad {
		return // the union is not known
	}
	union := r.sidecarUnion()
	if !set.Equal(union) {
		r.add(CheckFinding{Severity: CheckError, Code: CheckTableCoverageMismatch, Path: ptr.Path, Version: st.CoverageVersion,
			Problem:    "the table coverage snapshot is not the union of the live segments' sidecars (" + describeSetDiff(st.Index(), set, union) + "); appends check overlap and coverage queries answer from it",
			Action:     how,
			Repairable: repairable})
	}
}

// checkUnionMarker checks the segment-union marker the coverage pointer
// names (coverage_union.go): its coverage is the sidecars' union by
// definition, so only its bytes are judged. Missing, it is harmless (the
// 0.9.0 package rebuilds the union, as it does from the marker, and the next
// tsflight append writes it again); holding other bytes, another reader
// might decode them as the table's coverage.
func (r *checkRun) checkUnionMarker() {
	st := r.st
	data, err := r.fsys.ReadFile(unionCoveragePath)
	switch {
	case storage.IsNotExist(err):
		r.add(CheckFinding{Severity: CheckWarning, Code: CheckTableCoverageMissing, Path: unionCoveragePath, Version: st.CoverageVersion,
			Problem:    fmt.Sprintf("commit %d points the table coverage at the segment-union marker, which is missing; readers build the union from the sidecars either way", st.CoverageVersion),
			Action:     "tsflight check --repair writes it again (so does the next append)",
			Repairable: r.logIntact})
	case err != nil:
		r.add(CheckFinding{Severity: CheckError, Code: CheckTableCoverageCorrupt, Path: unionCoveragePath, Version: st.CoverageVersion,
			Problem: "the segment-union marker cannot be read: " + problemOf(err),
			Action:  "check the file system; then run tsflight check again"})
	case !bytes.Equal(data, unionCoverageBytes):
		r.add(CheckFinding{Severity: CheckError, Code: CheckTableCoverageCorrupt, Path: unionCoveragePath, Version: st.CoverageVersion,
			Problem:    fmt.Sprintf("the segment-union marker holds %d bytes that are not the marker's; another reader could take them for the table's coverage, and tsflight appends refuse to run", len(data)),
			Action:     "tsflight check --repair writes the marker again",
			Repairable: r.logIntact})
	}
}

func (r *checkRun) sidecarUnion() *coverage.Set {
	out := newSegmentCoverage(r.st.Index(), len(r.st.Index().EntityColumns) > 0).set
	for i := range r.st.Segments {
		if s := r.sidecars[r.st.Segments[i].Path]; s != nil {
			_ = out.Union(s)
		}
	}
	return out
}
