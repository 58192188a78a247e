package tableformat

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

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
	pf, err := file.OpenParquetFile(filepath.Join(dir, filepath.FromSlash(p)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
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

// TestCompactSpilledEqualsInMemory: 72,000 TSBS cpu-only rows (100 hosts ×
// 2 hours, appended a minute at a time in time order, about 13 MB
// decoded) compact under a bound of 1 MiB into the same rows in the same
// order, column for column, as with every row in memory: sorted by the
// hour, and by 7 minutes (runs of about 5 minutes: most cross a bucket
// into the first bucket of the next run, where the merge must open that
// run before going on), where one merge reads every run, each from its
// bucket on; and by the day, where every run shares the day and some are
// merged first. The compactions allocate nothing they do not free.
func TestCompactSpilledEqualsInMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("appends 72,000 rows")
	}
	ctx := context.Background()
	dir := t.TempDir()
	tb, err := Create(ctx, storage.Local(dir), CreateOptions{Index: tsbsIndex()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const hosts, steps, perAppend = 100, 720, 6
	for first := 0; first < steps; first += perAppend {
		batches := tsbsBatches(memory.DefaultAllocator, uint64(first)+1, hosts, first, perAppend, 1<<16)
		rdr, err := array.NewRecordReader(tsbsSchema(), batches)
		for _, r := range batches {
			r.Release()
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = tb.Append(ctx, rdr, nil)
		rdr.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	compact := func(t *testing.T, bucket time.Duration, limit int64) (rows []string, spilled, read int) {
		t.Helper()
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		st := tb.State()
		o := compactOpts(mem)
		o.SortBucket = bucket
		o.SpillDir = t.TempDir()
		var rep *CompactReport
		var err error
		testHookCompactSpilled = func(runs int) { read = runs }
		defer func() { testHookCompactSpilled = nil }()
		if limit == 0 {
			rep, err = tb.Compact(ctx, o)
		} else {
			rep, err = compactWithLimit(ctx, tb, o, limit)
		}
		if err != nil || rep.RowsWritten != hosts*steps || rep.OutputSegments != 1 {
			t.Fatalf("compaction: %+v %v", rep, err)
		}
		noSpillLeft(t, o.SpillDir)
		rows = storedRows(t, dir, rep.Groups[0].Outputs[0])
		if err := undoCompaction(ctx, tb, st, rep); err != nil {
			t.Fatal(err)
		}
		return rows, rep.SpilledRuns, read
	}
	for _, bucket := range []time.Duration{7 * time.Minute, time.Hour, 24 * time.Hour} {
		t.Run(bucket.String(), func(t *testing.T) {
			want, spilled, _ := compact(t, bucket, 0)
			if spilled != 0 {
				t.Fatalf("the in-memory compaction spilled %d runs", spilled)
			}
			got, spilled, read := compact(t, bucket, MinCompactMemoryBytes)
			t.Logf("%v: %d runs spilled while reading, %d in all", bucket, read, spilled)
			if read <= compactFanIn {
				t.Fatalf("%d runs spilled while reading, want more than %d", read, compactFanIn)
			}
			if (bucket <= time.Hour) != (spilled == read) {
				t.Fatalf("%d runs spilled in all, %d while reading", spilled, read)
			}
			if len(got) != len(want) {
				t.Fatalf("%d rows spilled, %d in memory", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("row %d differs:\n%s spilled\n%s in memory", i, got[i], want[i])
				}
			}
			sorted := slices.Clone(want)
			slices.Sort(sorted)
			if slices.Equal(sorted, want) {
				t.Fatal("the rows came out sorted as strings: the test would not see a change of order")
			}
		})
	}
}
