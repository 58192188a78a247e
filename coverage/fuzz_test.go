package coverage

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// ---------------------------------------------------------------------------
// (a) Queries against a []bool oracle.

const fuzzUniverse = 4096

// fuzzBases places the small universe at interesting points of the id space:
// container and partition boundaries and both ends.
var fuzzBases = []uint64{0, 1<<16 - 1000, 1<<32 - 2000, 1 << 63, math.MaxUint64 - fuzzUniverse + 1}

// buildFuzzSets turns spec into the coverage of two identities, as
// alternating (gap, run) byte pairs; the gap byte's top bit picks the
// identity, and run bytes >= 200 make long runs.
func buildFuzzSets(spec []byte, base uint64) (oracle [2][]bool, s *Set) {
	s = NewEntity()
	ids := [2]Identity{ident("A"), ident("B")}
	var cursor [2]int
	for k := range oracle {
		oracle[k] = make([]bool, fuzzUniverse)
		_ = s.AddIdentity(ids[k])
	}
	for i := 0; i+1 < len(spec); i += 2 {
		k := int(spec[i] >> 7)
		gap, run := int(spec[i]&0x7f), int(spec[i+1])
		if run >= 200 {
			run = (run - 199) * 40
		}
		start := cursor[k] + gap
		for x := start; x < start+run && x < fuzzUniverse; x++ {
			oracle[k][x] = true
			_, _ = s.Add(ids[k], base+uint64(x))
		}
		cursor[k] = start + run
	}
	return oracle, s
}

func oracleGaps(o []bool, first, last int) []Range {
	var out []Range
	for x := first; x <= last; x++ {
		if o[x] {
			continue
		}
		y := x
		for y+1 <= last && !o[y+1] {
			y++
		}
		out = append(out, Range{uint64(x), uint64(y)})
		x = y
	}
	return out
}

func oracleLastWindow(o []bool, end, n int) (Range, bool) {
	if n == 0 {
		return Range{}, false
	}
	for x := end; x >= 0; x-- {
		if !o[x] {
			continue
		}
		y := x
		for y-1 >= 0 && o[y-1] {
			y--
		}
		if x-y+1 >= n {
			return Range{uint64(x - n + 1), uint64(x)}, true
		}
		x = y
	}
	return Range{}, false
}

func shiftRanges(rs []Range, base uint64) []Range {
	out := make([]Range, len(rs))
	for i, r := range rs {
		out[i] = Range{r.First + base, r.Last + base}
	}
	return out
}

func checkViewAgainstOracle(t *testing.T, name string, v View, o []bool, base uint64, first, last, end, n, limit int) {
	r := Range{base + uint64(first), base + uint64(last)}
	want := 0
	for x := first; x <= last; x++ {
		if o[x] {
			want++
		}
	}
	if st, err := v.Stats(r); err != nil || st.Covered != uint64(want) || st.Expected != CountOf(uint64(last-first+1)) {
		t.Fatalf("%s: Stats(%v) = %+v, %v; want %d covered", name, r, st, err, want)
	}
	wantGaps := shiftRanges(oracleGaps(o, first, last), base)
	gaps, err := v.Gaps(r, 0)
	if err != nil || !slices.Equal(gaps, wantGaps) {
		t.Fatalf("%s: Gaps(%v) = %v, %v; want %v", name, r, gaps, err, wantGaps)
	}
	if limit > 0 && len(wantGaps) > limit {
		wantGaps = wantGaps[:limit]
	}
	if gaps, _ := v.Gaps(r, limit); !slices.Equal(gaps, wantGaps) {
		t.Fatalf("%s: Gaps(%v, %d) = %v; want %v", name, r, limit, gaps, wantGaps)
	}
	var longest Range
	found := false
	for _, g := range shiftRanges(oracleGaps(o, first, last), base) {
		if !found || g.Last-g.First > longest.Last-longest.First {
			longest, found = g, true
		}
	}
	if g, ok, err := v.LongestGap(r); err != nil || ok != found || g != longest {
		t.Fatalf("%s: LongestGap(%v) = %v, %v, %v; want %v, %v", name, r, g, ok, err, longest, found)
	}
	ww, wok := oracleLastWindow(o, end, n)
	if wok {
		ww = Range{ww.First + base, ww.Last + base}
	}
	if w, ok := v.LastWindow(base+uint64(end), uint64(n)); ok != wok || w != ww {
		t.Fatalf("%s: LastWindow(%d, %d) = %v, %v; want %v, %v", name, base+uint64(end), n, w, ok, ww, wok)
	}
}

func FuzzQueries(f *testing.F) {
	f.Add([]byte{3, 5, 0x81, 7, 2, 250, 0x80, 210, 10, 1, 0, 1}, uint8(0), uint16(0), uint16(600), uint16(500), uint16(4), uint8(0))
	f.Add([]byte{0, 255, 1, 255, 0x80, 255}, uint8(3), uint16(100), uint16(4095), uint16(4095), uint16(41), uint8(2))
	f.Add([]byte{}, uint8(4), uint16(0), uint16(4095), uint16(4095), uint16(1), uint8(1))
	f.Fuzz(func(t *testing.T, spec []byte, where uint8, a, b, end, n uint16, limit uint8) {
		base := fuzzBases[int(where)%len(fuzzBases)]
		oracle, s := buildFuzzSets(spec, base)
		first, last := int(a)%fuzzUniverse, int(b)%fuzzUniverse
		if first > last {
			first, last = last, first
		}
		e, nn, lim := int(end)%fuzzUniverse, int(n)%300, int(limit%5)
		for k, id := range []Identity{ident("A"), ident("B")} {
			v, err := s.View(id)
			if err != nil {
				t.Fatal(err)
			}
			checkViewAgainstOracle(t, id.String(), v, oracle[k], base, first, last, e, nn, lim)
		}
		both := make([]bool, fuzzUniverse)
		for x := range both {
			both[x] = oracle[0][x] && oracle[1][x]
		}
		checkViewAgainstOracle(t, "all", s.ViewAll(), both, base, first, last, e, nn, lim)
		// Aggregate stats are the sum over identities.
		st, err := s.Stats(Range{base + uint64(first), base + uint64(last)})
		var want uint64
		for x := first; x <= last; x++ {
			for k := range oracle {
				if oracle[k][x] {
					want++
				}
			}
		}
		if err != nil || st.Covered != want || st.Expected != CountOf(2*uint64(last-first+1)) {
			t.Fatalf("aggregate Stats = %+v, %v; want %d", st, err, want)
		}
		// A global set with identity A's coverage answers the same.
		g := NewGlobal()
		g.global = s.Bitmap(ident("A")).Clone()
		checkViewAgainstOracle(t, "global", g.ViewAll(), oracle[0], base, first, last, e, nn, lim)
	})
}

// ---------------------------------------------------------------------------
// (b) Domain mapping against big.Int arithmetic.

var (
	two63 = new(big.Int).Lsh(big.NewInt(1), 63)
	two64 = new(big.Int).Lsh(big.NewInt(1), 64)
)

// bigFloorDiv is floor(a / b) for b > 0.
func bigFloorDiv(a, b *big.Int) *big.Int {
	q, m := new(big.Int).DivMod(a, b, new(big.Int)) // Euclidean: m >= 0
	_ = m
	return q
}

// bigSignedID is the id of a signed ordinal.
func bigSignedID(ord *big.Int) uint64 {
	return new(big.Int).Add(ord, two63).Uint64()
}

func bigU(v uint64) *big.Int { return new(big.Int).SetUint64(v) }

// checkSignedInterval compares SignedInterval(id) with the reference's
// formula over the domain [lo, hi].
func checkSignedInterval(t *testing.T, d Domain, id uint64, lo, hi int64) {
	ord := new(big.Int).Sub(bigU(id), two63)
	w := bigU(d.Width())
	start := new(big.Int).Mul(ord, w)
	end := new(big.Int).Mul(new(big.Int).Add(ord, big.NewInt(1)), w)
	bLo, bEnd := big.NewInt(lo), new(big.Int).Add(big.NewInt(hi), big.NewInt(1))
	if start.Cmp(bLo) < 0 {
		start.Set(bLo)
	}
	if end.Cmp(bEnd) > 0 {
		end.Set(bEnd)
	}
	iv, err := d.SignedInterval(id)
	if start.Cmp(end) >= 0 {
		if !errors.Is(err, ErrOutOfDomain) {
			t.Fatalf("SignedInterval(%#x) width %d = %+v, %v; want out of domain", id, d.Width(), iv, err)
		}
		return
	}
	inclusive := end.Cmp(bEnd) == 0
	wantEnd := end.Int64()
	if inclusive {
		wantEnd = hi
	}
	if err != nil || iv.Start != start.Int64() || iv.End != wantEnd || iv.EndInclusive != inclusive {
		t.Fatalf("SignedInterval(%#x) width %d = %+v, %v; want [%s, %s) inclusive=%v", id, d.Width(), iv, err, start, end, inclusive)
	}
}

func FuzzDomain(f *testing.F) {
	f.Add(uint8(0), uint64(1), int64(0), int64(1), uint64(0), uint8(0))
	f.Add(uint8(1), uint64(math.MaxUint64), int64(math.MinInt64), int64(math.MaxInt64), uint64(math.MaxUint64), uint8(1))
	f.Add(uint8(2), uint64(7), int64(-1), int64(1<<62), uint64(1<<63), uint8(2))
	f.Add(uint8(0), uint64(3600), int64(math.MinInt64), int64(math.MaxInt64), uint64(1<<63+477000), uint8(3))
	f.Fuzz(func(t *testing.T, kind uint8, width uint64, v1, v2 int64, id uint64, unitSel uint8) {
		if width == 0 {
			width = 1
		}
		switch kind % 3 {
		case 0: // timestamp
			ups := []int64{Seconds, Milliseconds, Microseconds, Nanoseconds}[unitSel%4]
			d := mustDomain(t, KindTimestamp, width)
			sec := func(v int64) (*big.Int, bool) {
				s := bigFloorDiv(big.NewInt(v), big.NewInt(ups))
				ok := s.Cmp(big.NewInt(MinEpochSecond)) >= 0 && s.Cmp(big.NewInt(MaxEpochSecond)) <= 0
				return s, ok
			}
			var ids [2]uint64
			for i, v := range []int64{v1, v2} {
				s, ok := sec(v)
				got, err := d.TimestampID(v, ups)
				if !ok {
					if !errors.Is(err, ErrOutOfDomain) {
						t.Fatalf("TimestampID(%d, %d) = %#x, %v; want out of domain", v, ups, got, err)
					}
					return
				}
				want := bigSignedID(bigFloorDiv(s, bigU(width)))
				if err != nil || got != want {
					t.Fatalf("TimestampID(%d, %d) width %d = %#x, %v; want %#x", v, ups, width, got, err, want)
				}
				ids[i] = got
				iv, err := d.SignedInterval(got)
				if err != nil || s.Cmp(big.NewInt(iv.Start)) < 0 || (s.Cmp(big.NewInt(iv.End)) >= 0 && !(iv.EndInclusive && s.Int64() == iv.End)) {
					t.Fatalf("interval %+v, %v does not hold second %s", iv, err, s)
				}
				checkSignedInterval(t, d, got, MinEpochSecond, MaxEpochSecond)
			}
			if (v1 <= v2) != (ids[0] <= ids[1]) && ids[0] != ids[1] {
				t.Fatalf("order: %d -> %#x, %d -> %#x", v1, ids[0], v2, ids[1])
			}
			r, err := d.TimestampRange(v1, v2, ups)
			if v1 >= v2 {
				if !errors.Is(err, ErrEmptyRange) {
					t.Fatalf("TimestampRange(%d, %d) = %v, %v", v1, v2, r, err)
				}
			} else {
				s2, _ := sec(v2 - 1)
				want := Range{ids[0], bigSignedID(bigFloorDiv(s2, bigU(width)))}
				if err != nil || r != want {
					t.Fatalf("TimestampRange(%d, %d) = %v, %v; want %v", v1, v2, r, err, want)
				}
				if before, err := d.TimestampIDBefore(v2, ups); err != nil || before != r.Last {
					t.Fatalf("TimestampIDBefore(%d) = %#x, %v; want %#x", v2, before, err, r.Last)
				}
			}
			checkSignedInterval(t, d, id, MinEpochSecond, MaxEpochSecond)
		case 1: // int64
			d := mustDomain(t, KindInt64, width)
			id1, err1 := d.Int64ID(v1)
			id2, err2 := d.Int64ID(v2)
			w1 := bigSignedID(bigFloorDiv(big.NewInt(v1), bigU(width)))
			w2 := bigSignedID(bigFloorDiv(big.NewInt(v2), bigU(width)))
			if err1 != nil || err2 != nil || id1 != w1 || id2 != w2 {
				t.Fatalf("Int64ID width %d: %d -> %#x (%#x), %d -> %#x (%#x)", width, v1, id1, w1, v2, id2, w2)
			}
			if (v1 < v2 && id1 > id2) || (v1 > v2 && id1 < id2) {
				t.Fatalf("order not preserved")
			}
			r, err := d.Int64Range(v1, v2)
			if v1 >= v2 {
				if !errors.Is(err, ErrEmptyRange) {
					t.Fatalf("Int64Range(%d, %d) = %v, %v", v1, v2, r, err)
				}
			} else {
				want := Range{id1, bigSignedID(bigFloorDiv(big.NewInt(v2-1), bigU(width)))}
				if err != nil || r != want {
					t.Fatalf("Int64Range(%d, %d) = %v, %v; want %v", v1, v2, r, err, want)
				}
			}
			for _, v := range []int64{v1, v2} {
				iv, err := d.SignedInterval(must(d.Int64ID(v)))
				if err != nil || v < iv.Start || (v >= iv.End && !(iv.EndInclusive && v == iv.End)) {
					t.Fatalf("interval %+v, %v does not hold %d", iv, err, v)
				}
			}
			checkSignedInterval(t, d, id, math.MinInt64, math.MaxInt64)
			checkSignedInterval(t, d, id1, math.MinInt64, math.MaxInt64)
		default: // uint64
			d := mustDomain(t, KindUInt64, width)
			u1, u2 := uint64(v1), uint64(v2)
			id1, _ := d.UInt64ID(u1)
			id2, _ := d.UInt64ID(u2)
			if id1 != u1/width || id2 != u2/width || (u1 < u2 && id1 > id2) {
				t.Fatalf("UInt64ID")
			}
			r, err := d.UInt64Range(u1, u2)
			if u1 >= u2 {
				if !errors.Is(err, ErrEmptyRange) {
					t.Fatalf("UInt64Range(%d, %d) = %v, %v", u1, u2, r, err)
				}
			} else if err != nil || r != (Range{id1, (u2 - 1) / width}) {
				t.Fatalf("UInt64Range(%d, %d) = %v, %v", u1, u2, r, err)
			}
			start := new(big.Int).Mul(bigU(id), bigU(width))
			end := new(big.Int).Add(start, bigU(width))
			iv, err := d.UnsignedInterval(id)
			switch {
			case start.Cmp(two64) >= 0:
				if !errors.Is(err, ErrOutOfDomain) {
					t.Fatalf("UnsignedInterval(%d) width %d = %+v, %v", id, width, iv, err)
				}
			case end.Cmp(two64) >= 0:
				if err != nil || iv != (UnsignedInterval{start.Uint64(), math.MaxUint64, true}) {
					t.Fatalf("UnsignedInterval(%d) width %d = %+v, %v", id, width, iv, err)
				}
			default:
				if err != nil || iv != (UnsignedInterval{start.Uint64(), end.Uint64(), false}) {
					t.Fatalf("UnsignedInterval(%d) width %d = %+v, %v", id, width, iv, err)
				}
			}
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// ---------------------------------------------------------------------------
// (c) Decoding untrusted bytes.

// decodeAllocBound is what Decode may allocate for len(data) input bytes:
// a small multiple of the input plus a fixed allowance (see Decode's doc:
// 8 KiB per bitmap container, each of which takes 8 KiB of input).
func decodeAllocBound(n int) uint64 { return 64*uint64(n) + 256<<10 }

// FuzzDecode reads untrusted sidecar bytes in both encodings (the entity
// flag picks TSTECOV2 or the global RoaringTreemap; segment sidecars and
// table snapshots share them). No input panics; every refusal is
// ErrMalformed; Decode allocates within decodeAllocBound of its input; an
// accepted set answers consistently (Cardinality = Stats over the whole id
// space), re-encodes to bytes that decode to an equal set, and encodes
// stably; the canonical bytes are a fixed point (they decode and encode to
// themselves).
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "reference", "tables", "*", "_coverage", "*", "*.roar"))
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*", "*", "*.roar"))
	for _, name := range append(files, golden...) {
		data, err := os.ReadFile(name)
		if err == nil && len(data) < 4096 {
			f.Add(data, bytes.HasPrefix(data, []byte(entityMagic)))
		}
	}
	f.Add(roaringZero, false)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3b, 0x30, 0, 0, 1, 0, 0, 3, 0, 2, 0, 1, 0, 1, 0, 10, 0, 1, 0}, false)
	// One partition, one run container of all 65536 values: 27 bytes that
	// the global encoding writes back as an 8 KiB bitmap container.
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3b, 0x30, 0, 0, 1, 0, 0, 0xff, 0xff, 1, 0, 0, 0, 0xff, 0xff}, false)
	f.Add([]byte(entityMagic+"\x00\x00\x00\x00"), true)
	f.Fuzz(func(t *testing.T, data []byte, entity bool) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s, err := Decode(data, entity)
		runtime.ReadMemStats(&m1)
		if got := m1.TotalAlloc - m0.TotalAlloc; got > decodeAllocBound(len(data)) {
			t.Fatalf("Decode of %d bytes allocated %d bytes (bound %d)", len(data), got, decodeAllocBound(len(data)))
		}
		if err != nil {
			if s != nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed (set %v)", err, s != nil)
			}
			return
		}
		if s.IsEntity() != entity {
			t.Fatalf("decoded entity=%v, asked for %v", s.IsEntity(), entity)
		}
		st, err := s.Stats(Range{0, math.MaxUint64})
		if err != nil || st.Covered != s.Cardinality() {
			t.Fatalf("Stats over everything = %+v, %v; Cardinality %d", st, err, s.Cardinality())
		}
		enc, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(enc, entity)
		if err != nil {
			t.Fatalf("re-encoded bytes do not decode: %v", err)
		}
		if !back.Equal(s) || back.Cardinality() != s.Cardinality() || back.Len() != s.Len() {
			t.Fatal("re-encoded bytes decode to a different set")
		}
		if again, _ := back.Encode(); !bytes.Equal(again, enc) {
			t.Fatal("encoding is not stable")
		}
	})
}
