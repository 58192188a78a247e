package tableformat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// peakAllocator counts the Arrow memory through it and its peak, apart
// from the compaction's own account, to check the account's figure.
type peakAllocator struct {
	memory.Allocator
	peakGauge
}

func (p *peakAllocator) Allocate(n int) []byte {
	b := p.Allocator.Allocate(n)
	p.add(int64(len(b)))
	return b
}

func (p *peakAllocator) Reallocate(n int, b []byte) []byte {
	old := len(b)
	b = p.Allocator.Reallocate(n, b)
	p.add(int64(len(b) - old))
	return b
}

func (p *peakAllocator) Free(b []byte) {
	p.add(-int64(len(b)))
	p.Allocator.Free(b)
}

// openSpillFiles counts the spill files in dir this process has open:
// unlinked ones read "<dir>/tsflight-compact-… (deleted)" in /proc/self/fd,
// ones made without a name (O_TMPFILE) "<dir>/#<inode> (deleted)". -1
// where /proc is missing.
func openSpillFiles(t *testing.T, dir string) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		return -1
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") && strings.HasSuffix(target, " (deleted)") {
			n++
		}
	}
	return n
}

// noSpillLeft fails when a spill file is open or left in dir.
func noSpillLeft(t *testing.T, dir string) {
	t.Helper()
	if n := openSpillFiles(t, dir); n > 0 {
		t.Errorf("%d spill files are still open", n)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("spill directory holds %d entries (%v)", len(ents), err)
	}
}

// compactWithLimit compacts as Compact does, with a memory bound that may
// be below MinCompactMemoryBytes (tiny bounds spill tiny tables).
func compactWithLimit(ctx context.Context, tb *Table, opts *CompactOptions, limit int64) (*CompactReport, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	o.MemoryBytes = limit
	st, err := tb.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := tb.planCompaction(ctx, st, o)
	if err != nil {
		return nil, err
	}
	run := &compactRun{t: tb, opts: o, acct: newCompactAccount(o.Alloc)}
	defer run.cleanup()
	for _, g := range plan.groups {
		if err := run.writeGroup(ctx, st, g); err != nil {
			return nil, err
		}
	}
	v, err := tb.Commit(ctx, st.Version, compactActions(plan.groups))
	if err != nil {
		return nil, err
	}
	run.committed = true
	rep := &CompactReport{StartingVersion: st.Version, CommittedVersion: v}
	for _, g := range plan.groups {
		rep.Groups = append(rep.Groups, g.report())
	}
	rep.total()
	run.note(rep)
	return rep, nil
}

// wideRows are the rows of append i of a spill test: steps [i*steps,
// (i+1)*steps) of hosts hosts, time-major, with long host names.
func wideRows(i, steps, hosts int) []row {
	out := make([]row, 0, steps*hosts)
	for s := i * steps; s < (i+1)*steps; s++ {
		for h := range hosts {
			out = append(out, row{sec: int64(s) * 10, host: fmt.Sprintf("host-%012d", h), v: int64(s*1000 + h)})
		}
	}
	return out
}

// appendWide appends n appends of wideRows.
func appendWide(t *testing.T, e *appendEnv, n, steps, hosts int) {
	t.Helper()
	for i := range n {
		if _, err := appendRows(e.ctx, e.tb, e.mem, wideRows(i, steps, hosts)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

// TestCompactMemoryBound: 60 appends of 5,000 time-major rows (16 h 40 min
// of one day) decode to about 15 times the 1 MiB bound. The compaction
// holds at most the bound (by its own account and by an allocator of the
// test), spills more runs than one merge reads, and writes the same rows
// and coverage, sorted by (bucket, host, ts). Sorted by the hour (the
// default), the runs each cover a stretch of time and few share an hour:
// one merge reads them all, opening each when it reaches its hour, and no
// row is spilled twice. Sorted by the day, every run shares the one day:
// some runs are merged into one first, and the last merge reads at most
// compactFanIn. The runs are compressed: they take far fewer bytes than
// the rows decode to. The spill files are unlinked while they are used and
// closed at the end.
func TestCompactMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("appends 300,000 rows")
	}
	for _, bucket := range []time.Duration{time.Hour, 24 * time.Hour} {
		t.Run(bucket.String(), func(t *testing.T) { testCompactMemoryBound(t, bucket) })
	}
}

func testCompactMemoryBound(t *testing.T, bucket time.Duration) {
	e := newAppendEnv(t, tsIndex())
	ctx := e.ctx
	appendWide(t, e, 60, 100, 50)
	before := e.tb.State()
	rowsBefore := tableRows(t, ctx, e.tb, before, e.mem)
	unionBefore := liveUnion(t, e.tb, before)
	spill := t.TempDir()

	const limit = MinCompactMemoryBytes
	peak := &peakAllocator{Allocator: e.mem}
	o := compactOpts(peak)
	o.MemoryBytes = limit
	o.SpillDir = spill
	o.SortBucket = bucket
	var during []int
	read := 0 // runs spilled while reading
	t.Cleanup(func() { testHookCompactSpilled = nil })
	testHookCompactSpilled = func(runs int) {
		read = runs
		if runs == 1 {
			ents, _ := os.ReadDir(spill)
			during = append(during, len(ents), openSpillFiles(t, spill))
		}
	}
	rep, err := e.tb.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows: peak %d bytes (test allocator %d) of %d, %d runs spilled while reading, %d in all (%d bytes)",
		rep.RowsWritten, rep.MemoryPeak, peak.peak.Load(), limit, read, rep.SpilledRuns, rep.SpillBytes)
	if rep.RowsRead != 300000 || rep.RowsWritten != 300000 || rep.SourceSegments != 60 || rep.OutputSegments != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if read <= compactFanIn {
		t.Fatalf("%d runs spilled while reading, want more than one merge reads (%d)", read, compactFanIn)
	}
	if bucket == time.Hour && rep.SpilledRuns != read {
		t.Fatalf("%d runs spilled in all, %d while reading: rows were spilled again before the last merge", rep.SpilledRuns, read)
	}
	if bucket != time.Hour && rep.SpilledRuns <= read {
		t.Fatalf("%d runs spilled in all, %d while reading: want a merge before the last", rep.SpilledRuns, read)
	}
	// 300,000 rows of about 44 bytes decoded (ts, a 17-byte host and its
	// offset, v): at least each row once, compressed.
	if decoded := uint64(300000 * 44); rep.SpillBytes == 0 || rep.SpillBytes > decoded/3 {
		t.Fatalf("%d bytes spilled for rows of about %d bytes decoded: want them compressed at least 3 times", rep.SpillBytes, decoded)
	}
	if rep.MemoryPeak > limit || peak.peak.Load() > limit {
		t.Fatalf("peak memory %d (test allocator: %d) is above the bound %d", rep.MemoryPeak, peak.peak.Load(), limit)
	}
	if peak.peak.Load() > int64(rep.MemoryPeak) {
		t.Fatalf("the test allocator saw a peak of %d, the compaction's account %d", peak.peak.Load(), rep.MemoryPeak)
	}
	if len(during) != 2 || during[0] != 0 || (during[1] != -1 && during[1] != 1) {
		t.Fatalf("after the first spill: %d directory entries, %d open spill files; want 0 and 1", during[0], during[1])
	}
	noSpillLeft(t, spill)

	after := e.tb.State()
	if got := tableRows(t, ctx, e.tb, after, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatalf("rows differ after compaction: %d vs %d", len(got), len(rowsBefore))
	}
	if !liveUnion(t, e.tb, after).Equal(unionBefore) {
		t.Fatal("the union of the live sidecars changed")
	}
	keys, _ := segmentFileRows(t, e.dir, after.Segments[0].Path)
	if len(keys) != 300000 || !slices.IsSortedFunc(keys, byBucketHostTS(bucket)) {
		t.Fatalf("the output's %d rows are not sorted by (%v, host, ts)", len(keys), bucket)
	}
	checkTable(t, ctx, e.tb)
	if peak.cur.Load() != 0 {
		t.Fatalf("%d bytes still allocated", peak.cur.Load())
	}
}

// TestCompactMemoryFits: a group that fits its bound is sorted in memory
// and spills nothing; the report says how much it held.
func TestCompactMemoryFits(t *testing.T) {
	e, _ := newCompactEnv(t, 50)
	o := compactOpts(e.mem)
	o.SpillDir = filepath.Join(t.TempDir(), "missing") // never used
	rep, err := e.tb.Compact(e.ctx, o)
	if err != nil || rep.SpilledRuns != 0 || rep.SpillBytes != 0 || rep.MemoryPeak == 0 || rep.MemoryPeak > DefaultCompactMemoryBytes {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestCompactMemoryGlobalInterleaved: a table without entity columns whose
// sources interleave row by row in time (append i holds the steps ≡ i mod
// 20), with a bound so small (below the minimum) that a few hundred rows
// fill it: the merges take single rows from one run after another, in
// passes, and the output holds every row in index order.
func TestCompactMemoryGlobalInterleaved(t *testing.T) {
	e := newAppendEnv(t, IndexSpec{Column: "ts", Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}})
	ctx := e.ctx
	const sources, per = 20, 500
	for i := range sources {
		var rows []row
		for k := range per {
			rows = append(rows, row{sec: int64(k*sources+i) * 10, host: fmt.Sprintf("h%d", k%7), v: int64(k)})
		}
		if _, err := appendRows(ctx, e.tb, e.mem, rows); err != nil {
			t.Fatal(err)
		}
	}
	rowsBefore := tableRows(t, ctx, e.tb, nil, e.mem)
	spill := t.TempDir()
	o := compactOpts(e.mem)
	o.SpillDir = spill
	rep, err := compactWithLimit(ctx, e.tb, o, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SpilledRuns <= compactFanIn || rep.RowsWritten != sources*per {
		t.Fatalf("%+v", rep)
	}
	noSpillLeft(t, spill)
	if got := tableRows(t, ctx, e.tb, nil, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatal("rows differ after compaction")
	}
	keys, _ := segmentFileRows(t, e.dir, e.tb.State().Segments[0].Path)
	if len(keys) != sources*per || !slices.IsSortedFunc(keys, func(a, b [2]string) int { return strings.Compare(a[1], b[1]) }) {
		t.Fatal("the output is not in index order")
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactSpillFailures: a spill directory that cannot be written, a
// spill file that fails to write or to read back, a cancellation after a
// run was spilled and a failure after the merge all commit nothing, leave
// the table's files as they were and leave no spill file open.
func TestCompactSpillFailures(t *testing.T) {
	injected := errors.New("injected")
	setup := func(t *testing.T) (*appendEnv, *Table, *storage.FaultFS, map[string]string, uint64) {
		e := newAppendEnv(t, tsIndex())
		appendWide(t, e, 6, 100, 50) // 30,000 rows: about 2 MiB to sort
		ffs, tb := openFaulty(t, storage.Local(e.dir), nil)
		return e, tb, ffs, dirSnapshot(t, e.dir), e.tb.State().Version
	}
	unchanged := func(t *testing.T, e *appendEnv, before map[string]string, v uint64, spill string) {
		t.Helper()
		if diff := sameSnapshot(before, dirSnapshot(t, e.dir)); diff != "" {
			t.Fatalf("files changed: %s", diff)
		}
		if st, _ := e.tb.Refresh(e.ctx); st.Version != v {
			t.Fatalf("committed: version %d", st.Version)
		}
		noSpillLeft(t, spill)
	}
	hook := func(t *testing.T, p *func() error, after int) {
		n := 0
		*p = func() error {
			if n++; n > after {
				return injected
			}
			return nil
		}
		t.Cleanup(func() { *p = nil })
	}
	compact := func(ctx context.Context, e *appendEnv, tb *Table, spill string) (*CompactReport, error) {
		o := compactOpts(e.mem)
		o.SpillDir = spill
		o.MemoryBytes = MinCompactMemoryBytes
		return tb.Compact(ctx, o)
	}

	t.Run("spill directory missing", func(t *testing.T) {
		e, tb, _, before, v := setup(t)
		spill := t.TempDir()
		_, err := compact(e.ctx, e, tb, filepath.Join(spill, "nope"))
		if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "create a compaction spill file in "+filepath.Join(spill, "nope")) {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v, spill)
	})
	for _, c := range []struct {
		name  string
		hook  *func() error
		after int    // calls that succeed before the hook fails
		msg   string // what the error must say
		cause bool   // the injected error must be in the chain
	}{
		{"spill write fails", &testHookSpillWrite, 2, "write a compaction spill file", true},
		{"spill read fails", &testHookSpillRead, 1, "read a compaction spill file", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, tb, _, before, v := setup(t)
			spill := t.TempDir()
			hook(t, c.hook, c.after)
			_, err := compact(e.ctx, e, tb, spill)
			if !errors.Is(err, ErrStorage) || (c.cause && !errors.Is(err, injected)) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v", err)
			}
			unchanged(t, e, before, v, spill)
		})
	}
	t.Run("cancelled after a spill", func(t *testing.T) {
		e, tb, _, before, v := setup(t)
		spill := t.TempDir()
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		testHookCompactSpilled = func(int) { cancel() }
		t.Cleanup(func() { testHookCompactSpilled = nil })
		if rep, err := compact(ctx, e, tb, spill); err != context.Canceled || rep != nil {
			t.Fatalf("got %+v %v", rep, err)
		}
		unchanged(t, e, before, v, spill)
	})
	t.Run("sidecar write fails after the merge", func(t *testing.T) {
		e, tb, ffs, before, v := setup(t)
		spill := t.TempDir()
		ffs.Inject(storage.Fault{Op: storage.OpCreateExclusive, Match: func(n string) bool { return strings.HasPrefix(n, segmentCoverageDir) }, Err: injected})
		rep, err := compact(e.ctx, e, tb, spill)
		if !errors.Is(err, ErrStorage) || !errors.Is(err, injected) || rep != nil {
			t.Fatalf("got %+v %v", rep, err)
		}
		unchanged(t, e, before, v, spill)
	})
	t.Run("the same table compacts afterwards", func(t *testing.T) {
		e, tb, _, _, _ := setup(t)
		spill := t.TempDir()
		rep, err := compact(e.ctx, e, tb, spill)
		if err != nil || rep.SpilledRuns < 2 || rep.RowsWritten != 30000 {
			t.Fatalf("%+v %v", rep, err)
		}
		noSpillLeft(t, spill)
		checkTable(t, e.ctx, tb)
	})
}

// TestCompactMemoryBoundWide: rows of 18 columns (16 of them int64, half
// with values that defeat dictionaries, some null), 20 appends of 5,000
// rows, about 8 times the 2 MiB bound decoded: wide rows make the output's
// open row group the larger share of the bound. The peak stays under it
// and the rows come back the same, sorted.
func TestCompactMemoryBoundWide(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fields := []arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
	}
	for f := range 16 {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("f%d", f), Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	schema := arrow.NewSchema(fields, nil)
	dir := t.TempDir()
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsIndex()}, nil)
	const appends, steps, hosts = 20, 100, 50
	for i := range appends {
		b := array.NewRecordBuilder(mem, schema)
		for s := i * steps; s < (i+1)*steps; s++ {
			for h := range hosts {
				b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(s) * 10 * time.Second).UnixNano()))
				b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host-%03d", h))
				for f := range 16 {
					fb := b.Field(2 + f).(*array.Int64Builder)
					switch {
					case (s+h+f)%97 == 0:
						fb.AppendNull()
					case f%2 == 0:
						fb.Append(int64(s*hosts+h) * int64(f+1) * 7919)
					default:
						fb.Append(int64((s + h) % 10))
					}
				}
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		rdr := readerOf(t, schema, rec)
		appendReader(t, ctx, tb, rdr, mem)
	}
	want := tableRows(t, ctx, tb, nil, mem)
	const limit = 2 << 20
	peak := &peakAllocator{Allocator: mem}
	o := compactOpts(peak)
	o.MemoryBytes = limit
	o.SpillDir = t.TempDir()
	rep, err := tb.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows: peak %d bytes (test allocator %d) of %d, %d runs spilled (%d bytes)",
		rep.RowsWritten, rep.MemoryPeak, peak.peak.Load(), limit, rep.SpilledRuns, rep.SpillBytes)
	if rep.RowsWritten != appends*steps*hosts || rep.SpilledRuns < 4 || rep.MemoryPeak > limit || peak.peak.Load() > limit {
		t.Fatalf("%+v", rep)
	}
	noSpillLeft(t, o.SpillDir)
	if got := tableRows(t, ctx, tb, nil, mem); !slices.Equal(got, want) {
		t.Fatal("rows differ after compaction")
	}
	keys, groups := segmentFileRows(t, dir, tb.State().Segments[0].Path)
	if !slices.IsSortedFunc(keys, byBucketHostTS(time.Hour)) {
		t.Fatal("the output is not sorted by (hour, host, ts)")
	}
	t.Logf("output row groups: %v", groups)
	checkTable(t, ctx, tb)
}

// TestCompactBinaryLimit: when the strings of the rows chosen for one
// batch would pass the bytes one string column may hold, the gather takes
// fewer rows and the rest go into the next batch, in memory and in a
// merge alike (the limit, 1 GiB in use, is lowered to 300 bytes here).
func TestCompactBinaryLimit(t *testing.T) {
	defer func(old int64) { compactBinaryLimit = old }(compactBinaryLimit)
	compactBinaryLimit = 300
	for _, limit := range []int64{0, 1} {
		t.Run(fmt.Sprintf("memory %d", limit), func(t *testing.T) {
			e := newAppendEnv(t, tsIndex())
			appendWide(t, e, 4, 10, 20) // hosts of 17 bytes: at most 17 rows a batch
			want := tableRows(t, e.ctx, e.tb, nil, e.mem)
			var rep *CompactReport
			var err error
			if limit == 0 {
				rep, err = e.tb.Compact(e.ctx, compactOpts(e.mem))
			} else {
				rep, err = compactWithLimit(e.ctx, e.tb, compactOpts(e.mem), limit)
			}
			if err != nil || rep.RowsWritten != 800 || (limit > 0) != (rep.SpilledRuns > 0) {
				t.Fatalf("%+v %v", rep, err)
			}
			if got := tableRows(t, e.ctx, e.tb, nil, e.mem); !slices.Equal(got, want) {
				t.Fatal("rows differ after compaction")
			}
			keys, _ := segmentFileRows(t, e.dir, e.tb.State().Segments[0].Path)
			if len(keys) != 800 || !slices.IsSortedFunc(keys, func(a, b [2]string) int {
				if c := strings.Compare(a[0], b[0]); c != 0 {
					return c
				}
				return strings.Compare(a[1], b[1])
			}) {
				t.Fatal("the output is not sorted by (hour, host, ts)")
			}
			checkTable(t, e.ctx, e.tb)
		})
	}
	// limitBinary itself: spans cut where a column would pass the limit,
	// at least one row kept.
	rows := compactRows{schema: arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	for range 10 {
		b.Append(strings.Repeat("x", 100))
	}
	arr := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(rows.schema, []arrow.Array{arr}, 10)
	arr.Release()
	defer rec.Release()
	rows.batches = []arrow.RecordBatch{rec}
	srcs := [][]takeSource{rows.sources(0, make([]takeSource, 1))}
	for _, c := range []struct {
		spans []compactSpan
		limit int64
		kept  int
		last  compactSpan
	}{
		{[]compactSpan{{0, 0, 10}}, 300, 3, compactSpan{0, 0, 3}},
		{[]compactSpan{{0, 0, 2}, {0, 5, 5}}, 300, 3, compactSpan{0, 5, 1}},
		{[]compactSpan{{0, 0, 2}, {0, 5, 5}}, 200, 2, compactSpan{0, 0, 2}},
		{[]compactSpan{{0, 3, 4}}, 50, 1, compactSpan{0, 3, 1}},
		{[]compactSpan{{0, 0, 10}}, 1000, 10, compactSpan{0, 0, 10}},
	} {
		compactBinaryLimit = c.limit
		got, kept := limitBinary(slices.Clone(c.spans), srcs)
		if kept != c.kept || got[len(got)-1] != c.last {
			t.Errorf("spans %v, limit %d: kept %d, spans %v; want %d ending with %v", c.spans, c.limit, kept, got, c.kept, c.last)
		}
	}
}
