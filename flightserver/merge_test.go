package flightserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/internal/testkit"
)

// mergeSchema has a column of every type DoGet merges without copying.
func mergeSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "fixed", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 2}, Nullable: true},
		{Name: "sparse", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
}

// mergeRows builds n rows from row first, with nulls, empty strings and
// long strings at irregular places.
func mergeRows(mem memory.Allocator, first, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, mergeSchema())
	defer b.Release()
	for r := first; r < first+n; r++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.UnixMicro() + int64(r/3)*10_000_000))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("h%d", r%3))
		nullIf := func(k int) bool { return (r*7+k)%11 == 0 }
		if nullIf(1) {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int32Builder).Append(int32(r * 3))
		}
		if nullIf(2) {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Uint64Builder).Append(uint64(r) << 40)
		}
		if nullIf(3) {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.Float32Builder).Append(float32(r) / 4)
		}
		if nullIf(4) {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.Float64Builder).Append(float64(r) * 1.5)
		}
		if nullIf(5) {
			b.Field(6).AppendNull()
		} else {
			b.Field(6).(*array.BooleanBuilder).Append(r%3 == 1)
		}
		switch {
		case nullIf(6):
			b.Field(7).AppendNull()
		case r%13 == 0:
			b.Field(7).(*array.StringBuilder).Append("")
		default:
			b.Field(7).(*array.StringBuilder).Append(strings.Repeat(string(rune('a'+r%26)), r%40))
		}
		if nullIf(7) {
			b.Field(8).AppendNull()
		} else {
			b.Field(8).(*array.BinaryBuilder).Append([]byte{byte(r), byte(r >> 8)})
		}
		if nullIf(8) {
			b.Field(9).AppendNull()
		} else {
			b.Field(9).(*array.FixedSizeBinaryBuilder).Append([]byte{byte(r), 0, byte(r >> 8)})
		}
		if nullIf(9) {
			b.Field(10).AppendNull()
		} else {
			b.Field(10).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(r) * 101))
		}
		// Nulls in the first rows only: merged batches mix parts with
		// and without a validity bitmap.
		if r < 300 && r%5 == 0 {
			b.Field(11).AppendNull()
		} else {
			b.Field(11).(*array.Int64Builder).Append(int64(r))
		}
	}
	return b.NewRecordBatch()
}

// renderRows renders every row of recs as a string, column values in
// schema order.
func renderRows(recs ...arrow.RecordBatch) []string {
	var out []string
	for _, rec := range recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			vals := make([]string, rec.NumCols())
			for c, col := range rec.Columns() {
				vals[c] = col.ValueStr(i)
			}
			out = append(out, strings.Join(vals, "|"))
		}
	}
	slices.Sort(out)
	return out
}

// putMergeRows creates table m and puts mergeRows batches of the given
// lengths, one put each, consecutive; it returns the batches put, which
// the caller releases.
func putMergeRows(t *testing.T, ts *testServer, ctx context.Context, lengths ...int) []arrow.RecordBatch {
	t.Helper()
	desc := cmdDesc(t, map[string]any{"table": "m", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"host"}}})
	var put []arrow.RecordBatch
	first := 0
	for _, n := range lengths {
		rec := mergeRows(ts.cliMem, first, n)
		put = append(put, rec)
		if _, err := ts.put(ctx, desc, rec.Schema(), rec); err != nil {
			releaseAll(put)
			t.Fatalf("put: %v", err)
		}
		first += n
	}
	return put
}

// DoGet sends the scan's short batches merged into batches of BatchRows
// to 2 × BatchRows rows; the merged batches hold exactly the rows, nulls
// and values put (odd batch lengths exercise the bitmap packing, strings
// the offset rebasing).
func TestDoGetMergesBatches(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.BatchRows = 1000; o.MaxEndpoints = 1 })
	ctx := ctxT(t)
	want := putMergeRows(t, ts, ctx, 4001, 2500, 123, 777)
	defer releaseAll(want)
	got := ts.fetchBatches(t, ctx, "m")
	var sizes []int64
	for _, rec := range got {
		for c, col := range rec.Columns() {
			if v, ok := col.(interface{ ValidateFull() error }); ok {
				if err := v.ValidateFull(); err != nil {
					t.Fatalf("column %s: %v", rec.Schema().Field(c).Name, err)
				}
			}
		}
		sizes = append(sizes, rec.NumRows())
	}
	defer releaseAll(got)
	merged := false
	for i, n := range sizes {
		if (n < 1000 && i != len(sizes)-1) || n >= 2000 {
			t.Errorf("batch %d of %d rows; want 1000 to 1999 (the last may be shorter): %v", i, n, sizes)
		}
		merged = merged || n > 1000
	}
	if !merged {
		t.Fatalf("no batch was merged from several: %v", sizes)
	}
	g, w := renderRows(got...), renderRows(want...)
	if len(g) != len(w) {
		t.Fatalf("got %d rows, want %d", len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("row %d:\n got  %s\n want %s", i, g[i], w[i])
		}
	}
}

// TestDoGetMergesBatchesStandardCodec checks the same through arrow-go's
// writer, which gets the groups concatenated.
func TestDoGetMergesBatchesStandardCodec(t *testing.T) { TestDoGetMergesBatches(t) }

// encodeMerged lays sliced batches (array offsets not 0, odd lengths) end
// to end: arrow-go's IPC reader reads the message back as the rows of the
// parts, in order.
func TestEncodeMergedSlices(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	whole := mergeRows(mem, 0, 3000)
	defer whole.Release()
	var parts []arrow.RecordBatch
	for _, span := range [][2]int64{{3, 700}, {701, 702}, {1000, 1999}, {2001, 2998}} {
		parts = append(parts, whole.NewSlice(span[0], span[1]))
	}
	defer releaseAll(parts)
	if !mergeable(whole.Schema()) {
		t.Fatal("the schema is not mergeable")
	}
	m := encodeMerged(parts)
	defer m.free()
	for i, b := range m.buffers {
		if b.offset%8 != 0 {
			t.Errorf("buffer %d starts at %d: IPC body buffers must be 8-byte aligned", i, b.offset)
		}
	}

	// An IPC stream: the schema message, the merged message, the end.
	var stream bytes.Buffer
	frame := func(meta []byte, body [][]byte) {
		pad := (8 - len(meta)%8) % 8
		binary.Write(&stream, binary.LittleEndian, uint32(0xFFFFFFFF))
		binary.Write(&stream, binary.LittleEndian, int32(len(meta)+pad))
		stream.Write(meta)
		stream.Write(make([]byte, pad))
		for _, b := range body {
			stream.Write(b)
		}
	}
	sp := ipc.GetSchemaPayload(whole.Schema(), mem)
	smeta := sp.Meta()
	frame(smeta.Bytes(), nil)
	smeta.Release()
	sp.Release()
	frame(m.header, m.body)
	binary.Write(&stream, binary.LittleEndian, uint64(0xFFFFFFFF))

	rdr, err := ipc.NewReader(&stream, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if !rdr.Next() {
		t.Fatalf("no batch: %v", rdr.Err())
	}
	got := rdr.RecordBatch()
	for c, col := range got.Columns() {
		if v, ok := col.(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				t.Fatalf("column %s: %v", got.Schema().Field(c).Name, err)
			}
		}
	}
	want, err := ConcatBatches(parts, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	if !array.RecordEqual(got, want) {
		g, w := renderRows(got), renderRows(want)
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Fatalf("%d rows, want %d; row %d:\n got  %s\n want %s", len(g), len(w), i, g[i], w[i])
			}
		}
		t.Fatalf("%d rows, want %d", len(g), len(w))
	}
	if rdr.Next() {
		t.Fatal("more than one batch")
	}
}

// Schemas with nested columns cannot be laid end to end: their groups are
// concatenated, with the same rows coming out.
func TestDoGetGroupsNestedColumns(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.BatchRows = 1000; o.MaxEndpoints = 1 })
	ctx := ctxT(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "vals", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	if mergeable(schema) {
		t.Fatal("a list column counted as mergeable")
	}
	desc := cmdDesc(t, map[string]any{"table": "n", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "1s", "entity_columns": []string{"host"}}})
	var want []arrow.RecordBatch
	for seg := range 3 {
		b := array.NewRecordBuilder(ts.cliMem, schema)
		for i := range 700 {
			r := seg*700 + i
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.UnixMicro() + int64(r)*1_000_000))
			b.Field(1).(*array.StringBuilder).Append("h")
			lb := b.Field(2).(*array.ListBuilder)
			if r%9 == 0 {
				lb.AppendNull()
				continue
			}
			lb.Append(true)
			for k := range r % 4 {
				lb.ValueBuilder().(*array.Int64Builder).Append(int64(r * k))
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		defer rec.Release()
		want = append(want, rec)
		if _, err := ts.put(ctx, desc, schema, rec); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	got := ts.fetchBatches(t, ctx, "n")
	defer releaseAll(got)
	if len(got) != 2 || got[0].NumRows() != 1400 {
		t.Errorf("%d batches (first %d rows), want 1400 rows then 700", len(got), got[0].NumRows())
	}
	if g, w := renderRows(got...), renderRows(want...); !slices.Equal(g, w) {
		t.Fatalf("%d rows, want %d, or values differ", len(g), len(w))
	}
}

// A group whose strings would overflow int32 offsets is sent batch by
// batch (the bound is lowered here: the real one takes gigabytes).
func TestDoGetOversizedGroupSentBatchByBatch(t *testing.T) {
	defer func(v int64) { maxGroupStringBytes = v }(maxGroupStringBytes)
	maxGroupStringBytes = 20_000
	ts := startServer(t, func(o *Options) { o.BatchRows = 1000; o.MaxEndpoints = 1 })
	ctx := ctxT(t)
	want := putMergeRows(t, ts, ctx, 700, 700, 700)
	defer releaseAll(want)
	got := ts.fetchBatches(t, ctx, "m")
	defer releaseAll(got)
	for _, rec := range got {
		if rec.NumRows() != 700 {
			t.Errorf("a batch of %d rows; want the scan's 700-row batches sent one by one", rec.NumRows())
		}
	}
	if g, w := renderRows(got...), renderRows(want...); !slices.Equal(g, w) {
		t.Fatalf("%d rows, want %d, or values differ", len(g), len(w))
	}
}

// TestDoGetOversizedGroupSentBatchByBatchStandardCodec: the same through
// arrow-go's writer.
func TestDoGetOversizedGroupSentBatchByBatchStandardCodec(t *testing.T) {
	TestDoGetOversizedGroupSentBatchByBatch(t)
}

// fetchBatches reads the whole table through its first endpoint and keeps
// the batches (released by the caller).
func (ts *testServer) fetchBatches(t *testing.T, ctx context.Context, table string) []arrow.RecordBatch {
	t.Helper()
	info := ts.info(ctx, pathDesc(table))
	rdr := ts.mustStream(t, ctx, info.Endpoint[0].Ticket)
	defer rdr.Release()
	got, err := testkit.ReadBatches(rdr)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
