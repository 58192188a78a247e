package tableformat

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Gathering: selected rows of many decoded batches are copied into output
// batches of the scan's batch size.

// scanMaxBinaryBytes bounds the value bytes of one binary/utf8 column in
// an output batch (int32 offsets must not overflow).
const scanMaxBinaryBytes = 1 << 30

// scanCoalescer gathers selected rows of many input batches into output
// batches of exactly limit rows (the last one may be shorter).
type scanCoalescer struct {
	schema *arrow.Schema
	cols   []scanColBuilder
	rows   int
	limit  int
	// passThroughMin is the smallest fully matching input batch handed on
	// without copying; smaller ones are coalesced.
	passThroughMin int
	split          []scanSpan
}

func newScanCoalescer(schema *arrow.Schema, limit int, mem memory.Allocator) *scanCoalescer {
	// Whole row groups decode in equal batches of more than half the
	// decode size (scanEvenBatch): those pass through.
	c := &scanCoalescer{schema: schema, limit: limit, passThroughMin: max(1, min(limit, scanDecodeRows)/2)}
	for _, f := range schema.Fields() {
		c.cols = append(c.cols, newScanColBuilder(f.Type, mem))
	}
	return c
}

// add appends the rows in runs of cols (one array per output column),
// emitting every batch that reaches the limit.
func (c *scanCoalescer) add(cols []arrow.Array, runs []scanSpan, emit func(arrow.RecordBatch) error) error {
	for len(runs) > 0 {
		space := c.limit - c.rows
		// Take as many runs as fit, splitting the last one if needed.
		c.split = c.split[:0]
		taken := 0
		for len(runs) > 0 && taken < space {
			rn := runs[0]
			if l := rn.end - rn.start; taken+l <= space {
				c.split = append(c.split, rn)
				taken += l
				runs = runs[1:]
			} else {
				cut := rn.start + (space - taken)
				c.split = append(c.split, scanSpan{rn.start, cut})
				taken = space
				runs = append([]scanSpan{{cut, rn.end}}, runs[1:]...)
			}
		}
		if c.rows > 0 && c.wouldOverflow(cols, c.split) {
			if err := emit(c.flush()); err != nil {
				return err
			}
			continue
		}
		for i, b := range c.cols {
			b.appendRuns(cols[i], c.split)
		}
		c.rows += taken
		if c.rows >= c.limit {
			if err := emit(c.flush()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *scanCoalescer) wouldOverflow(cols []arrow.Array, runs []scanSpan) bool {
	for i, b := range c.cols {
		if bb, ok := b.(*scanBinaryBuilder); ok {
			if int64(bb.dataLen())+scanSpanBytes(cols[i].Data(), runs) > scanMaxBinaryBytes {
				return true
			}
		}
	}
	return false
}

// flush returns the gathered rows as a batch and starts a new one.
func (c *scanCoalescer) flush() arrow.RecordBatch {
	arrs := make([]arrow.Array, len(c.cols))
	for i, b := range c.cols {
		arrs[i] = b.finish()
	}
	rec := array.NewRecordBatch(c.schema, arrs, int64(c.rows))
	for _, a := range arrs {
		a.Release()
	}
	c.rows = 0
	return rec
}

func (c *scanCoalescer) release() {
	for _, b := range c.cols {
		b.release()
	}
	c.rows = 0
}

// scanColBuilder gathers selected rows of one column (a scanSelection-vector take).
type scanColBuilder interface {
	appendRuns(arr arrow.Array, runs []scanSpan)
	finish() arrow.Array
	release()
}

func newScanColBuilder(dt arrow.DataType, mem memory.Allocator) scanColBuilder {
	switch dt.ID() {
	case arrow.BOOL:
		return &scanBoolBuilder{dt: dt, mem: mem}
	case arrow.STRING, arrow.BINARY:
		return &scanBinaryBuilder{dt: dt, mem: mem}
	}
	if fw, ok := dt.(arrow.FixedWidthDataType); ok && fw.BitWidth() >= 8 && fw.BitWidth()%8 == 0 {
		switch dt.ID() {
		case arrow.INT32, arrow.INT64, arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64, arrow.TIMESTAMP,
			arrow.DECIMAL128, arrow.DECIMAL256, arrow.FIXED_SIZE_BINARY:
			return &scanFixedBuilder{dt: dt, mem: mem, width: fw.BitWidth() / 8}
		}
	}
	return &scanSliceBuilder{dt: dt, mem: mem}
}

// scanGrow makes buf hold at least n bytes, growing geometrically, and keeps
// its content.
func scanGrow(buf *memory.Buffer, n int) {
	if n <= buf.Cap() {
		return
	}
	buf.Reserve(max(n, 2*buf.Cap(), 256))
}

// scanNullMask is the scanValidity side of a builder: allocated at the first null,
// with every earlier row marked valid.
type scanNullMask struct {
	buf   *memory.Buffer
	nulls int
}

func (m *scanNullMask) append(mem memory.Allocator, d arrow.ArrayData, n int, runs []scanSpan) {
	src := scanValidity(d)
	if src == nil && m.buf == nil {
		return
	}
	total := n + scanRunsLen(runs)
	if m.buf == nil {
		m.buf = memory.NewResizableBuffer(mem)
		scanGrow(m.buf, int(bitutil.BytesForBits(int64(total))))
		bitutil.SetBitsTo(m.buf.Buf(), 0, int64(n), true)
	} else {
		scanGrow(m.buf, int(bitutil.BytesForBits(int64(total))))
	}
	dst := m.buf.Buf()
	at := n
	for _, rn := range runs {
		l := rn.end - rn.start
		if src == nil {
			bitutil.SetBitsTo(dst, int64(at), int64(l), true)
		} else {
			bitutil.CopyBitmap(src, d.Offset()+rn.start, l, dst, at)
			m.nulls += l - bitutil.CountSetBits(src, d.Offset()+rn.start, l)
		}
		at += l
	}
}

// take hands the mask over (nil when there were no nulls).
func (m *scanNullMask) take(n int) *memory.Buffer {
	b := m.buf
	if b != nil {
		b.ResizeNoShrink(int(bitutil.BytesForBits(int64(n))))
	}
	m.buf, m.nulls = nil, 0
	return b
}

func (m *scanNullMask) release() {
	if m.buf != nil {
		m.buf.Release()
		m.buf = nil
	}
	m.nulls = 0
}

// scanFixedBuilder takes rows of a fixed-width column (numbers, timestamps,
// decimals, fixed-size binary).
type scanFixedBuilder struct {
	dt     arrow.DataType
	mem    memory.Allocator
	width  int
	values *memory.Buffer
	mask   scanNullMask
	n      int
}

func (b *scanFixedBuilder) appendRuns(arr arrow.Array, runs []scanSpan) {
	d := arr.Data()
	b.mask.append(b.mem, d, b.n, runs)
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
	}
	total := scanRunsLen(runs)
	scanGrow(b.values, (b.n+total)*b.width)
	dst := b.values.Buf()
	src := d.Buffers()[1].Bytes()
	w, off := b.width, d.Offset()
	for _, rn := range runs {
		copy(dst[b.n*w:], src[(off+rn.start)*w:(off+rn.end)*w])
		b.n += rn.end - rn.start
	}
}

func (b *scanFixedBuilder) finish() arrow.Array {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
	}
	b.values.ResizeNoShrink(b.n * b.width)
	arr := scanFinishValues(b.dt, b.n, b.values, &b.mask)
	b.values, b.n = nil, 0
	return arr
}

func (b *scanFixedBuilder) release() { scanReleaseValues(&b.values, &b.mask, &b.n) }

// scanFinishValues wraps a values buffer and the mask's validity as an
// array of n rows; it takes the caller's reference to values.
func scanFinishValues(dt arrow.DataType, n int, values *memory.Buffer, mask *scanNullMask) arrow.Array {
	nulls := mask.nulls
	valid := mask.take(n)
	d := array.NewData(dt, n, []*memory.Buffer{valid, values}, nil, nulls, 0)
	arr := array.MakeFromData(d)
	d.Release()
	values.Release()
	if valid != nil {
		valid.Release()
	}
	return arr
}

// scanReleaseValues drops a builder's buffers.
func scanReleaseValues(values **memory.Buffer, mask *scanNullMask, n *int) {
	if *values != nil {
		(*values).Release()
		*values = nil
	}
	mask.release()
	*n = 0
}

// scanBoolBuilder takes rows of a boolean column.
type scanBoolBuilder struct {
	dt     arrow.DataType
	mem    memory.Allocator
	values *memory.Buffer
	mask   scanNullMask
	n      int
}

func (b *scanBoolBuilder) appendRuns(arr arrow.Array, runs []scanSpan) {
	d := arr.Data()
	b.mask.append(b.mem, d, b.n, runs)
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
	}
	total := scanRunsLen(runs)
	scanGrow(b.values, int(bitutil.BytesForBits(int64(b.n+total))))
	dst := b.values.Buf()
	src := d.Buffers()[1].Bytes()
	for _, rn := range runs {
		bitutil.CopyBitmap(src, d.Offset()+rn.start, rn.end-rn.start, dst, b.n)
		b.n += rn.end - rn.start
	}
}

func (b *scanBoolBuilder) finish() arrow.Array {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
	}
	b.values.ResizeNoShrink(int(bitutil.BytesForBits(int64(b.n))))
	arr := scanFinishValues(b.dt, b.n, b.values, &b.mask)
	b.values, b.n = nil, 0
	return arr
}

func (b *scanBoolBuilder) release() { scanReleaseValues(&b.values, &b.mask, &b.n) }

// scanBinaryBuilder takes rows of a utf8 or binary column (int32 offsets).
type scanBinaryBuilder struct {
	dt      arrow.DataType
	mem     memory.Allocator
	offsets *memory.Buffer
	data    *memory.Buffer
	size    int // bytes used in data
	mask    scanNullMask
	n       int
}

func (b *scanBinaryBuilder) dataLen() int { return b.size }

// scanSpanBytes is the number of value bytes the rows in runs of d hold.
// scanRunsLen is the number of rows in runs.
func scanRunsLen(runs []scanSpan) int {
	n := 0
	for _, rn := range runs {
		n += rn.end - rn.start
	}
	return n
}

func scanSpanBytes(d arrow.ArrayData, runs []scanSpan) int64 {
	if d.Len() == 0 {
		return 0
	}
	offs := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():]
	var n int64
	for _, rn := range runs {
		n += int64(offs[rn.end] - offs[rn.start])
	}
	return n
}

func (b *scanBinaryBuilder) appendRuns(arr arrow.Array, runs []scanSpan) {
	d := arr.Data()
	b.mask.append(b.mem, d, b.n, runs)
	if b.offsets == nil {
		b.offsets = memory.NewResizableBuffer(b.mem)
		b.data = memory.NewResizableBuffer(b.mem)
		scanGrow(b.offsets, 4)
		arrow.Int32Traits.CastFromBytes(b.offsets.Buf()[:4])[0] = 0
	}
	total := scanRunsLen(runs)
	scanGrow(b.offsets, (b.n+total+1)*4)
	scanGrow(b.data, b.size+int(scanSpanBytes(d, runs)))
	dstOff := arrow.Int32Traits.CastFromBytes(b.offsets.Buf())
	dst := b.data.Buf()
	srcOff := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():]
	var src []byte
	if buf := d.Buffers()[2]; buf != nil {
		src = buf.Bytes()
	}
	for _, rn := range runs {
		lo, hi := srcOff[rn.start], srcOff[rn.end]
		copy(dst[b.size:], src[lo:hi])
		shift := int32(b.size) - lo
		for i := rn.start + 1; i <= rn.end; i++ {
			b.n++
			dstOff[b.n] = srcOff[i] + shift
		}
		b.size += int(hi - lo)
	}
}

func (b *scanBinaryBuilder) finish() arrow.Array {
	if b.offsets == nil {
		b.offsets = memory.NewResizableBuffer(b.mem)
		b.data = memory.NewResizableBuffer(b.mem)
		scanGrow(b.offsets, 4)
		arrow.Int32Traits.CastFromBytes(b.offsets.Buf()[:4])[0] = 0
	}
	b.offsets.ResizeNoShrink((b.n + 1) * 4)
	b.data.ResizeNoShrink(b.size)
	nulls := b.mask.nulls
	valid := b.mask.take(b.n)
	d := array.NewData(b.dt, b.n, []*memory.Buffer{valid, b.offsets, b.data}, nil, nulls, 0)
	arr := array.MakeFromData(d)
	d.Release()
	b.offsets.Release()
	b.data.Release()
	if valid != nil {
		valid.Release()
	}
	b.offsets, b.data, b.n, b.size = nil, nil, 0, 0
	return arr
}

func (b *scanBinaryBuilder) release() {
	if b.offsets != nil {
		b.offsets.Release()
		b.data.Release()
		b.offsets, b.data = nil, nil
	}
	b.mask.release()
	b.n, b.size = 0, 0
}

// scanSliceBuilder takes rows of any other column (struct, list, map) by
// keeping zero-copy slices of the selected runs and concatenating them.
type scanSliceBuilder struct {
	dt    arrow.DataType
	mem   memory.Allocator
	parts []arrow.Array
}

func (b *scanSliceBuilder) appendRuns(arr arrow.Array, runs []scanSpan) {
	for _, rn := range runs {
		b.parts = append(b.parts, array.NewSlice(arr, int64(rn.start), int64(rn.end)))
	}
}

func (b *scanSliceBuilder) finish() arrow.Array {
	defer b.release()
	switch len(b.parts) {
	case 0:
		return array.MakeArrayOfNull(b.mem, b.dt, 0)
	case 1:
		b.parts[0].Retain()
		return b.parts[0]
	}
	out, err := array.Concatenate(b.parts, b.mem)
	if err != nil {
		panic(fmt.Errorf("tableformat: concatenating %s slices: %w", b.dt, err))
	}
	return out
}

func (b *scanSliceBuilder) release() {
	for _, p := range b.parts {
		p.Release()
	}
	b.parts = b.parts[:0]
}
