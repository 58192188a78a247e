package coverage

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Tag identifies the type of an identity component. The values are the tags
// of the TSTECOV2 encoding and also give the component sort order.
type Tag uint8

// Component tags.
const (
	TagUtf8   Tag = 1
	TagInt32  Tag = 2
	TagInt64  Tag = 3
	TagUInt64 Tag = 4
)

// String returns the lower-case type name of the tag.
func (t Tag) String() string {
	switch t {
	case TagUtf8:
		return "utf8"
	case TagInt32:
		return "int32"
	case TagInt64:
		return "int64"
	case TagUInt64:
		return "uint64"
	default:
		return fmt.Sprintf("Tag(%d)", uint8(t))
	}
}

// ErrInvalidIdentity reports an empty identity or a malformed component.
var ErrInvalidIdentity = errors.New("coverage: invalid entity identity")

// Component is one typed value of an entity identity. Only the field that
// belongs to the tag is meaningful: Str for TagUtf8, Int for TagInt32 and
// TagInt64, Uint for TagUInt64. Int32 and Int64 components with the same
// number are different values.
type Component struct {
	Tag  Tag
	Str  string
	Int  int64
	Uint uint64
}

// Utf8 returns a string component.
func Utf8(s string) Component { return Component{Tag: TagUtf8, Str: s} }

// Int32 returns a 32-bit signed component.
func Int32(v int32) Component { return Component{Tag: TagInt32, Int: int64(v)} }

// Int64 returns a 64-bit signed component.
func Int64(v int64) Component { return Component{Tag: TagInt64, Int: v} }

// UInt64 returns a 64-bit unsigned component.
func UInt64(v uint64) Component { return Component{Tag: TagUInt64, Uint: v} }

// Validate checks the tag, that an Int32 value is in range and that a
// string is valid UTF-8.
func (c Component) Validate() error {
	switch c.Tag {
	case TagUtf8:
		if !utf8.ValidString(c.Str) {
			return fmt.Errorf("%w: string component is not valid UTF-8", ErrInvalidIdentity)
		}
	case TagInt32:
		if c.Int < math.MinInt32 || c.Int > math.MaxInt32 {
			return fmt.Errorf("%w: int32 component %d out of range", ErrInvalidIdentity, c.Int)
		}
	case TagInt64, TagUInt64:
	default:
		return fmt.Errorf("%w: unknown component tag %d", ErrInvalidIdentity, uint8(c.Tag))
	}
	return nil
}

// normalized returns c with the fields that do not belong to its tag zeroed.
func (c Component) normalized() Component {
	switch c.Tag {
	case TagUtf8:
		return Component{Tag: c.Tag, Str: c.Str}
	case TagInt32, TagInt64:
		return Component{Tag: c.Tag, Int: c.Int}
	default:
		return Component{Tag: c.Tag, Uint: c.Uint}
	}
}

// Compare orders components like the reference implementation: by tag
// first (Utf8 < Int32 < Int64 < UInt64), then by value; strings compare
// bytewise.
func (c Component) Compare(o Component) int {
	if c.Tag != o.Tag {
		return cmp.Compare(c.Tag, o.Tag)
	}
	switch c.Tag {
	case TagUtf8:
		return strings.Compare(c.Str, o.Str)
	case TagInt32, TagInt64:
		return cmp.Compare(c.Int, o.Int)
	default:
		return cmp.Compare(c.Uint, o.Uint)
	}
}

// String formats the component as tag:value, e.g. utf8:"NVDA" or int32:-7.
func (c Component) String() string {
	switch c.Tag {
	case TagUtf8:
		return "utf8:" + strconv.Quote(c.Str)
	case TagInt32, TagInt64:
		return c.Tag.String() + ":" + strconv.FormatInt(c.Int, 10)
	default:
		return c.Tag.String() + ":" + strconv.FormatUint(c.Uint, 10)
	}
}

// Identity is a complete entity identity: one component per entity column,
// in the table's entity-column order.
type Identity []Component

// Validate checks that the identity is non-empty and every component is
// valid.
func (id Identity) Validate() error {
	if len(id) == 0 {
		return fmt.Errorf("%w: no components", ErrInvalidIdentity)
	}
	for _, c := range id {
		if err := c.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Compare orders identities lexicographically by component; a proper prefix
// sorts first. This is the order of identities in TSTECOV2 payloads.
func (id Identity) Compare(o Identity) int {
	for i := range min(len(id), len(o)) {
		if c := id[i].Compare(o[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(id), len(o))
}

// Equal reports whether two identities have the same components.
func (id Identity) Equal(o Identity) bool {
	return len(id) == len(o) && id.Compare(o) == 0
}

// Clone returns a deep copy with irrelevant component fields zeroed.
// Strings are copied too: callers build identities from Arrow buffers that
// are released (or reused) after the batch, so a Set must own its keys.
func (id Identity) Clone() Identity {
	if id == nil {
		return nil
	}
	out := make(Identity, len(id))
	for i, c := range id {
		out[i] = c.normalized()
		out[i].Str = strings.Clone(out[i].Str)
	}
	return out
}

// String formats the identity as [c1, c2, ...].
func (id Identity) String() string {
	parts := make([]string, len(id))
	for i, c := range id {
		parts[i] = c.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Key returns a compact string that is equal for two identities exactly when
// they are Equal, suitable as a map key. It is not ordered like Compare.
func (id Identity) Key() string { return string(id.appendKey(nil)) }

// AppendKey appends Key's bytes to b: a map lookup with string(b) then
// costs no allocation.
func (id Identity) AppendKey(b []byte) []byte { return id.appendKey(b) }

// appendKey appends the key encoding: per component the tag byte, then a
// uvarint length and the bytes (Utf8) or the 8-byte value (the integer tags;
// Int32 uses all 8 bytes so an out-of-range value never aliases a valid one).
// The encoding is prefix-free, so concatenation is unambiguous.
func (id Identity) appendKey(b []byte) []byte {
	for _, c := range id {
		b = append(b, byte(c.Tag))
		switch c.Tag {
		case TagUtf8:
			b = binary.AppendUvarint(b, uint64(len(c.Str)))
			b = append(b, c.Str...)
		case TagInt32, TagInt64:
			b = binary.BigEndian.AppendUint64(b, uint64(c.Int))
		default:
			b = binary.BigEndian.AppendUint64(b, c.Uint)
		}
	}
	return b
}
