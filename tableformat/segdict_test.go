package tableformat

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// stringShapes builds batches whose string columns exercise every branch of
// the dictionary front end: few values, nulls in some chunks, a value that
// is new now and then, unique values (the column gives up the fast path),
// long values that cut pages, and values that grow the dictionary past its
// page limit (the encoder falls back to plain mid-chunk), and long values
// that drift or cycle, so that each page has its own statistics.
func stringShapes(mem memory.Allocator, sizes []int) []arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "low", Type: arrow.BinaryTypes.String},
		{Name: "nulls", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "grow", Type: arrow.BinaryTypes.String},
		{Name: "unique", Type: arrow.BinaryTypes.String},
		{Name: "long", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "huge", Type: arrow.BinaryTypes.String},
		{Name: "drift", Type: arrow.BinaryTypes.String},
		{Name: "cycle", Type: arrow.BinaryTypes.String},
		{Name: "gauge", Type: arrow.PrimitiveTypes.Int64},
		{Name: "igauge", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "idrift", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ifar", Type: arrow.PrimitiveTypes.Int64},
		{Name: "itop", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	// ifar: few values, most outside the direct table of the front end
	// (which is placed around the first) and at both ends of int64;
	// itop: values near the top of int64, so the table cannot be centred.
	far := []int64{3, math.MinInt64, -1 << 40, 3 - int64Window/2 - 1, 3 - int64Window/2, 3 + int64Window/2 - 1, 3 + int64Window/2, 1 << 40, math.MaxInt64}
	pad := strings.Repeat("x", 150)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	var out []arrow.RecordBatch
	row := 0
	for _, size := range sizes {
		for range size {
			b.Field(0).(*array.Int64Builder).Append(int64(row))
			b.Field(1).(*array.StringBuilder).Append([]string{"eu", "us", "ap", "sa", "af", "me", "oc"}[row*7%11%7])
			if row%5000 < 40 && row%3 == 0 {
				b.Field(2).(*array.StringBuilder).AppendNull()
			} else {
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("host_%d", row%997))
			}
			b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("v%d", row/3000*3+row%3))
			b.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("u%09d", row))
			if row%777 == 0 {
				b.Field(5).(*array.StringBuilder).AppendNull()
			} else {
				b.Field(5).(*array.StringBuilder).Append(fmt.Sprintf("%s%03d", pad, row%61))
			}
			if row < 30000 {
				b.Field(6).(*array.StringBuilder).Append(fmt.Sprintf("%d", row%5))
			} else {
				b.Field(6).(*array.StringBuilder).Append(fmt.Sprintf("%s%07d", pad, row/2))
			}
			// Long values that change every 1,500 rows: several pages per
			// chunk, each with its own min and max.
			b.Field(7).(*array.StringBuilder).Append(fmt.Sprintf("%s%05d", pad, 99999-row/1500))
			// Long values from a set of five, in runs of 300: after the
			// first 1,500 rows every page is written as indices only.
			b.Field(8).(*array.StringBuilder).Append(fmt.Sprintf("%s%02d", pad, (row/300)%5))
			// int64 columns: few values; few values and nulls; values
			// that drift (each page its own min and max).
			b.Field(9).(*array.Int64Builder).Append(int64(row*7%101) - 50)
			if row%5000 < 40 && row%3 == 0 {
				b.Field(10).AppendNull()
			} else {
				b.Field(10).(*array.Int64Builder).Append(int64(row % 13))
			}
			b.Field(11).(*array.Int64Builder).Append(int64(1_000_000 - row/1500))
			b.Field(12).(*array.Int64Builder).Append(far[row*5%len(far)])
			b.Field(13).(*array.Int64Builder).Append(math.MaxInt64 - int64(row%7)*int64Window/3)
			row++
		}
		out = append(out, b.NewRecordBatch())
	}
	return out
}

func writeSegmentBytes(t *testing.T, batches []arrow.RecordBatch, fast bool, opts *AppendOptions) []byte {
	return writeSegmentBytesWith(t, batches, fast, opts, (*segmentWriter).write)
}

// writeSegmentBytesWith writes batches through write: the writer's write
// or writeAsync.
func writeSegmentBytesWith(t *testing.T, batches []arrow.RecordBatch, fast bool, opts *AppendOptions, write func(*segmentWriter, arrow.RecordBatch) error) []byte {
	t.Helper()
	defer func(v bool) { dictFrontEnabled = v }(dictFrontEnabled)
	dictFrontEnabled = fast
	fsys := storage.NewMem()
	w, err := newSegmentWriter(fsys, "seg.parquet", batches[0].Schema(), opts, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range batches {
		if err := write(w, rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.finish(); err != nil {
		t.Fatal(err)
	}
	data, err := fsys.ReadFile("seg.parquet")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mixedStringBatches are stringShapes of batches of many sizes (1 row to
// 70,000), in a checked allocator; they are released, and the allocator
// checked, when the test ends.
func mixedStringBatches(t *testing.T) []arrow.RecordBatch {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	batches := stringShapes(mem, []int{3000, 70000, 1, 20000, 1023, 1025, 40000})
	t.Cleanup(func() { releaseBatches(batches) })
	return batches
}

// The fast path writes the very file the dense path writes: same
// dictionaries, indices, page cuts and statistics.
func TestStringDictSameFileAsDensePath(t *testing.T) {
	batches := mixedStringBatches(t)
	for _, c := range []struct {
		rg    int64
		codec compress.Compression
	}{{1 << 20, compress.Codecs.Zstd}, {50000, compress.Codecs.Zstd}, {4096, compress.Codecs.Zstd}, {50000, compress.Codecs.Uncompressed}} {
		rg := c.rg
		t.Run(fmt.Sprintf("rowgroup=%d,%s", rg, c.codec), func(t *testing.T) {
			opts := DefaultAppendOptions()
			opts.Compression = c.codec
			opts.MaxRowsPerRowGroup = rg
			dense := writeSegmentBytes(t, batches, false, opts)
			fast := writeSegmentBytes(t, batches, true, opts)
			sameSegment(t, dense, fast)
			checkSegmentRoundTrip(t, fast, batches)
			// Encoding in the background writes the same file.
			sameSegment(t, fast, writeSegmentBytesWith(t, batches, true, opts, (*segmentWriter).writeAsync))
		})
	}
}

// sameSegment compares two Parquet files written from the same data: every
// byte before the footer (pages, dictionaries, page indexes) and, in the
// footer, each column chunk's offsets, sizes, value count, encodings (as a
// set: arrow-go lists them in map order) and statistics.
func sameSegment(t *testing.T, want, got []byte) {
	t.Helper()
	footerStart := func(b []byte) int {
		return len(b) - 8 - int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	}
	open := func(b []byte) *file.Reader {
		r, err := file.NewParquetReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rw, rg := open(want), open(got)
	defer rw.Close()
	defer rg.Close()
	mw, mg := rw.MetaData(), rg.MetaData()
	if mw.NumRowGroups() != mg.NumRowGroups() {
		t.Fatalf("%d row groups, want %d", mg.NumRowGroups(), mw.NumRowGroups())
	}
	for r := range mw.NumRowGroups() {
		for c := range mw.RowGroup(r).NumColumns() {
			cw, err := mw.RowGroup(r).ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			cg, err := mg.RowGroup(r).ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			describe := func(m *metadata.ColumnChunkMetaData) string {
				var encs []string
				for _, e := range m.Encodings() {
					encs = append(encs, e.String())
				}
				slices.Sort(encs)
				st, err := m.Statistics()
				if err != nil {
					t.Fatal(err)
				}
				enc, err := st.Encode()
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("data@%d dict@%d %d/%d bytes %d values [%s] min=%q max=%q nulls=%d", m.DataPageOffset(), m.DictionaryPageOffset(),
					m.TotalCompressedSize(), m.TotalUncompressedSize(), m.NumValues(), strings.Join(encs, ","), enc.Min, enc.Max, enc.NullCount)
			}
			if dw, dg := describe(cw), describe(cg); dw != dg {
				t.Fatalf("row group %d column %d: %s, want %s", r, c, dg, dw)
			}
		}
	}
	if fw, fg := footerStart(want), footerStart(got); fw != fg || !bytes.Equal(want[:fw], got[:fg]) {
		t.Fatalf("the files differ before their footers (footers at %d and %d)", fw, fg)
	}
}

// checkSegmentRoundTrip reads data back and compares it with batches.
func checkSegmentRoundTrip(t *testing.T, data []byte, batches []arrow.RecordBatch) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	want := array.NewTableFromRecords(batches[0].Schema(), batches)
	defer want.Release()
	if tbl.NumRows() != want.NumRows() {
		t.Fatalf("read %d rows, wrote %d", tbl.NumRows(), want.NumRows())
	}
	for i := range int(want.NumCols()) {
		if !array.ChunkedEqual(tbl.Column(i).Data(), want.Column(i).Data()) {
			t.Fatalf("column %s differs after the round trip", want.Schema().Field(i).Name)
		}
	}
}

func releaseBatches(batches []arrow.RecordBatch) {
	for _, b := range batches {
		b.Release()
	}
}

// Cutting every column's last page in parallel before a row group closes
// (cutPages) writes the file that closing the row group alone writes: the
// same pages in the same order, for chunks of dictionary indices, chunks
// that fell back to plain, chunks with nulls, without compression, and row
// groups cut by rows and by bytes.
func TestCutPagesSameFile(t *testing.T) {
	batches := mixedStringBatches(t)
	for _, c := range []struct {
		rg, bytes int64
		codec     compress.Compression
	}{{1 << 20, 0, compress.Codecs.Zstd}, {50000, 0, compress.Codecs.Zstd}, {4096, 0, compress.Codecs.Snappy}, {50000, 0, compress.Codecs.Uncompressed}, {1 << 20, 1 << 20, compress.Codecs.Zstd}} {
		t.Run(fmt.Sprintf("rowgroup=%d,bytes=%d,%s", c.rg, c.bytes, c.codec), func(t *testing.T) {
			opts := DefaultAppendOptions()
			opts.Compression = c.codec
			opts.MaxRowsPerRowGroup = c.rg
			opts.MaxBytesPerRowGroup = c.bytes
			cut := writeSegmentBytes(t, batches, true, opts)
			func() {
				defer func(v bool) { preflushPages = v }(preflushPages)
				preflushPages = false
				sameSegment(t, writeSegmentBytes(t, batches, true, opts), cut)
			}()
			checkSegmentRoundTrip(t, cut, batches)
		})
	}
}

// TestHasNull: hasNull answers as IsNull row by row does, for every range
// of arrays with and without nulls, sliced at every offset.
func TestHasNull(t *testing.T) {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range 40 {
		if i%13 == 7 {
			b.AppendNull()
		} else {
			b.Append(int64(i))
		}
	}
	withNulls := b.NewInt64Array()
	defer withNulls.Release()
	b.AppendValues([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, nil)
	noNulls := b.NewInt64Array()
	defer noNulls.Release()
	for _, full := range []*array.Int64{withNulls, noNulls} {
		for off := 0; off < full.Len(); off++ {
			arr := array.NewSlice(full, int64(off), int64(full.Len())).(*array.Int64)
			for s := 0; s <= arr.Len(); s++ {
				for e := s; e <= arr.Len(); e++ {
					want := false
					for i := s; i < e; i++ {
						want = want || arr.IsNull(i)
					}
					if got := hasNull(arr, s, e); got != want {
						t.Fatalf("slice at %d, rows [%d, %d): hasNull %v, want %v", off, s, e, got, want)
					}
				}
			}
			arr.Release()
		}
	}
}
