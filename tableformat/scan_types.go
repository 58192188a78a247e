package tableformat

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Type checks between a segment's stored Arrow types and the canonical ones.

// scanCompareTypes compares a segment's stored Arrow type with the canonical
// one. exact means the arrays can be used as they are; compatible means
// they have the same physical layout and differ at most in the names,
// nullability or metadata of nested fields (a map's entries struct named
// after its column, as the reference's Rust writer does, for example), in
// a map's keys_sorted flag or in a timestamp's timezone, so that the
// canonical type can be put on the same buffers.
func scanCompareTypes(stored, canon arrow.DataType) (exact, compatible bool) {
	if !scanSameLayout(stored, canon) {
		return false, false
	}
	if arrow.TypeEqual(stored, canon, arrow.CheckMetadata()) && !scanIsNested(canon) {
		return true, true
	}
	return false, true
}

func scanIsNested(t arrow.DataType) bool {
	_, ok := t.(arrow.NestedType)
	return ok
}

// scanSameLayout reports whether two types describe the same physical data.
func scanSameLayout(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch a := a.(type) {
	case *arrow.TimestampType:
		return a.Unit == b.(*arrow.TimestampType).Unit
	case *arrow.FixedSizeBinaryType:
		return a.ByteWidth == b.(*arrow.FixedSizeBinaryType).ByteWidth
	case *arrow.Decimal128Type:
		bb := b.(*arrow.Decimal128Type)
		return a.Precision == bb.Precision && a.Scale == bb.Scale
	case *arrow.Decimal256Type:
		bb := b.(*arrow.Decimal256Type)
		return a.Precision == bb.Precision && a.Scale == bb.Scale
	case *arrow.StructType:
		bb := b.(*arrow.StructType)
		if a.NumFields() != bb.NumFields() {
			return false
		}
		for i := 0; i < a.NumFields(); i++ {
			if !scanSameLayout(a.Field(i).Type, bb.Field(i).Type) {
				return false
			}
		}
		return true
	case *arrow.MapType:
		bb := b.(*arrow.MapType)
		return scanSameLayout(a.KeyType(), bb.KeyType()) && scanSameLayout(a.ItemType(), bb.ItemType())
	case *arrow.ListType:
		return scanSameLayout(a.Elem(), b.(*arrow.ListType).Elem())
	case *arrow.LargeListType, *arrow.FixedSizeListType, *arrow.DictionaryType, *arrow.ExtensionBase,
		*arrow.ListViewType, *arrow.LargeListViewType, *arrow.RunEndEncodedType, *arrow.DenseUnionType, *arrow.SparseUnionType:
		return arrow.TypeEqual(a, b)
	}
	return arrow.TypeEqual(a, b)
}

// scanRetype returns arr with type dt over the same buffers (dt has the same
// layout, see scanCompareTypes).
func scanRetype(arr arrow.Array, dt arrow.DataType) arrow.Array {
	d := scanRetypeData(arr.Data(), dt)
	defer d.Release()
	return array.MakeFromData(d)
}

func scanRetypeData(d arrow.ArrayData, dt arrow.DataType) arrow.ArrayData {
	var childTypes []arrow.DataType
	switch t := dt.(type) {
	case *arrow.StructType:
		for _, f := range t.Fields() {
			childTypes = append(childTypes, f.Type)
		}
	case *arrow.MapType:
		childTypes = []arrow.DataType{t.Elem()}
	case *arrow.ListType:
		childTypes = []arrow.DataType{t.Elem()}
	}
	children := d.Children()
	var kids []arrow.ArrayData
	if len(children) > 0 {
		kids = make([]arrow.ArrayData, len(children))
		for i, c := range children {
			if i < len(childTypes) {
				kids[i] = scanRetypeData(c, childTypes[i])
			} else {
				c.Retain()
				kids[i] = c
			}
		}
	}
	out := array.NewData(dt, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
	for _, k := range kids {
		k.Release()
	}
	return out
}
