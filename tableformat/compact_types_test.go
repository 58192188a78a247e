package tableformat

import (
	"cmp"
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

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
	src := mustOpen(t, storage.Local(filepath.Join("..", "testdata", "reference", "tables", "all_types")), &Options{ReadOnly: true})
	want := tableRows(t, ctx, src, nil, mem)
	if len(want) != 3 {
		t.Fatalf("the fixture has %d rows", len(want))
	}
	dir := t.TempDir()
	spec := *src.State().Index()
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: spec, Schema: src.State().Schema()}, nil)
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
	// Stored order: by the UTC hour of ts (so by its day too), the entity
	// columns, then ts.
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
