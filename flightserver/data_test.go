package flightserver

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Test data: a TSBS-like table model and Arrow batches built from it.

var tsbsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
	{Name: "hostname", Type: arrow.BinaryTypes.String},
	{Name: "usage_user", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "usage_system", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "usage_idle", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

var t0 = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// row is one row of a TSBS-like table, as the tests model it.
type row struct {
	ts     int64 // ns since the epoch
	host   string
	user   int64
	system int64
	idle   int64
}

// genRows returns hosts × steps rows starting at start, 10 s apart.
func genRows(start time.Time, steps, hosts int) []row {
	out := make([]row, 0, steps*hosts)
	for s := range steps {
		ts := start.Add(time.Duration(s) * 10 * time.Second).UnixNano()
		for h := range hosts {
			sec := ts / 1e9
			out = append(out, row{ts: ts, host: fmt.Sprintf("host_%d", h), user: sec%997 + int64(h), system: sec % 13, idle: int64(h*1000 + s)})
		}
	}
	return out
}

func buildBatches(mem memory.Allocator, rows []row, batchRows int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for lo := 0; lo < len(rows); lo += batchRows {
		hi := min(lo+batchRows, len(rows))
		b := array.NewRecordBuilder(mem, tsbsSchema)
		for _, r := range rows[lo:hi] {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
			b.Field(1).(*array.StringBuilder).Append(r.host)
			b.Field(2).(*array.Int64Builder).Append(r.user)
			b.Field(3).(*array.Int64Builder).Append(r.system)
			b.Field(4).(*array.Int64Builder).Append(r.idle)
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

func sumUser(rows []row) int64 {
	var s int64
	for _, r := range rows {
		s += r.user
	}
	return s
}

// sortRows orders rows by (ts, host) for comparison.
func sortRows(rs []row) []row {
	out := append([]row(nil), rs...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].ts != out[j].ts {
			return out[i].ts < out[j].ts
		}
		return out[i].host < out[j].host
	})
	return out
}

func sameRows(t *testing.T, what string, got, want []row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	g, w := sortRows(got), sortRows(want)
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("%s: row %d is %+v, want %+v", what, i, g[i], w[i])
		}
	}
}

// timeOfStep is the offset of step s from t0 (steps are 10 s apart).
func timeOfStep(s int) time.Duration { return time.Duration(s) * 10 * time.Second }

// int64Batch is a batch of an integer-indexed table: n (the index) and a
// nullable float v = n/2.
func int64Batch(ts *testServer, ns []int64) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(ts.cliMem, schema)
	defer b.Release()
	for _, n := range ns {
		b.Field(0).(*array.Int64Builder).Append(n)
		b.Field(1).(*array.Float64Builder).Append(float64(n) / 2)
	}
	return b.NewRecordBatch()
}
