package tableformat

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The memory bound of a compaction (CompactOptions.MemoryBytes). Every
// Arrow buffer a compaction allocates (decoded source rows, batches being
// gathered, spilled runs read back, the output writer's buffers) goes
// through a compactAccount, which also carries the Go memory of the sort
// index; a compactBudget turns the bound into batch sizes and the fill
// level at which buffered rows are sorted and spilled.

// compactAccount is an allocator that counts the bytes a compaction holds
// and remembers the peak. reserve adds memory the compaction holds outside
// Arrow (its sort index) to the same count.
type compactAccount struct {
	mem  memory.Allocator
	cur  atomic.Int64
	peak atomic.Int64
}

func newCompactAccount(mem memory.Allocator) *compactAccount { return &compactAccount{mem: mem} }

func (a *compactAccount) Allocate(n int) []byte {
	b := a.mem.Allocate(n)
	a.add(int64(len(b)))
	return b
}

func (a *compactAccount) Reallocate(n int, b []byte) []byte {
	old := len(b)
	b = a.mem.Reallocate(n, b)
	a.add(int64(len(b) - old))
	return b
}

func (a *compactAccount) Free(b []byte) {
	a.add(-int64(len(b)))
	a.mem.Free(b)
}

// Unwrap lets a scan see the allocator underneath (scans recycle their
// page buffers through the package pool when that is it).
func (a *compactAccount) Unwrap() memory.Allocator { return a.mem }

func (a *compactAccount) add(n int64) {
	v := a.cur.Add(n)
	for {
		p := a.peak.Load()
		if v <= p || a.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// reserve counts n bytes of Go memory (negative: gives them back).
func (a *compactAccount) reserve(n int64) { a.add(n) }

// compactBudget sizes one compaction's batches from its memory bound and
// the width of its rows. The bound is shared out so that each phase stays
// under it:
//
//   - reading: the rows buffered for sorting, with their sort index, up to
//     fill bytes, while the scan decodes ahead (an eighth of the bound: per
//     scan worker a decoded batch and a partial one, and the batch the
//     reader holds), and a spilled run's batch being gathered;
//   - writing a buffer that holds every row of the group: the buffer, a
//     gathered chunk and the batch it is encoded from (a sixteenth of the
//     bound each) and the output's open row group (writerRow bytes a row,
//     at most a quarter of the bound);
//   - merging: per spilled run its current batch and at most one more held
//     by the chunk being gathered (a quarter of the bound over compactFanIn
//     runs), two chunks and the open row group.
//
// So fill is at least 5/8 of the bound (less only when batches cannot be
// made small enough: at least compactMinRows rows each), and an output row
// group holds MaxRowsPerRowGroup rows, or as many as a quarter of the bound
// holds when that is fewer.
type compactBudget struct {
	limit int64
	cols  int64 // columns of the rows
	width int64 // bytes per decoded row (estimated, then observed)

	scanRows     int   // BatchRows of the source scans
	chunkRows    int   // rows gathered into one batch for the output
	runRows      int   // rows of each batch of a spilled run
	rowGroupRows int64 // MaxRowsPerRowGroup of the outputs
	rgBytes      int64 // MaxBytesPerRowGroup of the outputs
	fill         int64 // buffered bytes (rows and sort index) that start a spill
	// streamFill is fill while the output may be open during the reading
	// (compact_stream.go): the reading's and the writing's shares both
	// held beside the buffer.
	streamFill int64
}

// Shares of the bound (see compactBudget).
const (
	// compactFanIn is the most runs one merge reads at once; more are
	// merged in passes.
	compactFanIn = 16
	// compactMinRows is the fewest rows of any batch, whatever the bound.
	compactMinRows = 64
	// compactScanWorkers is the parallelism of the source scans.
	compactScanWorkers = 2
	// compactRefBytes is the sort index per buffered row: a compactRef,
	// and its index key while the order is built.
	compactRefBytes = 32 + 8
	// compactIdentBytes is the sort's map entry per distinct identity
	// (plus the key's length).
	compactIdentBytes = 96
	// compactWriterColumnBytes is what the Parquet writer holds per value
	// of an open row group, at most: values wait for their page as 8-byte
	// numbers or 4-byte dictionary indices (a page holds up to 1 MiB), so
	// a row costs the writer at most 8 bytes a column, or its decoded size
	// when that is less. (The demo table's 21 columns: 84 bytes a row
	// measured, 5.3 MiB for a row group of 65,536 rows.)
	compactWriterColumnBytes = 8
)

func newCompactBudget(limit, cols, width, rowGroupRows int64) *compactBudget {
	b := &compactBudget{limit: limit, cols: max(cols, 1)}
	b.setWidth(width, rowGroupRows)
	return b
}

// setWidth sizes the batches for rows of width bytes and output row
// groups of at most rowGroupRows rows.
func (b *compactBudget) setWidth(width, rowGroupRows int64) {
	w := max(width, 1)
	b.width = w
	rows := func(bytes, per, most int64) int64 {
		return min(max(bytes/per, compactMinRows), max(most, compactMinRows))
	}
	writerRow := min(w, compactWriterColumnBytes*b.cols)
	b.rowGroupRows = min(rows(b.limit/4, writerRow, rowGroupRows), max(rowGroupRows, 1))
	b.rgBytes = max(b.limit/4, 64<<10)
	b.scanRows = int(rows(b.limit/8/(2*compactScanWorkers+1), w, compactChunkRows))
	b.chunkRows = int(min(rows(b.limit/16, w, compactChunkRows), b.rowGroupRows))
	b.runRows = int(rows(b.limit/4/(2*compactFanIn), w, compactChunkRows))
	reading := int64(2*compactScanWorkers+1)*int64(b.scanRows)*w + int64(b.runRows)*w
	writing := 2*int64(b.chunkRows)*w + b.rowGroupRows*writerRow
	b.fill = max(b.limit-max(reading, writing), b.limit/8)
	b.streamFill = max(b.limit-reading-writing, b.limit/8)
}

// sortIndexBytes is the Go memory of the sort index of rows buffered rows
// holding at most idents distinct identities.
func sortIndexBytes(rows, idents int64) int64 {
	return rows*compactRefBytes + min(rows, idents)*compactIdentBytes
}

// compactSchemaWidth estimates the decoded bytes of one row of s before any
// is read: fixed-width values and validity exactly, 32 bytes per string or
// binary value, four elements per list.
func compactSchemaWidth(s *arrow.Schema) int64 {
	var w int64
	for _, f := range s.Fields() {
		w += compactTypeWidth(f.Type)
	}
	return max(w, 8)
}

func compactTypeWidth(dt arrow.DataType) int64 {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return 1
	case arrow.FixedWidthDataType:
		return int64(t.BitWidth()+7)/8 + 1
	case *arrow.StringType, *arrow.BinaryType:
		return 4 + 32 + 1
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		return 8 + 32 + 1
	case *arrow.StructType:
		w := int64(1)
		for _, f := range t.Fields() {
			w += compactTypeWidth(f.Type)
		}
		return w
	case arrow.ListLikeType:
		return 8 + 4*compactTypeWidth(t.Elem())
	}
	return 64
}

// compactBatchBytes is the size of the buffers rec holds.
func compactBatchBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += compactDataBytes(c.Data())
	}
	return n
}

func compactDataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += compactDataBytes(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		n += compactDataBytes(d.Dictionary())
	}
	return n
}
