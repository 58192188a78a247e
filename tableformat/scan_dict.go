package tableformat

import (
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
	indices := d.Indices()
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
	dictBase := valueOffsets[0]
	idx := func(i int) int {
		switch ix := indices.(type) {
		case *array.Int32:
			return int(ix.Value(i))
		case *array.Int16:
			return int(ix.Value(i))
		case *array.Int8:
			return int(ix.Value(i))
		case *array.Int64:
			return int(ix.Value(i))
		case *array.Uint32:
			return int(ix.Value(i))
		case *array.Uint16:
			return int(ix.Value(i))
		case *array.Uint8:
			return int(ix.Value(i))
		}
		return int(indices.(*array.Uint64).Value(i))
	}
	nulls := d.NullN()
	// Offsets.
	offBuf := memory.NewResizableBuffer(mem)
	offBuf.Resize((n + 1) * 4)
	offs := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(offBuf.Bytes()))), n+1)
	var total int32
	for i := 0; i < n; i++ {
		offs[i] = total
		if nulls > 0 && d.IsNull(i) {
			continue
		}
		k := idx(i)
		total += int32(valueOffsets[k+1] - valueOffsets[k])
	}
	offs[n] = total
	// Values.
	dataBuf := memory.NewResizableBuffer(mem)
	dataBuf.Resize(int(total))
	data := dataBuf.Bytes()
	for i := 0; i < n; i++ {
		if offs[i+1] == offs[i] {
			continue
		}
		k := idx(i)
		copy(data[offs[i]:offs[i+1]], dictBytes[valueOffsets[k]-dictBase:valueOffsets[k+1]-dictBase])
	}
	// Validity.
	var valid *memory.Buffer
	if nulls > 0 {
		valid = memory.NewResizableBuffer(mem)
		valid.Resize(int(bitutil.BytesForBits(int64(n))))
		bits := valid.Bytes()
		for i := 0; i < n; i++ {
			bitutil.SetBitTo(bits, i, d.IsValid(i))
		}
	}
	data2 := array.NewData(t, n, []*memory.Buffer{valid, offBuf, dataBuf}, nil, nulls, 0)
	if valid != nil {
		valid.Release()
	}
	offBuf.Release()
	dataBuf.Release()
	defer data2.Release()
	return array.MakeFromData(data2)
}
