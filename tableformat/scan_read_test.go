package tableformat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Reading: projection, schema alignment, every column type and the
// batches a scan returns (scan_read.go, scan_gather.go).

// ---- projection ----

func TestScanProjection(t *testing.T) {
	f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
	rec := scanRecord(t, f.canon, scSeq(100, 10), []string{"a", "b", "a", "b", "a", "b", "a", "b", "a", "b"}, scSeq(0, 10))
	f.addSegment(scMixed, 0, rec)
	recs := []arrow.RecordBatch{rec}
	for _, c := range []struct {
		cols []string
		opts ScanOptions
		keep func(arrow.RecordBatch, int) bool
	}{
		{cols: []string{"ts", "host", "v"}},
		{cols: []string{"v", "ts"}, opts: ScanOptions{Columns: []string{"v", "ts"}}},
		// Filter columns not in the output are read but dropped.
		{cols: []string{"v"}, opts: ScanOptions{Columns: []string{"v"}, Start: scTv(time.Unix(0, 103)), Entities: map[string]EntityValue{"host": scStr("b")}},
			keep: func(r arrow.RecordBatch, i int) bool { return i >= 3 && i%2 == 1 }},
		{cols: []string{"host"}, opts: ScanOptions{Columns: []string{"host"}, End: scTv(time.Unix(0, 102))},
			keep: func(r arrow.RecordBatch, i int) bool { return i < 2 }},
	} {
		res := scRunScan(t, f.tb, c.opts)
		var names []string
		for _, fl := range res.schema.Fields() {
			names = append(names, fl.Name)
		}
		if !slices.Equal(names, c.cols) {
			t.Errorf("%v: schema columns %v", c.opts.Columns, names)
		}
		for _, fl := range res.schema.Fields() {
			want := f.canon.Field(f.canon.FieldIndices(fl.Name)[0])
			if !fl.Equal(want) {
				t.Errorf("field %v, canonical %v", fl, want)
			}
		}
		scSameRows(t, res.rows, scExpectRows(recs, c.cols, c.keep))
	}
	// No columns: batches carry only row counts.
	res := scRunScan(t, f.tb, ScanOptions{Columns: []string{}, Start: scTv(time.Unix(0, 105))})
	total := 0
	for _, n := range res.batches {
		total += n
	}
	if res.schema.NumFields() != 0 || total != 5 {
		t.Errorf("zero-column scan: %d fields, %d rows", res.schema.NumFields(), total)
	}
}

// ---- schema alignment ----

func TestScanAddedColumnReadsNull(t *testing.T) {
	f := newScanFixture(t, scHostIndex(), scHostSchema(Millis))
	old := scanRecord(t, f.canon, scI64s(1000, 2000, 3000), []string{"a", "b", "a"}, scI64s(1, 2, 3))
	f.addSegment(scMixed, 0, old)
	f.addColumns(Field{Name: "score", Type: DataType{Kind: TypeFloat64}, Nullable: true},
		Field{Name: "tags", Type: DataType{Kind: TypeList, Elem: &Field{Name: "item", Type: DataType{Kind: TypeUtf8}, Nullable: true}}, Nullable: true})
	newer := scanJSONRecord(t, f.canon, `[
		{"ts": 4000, "host": "a", "v": 4, "score": 0.5, "tags": ["x"]},
		{"ts": 5000, "host": "b", "v": 5, "score": null, "tags": null}]`)
	f.addSegment(scMixed, 0, newer)

	res := scRunScan(t, f.tb, ScanOptions{})
	if res.schema.NumFields() != 5 {
		t.Fatalf("schema %s", res.schema)
	}
	want := []string{
		"1970-01-01T00:00:01Z|a|1|null|null",
		"1970-01-01T00:00:02Z|b|2|null|null",
		"1970-01-01T00:00:03Z|a|3|null|null",
		"1970-01-01T00:00:04Z|a|4|0.5|[\"x\"]",
		"1970-01-01T00:00:05Z|b|5|null|null",
	}
	scSameRows(t, res.rows, want)
	// Only the added column, with filters (partial selections of a
	// missing column).
	res = scRunScan(t, f.tb, ScanOptions{Columns: []string{"score"}, Start: scTv(time.UnixMilli(2000)), Entities: map[string]EntityValue{"host": scStr("a")}})
	scSameRows(t, res.rows, []string{"0.5", "null"})
	res = scRunScan(t, f.tb, ScanOptions{Columns: []string{"tags", "score"}, BatchRows: 2})
	scSameRows(t, res.rows, []string{"[\"x\"]|0.5", "null|null", "null|null", "null|null", "null|null"})
}

func TestScanTypeMismatchIsCorruption(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	wrong := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	seg := f.addSegment(scNA, 0, scanRecord(t, wrong, scI64s(1, 2), []float64{1, 2}))
	_, err := scTryScan(t, f.tb, ScanOptions{})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != seg.Path || !strings.Contains(err.Error(), `"v"`) {
		t.Fatalf("got %v, want a CorruptionError naming %s and column v", err, seg.Path)
	}
	// A segment lacking a column that is not nullable is corrupt too.
	f2 := newScanFixture(t, scIntIndex(), scKVSchema())
	only := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	f2.addSegment(scNA, 0, scanRecord(t, only, scI64s(1), scI64s(2)))
	// (This one has both columns, in another order: fine.)
	if got := scRunScan(t, f2.tb, ScanOptions{}).rows; !slices.Equal(got, []string{"2|1"}) {
		t.Fatalf("reordered columns: %v", got)
	}
	noK := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	path := "data/scan/no-k.parquet"
	f2.writeParquet(path, 0, scanRecord(t, noK, scI64s(5)))
	st := f2.tb.State()
	if _, err := f2.tb.Commit(context.Background(), st.Version, []Action{AddSegment{Segment: SegmentMeta{Path: path, Format: FormatParquet, Layout: scNA, IndexMin: Int64Value(5), IndexMax: Int64Value(5), RowCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, err = scTryScan(t, f2.tb, ScanOptions{Columns: []string{"v"}})
	if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("got %v, want a CorruptionError naming %s and column k", err, path)
	}
}

// ---- every column type, through both output paths ----

func scAllTypesSchema() *Schema {
	tz := "+05:00"
	return &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Micros}},
		{Name: "e", Type: DataType{Kind: TypeUtf8}},
		{Name: "c_bool", Type: DataType{Kind: TypeBool}, Nullable: true},
		{Name: "c_i32", Type: DataType{Kind: TypeInt32}, Nullable: true},
		{Name: "c_i64", Type: DataType{Kind: TypeInt64}, Nullable: true},
		{Name: "c_u64", Type: DataType{Kind: TypeUInt64}, Nullable: true},
		{Name: "c_f32", Type: DataType{Kind: TypeFloat32}, Nullable: true},
		{Name: "c_f64", Type: DataType{Kind: TypeFloat64}},
		{Name: "c_bin", Type: DataType{Kind: TypeBinary}, Nullable: true},
		{Name: "c_fsb", Type: DataType{Kind: TypeFixedBinary, ByteWidth: 3}, Nullable: true},
		{Name: "c_str", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		{Name: "c_d128", Type: DataType{Kind: TypeDecimal, Precision: 10, Scale: 2}, Nullable: true},
		{Name: "c_d256", Type: DataType{Kind: TypeDecimal, Precision: 40, Scale: 3}, Nullable: true},
		{Name: "c_struct", Type: DataType{Kind: TypeStruct, Fields: []Field{
			{Name: "x", Type: DataType{Kind: TypeInt32}},
			{Name: "label", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		}}, Nullable: true},
		{Name: "c_list", Type: DataType{Kind: TypeList, Elem: &Field{Name: "item", Type: DataType{Kind: TypeInt64}, Nullable: true}}, Nullable: true},
		{Name: "c_map", Type: DataType{Kind: TypeMap, Key: &Field{Name: "key", Type: DataType{Kind: TypeUtf8}}, Value: &Field{Name: "value", Type: DataType{Kind: TypeInt64}, Nullable: true}}, Nullable: true},
		{Name: "c_ts_tz", Type: DataType{Kind: TypeTimestamp, Unit: Nanos, Timezone: &tz}, Nullable: true},
	}}
}

func scAllTypesRows(from, n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := from; i < from+n; i++ {
		if i > from {
			b.WriteString(",")
		}
		nul := i%4 == 3
		val := func(s string) string {
			if nul {
				return "null"
			}
			return s
		}
		fmt.Fprintf(&b, `{"ts": %d, "e": "e%d", "c_bool": %s, "c_i32": %s, "c_i64": %s, "c_u64": %s, "c_f32": %s, "c_f64": %d.25,`,
			1_700_000_000_000_000+int64(i), i%3, val(strconv.FormatBool(i%2 == 0)), val(strconv.Itoa(-i)), val(strconv.Itoa(i*1000)),
			val(strconv.FormatUint(math.MaxUint64-uint64(i), 10)), val(fmt.Sprintf("%d.5", i)), i)
		fmt.Fprintf(&b, `"c_bin": %s, "c_fsb": %s, "c_str": %s, "c_d128": %s, "c_d256": %s,`,
			val(`"`+scBase64(fmt.Sprintf("bin-%d", i))+`"`), val(`"`+scBase64(fmt.Sprintf("%03d", i%1000))+`"`), val(fmt.Sprintf(`"s%dé"`, i)),
			val(fmt.Sprintf(`"%d.%02d"`, i, i%100)), val(fmt.Sprintf(`"12345678901234567890123456789012%d.%03d"`, i, i%1000)))
		fmt.Fprintf(&b, `"c_struct": %s, "c_list": %s, "c_map": %s, "c_ts_tz": %s}`,
			val(fmt.Sprintf(`{"x": %d, "label": %s}`, i, map[bool]string{true: "null", false: fmt.Sprintf(`"l%d"`, i)}[i%5 == 0])),
			val(fmt.Sprintf(`[%d, null, %d]`, i, -i)), val(fmt.Sprintf(`[{"key": "k%d", "value": %d}, {"key": "z", "value": null}]`, i, i)),
			val(strconv.Itoa(i*7)))
	}
	b.WriteString("]")
	return b.String()
}

func scBase64(s string) string {
	out, _ := json.Marshal([]byte(s))
	return strings.Trim(string(out), `"`)
}

func TestScanAllTypes(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"e"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Days, 1}}}
	f := newScanFixture(t, ix, scAllTypesSchema())
	var recs []arrow.RecordBatch
	for s := range 3 {
		rec := scanJSONRecord(t, f.canon, scAllTypesRows(s*400, 400))
		recs = append(recs, rec)
		f.addSegment(scMixed, 150, rec)
	}
	var cols []string
	for _, fl := range f.canon.Fields() {
		cols = append(cols, fl.Name)
	}
	lo := int64(1_700_000_000_000_000)
	for _, c := range []struct {
		name string
		opts ScanOptions
		keep func(arrow.RecordBatch, int) bool
	}{
		{"full, passed through", ScanOptions{BatchRows: 100}, nil},
		{"range", ScanOptions{Start: scTv(time.UnixMicro(lo + 137)), End: scTv(time.UnixMicro(lo + 1111)), BatchRows: 64}, func(r arrow.RecordBatch, i int) bool {
			v := int64(r.Column(0).(*array.Timestamp).Value(i))
			return v >= lo+137 && v < lo+1111
		}},
		{"entity, scattered rows", ScanOptions{Entities: map[string]EntityValue{"e": scStr("e1")}, BatchRows: 50}, func(r arrow.RecordBatch, i int) bool {
			return r.Column(1).(*array.String).Value(i) == "e1"
		}},
		{"entity, large batches", ScanOptions{Entities: map[string]EntityValue{"e": scStr("e2")}}, func(r arrow.RecordBatch, i int) bool {
			return r.Column(1).(*array.String).Value(i) == "e2"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := scRunScan(t, f.tb, c.opts)
			scSameRows(t, res.rows, scExpectRows(recs, cols, c.keep))
			if c.opts.BatchRows > 0 {
				for _, n := range res.batches {
					if n > c.opts.BatchRows {
						t.Errorf("batch of %d rows, limit %d", n, c.opts.BatchRows)
					}
				}
			}
		})
	}
}

// ---- batches ----

// Whole segments decode in equal batches of at most min(BatchRows, 16K)
// rows, all handed on without copying: no short tail per segment.
func TestScanEvenBatches(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	odd := scSeq(0, 4001)
	f.addSegment(scNA, 0, scanRecord(t, f.canon, odd, odd))
	big := scSeq(10_000, 40_000)
	f.addSegment(scNA, 0, scanRecord(t, f.canon, big, big))

	res := scRunScan(t, f.tb, ScanOptions{End: scIv(10_000), BatchRows: 1000})
	slices.Sort(res.batches)
	if !slices.Equal(res.batches, []int{797, 801, 801, 801, 801}) || res.stats.passThrough.Load() != 5 {
		t.Errorf("batches %v, %d passed through; want 4 × 801 and 797, all passed through", res.batches, res.stats.passThrough.Load())
	}
	res = scRunScan(t, f.tb, ScanOptions{Start: scIv(10_000), BatchRows: 1 << 16})
	total := 0
	for _, n := range res.batches {
		total += n
		if n < scanDecodeRows/2 || n > scanDecodeRows {
			t.Errorf("batch of %d rows, want %d to %d", n, scanDecodeRows/2, scanDecodeRows)
		}
	}
	if total != 40_000 || len(res.batches) != 3 || res.stats.passThrough.Load() != 3 {
		t.Errorf("batches %v, %d passed through; want 3 batches, 40,000 rows, all passed through", res.batches, res.stats.passThrough.Load())
	}
}

func TestScanBatchSizes(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	for s := range 20 {
		ks := scSeq(int64(s)*100, 100)
		f.addSegment(scNA, 0, scanRecord(t, f.canon, ks, ks))
	}
	big := scSeq(10_000, 5000)
	f.addSegment(scNA, 0, scanRecord(t, f.canon, big, big))

	// Small segments coalesce into full batches.
	res := scRunScan(t, f.tb, ScanOptions{End: scIv(2000), BatchRows: 1000, Parallelism: 1})
	if !slices.Equal(res.batches, []int{1000, 1000}) {
		t.Errorf("batches %v, want [1000 1000]", res.batches)
	}
	// Fully matching decoded batches of a large segment are handed on.
	res = scRunScan(t, f.tb, ScanOptions{Start: scIv(10_000), BatchRows: 1000})
	if !slices.Equal(res.batches, []int{1000, 1000, 1000, 1000, 1000}) || res.stats.passThrough.Load() != 5 {
		t.Errorf("batches %v, %d passed through; want 5 × 1000 passed through", res.batches, res.stats.passThrough.Load())
	}
	// A partial selection is split at exactly BatchRows.
	res = scRunScan(t, f.tb, ScanOptions{Start: scIv(10_001), End: scIv(14_999), BatchRows: 1000, Parallelism: 1})
	total := 0
	for _, n := range res.batches {
		total += n
		if n > 1000 {
			t.Errorf("batch of %d rows", n)
		}
	}
	if total != 4998 {
		t.Errorf("%d rows, want 4998", total)
	}
	// Several workers: every row exactly once.
	res = scRunScan(t, f.tb, ScanOptions{BatchRows: 333, Parallelism: 4})
	var want []string
	for s := range 20 {
		for k := int64(s) * 100; k < int64(s)*100+100; k++ {
			want = append(want, fmt.Sprintf("%d|%d", k, k))
		}
	}
	for _, k := range big {
		want = append(want, fmt.Sprintf("%d|%d", k, k))
	}
	slices.Sort(want)
	scSameRows(t, res.rows, want)
}
