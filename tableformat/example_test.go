package tableformat_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

var exampleStart = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// exampleRows is a reader over rows of (time, host, temp): for each host,
// one row a minute at the given minutes after exampleStart.
func exampleRows(mem memory.Allocator, minutes map[string][]int) array.RecordReader {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "temp", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for _, host := range []string{"a", "b"} {
		for _, m := range minutes[host] {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(exampleStart.Add(time.Duration(m) * time.Minute).UnixMicro()))
			b.Field(1).(*array.StringBuilder).Append(host)
			b.Field(2).(*array.Float64Builder).Append(20 + float64(m))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		log.Fatal(err)
	}
	return rdr
}

// createExample creates a table of per-minute readings per host in
// memory (storage.Local(dir) would put it on disk).
func createExample(ctx context.Context) *tableformat.Table {
	tb, err := tableformat.Create(ctx, storage.NewMem(), tableformat.CreateOptions{Index: tableformat.IndexSpec{
		Column:        "time",
		EntityColumns: []string{"host"},
		Kind:          tableformat.IndexKind{Type: tableformat.IndexTimestamp, Time: tableformat.TimeGranularity{Unit: tableformat.Minutes, N: 1}},
	}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	return tb
}

// A table is created with its index: a timestamp column, the entity
// columns that tell series apart, and the interval each row stands for.
func ExampleCreate() {
	ctx := context.Background()
	tb := createExample(ctx)
	st := tb.State()
	fmt.Println("version", st.Version, "index", st.Index().Column, "entities", st.Index().EntityColumns)
	// Output: version 1 index time entities [host]
}

// Each append is one commit: a new version holding one more segment.
// Rows that would land in an (entity, interval) already holding one are
// refused, and nothing is written.
func ExampleTable_Append() {
	ctx := context.Background()
	tb := createExample(ctx)
	rdr := exampleRows(memory.DefaultAllocator, map[string][]int{"a": {0, 1, 2}, "b": {0, 2}})
	defer rdr.Release()
	res, err := tb.Append(ctx, rdr, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version", res.Version, "rows", tb.State().Segments[0].RowCount)

	again := exampleRows(memory.DefaultAllocator, map[string][]int{"b": {2}})
	defer again.Release()
	_, err = tb.Append(ctx, again, nil)
	fmt.Println("again:", err != nil, "version", tb.State().Version)
	// Output:
	// version 2 rows 5
	// again: true version 2
}

// A scan reads a snapshot: here one host's rows from minute 1 on.
func ExampleTable_Scan() {
	ctx := context.Background()
	tb := createExample(ctx)
	rdr := exampleRows(memory.DefaultAllocator, map[string][]int{"a": {0, 1, 2}, "b": {0, 2}})
	defer rdr.Release()
	if _, err := tb.Append(ctx, rdr, nil); err != nil {
		log.Fatal(err)
	}
	from := tableformat.TimeValue(exampleStart.Add(time.Minute))
	out, err := tb.Scan(ctx, tb.State(), tableformat.ScanOptions{
		Start:    &from,
		Columns:  []string{"time", "temp"},
		Entities: map[string]tableformat.EntityValue{"host": {Type: tableformat.EntityUtf8, Str: "a"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer out.Release()
	for out.Next() {
		rec := out.RecordBatch()
		ts, temp := rec.Column(0).(*array.Timestamp), rec.Column(1).(*array.Float64)
		for i := range int(rec.NumRows()) {
			fmt.Println(ts.Value(i).ToTime(arrow.Microsecond).Format("15:04"), temp.Value(i))
		}
	}
	if err := out.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 00:01 21
	// 00:02 22
}

// Coverage and gaps come from the table's bitmaps, without reading data:
// host b has no row for minute 1.
func ExampleTable_Coverage() {
	ctx := context.Background()
	tb := createExample(ctx)
	rdr := exampleRows(memory.DefaultAllocator, map[string][]int{"a": {0, 1, 2}, "b": {0, 2}})
	defer rdr.Release()
	if _, err := tb.Append(ctx, rdr, nil); err != nil {
		log.Fatal(err)
	}
	st := tb.State()
	q := tableformat.CoverageQuery{Start: tableformat.TimeValue(exampleStart), End: tableformat.TimeValue(exampleStart.Add(3 * time.Minute))}
	rep, err := tb.Coverage(ctx, st, q)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("covered %d of %d (entity, minute) pairs\n", rep.Covered, rep.Expected)

	q.Entity = tableformat.Identity{{Type: tableformat.EntityUtf8, Str: "b"}}
	gaps, err := tb.Gaps(ctx, st, q)
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range gaps.Gaps {
		fmt.Printf("b misses [%s, %s)\n", g.Start, g.End)
	}
	// Output:
	// covered 5 of 6 (entity, minute) pairs
	// b misses [2024-06-01T00:01:00Z, 2024-06-01T00:02:00Z)
}
