package tableformat

import (
	"fmt"
	"maps"
	"slices"
)

// TypeKind names a variant of the reference's LogicalDataType.
type TypeKind int

// The LogicalDataType variants. The JSON name of each is its Go name
// without the "Type" prefix ("Bool", "Int32", …, "Other").
const (
	TypeBool TypeKind = iota + 1
	TypeInt32
	TypeInt64
	TypeUInt64
	TypeFloat32
	TypeFloat64
	TypeBinary
	TypeFixedBinary
	TypeUtf8
	TypeInt96
	TypeTimestamp
	TypeDecimal
	TypeStruct
	TypeList
	TypeMap
	TypeOther
)

var typeNames = map[TypeKind]string{
	TypeBool: "Bool", TypeInt32: "Int32", TypeInt64: "Int64", TypeUInt64: "UInt64",
	TypeFloat32: "Float32", TypeFloat64: "Float64", TypeBinary: "Binary",
	TypeFixedBinary: "FixedBinary", TypeUtf8: "Utf8", TypeInt96: "Int96",
	TypeTimestamp: "Timestamp", TypeDecimal: "Decimal", TypeStruct: "Struct",
	TypeList: "List", TypeMap: "Map", TypeOther: "Other",
}

func (k TypeKind) String() string {
	if n, ok := typeNames[k]; ok {
		return n
	}
	return fmt.Sprintf("TypeKind(%d)", int(k))
}

// TimeUnit is the unit of a Timestamp type: "Millis", "Micros" or "Nanos".
type TimeUnit string

// The timestamp units the format knows. Seconds are not among them.
const (
	Millis TimeUnit = "Millis"
	Micros TimeUnit = "Micros"
	Nanos  TimeUnit = "Nanos"
)

// DataType is a logical column type. Kind selects the variant; only the
// fields that variant uses are set.
type DataType struct {
	Kind TypeKind

	// ByteWidth is the width of a FixedBinary (> 0).
	ByteWidth int32
	// Unit and Timezone describe a Timestamp. A nil Timezone is written
	// as JSON null (the reference always writes the key).
	Unit     TimeUnit
	Timezone *string
	// Precision and Scale describe a Decimal.
	Precision uint8
	Scale     int8
	// Fields are the children of a Struct.
	Fields []Field
	// Elem is the element of a List.
	Elem *Field
	// Key, Value, KeysSorted and the two metadata maps describe a Map. A
	// nil Value is a keys-only map.
	Key               *Field
	Value             *Field
	KeysSorted        bool
	EntriesMetadata   map[string]string
	NullValueMetadata map[string]string
	// Other is the name carried by the Other placeholder.
	Other string
}

// Field is a named, typed column (or nested child).
type Field struct {
	Name     string
	Type     DataType
	Nullable bool
	Metadata map[string]string
}

// Schema is the table's logical schema: its top-level columns in order and
// optional string annotations.
type Schema struct {
	Columns  []Field
	Metadata map[string]string
}

// Column returns the top-level column called name.
func (s *Schema) Column(name string) (*Field, bool) {
	for i := range s.Columns {
		if s.Columns[i].Name == name {
			return &s.Columns[i], true
		}
	}
	return nil, false
}

// HasMetadata reports whether the schema or any field in it, at any depth,
// carries annotations (which requires the schema_metadata feature).
func (s *Schema) HasMetadata() bool {
	if len(s.Metadata) > 0 {
		return true
	}
	for i := range s.Columns {
		if s.Columns[i].hasMetadata() {
			return true
		}
	}
	return false
}

func (f *Field) hasMetadata() bool {
	if len(f.Metadata) > 0 {
		return true
	}
	t := &f.Type
	if len(t.EntriesMetadata) > 0 || len(t.NullValueMetadata) > 0 {
		return true
	}
	for i := range t.Fields {
		if t.Fields[i].hasMetadata() {
			return true
		}
	}
	for _, c := range []*Field{t.Elem, t.Key, t.Value} {
		if c != nil && c.hasMetadata() {
			return true
		}
	}
	return false
}

// Equal reports whether two schemas are identical, annotations included.
func (s *Schema) Equal(o *Schema) bool {
	if s == nil || o == nil {
		return s == o
	}
	return slices.EqualFunc(s.Columns, o.Columns, Field.Equal) && maps.Equal(s.Metadata, o.Metadata)
}

// Equal reports whether two fields are identical.
func (f Field) Equal(o Field) bool {
	return f.Name == o.Name && f.Nullable == o.Nullable && maps.Equal(f.Metadata, o.Metadata) && f.Type.Equal(o.Type)
}

// Equal reports whether two types are identical.
func (t DataType) Equal(o DataType) bool {
	if t.Kind != o.Kind {
		return false
	}
	switch t.Kind {
	case TypeFixedBinary:
		return t.ByteWidth == o.ByteWidth
	case TypeTimestamp:
		return t.Unit == o.Unit && equalStringPtr(t.Timezone, o.Timezone)
	case TypeDecimal:
		return t.Precision == o.Precision && t.Scale == o.Scale
	case TypeStruct:
		return slices.EqualFunc(t.Fields, o.Fields, Field.Equal)
	case TypeList:
		return equalFieldPtr(t.Elem, o.Elem)
	case TypeMap:
		return equalFieldPtr(t.Key, o.Key) && equalFieldPtr(t.Value, o.Value) && t.KeysSorted == o.KeysSorted &&
			maps.Equal(t.EntriesMetadata, o.EntriesMetadata) && maps.Equal(t.NullValueMetadata, o.NullValueMetadata)
	case TypeOther:
		return t.Other == o.Other
	}
	return true
}

func equalStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func equalFieldPtr(a, b *Field) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// validate checks the rules the reference enforces on a logical schema:
// non-blank, unique names at every level and well-formed type parameters.
func (s *Schema) validate() error {
	if len(s.Columns) == 0 {
		return fmt.Errorf("schema has no columns")
	}
	return validateFields(s.Columns, "column")
}

func validateFields(fields []Field, what string) error {
	seen := make(map[string]bool, len(fields))
	for i := range fields {
		f := &fields[i]
		if isBlank(f.Name) {
			return fmt.Errorf("%s %d has a blank name", what, i)
		}
		if seen[f.Name] {
			return fmt.Errorf("duplicate %s name %q", what, f.Name)
		}
		seen[f.Name] = true
		if err := f.Type.validate(); err != nil {
			return fmt.Errorf("%s %q: %w", what, f.Name, err)
		}
	}
	return nil
}

func (t *DataType) validate() error {
	switch t.Kind {
	case TypeFixedBinary:
		if t.ByteWidth <= 0 {
			return fmt.Errorf("FixedBinary byte_width must be positive, found %d", t.ByteWidth)
		}
	case TypeTimestamp:
		if t.Unit != Millis && t.Unit != Micros && t.Unit != Nanos {
			return fmt.Errorf("unknown timestamp unit %q", t.Unit)
		}
	case TypeDecimal:
		if t.Precision < 1 || t.Precision > 76 || t.Scale < 0 || int(t.Scale) > int(t.Precision) {
			return fmt.Errorf("invalid Decimal(precision %d, scale %d)", t.Precision, t.Scale)
		}
	case TypeStruct:
		if len(t.Fields) == 0 {
			return fmt.Errorf("Struct has no fields")
		}
		return validateFields(t.Fields, "struct field")
	case TypeList:
		if t.Elem == nil || isBlank(t.Elem.Name) {
			return fmt.Errorf("List element needs a name")
		}
		return t.Elem.Type.validate()
	case TypeMap:
		if t.Key == nil {
			return fmt.Errorf("Map has no key")
		}
		if t.Key.Nullable {
			return fmt.Errorf("Map key must not be nullable")
		}
		if err := t.Key.Type.validate(); err != nil {
			return err
		}
		if t.Value != nil {
			return t.Value.Type.validate()
		}
	case TypeBool, TypeInt32, TypeInt64, TypeUInt64, TypeFloat32, TypeFloat64, TypeBinary, TypeUtf8, TypeInt96, TypeOther:
	default:
		return fmt.Errorf("unknown type kind %d", int(t.Kind))
	}
	return nil
}

func isBlank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' && r != '\v' && r != '\f' {
			return false
		}
	}
	return true
}
