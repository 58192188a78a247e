package tableformat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// TestCompactMergesSmallAppends: 200 appends of 10 rows over 5 entities
// become one segment holding the same rows and the same coverage, sorted
// by (entity, index) in bounded row groups; the table checks clean and
// takes more appends; a second call has nothing to do.
func TestCompactMergesSmallAppends(t *testing.T) {
	e, ctx := newCompactEnv(t, 200)
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
	if len(keys) != 2000 || !slices.IsSortedFunc(keys, byBucketHostTS(time.Hour)) {
		t.Fatalf("output rows are not sorted by (hour, host, ts): %d rows, first %v", len(keys), keys[:3])
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
	fresh := mustOpen(t, storage.Local(e.dir), nil)
	if n := len(tableRows(t, ctx, fresh, nil, e.mem)); n != 2030 {
		t.Fatalf("a fresh handle reads %d rows", n)
	}
}

// TestCompactGroupsByIndexWindow: with small targets the candidates are
// packed, in index order, into contiguous groups of at most TargetBytes;
// MaxGroups and MaxBytes bound a call and Remaining says what is left.
func TestCompactGroupsByIndexWindow(t *testing.T) {
	e, ctx := newCompactEnv(t, 40)
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
	e, ctx := newCompactEnv(t, 60)
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
	if !slices.IsSortedFunc(keys, byBucketHostTS(time.Hour)) {
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
	e, _ := newCompactEnv(t, 30)
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
	e, ctx := newCompactEnv(t, 10)
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
	e, _ := newCompactEnv(t, 3)
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
	e, _ := newCompactEnv(t, 3)
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
		{func(o *CompactOptions) { o.SortBucket = 500 * time.Millisecond }, "SortBucket must be a whole number of seconds, at least 1s (0 = 1h0m0s), got 500ms"},
		{func(o *CompactOptions) { o.SortBucket = 1500 * time.Millisecond }, "SortBucket must be a whole number of seconds, at least 1s (0 = 1h0m0s), got 1.5s"},
		{func(o *CompactOptions) { o.SortBucket = -time.Hour }, "SortBucket must be a whole number of seconds, at least 1s (0 = 1h0m0s), got -1h0m0s"},
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
		o.MinSegments != 2 || o.MaxRowsPerRowGroup != DefaultCompactRowsPerRowGroup || o.Alloc != scanPool || o.MemoryBytes != DefaultCompactMemoryBytes || o.SpillDir != "" ||
		o.SortBucket != time.Hour {
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
	tb := mustOpen(t, storage.Local(dir), nil)
	o := DefaultCompactOptions()
	o.DryRun = true
	if _, err := tb.Compact(context.Background(), o); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
}
