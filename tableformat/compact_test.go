package tableformat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// compactHosts is the number of entities of the compaction tests' rows.
const compactHosts = 5

// compactRowsOf are the rows of append i: steps 2i and 2i+1 of every host,
// time-major (as a collector sends them), so that each append holds 10
// rows over 5 entities.
func compactRowsOf(i int) []row {
	var out []row
	for step := 2 * i; step < 2*i+2; step++ {
		for h := range compactHosts {
			out = append(out, row{sec: int64(step) * 10, host: fmt.Sprintf("h%d", h), v: int64(step*100 + h)})
		}
	}
	return out
}

// appendSmall appends appends [from, to) through tb.
func appendSmall(t *testing.T, ctx context.Context, tb *Table, mem memory.Allocator, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := appendRows(ctx, tb, mem, compactRowsOf(i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

func appendRows(ctx context.Context, tb *Table, mem memory.Allocator, rows []row) (*AppendResult, error) {
	rec := inBatch(mem, rows...)
	rdr, err := array.NewRecordReader(inSchema(), []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	o := DefaultAppendOptions()
	o.Alloc = mem
	return tb.Append(ctx, rdr, o)
}

// compactOpts are the default options with the test's allocator.
func compactOpts(mem memory.Allocator) *CompactOptions {
	o := DefaultCompactOptions()
	o.Alloc = mem
	return o
}

// tableRows scans every row of st and renders each as "col=value|…",
// sorted.
func tableRows(t *testing.T, ctx context.Context, tb *Table, st *State, mem memory.Allocator) []string {
	t.Helper()
	rdr, err := tb.Scan(ctx, st, ScanOptions{Alloc: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []string
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := range int(rec.NumRows()) {
			parts := make([]string, rec.NumCols())
			for c := range parts {
				parts[c] = rec.Schema().Field(c).Name + "=" + rec.Column(c).ValueStr(i)
			}
			out = append(out, strings.Join(parts, "|"))
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// liveUnion is the union of the live segments' sidecars of st.
func liveUnion(t *testing.T, tb *Table, st *State) *coverage.Set {
	t.Helper()
	entity := len(st.Index().EntityColumns) > 0
	u := newSegmentCoverage(st.Index(), entity)
	for _, seg := range st.Segments {
		c, err := tb.readCoverageFile(st, seg.CoveragePath, entity)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.set.Union(c.set); err != nil {
			t.Fatal(err)
		}
	}
	return u.set
}

// coverageAnswers renders the coverage and gap answers of every host and
// of the whole table over [start, end) through the query functions.
func coverageAnswers(t *testing.T, ctx context.Context, tb *Table, st *State, start, end IndexValue) string {
	t.Helper()
	var b strings.Builder
	for h := -1; h < compactHosts; h++ {
		q := CoverageQuery{Start: start, End: end}
		if h >= 0 {
			q.Entity = Identity{{Type: EntityUtf8, Str: fmt.Sprintf("h%d", h)}}
		}
		c, err := tb.Coverage(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		g, err := tb.Gaps(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d: %+v gaps %s missing %d\n", h, *c, spans(g.Gaps), g.MissingIntervals)
	}
	return b.String()
}

// checkTable runs the table check and fails on any finding.
func checkTable(t *testing.T, ctx context.Context, tb *Table) {
	t.Helper()
	rep, err := tb.Check(ctx, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("check after compaction: %+v", rep.Findings)
	}
}

// segmentFileRows reads a segment file in stored order: (host, ts) per
// row, and the row count of each row group.
func segmentFileRows(t *testing.T, dir, p string) (keys [][2]string, groups []int64) {
	t.Helper()
	pf, err := file.OpenParquetFile(filepath.Join(dir, filepath.FromSlash(p)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	for g := range pf.NumRowGroups() {
		groups = append(groups, pf.MetaData().RowGroup(g).NumRows())
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 1<<20)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		ts := rec.Column(0).(*array.Timestamp)
		host := rec.Column(1).(*array.String)
		for i := range int(rec.NumRows()) {
			keys = append(keys, [2]string{host.Value(i), fmt.Sprintf("%020d", int64(ts.Value(i)))})
		}
	}
	return keys, groups
}

// TestCompactMergesSmallAppends: 200 appends of 10 rows over 5 entities
// become one segment holding the same rows and the same coverage, sorted
// by (entity, index) in bounded row groups; the table checks clean and
// takes more appends; a second call has nothing to do.
func TestCompactMergesSmallAppends(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	ctx := e.ctx
	appendSmall(t, ctx, e.tb, e.mem, 0, 200)
	before := e.tb.State()
	if len(before.Segments) != 200 {
		t.Fatalf("%d segments before", len(before.Segments))
	}
	start, end := tsAt(-100), tsAt(4100)
	rowsBefore := tableRows(t, ctx, e.tb, before, e.mem)
	covBefore := coverageAnswers(t, ctx, e.tb, before, start, end)
	unionBefore := liveUnion(t, e.tb, before)
	var bytesBefore uint64
	for _, s := range before.Segments {
		bytesBefore += *s.FileSize
	}

	o := compactOpts(e.mem)
	o.MaxRowsPerRowGroup = 300
	rep, err := e.tb.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	after := e.tb.State()
	if rep.NoOp || rep.DryRun || rep.StartingVersion != before.Version || rep.CommittedVersion != before.Version+1 || after.Version != rep.CommittedVersion ||
		len(rep.Groups) != 1 || rep.SourceSegments != 200 || rep.OutputSegments != 1 || rep.RowsRead != 2000 || rep.RowsWritten != 2000 ||
		rep.BytesBefore != bytesBefore || rep.BytesAfter == 0 || rep.BytesAfter >= rep.BytesBefore || rep.Retries != 0 || rep.Remaining != 0 {
		t.Fatalf("report: %+v", rep)
	}
	g := rep.Groups[0]
	if g.Rows != 2000 || len(g.Sources) != 200 || g.IndexMin != "2024-06-01T00:00:00Z" || g.IndexMax != "2024-06-01T01:06:30Z" || g.OutputBytes != rep.BytesAfter {
		t.Fatalf("group: %+v", g)
	}
	if len(after.Segments) != 1 {
		t.Fatalf("%d segments after", len(after.Segments))
	}
	seg := after.Segments[0]
	if !strings.HasPrefix(seg.Path, appendDir+"/") || !strings.HasPrefix(seg.CoveragePath, segmentCoverageDir+"/segcov-") || seg.Layout.Kind != LayoutMixed ||
		seg.RowCount != 2000 || seg.IndexMin.String() != g.IndexMin || seg.IndexMax.String() != g.IndexMax || g.Outputs[0] != seg.Path {
		t.Fatalf("output segment: %+v", seg)
	}
	// The commit: the sources removed, the output added, coverage untouched.
	c, err := e.tb.log.readCommit(after.Version)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Actions) != 201 {
		t.Fatalf("commit has %d actions", len(c.Actions))
	}
	for i, a := range c.Actions {
		switch a := a.(type) {
		case RemoveSegment:
			if i >= 200 || a.Path != g.Sources[i] {
				t.Fatalf("action %d: %+v", i, a)
			}
		case AddSegment:
			if i != 200 {
				t.Fatalf("action %d: %+v", i, a)
			}
		default:
			t.Fatalf("action %d is a %T", i, a)
		}
	}
	if after.Coverage == nil || before.Coverage == nil || *after.Coverage != *before.Coverage {
		t.Fatalf("coverage pointer changed: %v -> %v", before.Coverage, after.Coverage)
	}

	if got := tableRows(t, ctx, e.tb, after, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatalf("rows differ after compaction: %d vs %d", len(got), len(rowsBefore))
	}
	if got := coverageAnswers(t, ctx, e.tb, after, start, end); got != covBefore {
		t.Fatalf("coverage answers differ:\n%s\nwant\n%s", got, covBefore)
	}
	if !liveUnion(t, e.tb, after).Equal(unionBefore) {
		t.Fatal("the union of the live sidecars changed")
	}
	checkTable(t, ctx, e.tb)

	// Stored order and row groups.
	keys, groups := segmentFileRows(t, e.dir, seg.Path)
	if len(keys) != 2000 || !slices.IsSortedFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	}) {
		t.Fatalf("output rows are not sorted by (host, ts): %d rows, first %v", len(keys), keys[:3])
	}
	if len(groups) != 7 {
		t.Fatalf("row groups %v, want 7 of at most 300 rows", groups)
	}
	for _, n := range groups {
		if n > 300 {
			t.Fatalf("row groups %v exceed 300 rows", groups)
		}
	}
	// The sources stay on disk (older versions name them).
	for _, p := range g.Sources[:3] {
		if _, err := os.Stat(filepath.Join(e.dir, filepath.FromSlash(p))); err != nil {
			t.Fatalf("source %s was removed: %v", p, err)
		}
	}

	// Nothing left to do; appends go on, and overlap is still refused.
	rep, err = e.tb.Compact(ctx, compactOpts(e.mem))
	if err != nil || !rep.NoOp || rep.CommittedVersion != 0 || e.tb.State().Version != after.Version {
		t.Fatalf("second compaction: %+v %v", rep, err)
	}
	appendSmall(t, ctx, e.tb, e.mem, 200, 203)
	if _, err := appendRows(ctx, e.tb, e.mem, compactRowsOf(7)); !errors.Is(err, ErrOverlap) {
		t.Fatalf("an append overlapping compacted rows: %v, want ErrOverlap", err)
	}
	rep, err = e.tb.Compact(ctx, compactOpts(e.mem))
	if err != nil || rep.SourceSegments != 4 || rep.OutputSegments != 1 || len(e.tb.State().Segments) != 1 {
		t.Fatalf("third compaction: %+v %v", rep, err)
	}
	if n := len(tableRows(t, ctx, e.tb, nil, e.mem)); n != 2030 {
		t.Fatalf("%d rows after the third compaction, want 2030", n)
	}
	checkTable(t, ctx, e.tb)

	// A fresh handle reads the same.
	fresh, err := Open(ctx, storage.Local(e.dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tableRows(t, ctx, fresh, nil, e.mem)); n != 2030 {
		t.Fatalf("a fresh handle reads %d rows", n)
	}
}

// TestCompactGroupsByIndexWindow: with small targets the candidates are
// packed, in index order, into contiguous groups of at most TargetBytes;
// MaxGroups and MaxBytes bound a call and Remaining says what is left.
func TestCompactGroupsByIndexWindow(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	ctx := e.ctx
	appendSmall(t, ctx, e.tb, e.mem, 0, 40)
	rowsBefore := tableRows(t, ctx, e.tb, nil, e.mem)
	sizes := map[string]uint64{}
	var largest uint64
	for _, seg := range e.tb.State().Segments {
		sizes[seg.Path] = *seg.FileSize
		largest = max(largest, *seg.FileSize)
	}
	target := int64(largest * 10) // about ten sources a group

	o := compactOpts(e.mem)
	o.TargetBytes, o.DryRun = target, true
	rep, err := e.tb.Compact(ctx, o)
	if err != nil || len(rep.Groups) < 4 || rep.Remaining != 0 || rep.SourceSegments != 40 {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	for i, g := range rep.Groups {
		if len(g.Sources) < 2 || g.SourceBytes > uint64(target) {
			t.Fatalf("group %d: %+v", i, g)
		}
		if i > 0 {
			prev := rep.Groups[i-1]
			if g.IndexMin <= prev.IndexMax {
				t.Fatalf("group %d [%s, %s] is not after group %d [%s, %s]", i, g.IndexMin, g.IndexMax, i-1, prev.IndexMin, prev.IndexMax)
			}
			if prev.SourceBytes+sizes[g.Sources[0]] <= uint64(target) {
				t.Fatalf("group %d (%d bytes) could have taken the next source (%d bytes) within %d", i-1, prev.SourceBytes, sizes[g.Sources[0]], target)
			}
		}
	}

	o.DryRun, o.MaxGroups = false, 1
	rep, err = e.tb.Compact(ctx, o)
	if err != nil || len(rep.Groups) != 1 || rep.Remaining != 40-rep.SourceSegments || len(e.tb.State().Segments) != 41-rep.SourceSegments {
		t.Fatalf("MaxGroups 1: %+v %v (%d segments)", rep, err, len(e.tb.State().Segments))
	}
	if first := rep.Groups[0]; first.IndexMin != "2024-06-01T00:00:00Z" {
		t.Fatalf("the first group is not the oldest window: %+v", first)
	}
	o.MaxGroups, o.MaxBytes = 0, target+1
	rep, err = e.tb.Compact(ctx, o)
	if err != nil || len(rep.Groups) != 1 || rep.Remaining == 0 {
		t.Fatalf("MaxBytes: %+v %v", rep, err)
	}
	o.MaxBytes = 0
	for range 10 {
		if rep, err = e.tb.Compact(ctx, o); err != nil {
			t.Fatal(err)
		}
		if rep.NoOp {
			break
		}
	}
	if !rep.NoOp || rep.Remaining != 0 {
		t.Fatalf("compaction does not converge: %+v", rep)
	}
	if got := tableRows(t, ctx, e.tb, nil, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatal("rows differ after compacting in groups")
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactRollsOutputs: a group whose rows exceed TargetBytes is
// written as several outputs, each verified; their coverage together
// equals the sources'.
func TestCompactRollsOutputs(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	ctx := e.ctx
	appendSmall(t, ctx, e.tb, e.mem, 0, 60)
	rowsBefore := tableRows(t, ctx, e.tb, nil, e.mem)
	o, err := compactOpts(e.mem).resolve()
	if err != nil {
		t.Fatal(err)
	}
	o.MaxRowsPerRowGroup = 50
	st := e.tb.State()
	plan, err := e.tb.planCompaction(ctx, st, o)
	if err != nil || len(plan.groups) != 1 {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	o.TargetBytes = 1 // now tiny: an output per row group
	run := &compactRun{t: e.tb, opts: o}
	defer run.cleanup()
	g := plan.groups[0]
	if err := run.writeGroup(ctx, st, g); err != nil {
		t.Fatal(err)
	}
	if len(g.outputs) != 12 {
		t.Fatalf("%d outputs, want 12 of 50 rows", len(g.outputs))
	}
	var keys [][2]string
	for i, seg := range g.outputs {
		k, groups := segmentFileRows(t, e.dir, seg.Path)
		if seg.RowCount != 50 || len(k) != 50 || len(groups) != 1 {
			t.Fatalf("output %d: %d rows, %d read, row groups %v", i, seg.RowCount, len(k), groups)
		}
		keys = append(keys, k...)
	}
	if !slices.IsSortedFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	}) {
		t.Fatal("the outputs in order do not hold the rows sorted by (host, ts)")
	}
	if _, err := e.tb.Commit(ctx, st.Version, compactActions(plan.groups)); err != nil {
		t.Fatal(err)
	}
	run.committed = true
	if got := tableRows(t, ctx, e.tb, nil, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatal("rows differ")
	}
	var single int
	for _, s := range e.tb.State().Segments {
		if s.Layout.Kind == LayoutSingle {
			single++
		}
	}
	if single == 0 {
		t.Fatal("no output holds a single entity, though rows are sorted by entity")
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactDryRun: a dry run reports the groups and writes and commits
// nothing.
func TestCompactDryRun(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	appendSmall(t, e.ctx, e.tb, e.mem, 0, 30)
	v := e.tb.State().Version
	files := dirSnapshot(t, e.dir)
	o := compactOpts(e.mem)
	o.DryRun = true
	rep, err := e.tb.Compact(e.ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.DryRun || rep.NoOp || rep.CommittedVersion != 0 || rep.StartingVersion != v || len(rep.Groups) != 1 || rep.SourceSegments != 30 ||
		rep.OutputSegments != 0 || rep.RowsRead != 0 || rep.RowsWritten != 0 || rep.BytesBefore == 0 || rep.BytesAfter != 0 ||
		rep.Groups[0].Rows != 300 || len(rep.Groups[0].Outputs) != 0 {
		t.Fatalf("dry run report: %+v", rep)
	}
	if diff := sameSnapshot(files, dirSnapshot(t, e.dir)); diff != "" {
		t.Fatalf("a dry run changed files: %s", diff)
	}
	if st, _ := e.tb.Refresh(e.ctx); st.Version != v || len(st.Segments) != 30 {
		t.Fatalf("a dry run committed: version %d, %d segments", st.Version, len(st.Segments))
	}
}

// TestCompactAfterAddColumns: segments written before add_columns are
// merged with later ones; their rows read null in the new column.
func TestCompactAfterAddColumns(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	ctx := e.ctx
	appendSmall(t, ctx, e.tb, e.mem, 0, 10)
	if _, err := e.tb.AddColumns(ctx, []Field{{Name: "extra", Type: DataType{Kind: TypeFloat64}, Nullable: true}}); err != nil {
		t.Fatal(err)
	}
	wide := arrow.NewSchema(append(inSchema().Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	for i := 10; i < 20; i++ {
		b := array.NewRecordBuilder(e.mem, wide)
		for _, r := range compactRowsOf(i) {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(r.sec) * time.Second).UnixNano()))
			b.Field(1).(*array.StringBuilder).Append(r.host)
			b.Field(2).(*array.Int64Builder).Append(r.v)
			b.Field(3).(*array.Float64Builder).Append(float64(r.v) / 2)
		}
		rdr := readerOf(t, wide, b.NewRecordBatch())
		b.Release()
		if _, err := e.tb.Append(ctx, rdr, e.opts()); err != nil {
			t.Fatal(err)
		}
		rdr.Release()
	}
	rowsBefore := tableRows(t, ctx, e.tb, nil, e.mem)
	rep, err := e.tb.Compact(ctx, compactOpts(e.mem))
	if err != nil || rep.SourceSegments != 20 || rep.OutputSegments != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	got := tableRows(t, ctx, e.tb, nil, e.mem)
	if !slices.Equal(got, rowsBefore) {
		t.Fatal("rows differ after compaction")
	}
	var nulls, values int
	for _, r := range got {
		if strings.HasSuffix(r, "|extra=(null)") {
			nulls++
		} else {
			values++
		}
	}
	if nulls != 100 || values != 100 {
		t.Fatalf("extra: %d nulls, %d values; want 100 and 100", nulls, values)
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactNothingToDo: tables without candidate groups are a no-op with
// no commit.
func TestCompactNothingToDo(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		appends int
		tweak   func(*CompactOptions)
	}{
		{"empty table", 0, nil},
		{"one segment", 1, nil},
		{"fewer than MinSegments", 3, func(o *CompactOptions) { o.MinSegments = 4 }},
		{"no small segment", 5, func(o *CompactOptions) { o.SmallBytes, o.TargetBytes = 100, 1000 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newAppendEnv(t, tsIndex())
			appendSmall(t, ctx, e.tb, e.mem, 0, c.appends)
			v := e.tb.State().Version
			files := dirSnapshot(t, e.dir)
			o := compactOpts(e.mem)
			if c.tweak != nil {
				c.tweak(o)
			}
			rep, err := e.tb.Compact(ctx, o)
			if err != nil || !rep.NoOp || len(rep.Groups) != 0 || rep.CommittedVersion != 0 || rep.StartingVersion != v {
				t.Fatalf("%+v %v", rep, err)
			}
			if diff := sameSnapshot(files, dirSnapshot(t, e.dir)); diff != "" || e.tb.State().Version != v {
				t.Fatalf("a no-op changed the table: %s", diff)
			}
		})
	}
}

// TestCompactSkipsSegmentsWithoutFullCoverage: a segment whose sidecar
// does not count its rows (as when the 0.9.0 package stored rows without
// an index value) is not a candidate.
func TestCompactSkipsSegmentsWithoutFullCoverage(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	appendSmall(t, e.ctx, e.tb, e.mem, 0, 3)
	st := e.tb.State()
	// Give the first segment the sidecar of a one-row segment.
	res, err := appendRows(e.ctx, e.tb, e.mem, []row{{sec: 10_000, host: "h0", v: 1}})
	if err != nil {
		t.Fatal(err)
	}
	one, err := os.ReadFile(filepath.Join(e.dir, res.Segment.CoveragePath))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, st.Segments[0].CoveragePath), one, 0o644); err != nil {
		t.Fatal(err)
	}
	o := compactOpts(e.mem)
	o.DryRun = true
	rep, err := e.tb.Compact(e.ctx, o)
	if err != nil || len(rep.Groups) != 1 || rep.SourceSegments != 3 || slices.Contains(rep.Groups[0].Sources, st.Segments[0].Path) {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestCompactRefusesOptions: invalid options are ErrInvalidInput naming
// the field and value, before anything is read.
func TestCompactRefusesOptions(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	appendSmall(t, e.ctx, e.tb, e.mem, 0, 3)
	cases := []struct {
		tweak func(*CompactOptions)
		want  string
	}{
		{func(o *CompactOptions) { o.TargetBytes = -1 }, "TargetBytes must be positive (0 = 134217728), got -1"},
		{func(o *CompactOptions) { o.SmallBytes = -5 }, "SmallBytes must not be negative (0 = TargetBytes/2), got -5"},
		{func(o *CompactOptions) { o.SmallBytes = o.TargetBytes + 1 }, "SmallBytes 134217729 is above TargetBytes 134217728"},
		{func(o *CompactOptions) { o.MinSegments = 1 }, "MinSegments must be at least 2 (0 = 2), got 1"},
		{func(o *CompactOptions) { o.MinSegments = -2 }, "MinSegments must be at least 2 (0 = 2), got -2"},
		{func(o *CompactOptions) { o.MaxRowsPerRowGroup = -1 }, "MaxRowsPerRowGroup must be positive (0 = 65536), got -1"},
		{func(o *CompactOptions) { o.MaxRetries = -1 }, "MaxRetries must not be negative, got -1"},
		{func(o *CompactOptions) { o.MaxGroups = -1 }, "MaxGroups must not be negative (0 = no bound), got -1"},
		{func(o *CompactOptions) { o.MaxBytes = -1 }, "MaxBytes must not be negative (0 = no bound), got -1"},
		{func(o *CompactOptions) { o.Compression = 99 }, "Compression"},
		{func(o *CompactOptions) { o.MemoryBytes = -1 }, "MemoryBytes must be at least 1048576 (1 MiB; 0 = 134217728), got -1"},
		{func(o *CompactOptions) { o.MemoryBytes = 1<<20 - 1 }, "MemoryBytes must be at least 1048576 (1 MiB; 0 = 134217728), got 1048575"},
	}
	for _, c := range cases {
		o := compactOpts(e.mem)
		c.tweak(o)
		_, err := e.tb.Compact(e.ctx, o)
		if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v", c.want, err)
		}
	}
	// The zero value of each field is its documented default.
	rep, err := e.tb.Compact(e.ctx, &CompactOptions{Alloc: e.mem, DryRun: true})
	if err != nil || len(rep.Groups) != 1 {
		t.Fatalf("zero options: %+v %v", rep, err)
	}
	if o, _ := (&CompactOptions{}).resolve(); o.TargetBytes != DefaultCompactTargetBytes || o.SmallBytes != DefaultCompactTargetBytes/2 ||
		o.MinSegments != 2 || o.MaxRowsPerRowGroup != DefaultCompactRowsPerRowGroup || o.Alloc != scanPool || o.MemoryBytes != DefaultCompactMemoryBytes || o.SpillDir != "" {
		t.Fatalf("zero options resolve to %+v", o)
	}
	if o, _ := (*CompactOptions)(nil).resolve(); o.MaxRetries != 64 || o.MaxBytes != DefaultCompactMaxBytes || o.MemoryBytes != DefaultCompactMemoryBytes {
		t.Fatalf("nil options resolve to %+v", o)
	}
}

// TestCompactRefusesUnwritableTable: a table whose writer features this
// build does not know is not compacted, not even in a dry run.
func TestCompactRefusesUnwritableTable(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, "1", commitJSON(1, metaJSON(7, "[]", `["time_travel"]`, testSchema, "")))
	tb, err := Open(context.Background(), storage.Local(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultCompactOptions()
	o.DryRun = true
	if _, err := tb.Compact(context.Background(), o); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
}

// withCompactHook sets testHookCompactBeforeCommit for one test.
func withCompactHook(t *testing.T, h func(retry int)) {
	t.Helper()
	testHookCompactBeforeCommit = h
	t.Cleanup(func() { testHookCompactBeforeCommit = nil })
}

// TestCompactRebasesOnAppends: appends committed through another handle
// between the compaction's plan and its commit make it retry on the new
// version; the appends keep their rows, and nothing is lost or doubled.
func TestCompactRebasesOnAppends(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	ctx := e.ctx
	appendSmall(t, ctx, e.tb, e.mem, 0, 20)
	other, err := Open(ctx, storage.Local(e.dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	next := 20
	withCompactHook(t, func(retry int) {
		if retry < 2 {
			appendSmall(t, ctx, other, e.mem, next, next+1)
			next++
		}
	})
	rep, err := e.tb.Compact(ctx, compactOpts(e.mem))
	if err != nil || rep.Retries != 2 || rep.SourceSegments != 20 || rep.DroppedGroups != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	st := e.tb.State()
	if len(st.Segments) != 3 || rep.CommittedVersion != rep.StartingVersion+3 {
		t.Fatalf("%d segments at version %d (report %+v)", len(st.Segments), st.Version, rep)
	}
	if n := len(tableRows(t, ctx, e.tb, nil, e.mem)); n != 220 {
		t.Fatalf("%d rows, want 220", n)
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactWithConcurrentAppends: appends from another handle run
// throughout repeated compactions; every append succeeds and every row is
// there exactly once.
func TestCompactWithConcurrentAppends(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	ctx := e.ctx
	appendSmall(t, ctx, e.tb, e.mem, 0, 10)
	other, err := Open(ctx, storage.Local(e.dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	const total = 80
	done := make(chan error, 1)
	go func() {
		for i := 10; i < total; i++ {
			if _, err := appendRows(ctx, other, e.mem, compactRowsOf(i)); err != nil {
				done <- fmt.Errorf("append %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	var compactions, retries int
	var appendErr error
loop:
	for {
		select {
		case appendErr = <-done:
			break loop
		default:
		}
		rep, err := e.tb.Compact(ctx, compactOpts(e.mem))
		if err != nil {
			t.Fatalf("compaction: %v", err)
		}
		if !rep.NoOp {
			compactions++
		}
		retries += rep.Retries
	}
	if appendErr != nil {
		t.Fatal(appendErr)
	}
	if _, err := e.tb.Compact(ctx, compactOpts(e.mem)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d compactions committed (%d retries) while %d appends ran", compactions, retries, total-10)
	if compactions == 0 {
		t.Fatal("no compaction committed")
	}
	var got, want []string
	for _, r := range tableRows(t, ctx, e.tb, nil, e.mem) {
		got = append(got, r[strings.Index(r, "|v=")+3:])
	}
	for i := range total {
		for _, r := range compactRowsOf(i) {
			want = append(want, fmt.Sprint(r.v))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows: %d, want %d", len(got), len(want))
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactLosesToAnotherCompaction: another handle compacts the same
// segments first; this one drops its group (and removes its files) and
// commits nothing, or commits the groups that are still whole.
func TestCompactLosesToAnotherCompaction(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	ctx := e.ctx
	appendSmall(t, ctx, e.tb, e.mem, 0, 20)
	rowsBefore := tableRows(t, ctx, e.tb, nil, e.mem)
	other, err := Open(ctx, storage.Local(e.dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	var largest uint64
	for _, seg := range e.tb.State().Segments {
		largest = max(largest, *seg.FileSize)
	}
	target := int64(largest * 10) // two groups of about ten

	var fired bool
	var otherRep *CompactReport
	withCompactHook(t, func(int) {
		if fired {
			return // the other compaction's own commit
		}
		fired = true
		o := compactOpts(e.mem)
		o.TargetBytes, o.MaxGroups = target, 1
		var err error
		if otherRep, err = other.Compact(ctx, o); err != nil {
			t.Errorf("the other compaction: %v", err)
		}
	})
	o := compactOpts(e.mem)
	o.TargetBytes = target
	rep, err := e.tb.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if otherRep == nil || len(otherRep.Groups) != 1 || rep.DroppedGroups != 1 || len(rep.Groups) == 0 || rep.Retries != 1 ||
		rep.Groups[0].Sources[0] == otherRep.Groups[0].Sources[0] {
		t.Fatalf("report %+v, other %+v", rep, otherRep)
	}
	if got := tableRows(t, ctx, e.tb, nil, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatalf("rows differ: %d vs %d", len(got), len(rowsBefore))
	}
	want := 20 - otherRep.SourceSegments - rep.SourceSegments + otherRep.OutputSegments + rep.OutputSegments
	if n := len(e.tb.State().Segments); n != want {
		t.Fatalf("%d segments, want %d", n, want)
	}
	// Only live segments and the original sources remain: the dropped
	// group's files are gone.
	vac, err := e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
	if err != nil || vac.Removable != 0 {
		t.Fatalf("vacuum finds %d stray files (%v): the dropped group left files behind", vac.Removable, err)
	}
	checkTable(t, ctx, e.tb)

	// Both at once, over and over: one wins each round, rows stay once.
	appendSmall(t, ctx, e.tb, e.mem, 20, 60)
	testHookCompactBeforeCommit = nil
	rowsBefore = tableRows(t, ctx, e.tb, nil, e.mem)
	var wg sync.WaitGroup
	for _, tb := range []*Table{e.tb, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				o := compactOpts(e.mem)
				o.TargetBytes = target
				if _, err := tb.Compact(ctx, o); err != nil {
					t.Errorf("concurrent compaction: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := tableRows(t, ctx, e.tb, nil, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatalf("rows differ after concurrent compactions: %d vs %d", len(got), len(rowsBefore))
	}
	vac, err = e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
	if err != nil || vac.Removable != 0 {
		t.Fatalf("vacuum finds %d stray files after concurrent compactions (%v)", vac.Removable, err)
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactCancelled: a cancelled context returns ctx.Err() and commits
// and leaves nothing, whether it ends before the call or just before the
// commit.
func TestCompactCancelled(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	appendSmall(t, e.ctx, e.tb, e.mem, 0, 20)
	v := e.tb.State().Version
	files := dirSnapshot(t, e.dir)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: %v", err)
	}
	ctx, cancel = context.WithCancel(e.ctx)
	withCompactHook(t, func(int) { cancel() })
	rep, err := e.tb.Compact(ctx, compactOpts(e.mem))
	if err != context.Canceled || rep != nil {
		t.Fatalf("cancelled before the commit: %+v %v", rep, err)
	}
	if st, _ := e.tb.Refresh(e.ctx); st.Version != v {
		t.Fatalf("committed version %d", st.Version)
	}
	if diff := sameSnapshot(files, dirSnapshot(t, e.dir)); diff != "" {
		t.Fatalf("a cancelled compaction left files: %s", diff)
	}
}

// TestCompactFailures: every failure before the commit removes the files
// the call wrote; an ambiguous commit keeps them and says so.
func TestCompactFailures(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*appendEnv, *storage.FaultFS, *Table) {
		e := newAppendEnv(t, tsIndex())
		appendSmall(t, ctx, e.tb, e.mem, 0, 12)
		ffs := storage.NewFaultFS(storage.Local(e.dir))
		tb, err := Open(ctx, ffs, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e, ffs, tb
	}
	unchanged := func(t *testing.T, e *appendEnv, before map[string]string, v uint64) {
		t.Helper()
		if diff := sameSnapshot(before, dirSnapshot(t, e.dir)); diff != "" {
			t.Fatalf("files changed: %s", diff)
		}
		if st, _ := e.tb.Refresh(ctx); st.Version != v {
			t.Fatalf("committed: version %d", st.Version)
		}
	}
	injected := errors.New("injected")

	t.Run("sidecar write fails", func(t *testing.T) {
		e, ffs, tb := setup(t)
		before, v := dirSnapshot(t, e.dir), e.tb.State().Version
		ffs.Inject(storage.Fault{Op: storage.OpCreateExclusive, Match: func(n string) bool { return strings.HasPrefix(n, segmentCoverageDir) }, Err: injected})
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrStorage) || !errors.Is(err, injected) {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("segment sync fails", func(t *testing.T) {
		e, ffs, tb := setup(t)
		before, v := dirSnapshot(t, e.dir), e.tb.State().Version
		ffs.Inject(storage.Fault{Op: storage.OpSync, Match: func(n string) bool { return strings.HasPrefix(n, appendDir) }, Err: injected})
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrStorage) {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("parent sync fails", func(t *testing.T) {
		e, ffs, tb := setup(t)
		before, v := dirSnapshot(t, e.dir), e.tb.State().Version
		ffs.Inject(storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == "data" }, Err: injected})
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "sync data") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("output removed before the commit", func(t *testing.T) {
		e, _, tb := setup(t)
		before, v := dirSnapshot(t, e.dir), e.tb.State().Version
		withCompactHook(t, func(int) {
			for name := range dirSnapshot(t, e.dir) {
				if _, ok := before[name]; !ok && strings.HasSuffix(name, ".parquet") {
					_ = os.Remove(filepath.Join(e.dir, name))
				}
			}
		})
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "disappeared before its commit") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("retries exhausted", func(t *testing.T) {
		e, _, tb := setup(t)
		next := 100
		withCompactHook(t, func(int) {
			appendSmall(t, ctx, e.tb, e.mem, next, next+1)
			next++
		})
		o := compactOpts(e.mem)
		o.MaxRetries = 2
		_, err := tb.Compact(ctx, o)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "gave up after 2 retries") || next != 103 {
			t.Fatalf("got %v", err)
		}
		// No file of the compaction is left.
		vac, err := e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
		if err != nil || vac.Removable != 0 {
			t.Fatalf("vacuum finds %d stray files (%v)", vac.Removable, err)
		}
	})
	t.Run("table replaced by another schema", func(t *testing.T) {
		e, _, tb := setup(t)
		withCompactHook(t, func(int) {
			// A new table in the directory; the old files stay.
			if err := os.RemoveAll(filepath.Join(e.dir, LogDir)); err != nil {
				t.Fatal(err)
			}
			nt, err := Create(ctx, storage.Local(e.dir), CreateOptions{Index: IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 10}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
			b := array.NewRecordBuilder(e.mem, s)
			b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 20, 30}, nil)
			rdr := readerOf(t, s, b.NewRecordBatch())
			b.Release()
			defer rdr.Release()
			if _, err := nt.Append(ctx, rdr, e.opts()); err != nil {
				t.Fatal(err)
			}
		})
		_, err := tb.Compact(ctx, compactOpts(e.mem))
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "schema changed") {
			t.Fatalf("got %v", err)
		}
		if n := len(dirSnapshot(t, filepath.Join(e.dir, appendDir))); n != 13 {
			t.Fatalf("%d segment files, want the old table's 12 and the new table's one", n)
		}
	})
	t.Run("sidecars disagree with the rows", func(t *testing.T) {
		e, _, tb := setup(t)
		st := e.tb.State()
		// Segment 0's sidecar now holds segment 11's coverage (same count).
		data, err := os.ReadFile(filepath.Join(e.dir, st.Segments[11].CoveragePath))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.dir, st.Segments[0].CoveragePath), data, 0o644); err != nil {
			t.Fatal(err)
		}
		before := dirSnapshot(t, e.dir)
		_, err = tb.Compact(ctx, compactOpts(e.mem))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "differs from the union of the 12 sources' sidecars") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, st.Version)
	})
	t.Run("sources overlap", func(t *testing.T) {
		e, _, tb := setup(t)
		st := e.tb.State()
		// Commit a second copy of segment 3 under new names.
		seg := st.Segments[3]
		cp := seg
		cp.Path = appendDir + "/00000000-0000-4000-8000-000000000001.parquet"
		cp.CoveragePath = segmentCoverageDir + "/copy.roar"
		for from, to := range map[string]string{seg.Path: cp.Path, seg.CoveragePath: cp.CoveragePath} {
			data, err := os.ReadFile(filepath.Join(e.dir, from))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.dir, to), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.tb.Commit(ctx, st.Version, []Action{AddSegment{Segment: cp}}); err != nil {
			t.Fatal(err)
		}
		before, v := dirSnapshot(t, e.dir), st.Version+1
		_, err := tb.Compact(ctx, compactOpts(e.mem))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "the source segments overlap") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("sidecar missing", func(t *testing.T) {
		e, _, tb := setup(t)
		st := e.tb.State()
		if err := os.Remove(filepath.Join(e.dir, st.Segments[2].CoveragePath)); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), st.Segments[2].CoveragePath) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("source missing", func(t *testing.T) {
		e, _, tb := setup(t)
		st := e.tb.State()
		if err := os.Remove(filepath.Join(e.dir, st.Segments[5].Path)); err != nil {
			t.Fatal(err)
		}
		before := dirSnapshot(t, e.dir)
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), st.Segments[5].Path) {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, st.Version)
	})
	t.Run("ambiguous commit keeps the files", func(t *testing.T) {
		e, ffs, tb := setup(t)
		before := dirSnapshot(t, e.dir)
		ffs.Inject(storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == LogDir }, Nth: 1, Err: injected})
		rep, err := tb.Compact(ctx, compactOpts(e.mem))
		if !errors.Is(err, ErrAmbiguousOutcome) || rep == nil || rep.SourceSegments != 12 || rep.OutputSegments != 1 || rep.CommittedVersion != 0 {
			t.Fatalf("got %+v %v", rep, err)
		}
		out := rep.Groups[0].Outputs[0]
		if _, err := os.Stat(filepath.Join(e.dir, out)); err != nil {
			t.Fatalf("the output of an ambiguous commit was removed: %v", err)
		}
		// Here the commit did land: the table holds the output.
		st, err := e.tb.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st.Segment(out); !ok || len(st.Segments) != 1 {
			t.Fatalf("after the ambiguous commit: %d segments", len(st.Segments))
		}
		if diff := sameSnapshot(before, dirSnapshot(t, e.dir)); !strings.Contains(diff, out) {
			t.Fatalf("new files %s do not include the output %s", diff, out)
		}
	})
}

// TestCompactAllTypes: rows of every column type (the all_types fixture:
// three entity columns of three types, nested columns, decimals, nulls),
// appended one row at a time, compact into one segment that reads back the
// same, sorted by (e_str, e_i32, e_u64, ts): sorted in memory, and with a
// memory bound so small that every batch read is spilled as a run of its
// own and the runs are merged.
func TestCompactAllTypes(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { testCompactAllTypes(t, 0) })
	t.Run("spilled", func(t *testing.T) { testCompactAllTypes(t, 1) })
}

// testCompactAllTypes runs TestCompactAllTypes with the memory bound limit
// (0: the default).
func testCompactAllTypes(t *testing.T, limit int64) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src, err := Open(ctx, storage.Local(filepath.Join("..", "testdata", "reference", "tables", "all_types")), &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	want := tableRows(t, ctx, src, nil, mem)
	if len(want) != 3 {
		t.Fatalf("the fixture has %d rows", len(want))
	}
	dir := t.TempDir()
	spec := *src.State().Index()
	tb, err := Create(ctx, storage.Local(dir), CreateOptions{Index: spec, Schema: src.State().Schema()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := src.Scan(ctx, nil, ScanOptions{Alloc: mem})
	if err != nil {
		t.Fatal(err)
	}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := range rec.NumRows() {
			one := rec.NewSlice(i, i+1)
			in, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{one})
			one.Release()
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultAppendOptions()
			o.Alloc = mem
			if _, err := tb.Append(ctx, in, o); err != nil {
				t.Fatalf("append of row %d: %v", i, err)
			}
			in.Release()
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	rdr.Release()
	if n := len(tb.State().Segments); n != 3 {
		t.Fatalf("%d segments", n)
	}
	var rep *CompactReport
	if limit == 0 {
		rep, err = tb.Compact(ctx, compactOpts(mem))
	} else {
		rep, err = compactWithLimit(ctx, tb, compactOpts(mem), limit)
	}
	if err != nil || rep.SourceSegments != 3 || rep.OutputSegments != 1 || (limit > 0) != (rep.SpilledRuns >= 2) {
		t.Fatalf("%+v %v", rep, err)
	}
	if got := tableRows(t, ctx, tb, nil, mem); !slices.Equal(got, want) {
		t.Fatalf("rows after compaction:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkTable(t, ctx, tb)
	// Stored order: by the UTC day of ts, the entity columns, then ts.
	pf, err := file.OpenParquetFile(filepath.Join(dir, filepath.FromSlash(tb.State().Segments[0].Path)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	col := func(name string) arrow.Array {
		return tbl.Column(tbl.Schema().FieldIndices(name)[0]).Data().Chunk(0)
	}
	es, ei, eu, ts := col("e_str").(*array.String), col("e_i32").(*array.Int32), col("e_u64").(*array.Uint64), col("ts").(*array.Timestamp)
	day := func(i int) int64 {
		tm := ts.Value(i).ToTime(ts.DataType().(*arrow.TimestampType).Unit)
		return int64(math.Floor(float64(tm.Unix()) / 86400))
	}
	days := map[int64]bool{}
	for i := 0; i < es.Len(); i++ {
		days[day(i)] = true
	}
	for i := 1; i < es.Len(); i++ {
		a := coverage.Identity{coverage.Utf8(es.Value(i - 1)), coverage.Int32(ei.Value(i - 1)), coverage.UInt64(eu.Value(i - 1))}
		b := coverage.Identity{coverage.Utf8(es.Value(i)), coverage.Int32(ei.Value(i)), coverage.UInt64(eu.Value(i))}
		if d := cmp.Compare(day(i-1), day(i)); d > 0 {
			t.Fatalf("rows %d and %d are out of day order: %v %v", i-1, i, ts.Value(i-1), ts.Value(i))
		} else if d < 0 {
			continue
		}
		if c := a.Compare(b); c > 0 || (c == 0 && ts.Value(i-1) > ts.Value(i)) {
			t.Fatalf("rows %d and %d are out of order: %v %v", i-1, i, a, b)
		}
	}
	t.Logf("%d rows over %d days", es.Len(), len(days))
}
