package main

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestCanonicalAndDiff(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
		{Name: "h", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	ts := time.Date(2016, 1, 1, 0, 0, 10, 0, time.UTC)
	b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{arrow.Timestamp(ts.UnixNano()), arrow.Timestamp(ts.UnixNano())}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"host_1", "host_0"}, nil)
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{0.1 + 0.2, 0}, []bool{true, false})
	b.Field(3).(*array.Int64Builder).AppendValues([]int64{7, 8}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	got, err := canonical(nil, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	micros := float64(ts.UnixMicro())
	// The same rows in another order, as JSON decodes them, a float off
	// in its last bits.
	want := fromJSON([][]any{{micros, "host_0", nil, 8.0}, {micros, "host_1", 0.3, 7.0}})
	if d := got.diff(want); d != "" {
		t.Errorf("diff: %s", d)
	}
	other := fromJSON([][]any{{micros, "host_0", nil, 8.0}, {micros, "host_1", 0.31, 7.0}})
	if d := got.diff(other); d == "" {
		t.Error("0.3 and 0.31 compare equal")
	}
	if d := got.diff(want[:1]); d != "2 rows vs 1" {
		t.Errorf("diff of lengths: %q", d)
	}
}

func TestReadResult(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var recs []arrow.RecordBatch
	for _, vals := range [][]int64{{1, 2}, {3}} {
		b := array.NewRecordBuilder(mem, schema)
		b.Field(0).(*array.Int64Builder).AppendValues(vals, nil)
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	for _, keep := range []bool{false, true} {
		rdr, err := array.NewRecordReader(schema, recs)
		if err != nil {
			t.Fatal(err)
		}
		got, n, err := readResult(rdr, keep)
		rdr.Release()
		if err != nil || n != 3 {
			t.Fatalf("keep %v: %d rows, %v", keep, n, err)
		}
		want := rows(nil)
		if keep {
			want = fromJSON([][]any{{1.0}, {2.0}, {3.0}})
		}
		if len(got) != len(want) || (keep && got.diff(want) != "") {
			t.Errorf("keep %v: rows %v, want %v", keep, got, want)
		}
	}
	for _, r := range recs {
		r.Release()
	}
}
