package coverage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

func ident(s ...string) Identity {
	out := make(Identity, len(s))
	for i, v := range s {
		out[i] = Utf8(v)
	}
	return out
}

func mustAdd(t testing.TB, s *Set, id Identity, ids ...uint64) {
	t.Helper()
	for _, x := range ids {
		if _, err := s.Add(id, x); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAddReportsDuplicates(t *testing.T) {
	s := NewEntity()
	a, b := ident("A"), ident("B")
	for i, c := range []struct {
		id   Identity
		x    uint64
		dup  bool
		card uint64
	}{
		{a, 7, false, 1}, {a, 7, true, 1}, {b, 7, false, 2}, {a, math.MaxUint64, false, 3}, {b, 7, true, 3},
	} {
		dup, err := s.Add(c.id, c.x)
		if err != nil || dup != c.dup || s.Cardinality() != c.card {
			t.Errorf("step %d: Add(%v, %d) = %v, %v; card %d", i, c.id, c.x, dup, err, s.Cardinality())
		}
	}
	g := NewGlobal()
	if dup, _ := g.Add(nil, 3); dup {
		t.Error("first add reported duplicate")
	}
	if dup, _ := g.Add(nil, 3); !dup {
		t.Error("second add not reported")
	}
	if _, err := g.Add(a, 1); !errors.Is(err, ErrSetKind) {
		t.Errorf("identity on global set: %v", err)
	}
	if _, err := s.Add(nil, 1); !errors.Is(err, ErrSetKind) {
		t.Errorf("no identity on entity set: %v", err)
	}
	if _, err := s.Add(Identity{Utf8("\xff")}, 1); !errors.Is(err, ErrInvalidIdentity) {
		t.Errorf("invalid identity: %v", err)
	}
	if s.Len() != 2 || g.Len() != 0 {
		t.Errorf("Len = %d, %d", s.Len(), g.Len())
	}
	if !s.IsEntity() || g.IsEntity() || s.IsEmpty() || g.IsEmpty() || !NewGlobal().IsEmpty() || !NewEntity().IsEmpty() {
		t.Error("IsEntity / IsEmpty")
	}
	if !g.Contains(nil, 3) || g.Contains(nil, 4) || g.Contains(a, 3) || !s.Contains(b, 7) || s.Contains(b, 8) {
		t.Error("Contains")
	}
}

func TestAddRangeAndIdentities(t *testing.T) {
	s := NewEntity()
	if err := s.AddRange(ident("z"), Range{math.MaxUint64 - 2, math.MaxUint64}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRange(ident("a"), Range{0, 0}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRange(ident("a"), Range{5, 4}); !errors.Is(err, ErrEmptyRange) {
		t.Errorf("inverted range: %v", err)
	}
	if err := s.AddIdentity(ident("m")); err != nil {
		t.Fatal(err)
	}
	if !s.Contains(ident("z"), math.MaxUint64) || !s.Contains(ident("z"), math.MaxUint64-2) || s.Contains(ident("z"), math.MaxUint64-3) {
		t.Error("range at the top of the id space")
	}
	got := s.Identities()
	if len(got) != 3 || !got[0].Equal(ident("a")) || !got[1].Equal(ident("m")) || !got[2].Equal(ident("z")) {
		t.Errorf("Identities = %v", got)
	}
	if !s.Has(ident("m")) || s.Bitmap(ident("m")) == nil || !s.Bitmap(ident("m")).IsEmpty() || s.Has(ident("q")) || s.Bitmap(ident("q")) != nil {
		t.Error("explicit empty identity")
	}
	if s.Cardinality() != 4 {
		t.Errorf("Cardinality = %d", s.Cardinality())
	}
	if err := NewGlobal().AddIdentity(ident("x")); !errors.Is(err, ErrSetKind) {
		t.Errorf("AddIdentity on global: %v", err)
	}
}

// twoEntitySets returns identities A, B and C and two entity sets: x
// holds A at 1 and 2 and B at 1, y holds A at 2 and 3 and C at 4.
func twoEntitySets(t *testing.T) (a, b, c Identity, x, y *Set) {
	t.Helper()
	a, b, c = ident("A"), ident("B"), ident("C")
	x, y = NewEntity(), NewEntity()
	mustAdd(t, x, a, 1, 2)
	mustAdd(t, x, b, 1)
	mustAdd(t, y, a, 2, 3)
	mustAdd(t, y, c, 4)
	return a, b, c, x, y
}

// wantUnion: got, which op made, must hold the union of x and y.
func wantUnion(t *testing.T, op string, got, x, y *Set) {
	t.Helper()
	want, err := Union(x, y)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(want) {
		t.Errorf("%s holds %d identities / %d pairs, the union %d / %d", op, got.Len(), got.Cardinality(), want.Len(), want.Cardinality())
	}
}

func TestUnionCloneEqual(t *testing.T) {
	_, _, c, left, right := twoEntitySets(t)
	before := left.Clone()
	u, err := Union(left, right)
	if err != nil {
		t.Fatal(err)
	}
	if !left.Equal(before) {
		t.Error("Union modified its first argument")
	}
	if u.Len() != 3 || u.Cardinality() != 5 {
		t.Errorf("union: %d identities, %d pairs", u.Len(), u.Cardinality())
	}
	if err := left.Union(right); err != nil || !left.Equal(u) {
		t.Errorf("in-place union differs: %v", err)
	}
	// The union owns its bitmaps.
	mustAdd(t, u, c, 99)
	if right.Contains(c, 99) {
		t.Error("union shares a bitmap with its input")
	}
	if before.Equal(left) {
		t.Error("Equal ignores differences")
	}
	self := left.Clone()
	if err := self.Union(self); err != nil || !self.Equal(left) {
		t.Errorf("self union: %v", err)
	}
	if err := left.Union(NewGlobal()); !errors.Is(err, ErrSetKind) {
		t.Errorf("mixed union: %v", err)
	}
	if _, err := Union(NewGlobal(), NewEntity()); !errors.Is(err, ErrSetKind) {
		t.Errorf("mixed Union: %v", err)
	}
	if NewGlobal().Equal(NewEntity()) {
		t.Error("global equals entity")
	}
}

func TestOverlap(t *testing.T) {
	first, later := ident("A", "one"), ident("B", "one")
	left := NewEntity()
	mustAdd(t, left, later, 1)
	mustAdd(t, left, first, 9, 3)
	mustAdd(t, left, ident("only-left"), 1)
	right := NewEntity()
	mustAdd(t, right, later, 1)
	mustAdd(t, right, first, 3, 9, 10)
	mustAdd(t, right, ident("only-right"), 1)
	ov, err := left.Overlap(right)
	if err != nil || ov.Count != 3 || !ov.Identity.Equal(first) || ov.ID != 3 {
		t.Errorf("Overlap = %+v, %v", ov, err)
	}
	if ov2, _ := right.Overlap(left); ov2.Count != 3 || !ov2.Identity.Equal(first) || ov2.ID != 3 {
		t.Errorf("reverse Overlap = %+v", ov2)
	}
	// Same interval, different identities: no overlap.
	x, y := NewEntity(), NewEntity()
	mustAdd(t, x, ident("NVDA"), 10)
	mustAdd(t, y, ident("AAPL"), 10)
	if ov, _ := x.Overlap(y); ov.Count != 0 || ov.Identity != nil {
		t.Errorf("different identities overlap: %+v", ov)
	}
	g1, g2 := NewGlobal(), NewGlobal()
	mustAdd(t, g1, nil, 5, 6, 7)
	mustAdd(t, g2, nil, 7, 6, 100)
	if ov, _ := g1.Overlap(g2); ov.Count != 2 || ov.ID != 6 || ov.Identity != nil {
		t.Errorf("global Overlap = %+v", ov)
	}
	if _, err := g1.Overlap(x); !errors.Is(err, ErrSetKind) {
		t.Errorf("mixed Overlap: %v", err)
	}
}

// A dense identity overlapping one id at its end: the example must come
// from intersecting bitmaps, not from walking 2^32 ids.
func TestOverlapDense(t *testing.T) {
	dense, probe := NewEntity(), NewEntity()
	id := ident("dense")
	last := uint64(math.MaxUint32)
	if err := dense.AddRange(id, Range{0, last}); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, probe, id, last, last+5)
	start := time.Now()
	ov, err := dense.Overlap(probe)
	if err != nil || ov.Count != 1 || ov.ID != last {
		t.Errorf("Overlap = %+v, %v", ov, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("dense overlap took %v", d)
	}
}

// Readers share nothing: run with -race.
func TestConcurrentReads(t *testing.T) {
	s := NewEntity()
	for i := range 50 {
		mustAdd(t, s, Identity{Utf8("h"), Int32(int32(i))}, uint64(i), uint64(i+1))
	}
	done := make(chan bool)
	for w := range 4 {
		go func() {
			ok := true
			for i := range 50 {
				id := Identity{Utf8("h"), Int32(int32((i + w) % 50))}
				v, err := s.View(id)
				st, _ := v.Stats(Range{0, 100})
				ok = ok && err == nil && st.Covered == 2 && s.Has(id) && s.Contains(id, uint64((i+w)%50))
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("concurrent reader saw wrong coverage")
		}
	}
}

func BenchmarkAddExistingIdentity(b *testing.B) {
	s := NewEntity()
	id := Identity{Utf8("host_1234"), Int32(7)}
	var x uint64
	for b.Loop() {
		x++
		if _, err := s.Add(id, x); err != nil {
			b.Fatal(err)
		}
	}
}

func TestExtendedLeavesBothInputs(t *testing.T) {
	a, b, _, left, right := twoEntitySets(t)
	leftBefore, rightBefore := left.Clone(), right.Clone()
	ext, err := left.Extended(right)
	if err != nil {
		t.Fatal(err)
	}
	wantUnion(t, "Extended", ext, leftBefore, rightBefore)
	if !left.Equal(leftBefore) || !right.Equal(rightBefore) {
		t.Error("Extended modified an input")
	}
	// An identity both hold gets a bitmap of its own; one only the left
	// holds is shared (the point: no copy of what the right leaves alone).
	if ext.Bitmap(a) == left.Bitmap(a) || ext.Bitmap(a) == right.Bitmap(a) {
		t.Error("an identity in both inputs shares a bitmap with one of them")
	}
	if ext.Bitmap(b) != left.Bitmap(b) {
		t.Error("an identity only the left holds was copied")
	}
	g1, g2 := NewGlobal(), NewGlobal()
	mustAdd(t, g1, nil, 1)
	mustAdd(t, g2, nil, 7)
	g, err := g1.Extended(g2)
	if err != nil || g.Cardinality() != 2 || g1.Cardinality() != 1 || g2.Cardinality() != 1 {
		t.Errorf("global Extended: %v, %d pairs (inputs %d, %d)", err, g.Cardinality(), g1.Cardinality(), g2.Cardinality())
	}
	if _, err := g1.Extended(left); !errors.Is(err, ErrSetKind) {
		t.Errorf("mixed Extended: %v", err)
	}
}

func TestAbsorbSharesAndLeavesInputs(t *testing.T) {
	a, b, c, first, second := twoEntitySets(t)
	firstBefore, secondBefore := first.Clone(), second.Clone()
	group := NewEntity()
	for _, s := range []*Set{first, second} {
		if err := group.Absorb(s); err != nil {
			t.Fatal(err)
		}
	}
	wantUnion(t, "Absorb", group, firstBefore, secondBefore)
	if !first.Equal(firstBefore) || !second.Equal(secondBefore) {
		t.Error("Absorb modified a set it absorbed")
	}
	// Identities one input alone holds share its bitmap; A, in both, has
	// a new one.
	if group.Bitmap(b) != first.Bitmap(b) || group.Bitmap(c) != second.Bitmap(c) {
		t.Error("an identity only one input holds was copied")
	}
	if group.Bitmap(a) == first.Bitmap(a) || group.Bitmap(a) == second.Bitmap(a) {
		t.Error("an identity in both inputs shares a bitmap with one of them")
	}
	g := NewGlobal()
	g1, g2 := NewGlobal(), NewGlobal()
	mustAdd(t, g1, nil, 1)
	mustAdd(t, g2, nil, 1, 7)
	if err := g.Absorb(g1); err != nil {
		t.Fatal(err)
	}
	if err := g.Absorb(g2); err != nil || g.Cardinality() != 2 || g1.Cardinality() != 1 || g2.Cardinality() != 2 {
		t.Errorf("global Absorb: %v, %d pairs (inputs %d, %d)", err, g.Cardinality(), g1.Cardinality(), g2.Cardinality())
	}
	if err := g.Absorb(first); !errors.Is(err, ErrSetKind) {
		t.Errorf("mixed Absorb: %v", err)
	}
}

// RunOptimize changes how bitmaps are held, never what they hold or the
// bytes Encode writes, and keeps extensions of gap-free coverage small.
func TestRunOptimizeKeepsPairsAndBytes(t *testing.T) {
	s := NewEntity()
	for h := range 50 {
		id := ident(fmt.Sprintf("host_%d", h))
		if err := s.AddRange(id, Range{First: 1000, Last: 5999}); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, s, id, 9000+uint64(h), 70000) // a gap and a second container
	}
	g := NewGlobal()
	if err := g.AddRange(nil, Range{First: 5, Last: 70004}); err != nil {
		t.Fatal(err)
	}
	for _, set := range []*Set{s, g} {
		before := set.Clone()
		enc, err := set.Encode()
		if err != nil {
			t.Fatal(err)
		}
		set.RunOptimize()
		if !set.Equal(before) {
			t.Fatal("RunOptimize changed the pairs")
		}
		got, err := set.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, enc) {
			t.Fatalf("RunOptimize changed the encoding (%d bytes, was %d)", len(got), len(enc))
		}
	}
	// A bitmap extended interval after interval stays as runs.
	one := ident("host_0")
	cur := s
	for i := range uint64(3000) {
		next := NewEntity()
		mustAdd(t, next, one, 6000+i)
		var err error
		if cur, err = cur.Extended(next); err != nil {
			t.Fatal(err)
		}
	}
	if size := cur.Bitmap(one).GetSizeInBytes(); size > 200 {
		t.Errorf("after 3,000 extensions the bitmap of a gap-free identity takes %d bytes", size)
	}
	if n := cur.Bitmap(one).GetCardinality(); n != 5000+3000+2 {
		t.Errorf("extended bitmap holds %d ids, want %d", n, 5000+3000+2)
	}
}
