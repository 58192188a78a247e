package testkit

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func newMem(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func TestAppendRowsAndDiff(t *testing.T) {
	mem := newMem(t)
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
	got, err := AppendRows(nil, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	micros := float64(ts.UnixMicro())
	// The same rows in another order, as JSON decodes them, a float off
	// in its last bits.
	want := FromJSON([][]any{{micros, "host_0", nil, 8.0}, {micros, "host_1", 0.3, 7.0}})
	if d := got.Diff(want); d != "" {
		t.Errorf("diff: %s", d)
	}
	other := FromJSON([][]any{{micros, "host_0", nil, 8.0}, {micros, "host_1", 0.31, 7.0}})
	if d := got.Diff(other); !strings.HasPrefix(d, "sorted row 1 column 2: 0.3 vs 0.31 ") {
		t.Errorf("0.3 against 0.31: %q", d)
	}
	if d := got.Diff(want[:1]); d != "2 rows vs 1" {
		t.Errorf("diff of lengths: %q", d)
	}
	if d := got.Diff(FromJSON([][]any{{micros, "host_0", nil}, {micros, "host_1", 0.3, 7.0}})); d != "sorted row 0: 4 vs 3 columns" {
		t.Errorf("diff of widths: %q", d)
	}
	if d := got.Diff(FromJSON([][]any{{micros, "host_0", 0.0, 8.0}, {micros, "host_1", 0.3, 7.0}})); d == "" {
		t.Error("NULL and 0 compare equal")
	}
	if d := got.Diff(FromJSON([][]any{{micros, "host_0", nil, 8.0}, {micros, "host_1", 0.3, 7.0}, {micros, "host_1", 0.3, 7.0}})); d != "2 rows vs 3" {
		t.Errorf("a row twice: %q", d)
	}
}

// TestDiffMultiset: rows equal as multisets compare equal in any order,
// and a row's repeat counts.
func TestDiffMultiset(t *testing.T) {
	a := Rows{{1.0, "x"}, {2.0, "y"}, {1.0, "x"}}
	if d := a.Diff(Rows{{1.0, "x"}, {1.0, "x"}, {2.0, "y"}}); d != "" {
		t.Errorf("same multiset: %q", d)
	}
	if d := a.Diff(Rows{{1.0, "x"}, {2.0, "y"}, {2.0, "y"}}); d == "" {
		t.Error("different multisets compare equal")
	}
	// Near-equal sums sort alike, so each row meets its own partner
	// (sorted exactly, (1, "b") would meet (1, "a")).
	x, y := Rows{{1.0000000000001, "a"}, {1.0, "b"}}, Rows{{1.0, "a"}, {1.0000000000001, "b"}}
	if d := x.Diff(y); d != "" {
		t.Errorf("near-equal floats: %q", d)
	}
	if d := a.Diff(Rows{{1.0, "x"}, {2.0, "y"}, {1.0, "z"}}); d == "" {
		t.Error("x and z compare equal")
	}
}

// TestCanonicalTypes: every type a system's answer has takes its
// canonical form, dictionaries by their values; any other is an error
// naming the column.
func TestCanonicalTypes(t *testing.T) {
	mem := newMem(t)
	dec := &arrow.Decimal128Type{Precision: 10, Scale: 2}
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "ts_us", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "dec", Type: dec},
		{Name: "large", Type: arrow.BinaryTypes.LargeString},
		{Name: "view", Type: arrow.BinaryTypes.StringView},
		{Name: "dict", Type: dict},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.TimestampBuilder).Append(1_451_606_400_000_000)
	b.Field(1).(*array.Int32Builder).Append(-3)
	b.Field(2).(*array.Uint64Builder).Append(1 << 40)
	b.Field(3).(*array.Float32Builder).Append(0.5)
	b.Field(4).(*array.Decimal128Builder).Append(decimal128.FromI64(1234))
	b.Field(5).(*array.LargeStringBuilder).Append("large")
	b.Field(6).(*array.StringViewBuilder).Append("a string longer than twelve bytes")
	if err := b.Field(7).(*array.BinaryDictionaryBuilder).AppendString("host_9"); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	got, err := AppendRows(Rows{{"kept"}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{1_451_606_400_000_000.0, -3.0, float64(1 << 40), 0.5, 12.34, "large", "a string longer than twelve bytes", "host_9"}
	if len(got) != 2 || len(got[0]) != 1 || got[0][0] != "kept" {
		t.Fatalf("AppendRows did not append: %v", got)
	}
	for c, w := range want {
		if !sameCell(got[1][c], w) {
			t.Errorf("column %s: %#v, want %#v", schema.Field(c).Name, got[1][c], w)
		}
	}

	bad := arrow.NewSchema([]arrow.Field{{Name: "flag", Type: arrow.FixedWidthTypes.Boolean}}, nil)
	bb := array.NewRecordBuilder(mem, bad)
	defer bb.Release()
	bb.Field(0).(*array.BooleanBuilder).Append(true)
	brec := bb.NewRecordBatch()
	defer brec.Release()
	if _, err := AppendRows(nil, brec); err == nil || err.Error() != "column flag: no canonical form for bool" {
		t.Errorf("a bool column: %v", err)
	}
}

func TestReadRows(t *testing.T) {
	mem := newMem(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var recs []arrow.RecordBatch
	for _, vals := range [][]int64{{1, 2}, {3}} {
		b := array.NewRecordBuilder(mem, schema)
		b.Field(0).(*array.Int64Builder).AppendValues(vals, nil)
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, keep := range []bool{false, true} {
		rdr, err := array.NewRecordReader(schema, recs)
		if err != nil {
			t.Fatal(err)
		}
		got, n, err := ReadRows(rdr, keep)
		rdr.Release()
		if err != nil || n != 3 {
			t.Fatalf("keep %v: %d rows, %v", keep, n, err)
		}
		if !keep {
			if got != nil {
				t.Errorf("keep false: rows %v, want none", got)
			}
			continue
		}
		if d := got.Diff(FromJSON([][]any{{1.0}, {2.0}, {3.0}})); d != "" || len(got) != 3 {
			t.Errorf("keep true: rows %v: %s", got, d)
		}
	}
}
