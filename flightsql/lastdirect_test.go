//go:build duckdb_arrow

package flightsql

import (
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// timestampTo converts units as DuckDB reads them: finer to coarser
// floors (toward negative infinity), coarser to finer multiplies, and it
// refuses what it cannot represent or another time zone.
func TestDirectTimestampUnits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ns := &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}
	us := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	build := func(typ *arrow.TimestampType, vals ...int64) arrow.Array {
		b := array.NewTimestampBuilder(mem, typ)
		defer b.Release()
		for _, v := range vals {
			if v == math.MinInt64 {
				b.AppendNull()
				continue
			}
			b.Append(arrow.Timestamp(v))
		}
		return b.NewArray()
	}
	src := build(ns, 1_500, -1_500, -1_000, 0, math.MinInt64)
	defer src.Release()
	got, ok := timestampTo(src, us, mem)
	if !ok {
		t.Fatal("ns to us refused")
	}
	if s := fmt.Sprint(got.(*array.Timestamp).TimestampValues()[:4], got.IsNull(4)); s != "[1 -2 -1 0] true" {
		t.Fatalf("ns to us: %s", s)
	}
	got.Release()
	three := build(us, 3)
	defer three.Release()
	back, ok := timestampTo(three, ns, mem)
	if !ok || back.(*array.Timestamp).Value(0) != 3000 {
		t.Fatalf("us to ns: %v %v", back, ok)
	}
	back.Release()
	big := build(us, math.MaxInt64/10)
	defer big.Release()
	if _, ok := timestampTo(big, ns, mem); ok {
		t.Fatal("an overflowing conversion was accepted")
	}
	if _, ok := timestampTo(src, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}, mem); ok {
		t.Fatal("another time zone was accepted")
	}
}

// constantLimit takes plain non-negative integer constants only.
func TestDirectLimit(t *testing.T) {
	mk := func(limit any, offset any) map[string]any {
		return map[string]any{"type": "LIMIT_MODIFIER", "offset": offset,
			"limit": map[string]any{"class": "CONSTANT", "value": map[string]any{"is_null": false, "value": limit}}}
	}
	for _, c := range []struct {
		mod  map[string]any
		want int64
	}{
		{mk(float64(5), nil), 5},
		{mk(float64(0), nil), 0},
		{mk(float64(-1), nil), -2},
		{mk(2.5, nil), -2},
		{mk(float64(5), map[string]any{"class": "CONSTANT"}), -2},
		{mk("5", nil), -2},
		{map[string]any{"type": "LIMIT_PERCENT_MODIFIER"}, -2},
		{map[string]any{"type": "LIMIT_MODIFIER", "limit": map[string]any{"class": "PARAMETER"}}, -2},
	} {
		if got := constantLimit(c.mod); got != c.want {
			t.Errorf("%v: %d, want %d", c.mod, got, c.want)
		}
	}
}
