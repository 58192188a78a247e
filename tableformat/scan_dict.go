package tableformat

import (
	"encoding/binary"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// Time-series segments are full of low-cardinality strings (host names,
// regions, tags) that Parquet stores dictionary-encoded. Decoding them
// value by value through a string builder is the most expensive part of a
// scan; reading them as Arrow dictionary arrays and expanding those in one
// pass (sizes first, then one copy per value into a buffer allocated once)
// is several times cheaper. The output type is unchanged.

// scanDictLeaves lists the leaf columns to read as dictionaries: top-level
// (not nested) BYTE_ARRAY columns.
func scanDictLeaves(pf *file.Reader) []int {
	sc := pf.MetaData().Schema
	var out []int
	for i := 0; i < sc.NumColumns(); i++ {
		col := sc.Column(i)
		if col.PhysicalType() != parquet.Types.ByteArray || col.MaxRepetitionLevel() != 0 || col.MaxDefinitionLevel() > 1 {
			continue
		}
		if node := col.SchemaNode(); node.Parent() != sc.Root() {
			continue
		}
		if lt := col.LogicalType(); lt != nil && !(lt.Equals(schema.StringLogicalType{}) || lt.Equals(schema.NoLogicalType{})) {
			continue
		}
		out = append(out, i)
	}
	return out
}

// scanExpandDict turns a dictionary array of utf8 or binary values into a
// plain array of type t (utf8 or binary).
func scanExpandDict(mem memory.Allocator, d *array.Dictionary, t arrow.DataType) arrow.Array {
	n := d.Len()
	var valueOffsets []int32
	var dictBytes []byte
	switch dict := d.Dictionary().(type) {
	case *array.String:
		valueOffsets, dictBytes = dict.ValueOffsets(), dict.ValueBytes()
	case *array.Binary:
		valueOffsets, dictBytes = dict.ValueOffsets(), dict.ValueBytes()
	default:
		panic("tableformat: dictionary of " + dict.DataType().String() + " read for a string column") // scanDictLeaves selects byte arrays only
	}
	base := valueOffsets[0]
	// The index of every row as int32 (pqarrow produces int32 indices; any
	// other width is converted once).
	var ids []int32
	if ix, ok := d.Indices().(*array.Int32); ok {
		ids = ix.Int32Values()
	} else {
		ids = make([]int32, n)
		for i := range ids {
			ids[i] = int32(d.GetValueIndex(i))
		}
	}
	nulls := d.NullN()
	// Per dictionary entry: its length and its start in a padded copy of
	// the (small) dictionary, so that each row costs two table loads.
	ndict := len(valueOffsets) - 1
	lens := make([]int32, ndict)
	starts := make([]int32, ndict)
	for k := range ndict {
		starts[k] = valueOffsets[k] - base
		lens[k] = valueOffsets[k+1] - valueOffsets[k]
	}
	dictLen := int(valueOffsets[ndict] - base)
	padded := make([]byte, dictLen+8)
	copy(padded, dictBytes[:dictLen])
	var total int64
	if nulls == 0 {
		for _, k := range ids {
			total += int64(lens[k])
		}
	} else {
		for i, k := range ids {
			if d.IsValid(i) {
				total += int64(lens[k])
			}
		}
	}
	// Offsets and values are written in one pass: every entry and every
	// byte is written, so the buffers need not be zeroed. Short values
	// (most tags and names) are moved as one 8-byte word: the source has 8
	// bytes of padding and the destination 8 bytes of slack, so a word may
	// spill past a value only into bytes the next value, or the slack,
	// overwrites.
	offBuf := scanRawBuffer(mem, (n+1)*4)
	offs := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(offBuf.Bytes()))), n+1)
	dataBuf := scanRawBuffer(mem, int(total)+8)
	data := dataBuf.Bytes()
	pos := int32(0)
	for i, k := range ids {
		offs[i] = pos
		if nulls > 0 && !d.IsValid(i) {
			continue
		}
		l, st := lens[k], starts[k]
		if l <= 8 {
			binary.LittleEndian.PutUint64(data[pos:], binary.LittleEndian.Uint64(padded[st:]))
		} else {
			copy(data[pos:pos+l], padded[st:st+l])
		}
		pos += l
	}
	offs[n] = pos
	dataBuf.ResizeNoShrink(int(total))
	return scanBinaryArray(mem, t, n, nulls, d.IsValid, offBuf, dataBuf)
}

// scanBinaryArray assembles a utf8 or binary array of n rows from its
// offsets and values (both of which it takes over) and, when there are
// nulls, a validity bitmap built from valid.
func scanBinaryArray(mem memory.Allocator, t arrow.DataType, n, nulls int, valid func(int) bool, offBuf, dataBuf *memory.Buffer) arrow.Array {
	var bitmap *memory.Buffer
	if nulls > 0 {
		// Zeroed: bits past the last row stay clear.
		bitmap = memory.NewResizableBuffer(mem)
		bitmap.Resize(int(bitutil.BytesForBits(int64(n))))
		bits := bitmap.Bytes()
		for i := range n {
			if valid(i) {
				bitutil.SetBit(bits, i)
			}
		}
	}
	out := array.NewData(t, n, []*memory.Buffer{bitmap, offBuf, dataBuf}, nil, nulls, 0)
	if bitmap != nil {
		bitmap.Release()
	}
	offBuf.Release()
	dataBuf.Release()
	defer out.Release()
	return array.MakeFromData(out)
}

// UninitAllocator is an allocator that can hand out memory without
// clearing recycled bytes first, for buffers the caller overwrites
// entirely (the scan's string decoders fill every offset and value byte).
// The scan pool is one; an allocator that wraps another (a server's
// per-stream account) implements it by calling [AllocateUninit] on the
// allocator it wraps. Memory from AllocateUninit is freed with Free, like
// any other.
type UninitAllocator interface {
	memory.Allocator
	AllocateUninit(n int) []byte
}

// AllocateUninit returns n bytes from mem whose content is unspecified:
// recycled memory is not cleared when mem is the scan pool or an
// [UninitAllocator]; any other allocator's Allocate is used as it is.
func AllocateUninit(mem memory.Allocator, n int) []byte {
	switch a := mem.(type) {
	case *poolAllocator:
		return a.allocateUninit(n)
	case UninitAllocator:
		return a.AllocateUninit(n)
	}
	return mem.Allocate(n)
}

// scanRawBuffer returns a buffer of n bytes whose content is unspecified
// (see AllocateUninit).
func scanRawBuffer(mem memory.Allocator, n int) *memory.Buffer {
	return memory.NewBufferWithAllocator(AllocateUninit(mem, n), mem)
}
