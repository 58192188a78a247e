package tableformat

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// Malformed pages are errors (reported as corruption by the scan), never
// panics or endless loops.
func TestStringDecoderRefusesMalformedPages(t *testing.T) {
	fill := func(data []byte, width uint, n int) error {
		d := rleDecoder{data: data, width: width}
		return d.fill(make([]int32, n))
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"no run header", fill(nil, 3, 1)},
		{"RLE run of zero values", fill([]byte{0x00, 0x01}, 3, 1)},
		{"RLE run without its value", fill([]byte{0x08}, 3, 1)},
		{"runs shorter than the values asked", fill([]byte{0x04, 0x01}, 3, 5)},
		{"bit-packed run of zero groups", fill([]byte{0x01}, 3, 1)},
	} {
		if !errors.Is(c.err, errStringPage) {
			t.Errorf("%s: %v, want a page error", c.name, c.err)
		}
	}
	// A bit-packed run cut short by the page end still yields the values
	// that are there, then fails.
	d := rleDecoder{data: []byte{0x03, 0xff}, width: 4}
	out := make([]int32, 2)
	if err := d.fill(out); err != nil || out[0] != 15 || out[1] != 15 {
		t.Errorf("short bit-packed run: %v, %v", out, err)
	}

	r := &stringColumnReader{}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"entry length cut", []byte{1, 0}},
		{"entry overruns the page", []byte{9, 0, 0, 0, 'a'}},
	} {
		if err := r.loadDictionary(c.data, 1); !errors.Is(err, errStringPage) {
			t.Errorf("dictionary %s: %v, want a page error", c.name, err)
		}
	}

	page := func(enc parquet.Encoding, data []byte, n int32) *file.DataPageV1 {
		return file.NewDataPageV1(memory.NewBufferBytes(data), n, enc, parquet.Encodings.RLE, parquet.Encodings.RLE, int32(len(data)))
	}
	// Dictionary indices before any dictionary page.
	if err := (&stringColumnReader{}).startDataPage(page(parquet.Encodings.RLEDict, []byte{2, 0x02, 0x00}, 1)); !errors.Is(err, errStringPage) {
		t.Errorf("indices without a dictionary: %v", err)
	}
	// An index bit width over 32.
	r = &stringColumnReader{haveDict: true}
	if err := r.startDataPage(page(parquet.Encodings.RLEDict, []byte{33, 0x02, 0x00}, 1)); !errors.Is(err, errStringPage) {
		t.Errorf("index width 33: %v", err)
	}
	// Definition levels longer than the page.
	r = &stringColumnReader{haveDict: true, optional: true}
	if err := r.startDataPage(page(parquet.Encodings.RLEDict, []byte{200, 0, 0, 0, 1}, 1)); !errors.Is(err, errStringPage) {
		t.Errorf("definition levels overrun: %v", err)
	}
	// An unsupported value encoding.
	r = &stringColumnReader{haveDict: true}
	if err := r.startDataPage(page(parquet.Encodings.DeltaByteArray, []byte{0}, 1)); !errors.Is(err, errStringPage) {
		t.Errorf("DELTA_BYTE_ARRAY values: %v", err)
	}
	// An index past the dictionary's end.
	r = &stringColumnReader{haveDict: true, mem: memory.DefaultAllocator, typ: arrow.BinaryTypes.String}
	if err := r.loadDictionary([]byte{1, 0, 0, 0, 'a', 1, 0, 0, 0, 'b'}, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.startDataPage(page(parquet.Encodings.RLEDict, []byte{3, 0x02, 0x05}, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.read(1); !errors.Is(err, errStringPage) {
		t.Errorf("index 5 of 2 entries: %v", err)
	}
	// PLAIN values cut short.
	r = &stringColumnReader{haveDict: true, mem: memory.DefaultAllocator, typ: arrow.BinaryTypes.String}
	if err := r.startDataPage(page(parquet.Encodings.Plain, []byte{7, 0, 0, 0, 'x'}, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.read(1); !errors.Is(err, errStringPage) {
		t.Errorf("plain value overrun: %v", err)
	}
}

// uninitCounter is an UninitAllocator that counts the uninitialised
// allocations it serves from the allocator it wraps.
type uninitCounter struct {
	memory.Allocator
	uninit int
}

func (u *uninitCounter) AllocateUninit(n int) []byte {
	u.uninit++
	return AllocateUninit(u.Allocator, n)
}

// TestAllocateUninit: the scan pool hands out recycled memory without
// clearing it (and Allocate still clears it), an UninitAllocator is asked
// through its method, and any other allocator through Allocate, with
// every byte accounted for.
func TestAllocateUninit(t *testing.T) {
	const n = 64 << 10
	pool := newPoolAllocator(1 << 20)
	b := pool.Allocate(n)
	for i := range b {
		b[i] = 0xAB
	}
	pool.Free(b)
	if got := AllocateUninit(pool, n); len(got) != n || got[0] != 0xAB {
		t.Fatalf("the pool's uninitialised allocation: %d bytes starting %#x, want %d recycled bytes", len(got), got[0], n)
	} else {
		pool.Free(got)
	}
	if got := pool.Allocate(n); got[0] != 0 || got[n-1] != 0 {
		t.Fatal("the pool's Allocate returned recycled memory without clearing it")
	}

	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer checked.AssertSize(t, 0)
	w := &uninitCounter{Allocator: checked}
	buf := AllocateUninit(w, n)
	if w.uninit != 1 || len(buf) != n || checked.CurrentAlloc() != n {
		t.Fatalf("through an UninitAllocator: %d calls, %d bytes, %d held; want 1, %d, %d", w.uninit, len(buf), checked.CurrentAlloc(), n, n)
	}
	w.Free(buf)
	buf = AllocateUninit(checked, n)
	if len(buf) != n || checked.CurrentAlloc() != n {
		t.Fatalf("through a plain allocator: %d bytes, %d held; want %d, %d", len(buf), checked.CurrentAlloc(), n, n)
	}
	checked.Free(buf)

	// A string column decoded through the wrapper takes its offsets and
	// values uninitialised, and its array frees them all.
	arr := scanBinaryArray(w, arrow.BinaryTypes.String, 1, 0, nil, scanRawBuffer(w, 8), scanRawBuffer(w, 8))
	if w.uninit != 3 {
		t.Fatalf("scanRawBuffer made %d uninitialised allocations, want 2", w.uninit-1)
	}
	arr.Release()
}

// ---- the direct string decoder ----

// scDirectCompare scans f with and without the direct string decoder and
// wants the same rows, and the direct decoder to have been used.
func scDirectCompare(t *testing.T, f *scanFixture, opts ScanOptions) {
	t.Helper()
	defer func() { scanDirectStrings = true }()
	scanDirectStrings = false
	want := scRunScan(t, f.tb, opts)
	scanDirectStrings = true
	got := scRunScan(t, f.tb, opts)
	if want.stats.directString.Load() != 0 || got.stats.directString.Load() == 0 {
		t.Fatalf("direct string chunks: %d with the decoder off, %d with it on", want.stats.directString.Load(), got.stats.directString.Load())
	}
	scSameRows(t, got.rows, want.rows)
}

// Nullable and required strings and binaries, row groups of 150 rows read
// in batches of 100 (batches span column chunks, each with its own
// dictionary).
func TestScanDirectStringsAllTypes(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"e"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Days, 1}}}
	f := newScanFixture(t, ix, scAllTypesSchema())
	for s := range 3 {
		f.addSegment(scMixed, 150, scanJSONRecord(t, f.canon, scAllTypesRows(s*400, 400)))
	}
	scDirectCompare(t, f, ScanOptions{BatchRows: 100})
	scDirectCompare(t, f, ScanOptions{Columns: []string{"ts", "c_str", "c_bin"}, BatchRows: 64})
	scDirectCompare(t, f, ScanOptions{Entities: map[string]EntityValue{"e": scStr("e1")}})
}

// A column whose dictionary outgrows the writer's limit continues in
// PLAIN pages; nulls, empty strings and long values on the way.
func TestScanDirectStringsFallback(t *testing.T) {
	utc := "UTC"
	f := newScanFixture(t, scHostIndex(), &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Nanos, Timezone: &utc}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "note", Type: DataType{Kind: TypeUtf8}, Nullable: true},
	}})
	for s := range 2 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, f.canon)
		for i := range 30_000 {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(s*30_000+i) * 1e9))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host_%d", i%50))
			switch {
			case i%17 == 0:
				b.Field(2).AppendNull()
			case i%23 == 0:
				b.Field(2).(*array.StringBuilder).Append("")
			case i < 5000:
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("tag-%d", i%7))
			default: // unique and long: the dictionary overflows
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%s-%d", strings.Repeat("v", 60), s*30_000+i))
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		f.addSegment(scMixed, 0, rec)
		rec.Release()
	}
	scDirectCompare(t, f, ScanOptions{})
	scDirectCompare(t, f, ScanOptions{BatchRows: 7000, Columns: []string{"ts", "note"}})
	// With the package's pool, freed page buffers are reused at once: a
	// batch that spans PLAIN pages must not keep pointing into them.
	defer func() { scanDirectStrings = true }()
	scanDirectStrings = false
	want := scRunScanPooled(t, f.tb, ScanOptions{BatchRows: 7000, Columns: []string{"ts", "note"}})
	scanDirectStrings = true
	got := scRunScanPooled(t, f.tb, ScanOptions{BatchRows: 7000, Columns: []string{"ts", "note"}})
	scSameRows(t, got, want)
}
