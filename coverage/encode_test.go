package coverage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// A treemap holding only 0 and only math.MaxUint64, as the reference's
// serde tests spell them.
var (
	roaringZero = []byte{
		1, 0, 0, 0, 0, 0, 0, 0, // partitions
		0, 0, 0, 0, // key
		0x3a, 0x30, 0, 0, // cookie 12346
		1, 0, 0, 0, // containers
		0, 0, 0, 0, // key, cardinality-1
		16, 0, 0, 0, // offset
		0, 0, // value
	}
	roaringMax = []byte{
		1, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff, 0xff, 0xff,
		0x3a, 0x30, 0, 0,
		1, 0, 0, 0,
		0xff, 0xff, 0, 0,
		16, 0, 0, 0,
		0xff, 0xff,
	}
)

func mustEncode(t testing.TB, s *Set) []byte {
	t.Helper()
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeKnownPayloads(t *testing.T) {
	if got := mustEncode(t, NewGlobal()); !bytes.Equal(got, make([]byte, 8)) {
		t.Errorf("empty global = %x", got)
	}
	if got := mustEncode(t, NewEntity()); !bytes.Equal(got, []byte("TSTECOV2\x00\x00\x00\x00")) {
		t.Errorf("empty entity = %x", got)
	}
	g := NewGlobal()
	mustAdd(t, g, nil, math.MaxUint64, 0)
	want := append(append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, roaringZero[8:]...), roaringMax[8:]...)
	if got := mustEncode(t, g); !bytes.Equal(got, want) {
		t.Errorf("global {0, max} = %x\nwant %x", got, want)
	}

	// The reference's golden entity payload.
	s := NewEntity()
	mustAdd(t, s, Identity{Utf8("\u6771\u4eac"), Int32(-1), Int64(math.MinInt64), UInt64(math.MaxUint64)}, 0)
	want = []byte("TSTECOV2")
	want = append(want, 0, 0, 0, 1, 0, 0, 0, 4)
	want = append(want, 1, 0, 0, 0, 0, 0, 0, 0, 6, 0xe6, 0x9d, 0xb1, 0xe4, 0xba, 0xac)
	want = append(want, 2, 0xff, 0xff, 0xff, 0xff)
	want = append(want, 3, 0x80, 0, 0, 0, 0, 0, 0, 0)
	want = append(want, 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	want = append(want, 0, 0, 0, 0, 0, 0, 0, 30)
	want = append(want, roaringZero...)
	got := mustEncode(t, s)
	if !bytes.Equal(got, want) {
		t.Errorf("entity golden = %x\nwant %x", got, want)
	}
	back, err := Decode(want, true)
	if err != nil || !back.Equal(s) {
		t.Errorf("Decode(golden): %v", err)
	}
}

// Rebuild the reference's container-type decisions case by case.
func TestContainerChoice(t *testing.T) {
	nestedOf := func(ids ...uint64) []byte {
		s := NewEntity()
		mustAdd(t, s, ident("e"), ids...)
		b := mustEncode(t, s)
		return b[8+4+4+1+8+1+8:] // magic, count, components, tag, len, "e", nested len
	}
	seq := func(from, to uint64) []uint64 {
		var out []uint64
		for i := from; i <= to; i++ {
			out = append(out, i)
		}
		return out
	}
	cookie := func(b []byte) uint16 { return binary.LittleEndian.Uint16(b[12:]) }
	for _, c := range []struct {
		name string
		ids  []uint64
		run  bool
	}{
		{"1 value", []uint64{5}, false},
		{"2 consecutive", []uint64{5, 6}, false},
		{"3 consecutive (tie, starts as run)", []uint64{5, 6, 7}, true},
		{"first run 2, tie", []uint64{1, 2, 10, 11, 12}, false},
		{"first run 3, tie", []uint64{1, 2, 3, 10, 11}, true},
		{"4 consecutive", seq(20, 23), true},
		{"alternating", []uint64{1, 3, 5, 7, 9}, false},
		{"full container", seq(0, 0xFFFF), true},
		{"one run to the container end", seq(0x10000-5000, 0xFFFF), true},
		{"pairs over 4096", func() (o []uint64) {
			for i := range uint64(2250) {
				o = append(o, 3*i, 3*i+1)
			}
			return o
		}(), false},
	} {
		got := cookie(nestedOf(c.ids...)) == cookieRuns
		if got != c.run {
			t.Errorf("%s: run container = %v, want %v", c.name, got, c.run)
		}
	}
	// Global coverage never uses run containers.
	g := NewGlobal()
	mustAdd(t, g, nil, seq(0, 0xFFFF)...)
	if b := mustEncode(t, g); len(b) != 8+4+8+8+bitmapBytes || binary.LittleEndian.Uint16(b[12:]) != cookieNoRuns {
		t.Errorf("global full container: %d bytes", len(b))
	}
}

// Construction history (ranges, single adds, run optimization, removals)
// does not change the bytes.
func TestEncodingIsCanonical(t *testing.T) {
	build := func(viaRange, optimize bool) *Set {
		s := NewEntity()
		for _, id := range []Identity{ident("B"), ident("A")} {
			r := []Range{{1, 3}, {1<<32 + 1, 1<<32 + 5000}, {0xFFFE, 0x10003}}
			for _, rr := range r {
				if viaRange {
					if err := s.AddRange(id, rr); err != nil {
						t.Fatal(err)
					}
				} else {
					for x := rr.First; x <= rr.Last; x++ {
						mustAdd(t, s, id, x)
					}
				}
			}
			if optimize {
				s.Bitmap(id).RunOptimize()
			}
		}
		return s
	}
	a := mustEncode(t, build(false, false))
	for _, s := range []*Set{build(true, false), build(false, true), build(true, true)} {
		if b := mustEncode(t, s); !bytes.Equal(a, b) {
			t.Errorf("encoding depends on construction history")
		}
	}
	// An emptied partition is dropped.
	s := NewEntity()
	mustAdd(t, s, ident("x"), 1<<40, 3)
	s.Bitmap(ident("x")).Remove(1 << 40)
	t2 := NewEntity()
	mustAdd(t, t2, ident("x"), 3)
	if !bytes.Equal(mustEncode(t, s), mustEncode(t, t2)) {
		t.Error("empty partition is encoded")
	}
	g := NewGlobal()
	mustAdd(t, g, nil, 1<<40, 3)
	g.Bitmap(nil).Remove(1 << 40)
	g.Bitmap(nil).RunOptimize()
	g2 := NewGlobal()
	mustAdd(t, g2, nil, 3)
	if !bytes.Equal(mustEncode(t, g), mustEncode(t, g2)) {
		t.Error("global encoding depends on history")
	}
}

// Whatever the encoder writes for global coverage, roaring64 reads back.
func TestGlobalEncodingInteroperates(t *testing.T) {
	g := NewGlobal()
	if err := g.AddRange(nil, Range{100, 70_000}); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, g, nil, 0, 1<<33, math.MaxUint64)
	b := mustEncode(t, g)
	bm := roaring64.New()
	if _, err := bm.ReadFrom(bytes.NewReader(b)); err != nil || !bm.Equals(g.Bitmap(nil)) {
		t.Errorf("roaring64 ReadFrom: %v", err)
	}
}

func TestDecodeKeepsEmptyIdentities(t *testing.T) {
	s := NewEntity()
	if err := s.AddIdentity(ident("venue", "symbol")); err != nil {
		t.Fatal(err)
	}
	b := mustEncode(t, s)
	if bytes.Equal(b, mustEncode(t, NewEntity())) {
		t.Fatal("explicit empty identity not encoded")
	}
	back, err := Decode(b, true)
	if err != nil || back.Len() != 1 || !back.Has(ident("venue", "symbol")) || !back.Equal(s) {
		t.Errorf("Decode: %v, %d identities", err, back.Len())
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	s := NewEntity()
	mustAdd(t, s, ident("A"), 1)
	good := mustEncode(t, s)
	// Layout: magic 0-7, count 8-11, components 12-15, tag 16, len 17-24,
	// "A" 25, nested len 26-33, nested 34-...
	for end := range len(good) {
		if _, err := Decode(good[:end], true); !errors.Is(err, ErrMalformed) {
			t.Errorf("prefix of %d bytes: %v", end, err)
		}
	}
	patch := func(at int, p ...byte) []byte {
		b := bytes.Clone(good)
		copy(b[at:], p)
		return b
	}
	dup := bytes.Clone(good)
	binary.BigEndian.PutUint32(dup[8:], 2)
	dup = append(dup, good[12:]...)
	for name, b := range map[string][]byte{
		"magic":           patch(0, 0xff),
		"version 1":       patch(0, []byte("TSTECOV1")...),
		"count max":       patch(8, 0xff, 0xff, 0xff, 0xff),
		"no components":   patch(12, 0, 0, 0, 0),
		"components max":  patch(12, 0xff, 0xff, 0xff, 0xff),
		"string length":   patch(17, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"invalid utf8":    patch(25, 0xff),
		"unknown tag":     patch(16, 0xff),
		"tag zero":        patch(16, 0),
		"nested too long": patch(26, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"nested short":    patch(26, 0, 0, 0, 0, 0, 0, 0, 1),
		"trailing":        append(bytes.Clone(good), 0),
		"duplicate":       dup,
		"global bytes":    roaringZero,
	} {
		if _, err := Decode(b, true); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}

	g := NewGlobal()
	mustAdd(t, g, nil, 1, 2, 3, 1<<33)
	gb := mustEncode(t, g)
	gpatch := func(at int, p ...byte) []byte {
		b := bytes.Clone(gb)
		copy(b[at:], p)
		return b
	}
	for end := range len(gb) {
		if _, err := Decode(gb[:end], false); !errors.Is(err, ErrMalformed) {
			t.Errorf("global prefix of %d bytes: %v", end, err)
		}
	}
	twoEmpty := []byte{2, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0x3a, 0x30, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0x3a, 0x30, 0, 0, 0, 0, 0, 0}
	for name, b := range map[string][]byte{
		"not a roaring bitmap": []byte("not a roaring bitmap"),
		"entity bytes":         good,
		"trailing":             append(bytes.Clone(gb), 0),
		"two payloads":         append(mustEncode(t, NewGlobal()), roaringZero...),
		"bad cookie":           gpatch(12, 0x3b, 0x31),
		"absurd partitions":    gpatch(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
		"absurd containers":    gpatch(16, 0xff, 0xff, 0xff, 0x7f),
		"array unsorted":       gpatch(28, 3, 0, 2, 0),
		"array duplicate":      gpatch(28, 2, 0, 2, 0),
		"partitions unsorted":  twoEmpty,
	} {
		if _, err := Decode(b, false); !errors.Is(err, ErrMalformed) {
			t.Errorf("global %s: %v", name, err)
		}
	}

	// Run and bitmap containers.
	runs := []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3b, 0x30, 0, 0, 1, 0, 0, 3, 0, 2, 0, 1, 0, 1, 0, 10, 0, 1, 0}
	if s, err := Decode(runs, false); err != nil || s.Cardinality() != 4 || !s.Contains(nil, 11) {
		t.Fatalf("valid runs: %v", err)
	}
	bad := func(at int, p ...byte) []byte {
		b := bytes.Clone(runs)
		copy(b[at:], p)
		return b
	}
	for name, b := range map[string][]byte{
		"zero runs":         bad(21, 0, 0),
		"overlapping runs":  bad(27, 2, 0),
		"touching runs":     bad(27, 3, 0),
		"run past end":      bad(23, 0xff, 0xff, 0xff, 0xff),
		"cardinality wrong": bad(19, 5),
	} {
		if _, err := Decode(b, false); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	words := make([]byte, 8+4+8+8+bitmapBytes)
	words[12], words[13], words[16] = 0x3a, 0x30, 1
	binary.LittleEndian.PutUint16(words[22:], 4096) // cardinality 4097
	binary.LittleEndian.PutUint32(words[24:], 16)
	words[0] = 1
	for i := range 4097 {
		words[28+i/8] |= 1 << (i % 8)
	}
	if s, err := Decode(words, false); err != nil || s.Cardinality() != 4097 {
		t.Fatalf("valid bitmap container: %v", err)
	}
	words[28+5000/8] |= 1 << (5000 % 8)
	if _, err := Decode(words, false); !errors.Is(err, ErrMalformed) {
		t.Errorf("bitmap popcount mismatch: %v", err)
	}
}

// Identities in a payload may come in any order; re-encoding sorts them.
func TestDecodeUnsortedIdentities(t *testing.T) {
	a, b := NewEntity(), NewEntity()
	mustAdd(t, a, ident("A"), 1)
	mustAdd(t, b, ident("B"), 2)
	ab := mustEncode(t, a)
	bb := mustEncode(t, b)
	swapped := []byte("TSTECOV2\x00\x00\x00\x02")
	swapped = append(append(swapped, bb[12:]...), ab[12:]...)
	s, err := Decode(swapped, true)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := Union(a, b)
	if !s.Equal(u) || bytes.Equal(mustEncode(t, s), swapped) || !bytes.Equal(mustEncode(t, s), mustEncode(t, u)) {
		t.Error("unsorted identities not canonicalised")
	}
}
