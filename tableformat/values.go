package tableformat

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// IndexValue is one value of the ordered index: a timestamp, an int64 or a
// uint64. On disk it is adjacently tagged, {"type":…,"value":…}, with the
// tags "timestamp", "int64" and "u_int64" (sic: serde's snake case of
// UInt64; the index kind says "uint64").
type IndexValue struct {
	Type IndexType
	Time time.Time // IndexTimestamp, in UTC
	Int  int64     // IndexInt64
	Uint uint64    // IndexUInt64
}

// TimeValue returns a timestamp index value.
func TimeValue(t time.Time) IndexValue { return IndexValue{Type: IndexTimestamp, Time: t.UTC()} }

// Int64Value returns an int64 index value.
func Int64Value(v int64) IndexValue { return IndexValue{Type: IndexInt64, Int: v} }

// Uint64Value returns a uint64 index value.
func Uint64Value(v uint64) IndexValue { return IndexValue{Type: IndexUInt64, Uint: v} }

// Compare orders two values of the same type (-1, 0, +1). Values of
// different types compare by type name, which only matters for sorting
// corrupt input deterministically.
func (v IndexValue) Compare(o IndexValue) int {
	if v.Type != o.Type {
		return strings.Compare(string(v.Type), string(o.Type))
	}
	switch v.Type {
	case IndexTimestamp:
		return v.Time.Compare(o.Time)
	case IndexInt64:
		return cmp.Compare(v.Int, o.Int)
	default:
		return cmp.Compare(v.Uint, o.Uint)
	}
}

// String renders the value in its own units (RFC 3339 for timestamps).
func (v IndexValue) String() string {
	switch v.Type {
	case IndexTimestamp:
		return formatTime(v.Time)
	case IndexInt64:
		return strconv.FormatInt(v.Int, 10)
	default:
		return strconv.FormatUint(v.Uint, 10)
	}
}

// MarshalJSON writes the adjacently tagged form.
func (v IndexValue) MarshalJSON() ([]byte, error) { return v.appendJSON(nil), nil }

func (v *IndexValue) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, "type")
	switch v.Type {
	case IndexTimestamp:
		b = appendString(b, "timestamp")
		b = appendKey(b, "value")
		b = append(b, '"')
		b = appendTime(b, v.Time)
		b = append(b, '"')
	case IndexInt64:
		b = appendString(b, "int64")
		b = appendKey(b, "value")
		b = strconv.AppendInt(b, v.Int, 10)
	default:
		b = appendString(b, "u_int64")
		b = appendKey(b, "value")
		b = strconv.AppendUint(b, v.Uint, 10)
	}
	return append(b, '}')
}

// UnmarshalJSON reads the adjacently tagged form strictly.
func (v *IndexValue) UnmarshalJSON(data []byte) error {
	*v = IndexValue{}
	t, val, err := decodeTagged(data)
	if err != nil {
		return err
	}
	switch t {
	case "timestamp":
		v.Type = IndexTimestamp
		v.Time, err = decodeTime(val)
	case "int64":
		v.Type = IndexInt64
		v.Int, err = decodeInt(val, 64)
	case "u_int64":
		v.Type = IndexUInt64
		v.Uint, err = decodeUint(val, 64)
	default:
		return fmt.Errorf("unknown index value type %q", t)
	}
	if err != nil {
		return fmt.Errorf("%s value: %w", t, err)
	}
	return nil
}

// decodeTagged reads an adjacently tagged value {"type": …, "value": …}
// and refuses any other member, as serde's deny_unknown_fields does.
func decodeTagged(data []byte) (string, json.RawMessage, error) {
	o, err := decodeObject(data)
	if err != nil {
		return "", nil, err
	}
	raw, err := o.need("type")
	if err != nil {
		return "", nil, err
	}
	t, err := decodeString(raw)
	if err != nil {
		return "", nil, fmt.Errorf("type: %w", err)
	}
	val, err := o.need("value")
	if err != nil {
		return "", nil, err
	}
	return t, val, o.unknown()
}

// EntityType is the type of one identity component.
type EntityType uint8

// The identity component types, in the order the reference sorts them (and
// numbers them in TSTECOV2 sidecars). NB: on-disk tags; must not change.
const (
	EntityUtf8   EntityType = 1
	EntityInt32  EntityType = 2
	EntityInt64  EntityType = 3
	EntityUInt64 EntityType = 4
)

var entityTags = map[EntityType]string{EntityUtf8: "utf8", EntityInt32: "int32", EntityInt64: "int64", EntityUInt64: "uint64"}

func (t EntityType) String() string {
	if s, ok := entityTags[t]; ok {
		return s
	}
	return fmt.Sprintf("EntityType(%d)", uint8(t))
}

// EntityValue is one component of an entity identity. Int32, Int64 and
// UInt64 components are distinct even for equal numbers.
type EntityValue struct {
	Type EntityType
	Str  string // EntityUtf8
	Int  int64  // EntityInt32, EntityInt64
	Uint uint64 // EntityUInt64
}

// Compare orders components as the reference does: by type tag, then value.
func (e EntityValue) Compare(o EntityValue) int {
	if c := cmp.Compare(e.Type, o.Type); c != 0 {
		return c
	}
	switch e.Type {
	case EntityUtf8:
		return strings.Compare(e.Str, o.Str)
	case EntityUInt64:
		return cmp.Compare(e.Uint, o.Uint)
	default:
		return cmp.Compare(e.Int, o.Int)
	}
}

func (e EntityValue) String() string {
	switch e.Type {
	case EntityUtf8:
		return e.Str
	case EntityUInt64:
		return strconv.FormatUint(e.Uint, 10)
	default:
		return strconv.FormatInt(e.Int, 10)
	}
}

// Identity is a complete entity identity: one component per entity column,
// in the order of the index spec's entity columns.
type Identity []EntityValue

// Compare orders identities lexicographically by component.
func (id Identity) Compare(o Identity) int { return slices.CompareFunc(id, o, EntityValue.Compare) }

func (id Identity) String() string {
	parts := make([]string, len(id))
	for i, c := range id {
		parts[i] = c.String()
	}
	return strings.Join(parts, "/")
}

func (e *EntityValue) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, "type")
	b = appendString(b, entityTags[e.Type])
	b = appendKey(b, "value")
	switch e.Type {
	case EntityUtf8:
		b = appendString(b, e.Str)
	case EntityUInt64:
		b = strconv.AppendUint(b, e.Uint, 10)
	default:
		b = strconv.AppendInt(b, e.Int, 10)
	}
	return append(b, '}')
}

// MarshalJSON writes the adjacently tagged component.
func (e EntityValue) MarshalJSON() ([]byte, error) {
	if _, ok := entityTags[e.Type]; !ok {
		return nil, fmt.Errorf("cannot encode entity type %d", e.Type)
	}
	return e.appendJSON(nil), nil
}

// UnmarshalJSON reads an adjacently tagged component strictly.
func (e *EntityValue) UnmarshalJSON(data []byte) error {
	*e = EntityValue{}
	t, val, err := decodeTagged(data)
	if err != nil {
		return err
	}
	switch t {
	case "utf8":
		e.Type = EntityUtf8
		e.Str, err = decodeString(val)
	case "int32":
		e.Type = EntityInt32
		e.Int, err = decodeInt(val, 32)
	case "int64":
		e.Type = EntityInt64
		e.Int, err = decodeInt(val, 64)
	case "uint64":
		e.Type = EntityUInt64
		e.Uint, err = decodeUint(val, 64)
	default:
		return fmt.Errorf("unknown entity value type %q", t)
	}
	if err != nil {
		return fmt.Errorf("%s value: %w", t, err)
	}
	return nil
}

// LayoutKind says how many identities a segment holds.
type LayoutKind string

// The entity layouts. NB: on-disk names; must not change.
const (
	// LayoutNotApplicable: the table has no entity columns.
	LayoutNotApplicable LayoutKind = "NotApplicable"
	// LayoutSingle: every row of the segment has the same identity.
	LayoutSingle LayoutKind = "Single"
	// LayoutMixed: the segment holds more than one identity.
	LayoutMixed LayoutKind = "Mixed"
)

// EntityLayout is a segment's entity layout; Identity is set for Single.
type EntityLayout struct {
	Kind     LayoutKind
	Identity Identity
}

// MarshalJSON writes "NotApplicable", "Mixed" or {"Single":[…]}.
func (l EntityLayout) MarshalJSON() ([]byte, error) { return l.appendJSON(nil), nil }

func (l *EntityLayout) appendJSON(b []byte) []byte {
	if l.Kind != LayoutSingle {
		return appendString(b, string(l.Kind))
	}
	b = append(b, '{')
	b = appendKey(b, "Single")
	b = append(b, '[')
	for i := range l.Identity {
		if i > 0 {
			b = append(b, ',')
		}
		b = l.Identity[i].appendJSON(b)
	}
	return append(b, ']', '}')
}

// UnmarshalJSON reads an entity layout.
func (l *EntityLayout) UnmarshalJSON(data []byte) error {
	*l = EntityLayout{}
	if s, err := decodeString(data); err == nil {
		switch LayoutKind(s) {
		case LayoutNotApplicable, LayoutMixed:
			l.Kind = LayoutKind(s)
			return nil
		}
		return fmt.Errorf("unknown entity layout %q", s)
	}
	o, err := decodeObject(data)
	if err != nil {
		return fmt.Errorf("entity layout: %w", err)
	}
	name, raw, err := o.single()
	if err != nil {
		return fmt.Errorf("entity layout: %w", err)
	}
	if name != string(LayoutSingle) {
		return fmt.Errorf("unknown entity layout %q", name)
	}
	items, err := decodeArray(raw)
	if err != nil {
		return fmt.Errorf("Single: %w", err)
	}
	if len(items) == 0 {
		return fmt.Errorf("Single: identity is empty")
	}
	l.Kind = LayoutSingle
	l.Identity = make(Identity, len(items))
	for i, it := range items {
		if err := l.Identity[i].UnmarshalJSON(it); err != nil {
			return fmt.Errorf("Single component %d: %w", i, err)
		}
	}
	return nil
}
