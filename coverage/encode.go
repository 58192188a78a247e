package coverage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// ErrMalformed reports bytes that are not a valid coverage sidecar.
var ErrMalformed = errors.New("coverage: malformed coverage bytes")

// entityMagic starts every entity coverage payload.
const entityMagic = "TSTECOV2"

// Smallest encodings, used to bound counts by the input length before
// allocating: a component is at least a tag and an int32; an identity entry
// is a component count, one component, a nested length and an empty nested
// bitmap (its u64 partition count).
const (
	minComponentBytes = 1 + 4
	minEntityBytes    = 4 + minComponentBytes + 8 + 8
)

// Encode serializes s exactly as the reference writes it.
//
// A global set becomes a RoaringTreemap serialization with array containers
// up to 4096 values and bitmap containers above, never run containers (the
// reference builds global coverage one id at a time and never optimizes
// it). An entity set becomes a TSTECOV2 payload: identities in canonical
// order, each followed by its canonicalised nested treemap (see
// container.choice). Equal sets always give equal bytes.
//
// Like the reference's, the global encoding spends 8 KiB on every 2^16-id
// block holding more than 4096 ids, however regular; a global set built
// with AddRange over billions of ids encodes to gigabytes.
func (s *Set) Encode() ([]byte, error) {
	if !s.entity {
		parts, err := partitionsOf(s.global)
		if err != nil {
			return nil, err
		}
		return appendTreemap(nil, parts, layoutGlobal), nil
	}
	es := s.sortedEntries()
	if uint64(len(es)) > math.MaxUint32 {
		return nil, fmt.Errorf("coverage: %d identities do not fit the format", len(es))
	}
	out := append([]byte(nil), entityMagic...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(es)))
	for _, e := range es {
		out = binary.BigEndian.AppendUint32(out, uint32(len(e.ident)))
		for _, c := range e.ident {
			out = append(out, byte(c.Tag))
			switch c.Tag {
			case TagUtf8:
				out = binary.BigEndian.AppendUint64(out, uint64(len(c.Str)))
				out = append(out, c.Str...)
			case TagInt32:
				out = binary.BigEndian.AppendUint32(out, uint32(int32(c.Int)))
			case TagInt64:
				out = binary.BigEndian.AppendUint64(out, uint64(c.Int))
			default:
				out = binary.BigEndian.AppendUint64(out, c.Uint)
			}
		}
		parts, err := partitionsOf(e.bm)
		if err != nil {
			return nil, err
		}
		lenAt := len(out)
		out = binary.BigEndian.AppendUint64(out, 0)
		out = appendTreemap(out, parts, layoutEntity)
		binary.BigEndian.PutUint64(out[lenAt:], uint64(len(out)-lenAt-8))
	}
	return out, nil
}

// Decode parses a coverage sidecar: a TSTECOV2 payload when entity is set
// (tables with entity columns), a RoaringTreemap serialization otherwise.
//
// Decode accepts what the reference accepts, with these deliberate
// exceptions: partition keys must be strictly increasing, and a run
// container's declared cardinality must match its runs (the reference
// ignores it). Identities may appear in any order but not twice. Empty
// partitions are dropped; identities with empty coverage are kept. Any
// malformation, including truncation and trailing bytes, is ErrMalformed.
// Decode never panics, and allocates at most a small multiple of len(data)
// (plus a fixed 8 KiB per bitmap container, each of which takes 8 KiB of
// input).
func Decode(data []byte, entity bool) (*Set, error) {
	if !entity {
		parts, err := parseTreemap(data)
		if err != nil {
			return nil, err
		}
		bm, err := bitmapOf(parts)
		if err != nil {
			return nil, err
		}
		return &Set{global: bm}, nil
	}

	r := &reader{b: data}
	magic, err := r.take(len(entityMagic))
	if err != nil {
		return nil, err
	}
	if string(magic) != entityMagic {
		return nil, r.fail("not an entity coverage payload (magic %q)", magic)
	}
	count, err := r.be32()
	if err != nil {
		return nil, err
	}
	if uint64(count) > uint64(r.remaining()/minEntityBytes) {
		return nil, r.fail("identity count %d exceeds what %d bytes can hold", count, r.remaining())
	}
	s := &Set{entity: true, byKey: make(map[string]*entry, count)}
	for range count {
		ident, err := readIdentity(r)
		if err != nil {
			return nil, err
		}
		key := ident.Key()
		if _, dup := s.byKey[key]; dup {
			return nil, r.fail("identity %v appears twice", ident)
		}
		nested, err := r.lengthPrefixed("nested coverage")
		if err != nil {
			return nil, err
		}
		parts, err := parseTreemap(nested)
		if err != nil {
			return nil, fmt.Errorf("identity %v: %w", ident, err)
		}
		bm, err := bitmapOf(parts)
		if err != nil {
			return nil, err
		}
		s.byKey[key] = &entry{ident: ident, bm: bm}
	}
	if r.remaining() != 0 {
		return nil, r.fail("%d trailing bytes", r.remaining())
	}
	return s, nil
}

func readIdentity(r *reader) (Identity, error) {
	n, err := r.be32()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, r.fail("identity with no components")
	}
	// Besides its components an entry needs a nested length and at least an
	// empty nested bitmap: 16 bytes.
	if uint64(n) > uint64(max(r.remaining()-16, 0))/minComponentBytes {
		return nil, r.fail("component count %d exceeds what %d bytes can hold", n, r.remaining())
	}
	ident := make(Identity, n)
	for i := range ident {
		tag, err := r.u8()
		if err != nil {
			return nil, err
		}
		c := Component{Tag: Tag(tag)}
		switch c.Tag {
		case TagUtf8:
			p, err := r.lengthPrefixed("string")
			if err != nil {
				return nil, err
			}
			if !utf8.Valid(p) {
				return nil, r.fail("identity string is not valid UTF-8")
			}
			c.Str = string(p)
		case TagInt32:
			v, err := r.take(4)
			if err != nil {
				return nil, err
			}
			c.Int = int64(int32(binary.BigEndian.Uint32(v)))
		case TagInt64:
			v, err := r.be64()
			if err != nil {
				return nil, err
			}
			c.Int = int64(v)
		case TagUInt64:
			if c.Uint, err = r.be64(); err != nil {
				return nil, err
			}
		default:
			return nil, r.fail("unknown identity component tag %d", tag)
		}
		ident[i] = c
	}
	return ident, nil
}
