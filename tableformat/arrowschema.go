package tableformat

import (
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
)

// ArrowSchema converts a logical schema to the Arrow schema segments are
// written and read with. Int96 and Other have no Arrow form and are refused.
func ArrowSchema(s *Schema) (*arrow.Schema, error) {
	fields := make([]arrow.Field, len(s.Columns))
	for i := range s.Columns {
		f, err := arrowField(&s.Columns[i])
		if err != nil {
			return nil, err
		}
		fields[i] = f
	}
	var md *arrow.Metadata
	if len(s.Metadata) > 0 {
		m := arrowMetadata(s.Metadata)
		md = &m
	}
	return arrow.NewSchema(fields, md), nil
}

func arrowMetadata(m map[string]string) arrow.Metadata {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = m[k]
	}
	return arrow.NewMetadata(keys, vals)
}

func arrowField(f *Field) (arrow.Field, error) {
	dt, err := arrowType(&f.Type, f.Name)
	if err != nil {
		return arrow.Field{}, err
	}
	out := arrow.Field{Name: f.Name, Type: dt, Nullable: f.Nullable}
	if len(f.Metadata) > 0 {
		out.Metadata = arrowMetadata(f.Metadata)
	}
	return out, nil
}

var timeUnits = map[TimeUnit]arrow.TimeUnit{Millis: arrow.Millisecond, Micros: arrow.Microsecond, Nanos: arrow.Nanosecond}

func arrowType(t *DataType, name string) (arrow.DataType, error) {
	switch t.Kind {
	case TypeBool:
		return arrow.FixedWidthTypes.Boolean, nil
	case TypeInt32:
		return arrow.PrimitiveTypes.Int32, nil
	case TypeInt64:
		return arrow.PrimitiveTypes.Int64, nil
	case TypeUInt64:
		return arrow.PrimitiveTypes.Uint64, nil
	case TypeFloat32:
		return arrow.PrimitiveTypes.Float32, nil
	case TypeFloat64:
		return arrow.PrimitiveTypes.Float64, nil
	case TypeBinary:
		return arrow.BinaryTypes.Binary, nil
	case TypeUtf8:
		return arrow.BinaryTypes.String, nil
	case TypeFixedBinary:
		return &arrow.FixedSizeBinaryType{ByteWidth: int(t.ByteWidth)}, nil
	case TypeTimestamp:
		tz := ""
		if t.Timezone != nil {
			tz = *t.Timezone
		}
		return &arrow.TimestampType{Unit: timeUnits[t.Unit], TimeZone: tz}, nil
	case TypeDecimal:
		if t.Precision <= 38 {
			return &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}, nil
		}
		return &arrow.Decimal256Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}, nil
	case TypeStruct:
		fields := make([]arrow.Field, len(t.Fields))
		for i := range t.Fields {
			f, err := arrowField(&t.Fields[i])
			if err != nil {
				return nil, err
			}
			fields[i] = f
		}
		return arrow.StructOf(fields...), nil
	case TypeList:
		f, err := arrowField(t.Elem)
		if err != nil {
			return nil, err
		}
		return arrow.ListOfField(f), nil
	case TypeMap:
		kf, err := arrowField(t.Key)
		if err != nil {
			return nil, err
		}
		vf := arrow.Field{Name: "value", Type: arrow.Null, Nullable: true}
		if t.Value != nil {
			if vf, err = arrowField(t.Value); err != nil {
				return nil, err
			}
		}
		m := arrow.MapOfFields(kf, vf)
		m.KeysSorted = t.KeysSorted
		return m, nil
	}
	return nil, invalidf("column %q: logical type %s has no Arrow equivalent", name, t.Kind)
}

// LogicalFromArrow converts an Arrow schema to a logical schema exactly, as
// the reference does when the first append adopts a schema. Types without
// an exact logical form (Int8, Int16, UInt8–UInt32, LargeUtf8, Utf8View,
// LargeBinary, BinaryView, Date32/64, Timestamp(s), Decimal128 with
// precision > 38, Decimal256 with precision ≤ 38, Dictionary, LargeList,
// FixedSizeList, Float16, Null, …) are refused with an error naming the
// column and the type.
func LogicalFromArrow(as *arrow.Schema) (*Schema, error) {
	out := &Schema{Columns: make([]Field, as.NumFields())}
	for i, f := range as.Fields() {
		lf, err := logicalField(f, f.Name)
		if err != nil {
			return nil, err
		}
		out.Columns[i] = lf
	}
	if md := as.Metadata(); md.Len() > 0 {
		out.Metadata = metadataMap(md)
	}
	if err := out.validate(); err != nil {
		return nil, invalidf("%v", err)
	}
	return out, nil
}

func metadataMap(md arrow.Metadata) map[string]string {
	m := make(map[string]string, md.Len())
	for i, k := range md.Keys() {
		m[k] = md.Values()[i]
	}
	return m
}

func logicalField(f arrow.Field, path string) (Field, error) {
	dt, err := logicalType(f.Type, path)
	if err != nil {
		return Field{}, err
	}
	out := Field{Name: f.Name, Type: dt, Nullable: f.Nullable}
	if f.Metadata.Len() > 0 {
		out.Metadata = metadataMap(f.Metadata)
	}
	return out, nil
}

var logicalUnits = map[arrow.TimeUnit]TimeUnit{arrow.Millisecond: Millis, arrow.Microsecond: Micros, arrow.Nanosecond: Nanos}

func logicalType(t arrow.DataType, path string) (DataType, error) {
	switch t := t.(type) {
	case *arrow.BooleanType:
		return DataType{Kind: TypeBool}, nil
	case *arrow.Int32Type:
		return DataType{Kind: TypeInt32}, nil
	case *arrow.Int64Type:
		return DataType{Kind: TypeInt64}, nil
	case *arrow.Uint64Type:
		return DataType{Kind: TypeUInt64}, nil
	case *arrow.Float32Type:
		return DataType{Kind: TypeFloat32}, nil
	case *arrow.Float64Type:
		return DataType{Kind: TypeFloat64}, nil
	case *arrow.BinaryType:
		return DataType{Kind: TypeBinary}, nil
	case *arrow.StringType:
		return DataType{Kind: TypeUtf8}, nil
	case *arrow.FixedSizeBinaryType:
		if t.ByteWidth <= 0 {
			break
		}
		return DataType{Kind: TypeFixedBinary, ByteWidth: int32(t.ByteWidth)}, nil
	case *arrow.TimestampType:
		u, ok := logicalUnits[t.Unit]
		if !ok {
			return DataType{}, invalidf("column %q: timestamp[s] is not supported; use ms, us or ns", path)
		}
		dt := DataType{Kind: TypeTimestamp, Unit: u}
		if t.TimeZone != "" {
			tz := t.TimeZone
			dt.Timezone = &tz
		}
		return dt, nil
	case *arrow.Decimal128Type:
		if t.Precision < 1 || t.Precision > 38 || t.Scale < 0 || t.Scale > t.Precision {
			break
		}
		return DataType{Kind: TypeDecimal, Precision: uint8(t.Precision), Scale: int8(t.Scale)}, nil
	case *arrow.Decimal256Type:
		if t.Precision <= 38 || t.Precision > 76 || t.Scale < 0 || t.Scale > t.Precision {
			break
		}
		return DataType{Kind: TypeDecimal, Precision: uint8(t.Precision), Scale: int8(t.Scale)}, nil
	case *arrow.StructType:
		if t.NumFields() == 0 {
			break
		}
		fields := make([]Field, t.NumFields())
		for i, f := range t.Fields() {
			lf, err := logicalField(f, path+"."+f.Name)
			if err != nil {
				return DataType{}, err
			}
			fields[i] = lf
		}
		return DataType{Kind: TypeStruct, Fields: fields}, nil
	case *arrow.MapType:
		kf, err := logicalField(t.KeyField(), path+".key")
		if err != nil {
			return DataType{}, err
		}
		dt := DataType{Kind: TypeMap, Key: &kf, KeysSorted: t.KeysSorted}
		if it := t.ItemField(); it.Type.ID() != arrow.NULL {
			vf, err := logicalField(it, path+".value")
			if err != nil {
				return DataType{}, err
			}
			dt.Value = &vf
		}
		return dt, nil
	case *arrow.ListType:
		ef, err := logicalField(t.ElemField(), path+"[]")
		if err != nil {
			return DataType{}, err
		}
		return DataType{Kind: TypeList, Elem: &ef}, nil
	}
	return DataType{}, invalidf("column %q: Arrow type %s is not supported (supported: bool, int32, int64, uint64, float32, float64, binary, fixed_size_binary, utf8, timestamp[ms|us|ns], decimal, struct, list, map)", path, t)
}
