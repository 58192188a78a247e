package tableformat

import (
	"encoding/json"
	"fmt"
)

// JSON forms of the logical schema, exactly as the reference writes them.

// MarshalJSON writes the schema as the reference does: "columns", then
// "metadata" only when it is not empty.
func (s Schema) MarshalJSON() ([]byte, error) { return s.appendJSON(nil), nil }

func (s *Schema) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, "columns")
	b = appendFields(b, s.Columns)
	if len(s.Metadata) > 0 {
		b = appendKey(b, "metadata")
		b = appendStringMap(b, s.Metadata)
	}
	return append(b, '}')
}

func appendFields(b []byte, fields []Field) []byte {
	b = append(b, '[')
	for i := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = fields[i].appendJSON(b)
	}
	return append(b, ']')
}

// MarshalJSON writes a LogicalField.
func (f Field) MarshalJSON() ([]byte, error) { return f.appendJSON(nil), nil }

func (f *Field) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, "name")
	b = appendString(b, f.Name)
	b = appendKey(b, "data_type")
	b = f.Type.appendJSON(b)
	b = appendKey(b, "nullable")
	b = strconvBool(b, f.Nullable)
	if len(f.Metadata) > 0 {
		b = appendKey(b, "metadata")
		b = appendStringMap(b, f.Metadata)
	}
	return append(b, '}')
}

func strconvBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// MarshalJSON writes a LogicalDataType, externally tagged.
func (t DataType) MarshalJSON() ([]byte, error) {
	if _, ok := typeNames[t.Kind]; !ok {
		return nil, fmt.Errorf("cannot encode unknown type kind %d", int(t.Kind))
	}
	return t.appendJSON(nil), nil
}

func (t *DataType) appendJSON(b []byte) []byte {
	name := t.Kind.String()
	switch t.Kind {
	case TypeFixedBinary, TypeTimestamp, TypeDecimal, TypeStruct, TypeList, TypeMap:
		// {"<name>":{<parameters>}}
		b = append(b, '{')
		b = appendKey(b, name)
		b = append(b, '{')
		b = t.appendParams(b)
		return append(b, '}', '}')
	case TypeOther:
		b = append(b, '{')
		b = appendKey(b, name)
		b = appendString(b, t.Other)
		return append(b, '}')
	}
	return appendString(b, name)
}

// appendParams appends the members of a parameterised type's object.
func (t *DataType) appendParams(b []byte) []byte {
	switch t.Kind {
	case TypeFixedBinary:
		b = appendKey(b, "byte_width")
		b = fmt.Appendf(b, "%d", t.ByteWidth)
	case TypeTimestamp:
		b = appendKey(b, "unit")
		b = appendString(b, string(t.Unit))
		b = appendKey(b, "timezone")
		if t.Timezone == nil {
			b = append(b, "null"...)
		} else {
			b = appendString(b, *t.Timezone)
		}
	case TypeDecimal:
		b = appendKey(b, "precision")
		b = fmt.Appendf(b, "%d", t.Precision)
		b = appendKey(b, "scale")
		b = fmt.Appendf(b, "%d", t.Scale)
	case TypeStruct:
		b = appendKey(b, "fields")
		b = appendFields(b, t.Fields)
	case TypeList:
		b = appendKey(b, "elements")
		b = t.Elem.appendJSON(b)
	case TypeMap:
		b = appendKey(b, "key")
		b = t.Key.appendJSON(b)
		b = appendKey(b, "value")
		if t.Value == nil {
			b = append(b, "null"...)
		} else {
			b = t.Value.appendJSON(b)
		}
		b = appendKey(b, "keys_sorted")
		b = strconvBool(b, t.KeysSorted)
		if len(t.EntriesMetadata) > 0 {
			b = appendKey(b, "entries_metadata")
			b = appendStringMap(b, t.EntriesMetadata)
		}
		if len(t.NullValueMetadata) > 0 {
			b = appendKey(b, "null_value_metadata")
			b = appendStringMap(b, t.NullValueMetadata)
		}
	}
	return b
}

// UnmarshalJSON reads a LogicalSchema.
func (s *Schema) UnmarshalJSON(data []byte) error {
	o, err := decodeObject(data)
	if err != nil {
		return fmt.Errorf("logical_schema: %w", err)
	}
	raw, err := o.need("columns")
	if err != nil {
		return fmt.Errorf("logical_schema: %w", err)
	}
	if s.Columns, err = decodeFields(raw); err != nil {
		return fmt.Errorf("logical_schema: %w", err)
	}
	if s.Metadata, err = decodeStringMap(o.get("metadata")); err != nil {
		return fmt.Errorf("logical_schema: %w", err)
	}
	return nil
}

func decodeFields(raw json.RawMessage) ([]Field, error) {
	items, err := decodeArray(raw)
	if err != nil {
		return nil, err
	}
	out := make([]Field, len(items))
	for i, it := range items {
		if err := out[i].UnmarshalJSON(it); err != nil {
			return nil, fmt.Errorf("field %d: %w", i, err)
		}
	}
	return out, nil
}

// UnmarshalJSON reads a LogicalField; "nullable" is required.
func (f *Field) UnmarshalJSON(data []byte) error {
	o, err := decodeObject(data)
	if err != nil {
		return err
	}
	raw, err := o.need("name")
	if err != nil {
		return err
	}
	if f.Name, err = decodeString(raw); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if raw, err = o.need("data_type"); err != nil {
		return fmt.Errorf("field %q: %w", f.Name, err)
	}
	if err := f.Type.UnmarshalJSON(raw); err != nil {
		return fmt.Errorf("field %q: data_type: %w", f.Name, err)
	}
	if raw, err = o.need("nullable"); err != nil {
		return fmt.Errorf("field %q: %w", f.Name, err)
	}
	if f.Nullable, err = decodeBool(raw); err != nil {
		return fmt.Errorf("field %q: nullable: %w", f.Name, err)
	}
	if f.Metadata, err = decodeStringMap(o.get("metadata")); err != nil {
		return fmt.Errorf("field %q: %w", f.Name, err)
	}
	return nil
}

// UnmarshalJSON reads a LogicalDataType.
func (t *DataType) UnmarshalJSON(data []byte) error {
	*t = DataType{}
	if s, err := decodeString(data); err == nil {
		for k, n := range typeNames {
			if n == s {
				switch k {
				case TypeFixedBinary, TypeTimestamp, TypeDecimal, TypeStruct, TypeList, TypeMap, TypeOther:
					return fmt.Errorf("type %q needs parameters", s)
				}
				t.Kind = k
				return nil
			}
		}
		return fmt.Errorf("unknown data type %q", s)
	}
	o, err := decodeObject(data)
	if err != nil {
		return fmt.Errorf("expected a type name or a tagged object: %w", err)
	}
	name, body, err := o.single()
	if err != nil {
		return err
	}
	if name == "Other" {
		t.Kind = TypeOther
		t.Other, err = decodeString(body)
		return err
	}
	p, err := decodeObject(body)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	switch name {
	case "FixedBinary":
		t.Kind = TypeFixedBinary
		raw, err := p.need("byte_width")
		if err != nil {
			return fmt.Errorf("FixedBinary: %w", err)
		}
		w, err := decodeInt(raw, 32)
		if err != nil {
			return fmt.Errorf("FixedBinary byte_width: %w", err)
		}
		t.ByteWidth = int32(w)
	case "Timestamp":
		t.Kind = TypeTimestamp
		raw, err := p.need("unit")
		if err != nil {
			return fmt.Errorf("Timestamp: %w", err)
		}
		u, err := decodeString(raw)
		if err != nil {
			return fmt.Errorf("Timestamp unit: %w", err)
		}
		t.Unit = TimeUnit(u)
		if t.Unit != Millis && t.Unit != Micros && t.Unit != Nanos {
			return fmt.Errorf("Timestamp: unknown unit %q", u)
		}
		raw, err = p.need("timezone")
		if err != nil {
			return fmt.Errorf("Timestamp: %w", err)
		}
		if !isNull(raw) {
			tz, err := decodeString(raw)
			if err != nil {
				return fmt.Errorf("Timestamp timezone: %w", err)
			}
			t.Timezone = &tz
		}
	case "Decimal":
		t.Kind = TypeDecimal
		raw, err := p.need("precision")
		if err != nil {
			return fmt.Errorf("Decimal: %w", err)
		}
		prec, err := decodeUint(raw, 8)
		if err != nil {
			return fmt.Errorf("Decimal precision: %w", err)
		}
		if raw, err = p.need("scale"); err != nil {
			return fmt.Errorf("Decimal: %w", err)
		}
		scale, err := decodeInt(raw, 8)
		if err != nil {
			return fmt.Errorf("Decimal scale: %w", err)
		}
		t.Precision, t.Scale = uint8(prec), int8(scale)
	case "Struct":
		t.Kind = TypeStruct
		raw, err := p.need("fields")
		if err != nil {
			return fmt.Errorf("Struct: %w", err)
		}
		if t.Fields, err = decodeFields(raw); err != nil {
			return fmt.Errorf("Struct: %w", err)
		}
	case "List":
		t.Kind = TypeList
		raw, err := p.need("elements")
		if err != nil {
			return fmt.Errorf("List: %w", err)
		}
		t.Elem = new(Field)
		if err := t.Elem.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("List elements: %w", err)
		}
	case "Map":
		t.Kind = TypeMap
		raw, err := p.need("key")
		if err != nil {
			return fmt.Errorf("Map: %w", err)
		}
		t.Key = new(Field)
		if err := t.Key.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("Map key: %w", err)
		}
		if raw := p.get("value"); raw != nil && !isNull(raw) {
			t.Value = new(Field)
			if err := t.Value.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("Map value: %w", err)
			}
		}
		if raw := p.get("keys_sorted"); raw != nil {
			if t.KeysSorted, err = decodeBool(raw); err != nil {
				return fmt.Errorf("Map keys_sorted: %w", err)
			}
		} else {
			return fmt.Errorf("Map: missing field \"keys_sorted\"")
		}
		if t.EntriesMetadata, err = decodeStringMap(p.get("entries_metadata")); err != nil {
			return fmt.Errorf("Map entries_metadata: %w", err)
		}
		if t.NullValueMetadata, err = decodeStringMap(p.get("null_value_metadata")); err != nil {
			return fmt.Errorf("Map null_value_metadata: %w", err)
		}
	default:
		return fmt.Errorf("unknown data type %q", name)
	}
	return nil
}
