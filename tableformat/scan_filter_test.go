package tableformat

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Exact filtering: the range edges of every index type, null index
// values and entity filters (scan_filter.go).

// ---- exact filtering ----

func TestScanRangeEdgesInt64(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	keys := scI64s(math.MinInt64, -1, 0, 1, math.MaxInt64)
	f.addSegment(scNA, 0, scanRecord(t, f.canon, keys, keys))
	for _, c := range []struct {
		start, end *IndexValue
		want       []int64
	}{
		{nil, nil, keys},
		{scIv(math.MinInt64), scIv(math.MaxInt64), scI64s(math.MinInt64, -1, 0, 1)},
		{scIv(0), nil, scI64s(0, 1, math.MaxInt64)},
		{nil, scIv(0), scI64s(math.MinInt64, -1)},
		{nil, scIv(math.MinInt64 + 1), scI64s(math.MinInt64)},
		{scIv(math.MaxInt64), nil, scI64s(math.MaxInt64)},
		{scIv(-1), scIv(1), scI64s(-1, 0)},
		{scIv(2), scIv(math.MaxInt64), nil},
	} {
		scCheckRange(t, f.tb, c.start, c.end, "k", c.want)
	}
}

func TestScanRangeEdgesUint64(t *testing.T) {
	ix := IndexSpec{Column: "k", EntityColumns: []string{}, Kind: IndexKind{Type: IndexUInt64, Width: 7}}
	sch := &Schema{Columns: []Field{{Name: "k", Type: DataType{Kind: TypeUInt64}}, {Name: "s", Type: DataType{Kind: TypeUtf8}, Nullable: true}}}
	f := newScanFixture(t, ix, sch)
	keys := []uint64{0, 1, math.MaxUint64 - 1, math.MaxUint64}
	// Two row groups so that the unsigned statistics are exercised.
	f.addSegment(scNA, 2, scanRecord(t, f.canon, keys, []string{"a", "b", "c", "d"}))
	for _, c := range []struct {
		start, end *IndexValue
		want       []string
		groups     int64
	}{
		{nil, nil, []string{"a", "b", "c", "d"}, 2},
		{scUv(math.MaxUint64), nil, []string{"d"}, 1},
		{nil, scUv(1), []string{"a"}, 1},
		{scUv(1), scUv(math.MaxUint64), []string{"b", "c"}, 2},
		{scUv(2), scUv(math.MaxUint64 - 1), nil, 0},
		{scUv(1 << 63), nil, []string{"c", "d"}, 1},
	} {
		res := scRunScan(t, f.tb, ScanOptions{Start: c.start, End: c.end, Columns: []string{"s"}})
		if !slices.Equal(res.rows, c.want) {
			t.Errorf("[%v, %v): got %v, want %v", c.start, c.end, res.rows, c.want)
		}
		if got := res.stats.rowGroupsRead.Load(); got != c.groups {
			t.Errorf("[%v, %v): read %d row groups, want %d", c.start, c.end, got, c.groups)
		}
	}
}

func TestScanRangeEdgesTimestamps(t *testing.T) {
	base := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	t.Run("ns", func(t *testing.T) {
		f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
		b := base.UnixNano()
		ts := scI64s(math.MinInt64, b-1, b, b+1, b+999, math.MaxInt64)
		f.addSegment(scMixed, 0, scanRecord(t, f.canon, ts, scRepeat("h", len(ts)), ts))
		ns := func(v int64) *IndexValue { return scTv(time.Unix(0, v)) }
		for _, c := range []struct {
			start, end *IndexValue
			want       []int64
		}{
			{ns(b), ns(b + 1), scI64s(b)},
			{ns(b), ns(b + 999), scI64s(b, b+1)},
			{nil, ns(b), scI64s(math.MinInt64, b-1)},
			{ns(b + 1), nil, scI64s(b+1, b+999, math.MaxInt64)},
			{ns(math.MinInt64), ns(math.MaxInt64), scI64s(math.MinInt64, b-1, b, b+1, b+999)},
			// Bounds beyond the nanosecond range saturate.
			{scTv(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)), scTv(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)), ts},
			{scTv(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)), ns(b), scI64s(math.MinInt64, b-1)},
			{ns(math.MaxInt64), scTv(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)), scI64s(math.MaxInt64)},
		} {
			scCheckRange(t, f.tb, c.start, c.end, "v", c.want)
		}
	})
	t.Run("ms", func(t *testing.T) {
		f := newScanFixture(t, scHostIndex(), scHostSchema(Millis))
		b := base.UnixMilli()
		ts := scI64s(b-1, b, b+1, b+999, b+1000)
		f.addSegment(scMixed, 0, scanRecord(t, f.canon, ts, scRepeat("h", len(ts)), ts))
		ms := func(v int64) *IndexValue { return scTv(time.UnixMilli(v)) }
		half := func(v int64) *IndexValue { return scTv(time.UnixMilli(v).Add(500 * time.Microsecond)) }
		for _, c := range []struct {
			start, end *IndexValue
			want       []int64
		}{
			{ms(b), ms(b + 1000), scI64s(b, b+1, b+999)},
			{ms(b + 1), ms(b + 1000), scI64s(b+1, b+999)},
			{ms(b), ms(b + 1), scI64s(b)},
			// Bounds finer than the column's unit are floored, as the
			// reference does: b-0.5ms selects b-1, and an end of
			// b+1000.5ms excludes b+1000.
			{half(b - 1), ms(b), scI64s(b - 1)},
			{ms(b), half(b + 1000), scI64s(b, b+1, b+999)},
			{half(b), half(b + 1), scI64s(b)},
			// Both bounds in the same millisecond: nothing.
			{half(b), scTv(time.UnixMilli(b).Add(700 * time.Microsecond)), nil},
		} {
			scCheckRange(t, f.tb, c.start, c.end, "v", c.want)
		}
	})
}

func TestScanNullIndexValues(t *testing.T) {
	utc := "UTC"
	sch := &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Millis, Timezone: &utc}, Nullable: true},
		{Name: "host", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
	}}
	f := newScanFixture(t, scHostIndex(), sch)
	f.addSegment(scMixed, 0, scanRecord(t, f.canon, []*int64{scPtr[int64](1000), nil, scPtr[int64](3000)}, []*string{scPtr("a"), scPtr("a"), nil}, scI64s(1, 2, 3)))
	// No bounds: no range filter, every row.
	if got := scRunScan(t, f.tb, ScanOptions{Columns: []string{"v"}}).rows; !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("full scan: %v", got)
	}
	// Any bound drops the null index.
	if got := scRunScan(t, f.tb, ScanOptions{Columns: []string{"v"}, End: scTv(time.UnixMilli(1 << 50))}).rows; !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("bounded scan: %v", got)
	}
	// A null entity never matches.
	if got := scRunScan(t, f.tb, ScanOptions{Columns: []string{"v"}, Entities: map[string]EntityValue{"host": scStr("a")}}).rows; !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("entity scan: %v", got)
	}
}

// ---- entity filters ----

func TestScanEntityFilters(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"host", "i32", "i64", "u64"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Hours, 1}}}
	sch := &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Micros}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "i32", Type: DataType{Kind: TypeInt32}},
		{Name: "i64", Type: DataType{Kind: TypeInt64}},
		{Name: "u64", Type: DataType{Kind: TypeUInt64}},
		{Name: "x", Type: DataType{Kind: TypeFloat64}, Nullable: true},
	}}
	f := newScanFixture(t, ix, sch)
	n := 3000
	ts := scSeq(1_700_000_000_000_000, int64(n))
	hosts, i32, i64, u64, x := make([]string, n), make([]int32, n), make([]int64, n), make([]uint64, n), make([]float64, n)
	for i := range n {
		hosts[i] = fmt.Sprintf("host-%d", i%7)
		i32[i] = int32(i % 3)
		i64[i] = int64(i%5) - 2
		u64[i] = math.MaxUint64 - uint64(i%2)
		x[i] = float64(i) / 4
	}
	rec := scanRecord(t, f.canon, ts, hosts, i32, i64, u64, x)
	f.addSegment(scMixed, 1000, rec)
	recs := []arrow.RecordBatch{rec}
	cols := []string{"ts", "host", "i32", "i64", "u64", "x"}
	for _, c := range []struct {
		ents map[string]EntityValue
		keep func(i int) bool
	}{
		{map[string]EntityValue{"host": scStr("host-3")}, func(i int) bool { return i%7 == 3 }},
		{map[string]EntityValue{"i32": {Type: EntityInt32, Int: 2}}, func(i int) bool { return i%3 == 2 }},
		{map[string]EntityValue{"i64": {Type: EntityInt64, Int: -2}}, func(i int) bool { return i%5 == 0 }},
		{map[string]EntityValue{"u64": {Type: EntityUInt64, Uint: math.MaxUint64}}, func(i int) bool { return i%2 == 0 }},
		{map[string]EntityValue{"host": scStr("host-1"), "i32": {Type: EntityInt32, Int: 1}, "u64": {Type: EntityUInt64, Uint: math.MaxUint64 - 1}},
			func(i int) bool { return i%7 == 1 && i%3 == 1 && i%2 == 1 }},
		{map[string]EntityValue{"host": scStr("nobody")}, func(int) bool { return false }},
	} {
		for _, batchRows := range []int{0, 100} {
			res := scRunScan(t, f.tb, ScanOptions{Entities: c.ents, BatchRows: batchRows})
			scSameRows(t, res.rows, scExpectRows(recs, cols, func(_ arrow.RecordBatch, i int) bool { return c.keep(i) }))
			for k, b := range res.batches {
				if batchRows > 0 && b > batchRows {
					t.Errorf("batch %d has %d rows, limit %d", k, b, batchRows)
				}
			}
		}
	}
}
