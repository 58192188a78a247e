package tableformat

import (
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// normalizer turns incoming Arrow batches into batches of the table's
// canonical schema: columns matched by name and put in registered order,
// allow-listed lossless widenings applied, omitted nullable columns filled
// with nulls (only once schema_add_columns is active).
type normalizer struct {
	in        *arrow.Schema
	canonical *arrow.Schema
	// src[i] is the input column of canonical column i, or -1 for a
	// column filled with nulls.
	src []int
	// widen[i] converts input column src[i]; nil when the type is exact.
	widen []func(memory.Allocator, arrow.Array) arrow.Array
	// identity is true when every column passes through unchanged.
	identity bool
}

// planSchema decides how an append with input schema in fits the table at
// st. When the table has no schema yet it returns the schema the append
// adopts (the metadata update rides in the same commit).
func planSchema(st *State, in *arrow.Schema) (*normalizer, *Schema, error) {
	if st.Schema() == nil {
		if st.Version != 1 {
			return nil, nil, corruptf("", st.Version, nil, "the table has no logical schema at version %d (only the first append may adopt one)", st.Version)
		}
		adopted, err := LogicalFromArrow(in)
		if err != nil {
			return nil, nil, err
		}
		if err := checkSchemaMatchesIndex(adopted, st.Index()); err != nil {
			return nil, nil, invalidf("%v", err)
		}
		canonical, err := ArrowSchema(adopted)
		if err != nil {
			return nil, nil, err
		}
		n := &normalizer{in: in, canonical: canonical, identity: true}
		for i, f := range in.Fields() {
			n.src = append(n.src, i)
			var w func(memory.Allocator, arrow.Array) arrow.Array
			if want := canonical.Field(i).Type; !arrow.TypeEqual(f.Type, want) {
				w, n.identity = rewrapAs(want), false
			}
			n.widen = append(n.widen, w)
		}
		return n, adopted, nil
	}
	n, err := newNormalizer(st, in)
	return n, nil, err
}

func newNormalizer(st *State, in *arrow.Schema) (*normalizer, error) {
	schema := st.Schema()
	canonical, err := ArrowSchema(schema)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]int, in.NumFields())
	for i, f := range in.Fields() {
		if _, dup := byName[f.Name]; dup {
			return nil, invalidf("column %q appears twice in the input", f.Name)
		}
		byName[f.Name] = i
	}
	for _, f := range in.Fields() {
		if _, ok := schema.Column(f.Name); !ok {
			return nil, invalidf("input column %q is not in the table schema (columns: %s)", f.Name, columnNames(schema))
		}
	}
	if md := in.Metadata(); md.Len() > 0 && !maps.Equal(metadataMap(md), schema.Metadata) {
		return nil, invalidf("the input schema carries metadata %v that differs from the table's %v (send the same annotations or none)", metadataMap(md), schema.Metadata)
	}
	ix := st.Index()
	addColumns := st.Meta.HasReaderFeature(FeatureSchemaAddColumns)
	n := &normalizer{in: in, canonical: canonical, identity: in.NumFields() == len(schema.Columns)}
	for i := range schema.Columns {
		col := &schema.Columns[i]
		j, ok := byName[col.Name]
		if !ok {
			key := col.Name == ix.Column || slices.Contains(ix.EntityColumns, col.Name)
			switch {
			case key:
				return nil, invalidf("key column %q is missing from the input", col.Name)
			case !col.Nullable:
				return nil, invalidf("non-nullable column %q is missing from the input", col.Name)
			case !addColumns:
				return nil, invalidf("column %q is missing from the input (omitting nullable columns is allowed only after columns were added)", col.Name)
			}
			n.src = append(n.src, -1)
			n.widen = append(n.widen, nil)
			n.identity = false
			continue
		}
		if j != i {
			n.identity = false
		}
		f := in.Field(j)
		if f.Metadata.Len() > 0 && !maps.Equal(metadataMap(f.Metadata), col.Metadata) {
			return nil, invalidf("column %q carries metadata %v that differs from the table's %v (send the same annotations or none)", col.Name, metadataMap(f.Metadata), col.Metadata)
		}
		if f.Nullable != col.Nullable {
			return nil, invalidf("column %q is %s in the input but %s in the table", col.Name, nullability(f.Nullable), nullability(col.Nullable))
		}
		want := canonical.Field(i).Type
		var w func(memory.Allocator, arrow.Array) arrow.Array
		if !arrow.TypeEqual(f.Type, want) {
			if lt, err := logicalType(f.Type, col.Name); err == nil && lt.Equal(col.Type) {
				// Same logical type, different nested names or metadata:
				// re-wrap with the canonical type.
				w = rewrapAs(want)
			} else if w = widening(f.Type, want); w == nil {
				return nil, invalidf("column %q has type %s in the input but %s in the table (lossless widenings allowed: int8/int16→int32/int64, int32→int64, uint8/uint16/uint32→uint64, float32→float64)", col.Name, f.Type, want)
			}
			n.identity = false
		}
		n.src = append(n.src, j)
		n.widen = append(n.widen, w)
	}
	return n, nil
}

func columnNames(s *Schema) string {
	names := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		names[i] = c.Name
	}
	return fmt.Sprint(names)
}

func nullability(nullable bool) string {
	if nullable {
		return "nullable"
	}
	return "non-nullable"
}

// apply returns rec in the canonical schema. The result must be released.
func (n *normalizer) apply(mem memory.Allocator, rec arrow.RecordBatch) arrow.RecordBatch {
	if n.identity && n.canonical.Equal(rec.Schema()) {
		rec.Retain()
		return rec
	}
	rows := rec.NumRows()
	cols := make([]arrow.Array, len(n.src))
	for i, j := range n.src {
		switch {
		case j < 0:
			cols[i] = array.MakeArrayOfNull(mem, n.canonical.Field(i).Type, int(rows))
		case n.widen[i] != nil:
			cols[i] = n.widen[i](mem, rec.Column(j))
		default:
			cols[i] = rec.Column(j)
			cols[i].Retain()
		}
	}
	out := array.NewRecordBatch(n.canonical, cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return out
}

func rewrapAs(t arrow.DataType) func(memory.Allocator, arrow.Array) arrow.Array {
	return func(_ memory.Allocator, a arrow.Array) arrow.Array {
		return array.MakeFromData(retypeData(a.Data(), t))
	}
}

// retypeData returns data viewed as type t (same buffers and layout).
func retypeData(d arrow.ArrayData, t arrow.DataType) arrow.ArrayData {
	children := d.Children()
	var kids []arrow.ArrayData
	if len(children) > 0 {
		kids = make([]arrow.ArrayData, len(children))
		childTypes := childTypesOf(t)
		for i, c := range children {
			if i < len(childTypes) {
				kids[i] = retypeData(c, childTypes[i])
			} else {
				kids[i] = c
				c.Retain()
			}
		}
	}
	out := array.NewData(t, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
	for _, k := range kids {
		k.Release()
	}
	return out
}

func childTypesOf(t arrow.DataType) []arrow.DataType {
	switch t := t.(type) {
	case *arrow.StructType:
		out := make([]arrow.DataType, t.NumFields())
		for i, f := range t.Fields() {
			out[i] = f.Type
		}
		return out
	case *arrow.MapType:
		return []arrow.DataType{t.Elem()}
	case *arrow.ListType:
		return []arrow.DataType{t.Elem()}
	}
	return nil
}

// widening returns the conversion from one of the allow-listed narrower
// types to want, or nil.
func widening(from, want arrow.DataType) func(memory.Allocator, arrow.Array) arrow.Array {
	switch want.ID() {
	case arrow.INT32:
		switch from.ID() {
		case arrow.INT8:
			return widenInts(func(a arrow.Array, i int) int32 { return int32(a.(*array.Int8).Value(i)) }, array.NewInt32Builder)
		case arrow.INT16:
			return widenInts(func(a arrow.Array, i int) int32 { return int32(a.(*array.Int16).Value(i)) }, array.NewInt32Builder)
		}
	case arrow.INT64:
		switch from.ID() {
		case arrow.INT8:
			return widenInts(func(a arrow.Array, i int) int64 { return int64(a.(*array.Int8).Value(i)) }, array.NewInt64Builder)
		case arrow.INT16:
			return widenInts(func(a arrow.Array, i int) int64 { return int64(a.(*array.Int16).Value(i)) }, array.NewInt64Builder)
		case arrow.INT32:
			return widenInts(func(a arrow.Array, i int) int64 { return int64(a.(*array.Int32).Value(i)) }, array.NewInt64Builder)
		}
	case arrow.UINT64:
		switch from.ID() {
		case arrow.UINT8:
			return widenInts(func(a arrow.Array, i int) uint64 { return uint64(a.(*array.Uint8).Value(i)) }, array.NewUint64Builder)
		case arrow.UINT16:
			return widenInts(func(a arrow.Array, i int) uint64 { return uint64(a.(*array.Uint16).Value(i)) }, array.NewUint64Builder)
		case arrow.UINT32:
			return widenInts(func(a arrow.Array, i int) uint64 { return uint64(a.(*array.Uint32).Value(i)) }, array.NewUint64Builder)
		}
	case arrow.FLOAT64:
		if from.ID() == arrow.FLOAT32 {
			return widenInts(func(a arrow.Array, i int) float64 { return float64(a.(*array.Float32).Value(i)) }, array.NewFloat64Builder)
		}
	}
	return nil
}

type valueBuilder[T any] interface {
	array.Builder
	UnsafeAppend(T)
}

func widenInts[T any, B valueBuilder[T]](get func(arrow.Array, int) T, newBuilder func(memory.Allocator) B) func(memory.Allocator, arrow.Array) arrow.Array {
	return func(mem memory.Allocator, a arrow.Array) arrow.Array {
		b := newBuilder(mem)
		defer b.Release()
		b.Reserve(a.Len())
		for i := range a.Len() {
			if a.IsNull(i) {
				b.UnsafeAppendBoolToBitmap(false)
				continue
			}
			b.UnsafeAppend(get(a, i))
		}
		return b.NewArray()
	}
}
