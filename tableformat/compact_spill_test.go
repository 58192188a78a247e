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
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// undoCompaction commits the sources of rep back in place of its outputs
// (st is the state rep compacted), so that the same table compacts again.
func undoCompaction(ctx context.Context, tb *Table, st *State, rep *CompactReport) error {
	var undo []Action
	for _, g := range rep.Groups {
		for _, p := range g.Outputs {
			undo = append(undo, RemoveSegment{Path: p})
		}
	}
	for _, seg := range st.Segments {
		undo = append(undo, AddSegment{Segment: seg})
	}
	_, err := tb.Commit(ctx, rep.CommittedVersion, undo)
	return err
}

// storedRows renders every row of the segment file p, every column, in
// stored order.
func storedRows(t *testing.T, dir, p string) []string {
	t.Helper()
	tbl, _ := readSegmentFile(t, dir, p)
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 1<<16)
	defer tr.Release()
	var out []string
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := range int(rec.NumRows()) {
			parts := make([]string, rec.NumCols())
			for c := range parts {
				parts[c] = rec.Column(c).ValueStr(i)
			}
			out = append(out, strings.Join(parts, "|"))
		}
	}
	return out
}

// appendTSBSMinutes appends steps of 10 s of hosts hosts (host_<first>
// on) from step first, a minute (6 steps) at a time, with the given seed.
func appendTSBSMinutes(t *testing.T, ctx context.Context, tb *Table, seed uint64, hosts, first, steps int) {
	t.Helper()
	for s := first; s < first+steps; s += 6 {
		appendTSBSBatches(t, ctx, tb, tsbsBatches(memory.DefaultAllocator, seed+uint64(s), hosts, s, min(6, first+steps-s), 1<<16))
	}
}

// appendTSBSBatches appends batches (TSBS-shaped) in one append and
// releases them.
func appendTSBSBatches(t testing.TB, ctx context.Context, tb *Table, batches []arrow.RecordBatch) {
	t.Helper()
	defer testkit.Release(batches)
	appendTSBS(t, ctx, tb, batches, nil)
}

// compactedRows compacts tb into one segment sorted by bucket, in memory
// (limit 0) or under the bound limit, and returns its rows in stored order
// (storedRows), how many runs were spilled in all and while reading, and
// how often complete buckets were written while reading; then it undoes
// the compaction. It checks that the compaction frees what it allocates,
// holds at most the bound and leaves no spill file.
func compactedRows(t *testing.T, tb *Table, dir string, bucket time.Duration, limit int64, rows uint64) (out []string, spilled, read, flushed int) {
	t.Helper()
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	st := tb.State()
	o := compactOpts(mem)
	o.SortBucket = bucket
	o.SpillDir = t.TempDir()
	var rep *CompactReport
	var err error
	testHookCompactSpilled = func(runs int) { read = runs }
	testHookCompactFlushed = func() { flushed++ }
	defer func() { testHookCompactSpilled, testHookCompactFlushed = nil, nil }()
	if limit == 0 {
		rep, err = tb.Compact(ctx, o)
	} else {
		rep, err = compactWithLimit(ctx, tb, o, limit)
	}
	if err != nil || rep.RowsWritten != rows || rep.OutputSegments != 1 {
		t.Fatalf("compaction: %+v %v", rep, err)
	}
	noSpillLeft(t, o.SpillDir)
	if limit > 0 && rep.MemoryPeak > uint64(limit) {
		t.Fatalf("peak memory %d is above the bound %d", rep.MemoryPeak, limit)
	}
	out = storedRows(t, dir, rep.Groups[0].Outputs[0])
	if err := undoCompaction(ctx, tb, st, rep); err != nil {
		t.Fatal(err)
	}
	return out, rep.SpilledRuns, read, flushed
}

// sameRows fails unless got equals want row for row, and want is not
// simply sorted as strings (then a change of order could go unseen).
func sameRows(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows under the bound, %d in memory", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("row %d differs:\n%s under the bound\n%s in memory", i, got[i], want[i])
		}
	}
	sorted := slices.Clone(want)
	slices.Sort(sorted)
	if slices.Equal(sorted, want) {
		t.Fatal("the rows came out sorted as strings: the test would not see a change of order")
	}
}

// TestCompactSpilledEqualsInMemory: 36,000 TSBS cpu-only rows (50 hosts ×
// 2 hours, appended a minute at a time in time order, about 6.5 MB
// decoded) compact under a bound of 512 KiB into the same rows in the same
// order, column for column, as with every row in memory. Sorted by the
// minute, a bucket fits the bound: the complete buckets are written while
// reading, and nothing is spilled. Sorted by 7 minutes, they do not:
// every row is spilled, and the runs (of about 5 minutes: most cross a
// bucket into the first bucket of the next run, where the merge must open
// that run before going on) are merged in one pass, as by the hour.
// Sorted by the day, every run shares the day and some are merged first.
// The compactions allocate nothing they do not free.
func TestCompactSpilledEqualsInMemory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsbsIndex()}, nil)
	const hosts, steps, limit = 50, 720, 512 << 10
	appendTSBSMinutes(t, ctx, tb, 1, hosts, 0, steps)
	for _, bucket := range []time.Duration{time.Minute, 7 * time.Minute, time.Hour, 24 * time.Hour} {
		t.Run(bucket.String(), func(t *testing.T) {
			want, spilled, _, flushed := compactedRows(t, tb, dir, bucket, 0, hosts*steps)
			if spilled != 0 || flushed != 0 {
				t.Fatalf("the in-memory compaction spilled %d runs, wrote %d times while reading", spilled, flushed)
			}
			got, spilled, read, flushed := compactedRows(t, tb, dir, bucket, limit, hosts*steps)
			t.Logf("%v: %d runs spilled while reading, %d in all, %d writes of complete buckets while reading", bucket, read, spilled, flushed)
			if bucket == time.Minute {
				if spilled != 0 || flushed < 10 {
					t.Fatalf("%d runs spilled, %d writes while reading: want only writes", spilled, flushed)
				}
			} else {
				if read <= compactFanIn || flushed != 0 {
					t.Fatalf("%d runs spilled while reading, %d writes: want more than %d runs, no writes", read, flushed, compactFanIn)
				}
				if (bucket <= time.Hour) != (spilled == read) {
					t.Fatalf("%d runs spilled in all, %d while reading", spilled, read)
				}
			}
			sameRows(t, got, want)
		})
	}
}

// TestCompactStreamThenSpill: an hour of 100 hosts appended a minute at a
// time, and then the rows of 30 more hosts over its last 40 minutes in one
// append, compact by the minute under 1 MiB: the complete minutes are
// written while reading until the late append, read in order of its first
// row, fills the buffer with rows of minutes to come; from there the rows
// are spilled and merged. The rows come out as in memory, row for row.
func TestCompactStreamThenSpill(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsbsIndex()}, nil)
	appendTSBSMinutes(t, ctx, tb, 1, 100, 0, 360)
	late := tsbsBatches(memory.DefaultAllocator, 99, 130, 120, 240, 1<<16)
	var keep []arrow.RecordBatch
	for _, b := range late {
		// Only hosts 100..129 of the 130 generated.
		n := b.NumRows()
		var idx []int
		for i := range int(n) {
			if h := b.Column(1).(*array.String).Value(i); h >= "host_100" && len(h) == len("host_100") {
				idx = append(idx, i)
			}
		}
		keep = append(keep, takeRows(t, b, idx))
		b.Release()
	}
	appendTSBSBatches(t, ctx, tb, keep)
	const rows = 100*360 + 30*240
	want, _, _, _ := compactedRows(t, tb, dir, time.Minute, 0, rows)
	got, spilled, read, flushed := compactedRows(t, tb, dir, time.Minute, MinCompactMemoryBytes, rows)
	t.Logf("%d writes of complete buckets while reading, then %d runs spilled while reading, %d in all", flushed, read, spilled)
	if flushed == 0 || read == 0 {
		t.Fatalf("%d writes while reading, %d runs spilled: want writes, then runs", flushed, read)
	}
	sameRows(t, got, want)
}

// takeRows is the rows idx of b, as a new batch.
func takeRows(t *testing.T, b arrow.RecordBatch, idx []int) arrow.RecordBatch {
	t.Helper()
	bld := array.NewRecordBuilder(memory.DefaultAllocator, b.Schema())
	defer bld.Release()
	for c := range int(b.NumCols()) {
		col := b.Column(c)
		for _, i := range idx {
			if err := bld.Field(c).AppendValueFromString(col.ValueStr(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return bld.NewRecordBatch()
}

// TestCompactStreamIndexMinLies: a segment whose log entry records an
// index_min later than its rows (a log that lies: Check finds it too) is
// read after the complete buckets before that index_min were written; its
// earlier rows could no longer be put in order, so the compaction fails
// with ErrCorrupt and commits nothing.
func TestCompactStreamIndexMinLies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsbsIndex()}, nil)
	appendTSBSMinutes(t, ctx, tb, 1, 100, 0, 360)
	// The first minute's segment claims to start 50 minutes later: the
	// planner reads it after the segments of minutes 1..50.
	st := tb.State()
	first := st.Segments[0]
	for _, seg := range st.Segments {
		if seg.IndexMin.Compare(first.IndexMin) < 0 {
			first = seg
		}
	}
	lied := first
	lied.IndexMin = TimeValue(first.IndexMin.Time.Add(50 * time.Minute))
	lied.IndexMax = TimeValue(first.IndexMax.Time.Add(50 * time.Minute))
	if _, err := tb.Commit(ctx, st.Version, []Action{RemoveSegment{Path: first.Path}, AddSegment{Segment: lied}}); err != nil {
		t.Fatal(err)
	}
	before := tb.State().Version
	o := compactOpts(memory.DefaultAllocator)
	o.SortBucket = time.Minute
	o.SpillDir = t.TempDir()
	flushed := 0
	testHookCompactFlushed = func() { flushed++ }
	defer func() { testHookCompactFlushed = nil }()
	rep, err := compactWithLimit(ctx, tb, o, MinCompactMemoryBytes)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "before the index_min its log entry records") || rep != nil || flushed == 0 {
		t.Fatalf("got %+v %v after %d writes while reading", rep, err, flushed)
	}
	if st, _ := tb.Refresh(ctx); st.Version != before {
		t.Fatalf("committed: version %d", st.Version)
	}
	noSpillLeft(t, o.SpillDir)
}

// TestCompactSweepsSpillFiles: spill files left in the spill directory by
// a killed process (a name matching the pattern) are removed by the next
// compaction that spills there; other files are left alone. Spill files
// made without O_TMPFILE lose their name at once, and creating one in a
// missing directory fails.
func TestCompactSweepsSpillFiles(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	appendWide(t, e, 6, 100, 50)
	spill := t.TempDir()
	for _, n := range []string{"tsflight-compact-123.arrows", "tsflight-compact-4.arrows", "other.arrows"} {
		if err := os.WriteFile(filepath.Join(spill, n), []byte("left"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o := compactOpts(e.mem)
	o.SpillDir = spill
	o.MemoryBytes = MinCompactMemoryBytes
	rep, err := e.tb.Compact(e.ctx, o)
	if err != nil || rep.SpilledRuns < 2 {
		t.Fatalf("%+v %v", rep, err)
	}
	ents, err := os.ReadDir(spill)
	if err != nil || len(ents) != 1 || ents[0].Name() != "other.arrows" {
		t.Fatalf("the spill directory holds %v (%v), want other.arrows alone", ents, err)
	}

	f, name, err := createNamedSpillFile(spill)
	if err != nil || name != "" {
		t.Fatalf("named spill file: %q %v", name, err)
	}
	f.Close()
	if ents, _ := os.ReadDir(spill); len(ents) != 1 {
		t.Fatalf("the named spill file kept its name: %v", ents)
	}
	if _, _, err := createNamedSpillFile(filepath.Join(spill, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("in a missing directory: %v", err)
	}
}
