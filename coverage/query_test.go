package coverage

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func globalOf(t testing.TB, ids ...uint64) *Set {
	s := NewGlobal()
	mustAdd(t, s, nil, ids...)
	return s
}

func viewOf(t testing.TB, s *Set, id Identity) View {
	t.Helper()
	v, err := s.View(id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestQueriesRespectBounds(t *testing.T) {
	v := viewOf(t, globalOf(t, 2, 3, 4, 7, 8, 9), nil)
	r := Range{1, 8}
	st, err := v.Stats(r)
	if err != nil || st.Covered != 5 || st.Expected != CountOf(8) || st.Ratio() != 5.0/8 || st.Missing() != CountOf(3) {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	gaps, _ := v.Gaps(r, 0)
	if !slices.Equal(gaps, []Range{{1, 1}, {5, 6}}) {
		t.Errorf("Gaps = %v", gaps)
	}
	if g, ok, _ := v.LongestGap(r); !ok || g != (Range{5, 6}) || g.Len() != CountOf(2) {
		t.Errorf("LongestGap = %v, %v", g, ok)
	}
	if w, ok := v.LastWindow(8, 2); !ok || w != (Range{7, 8}) {
		t.Errorf("LastWindow(8, 2) = %v, %v", w, ok)
	}
	// A run extending past end counts only up to end.
	if w, ok := v.LastWindow(8, 3); !ok || w != (Range{2, 4}) {
		t.Errorf("LastWindow(8, 3) = %v, %v", w, ok)
	}
	if w, ok := v.LastWindow(9, 3); !ok || w != (Range{7, 9}) {
		t.Errorf("LastWindow(9, 3) = %v, %v", w, ok)
	}
	if w, ok := v.LastWindow(6, 2); !ok || w != (Range{3, 4}) {
		t.Errorf("LastWindow(6, 2) = %v, %v", w, ok)
	}
	if _, ok := v.LastWindow(9, 4); ok {
		t.Error("LastWindow(9, 4) found a window")
	}
	if _, ok := v.LastWindow(1, 1); ok {
		t.Error("LastWindow(1, 1) found a window")
	}
	// Limit.
	if gaps, _ := v.Gaps(Range{0, 20}, 2); !slices.Equal(gaps, []Range{{0, 1}, {5, 6}}) {
		t.Errorf("Gaps limit 2 = %v", gaps)
	}
	if gaps, _ := v.Gaps(Range{0, 20}, 0); !slices.Equal(gaps, []Range{{0, 1}, {5, 6}, {10, 20}}) {
		t.Errorf("Gaps = %v", gaps)
	}
	if gaps, _ := v.Gaps(Range{2, 4}, 0); len(gaps) != 0 {
		t.Errorf("covered range has gaps %v", gaps)
	}
	if _, ok, _ := v.LongestGap(Range{7, 9}); ok {
		t.Error("covered range has a longest gap")
	}
	// Invalid ranges.
	for _, err := range []error{
		second(v.Stats(Range{5, 4})), second(v.Gaps(Range{5, 4}, 0)), second(v.Covered(Range{5, 4})),
	} {
		if !errors.Is(err, ErrEmptyRange) {
			t.Errorf("inverted range: %v", err)
		}
	}
	if _, _, err := v.LongestGap(Range{5, 4}); !errors.Is(err, ErrEmptyRange) {
		t.Errorf("LongestGap inverted: %v", err)
	}
}

func TestQueriesOverTheWholeIDSpace(t *testing.T) {
	v := viewOf(t, globalOf(t, 0, 2, math.MaxUint64), nil)
	all := Range{0, math.MaxUint64}
	st, _ := v.Stats(all)
	if st.Covered != 3 || st.Expected.String() != "18446744073709551616" {
		t.Errorf("Stats = %+v (%s)", st, st.Expected)
	}
	gaps, _ := v.Gaps(all, 0)
	if !slices.Equal(gaps, []Range{{1, 1}, {3, math.MaxUint64 - 1}}) {
		t.Errorf("Gaps = %v", gaps)
	}
	if g, _, _ := v.LongestGap(all); g.Len() != CountOf(math.MaxUint64-3) {
		t.Errorf("LongestGap = %v", g)
	}
	empty := viewOf(t, NewGlobal(), nil)
	if g, ok, _ := empty.LongestGap(all); !ok || g != all || g.Len().String() != "18446744073709551616" {
		t.Errorf("empty LongestGap = %v %v", g, ok)
	}
	if gaps, _ := empty.Gaps(all, 5); !slices.Equal(gaps, []Range{all}) {
		t.Errorf("empty Gaps = %v", gaps)
	}
	// Windows at both ends of the id space.
	w := viewOf(t, globalOf(t, 0, 1, math.MaxUint64-2, math.MaxUint64-1, math.MaxUint64), nil)
	if r, ok := w.LastWindow(math.MaxUint64, 3); !ok || r != (Range{math.MaxUint64 - 2, math.MaxUint64}) {
		t.Errorf("LastWindow(max, 3) = %v", r)
	}
	if r, ok := w.LastWindow(1, 2); !ok || r != (Range{0, 1}) {
		t.Errorf("LastWindow(1, 2) = %v", r)
	}
	if _, ok := w.LastWindow(math.MaxUint64, 0); ok {
		t.Error("LastWindow with n = 0")
	}
	if _, ok := w.LastWindow(math.MaxUint64, 4); ok {
		t.Error("LastWindow(max, 4)")
	}
	if gaps, _ := w.Gaps(Range{math.MaxUint64 - 3, math.MaxUint64}, 0); !slices.Equal(gaps, []Range{{math.MaxUint64 - 3, math.MaxUint64 - 3}}) {
		t.Errorf("Gaps at the top = %v", gaps)
	}
}

// Long runs go through the galloping path.
func TestLongRuns(t *testing.T) {
	s := NewGlobal()
	for _, r := range []Range{{10, 100_000}, {100_002, 100_002}, {100_004, 5_000_000}, {1<<32 - 5, 1<<32 + 7}} {
		if err := s.AddRange(nil, r); err != nil {
			t.Fatal(err)
		}
	}
	v := viewOf(t, s, nil)
	gaps, _ := v.Gaps(Range{0, 1<<32 + 10}, 0)
	want := []Range{{0, 9}, {100_001, 100_001}, {100_003, 100_003}, {5_000_001, 1<<32 - 6}, {1<<32 + 8, 1<<32 + 10}}
	if !slices.Equal(gaps, want) {
		t.Errorf("Gaps = %v", gaps)
	}
	if gaps, _ := v.Gaps(Range{50, 4_000_000}, 0); !slices.Equal(gaps, want[1:3]) {
		t.Errorf("inner Gaps = %v", gaps)
	}
	if r, ok := v.LastWindow(1<<32+100, 13); !ok || r != (Range{1<<32 - 5, 1<<32 + 7}) {
		t.Errorf("LastWindow(13) = %v", r)
	}
	if r, ok := v.LastWindow(1<<32+100, 14); !ok || r != (Range{5_000_000 - 13, 5_000_000}) {
		t.Errorf("LastWindow(14) = %v", r)
	}
	if r, ok := v.LastWindow(100_003, 2); !ok || r != (Range{99_999, 100_000}) {
		t.Errorf("LastWindow(100003, 2) = %v", r)
	}
	if r, ok := v.LastWindow(2_000_000, 1_899_997); !ok || r != (Range{100_004, 2_000_000}) {
		t.Errorf("LastWindow(2e6, 1899997) = %v", r)
	}
	if _, ok := v.LastWindow(2_000_000, 1_899_998); ok {
		t.Error("window longer than any run")
	}
}

func TestEntityViews(t *testing.T) {
	s := NewEntity()
	a, b, c := ident("a"), ident("b"), ident("c")
	mustAdd(t, s, a, 1, 2, 3, 4, 5)
	mustAdd(t, s, b, 2, 3, 5, 6)
	if err := s.AddIdentity(c); err != nil {
		t.Fatal(err)
	}
	r := Range{1, 6}
	st, err := s.Stats(r)
	if err != nil || st.Covered != 9 || st.Expected != CountOf(18) || st.Ratio() != 0.5 {
		t.Errorf("aggregate Stats = %+v, %v", st, err)
	}
	per, _ := s.StatsByIdentity(r)
	if len(per) != 3 || !per[0].Identity.Equal(a) || per[0].Covered != 5 || per[1].Covered != 4 || per[2].Covered != 0 || per[2].Expected != CountOf(6) {
		t.Errorf("StatsByIdentity = %+v", per)
	}
	// Other identities never fill a gap.
	if gaps, _ := viewOf(t, s, b).Gaps(r, 0); !slices.Equal(gaps, []Range{{1, 1}, {4, 4}}) {
		t.Errorf("b gaps = %v", gaps)
	}
	// Absent identity: nothing covered.
	absent := viewOf(t, s, ident("zzz"))
	if st, _ := absent.Stats(r); st.Covered != 0 || st.Ratio() != 0 {
		t.Errorf("absent Stats = %+v", st)
	}
	if g, _, _ := absent.LongestGap(r); g != r {
		t.Errorf("absent LongestGap = %v", g)
	}
	if _, ok := absent.LastWindow(10, 1); ok {
		t.Error("absent LastWindow")
	}
	// ViewAll: intervals every identity covers; c covers nothing.
	if st, _ := s.ViewAll().Stats(r); st.Covered != 0 {
		t.Errorf("ViewAll with an empty identity covers %d", st.Covered)
	}
	s2 := NewEntity()
	mustAdd(t, s2, a, 1, 2, 3, 4, 5)
	mustAdd(t, s2, b, 2, 3, 5, 6)
	all := s2.ViewAll()
	if gaps, _ := all.Gaps(r, 0); !slices.Equal(gaps, []Range{{1, 1}, {4, 4}, {6, 6}}) {
		t.Errorf("ViewAll gaps = %v", gaps)
	}
	if w, ok := all.LastWindow(6, 2); !ok || w != (Range{2, 3}) {
		t.Errorf("ViewAll LastWindow = %v", w)
	}
	if st, _ := NewEntity().Stats(r); st.Covered != 0 || !st.Expected.IsZero() || st.Ratio() != 0 {
		t.Errorf("empty entity Stats = %+v", st)
	}
	if _, err := s.View(nil); !errors.Is(err, ErrSetKind) {
		t.Errorf("View(nil) on entity set: %v", err)
	}
	if _, err := NewGlobal().View(a); !errors.Is(err, ErrSetKind) {
		t.Errorf("View(a) on global set: %v", err)
	}
	g := globalOf(t, 1, 2)
	if st, _ := g.Stats(r); st.Covered != 2 || st.Expected != CountOf(6) {
		t.Errorf("global aggregate = %+v", st)
	}
	if per, err := g.StatsByIdentity(r); per != nil || err != nil {
		t.Errorf("global StatsByIdentity = %v, %v", per, err)
	}
}

func TestCount(t *testing.T) {
	max := Range{0, math.MaxUint64}.Len()
	if v, ok := max.Uint64(); ok || v != 0 || max.String() != "18446744073709551616" || max.Float64() != 1<<64 {
		t.Errorf("2^64 = %v %v %s", v, ok, max)
	}
	if got := max.mul(4000).String(); got != "73786976294838206464000" {
		t.Errorf("2^64 * 4000 = %s", got)
	}
	if CountOf(5).Cmp(max) != -1 || max.Cmp(CountOf(5)) != 1 || max.Cmp(max) != 0 {
		t.Error("Cmp")
	}
	if got := max.sub(CountOf(1)).String(); got != "18446744073709551615" {
		t.Errorf("2^64 - 1 = %s", got)
	}
	if !CountOf(3).sub(CountOf(4)).IsZero() {
		t.Error("sub below zero")
	}
	if (Range{3, 2}).Len() != (Count{}) {
		t.Error("invalid range length")
	}
}

// TestEachGapStopsWhenTold: EachGap yields the gaps Gaps lists, in order,
// and calls f no more after f returns false, however many gaps are left.
func TestEachGapStopsWhenTold(t *testing.T) {
	s := NewGlobal()
	const n = 100_000
	for i := uint64(0); i < n; i++ {
		if _, err := s.Add(nil, 2*i+1); err != nil { // gaps at every even id
			t.Fatal(err)
		}
	}
	v := viewOf(t, s, nil)
	r := Range{0, 2 * n}
	all, _ := v.Gaps(r, 0)
	var walked []Range
	if err := v.EachGap(r, func(g Range) bool { walked = append(walked, g); return true }); err != nil {
		t.Fatal(err)
	}
	if len(all) != n+1 || !slices.Equal(walked, all) {
		t.Fatalf("EachGap walked %d gaps, Gaps lists %d (want %d), or they differ", len(walked), len(all), n+1)
	}
	for _, stop := range []int{1, 2, 7, 1000} {
		calls := 0
		err := v.EachGap(r, func(g Range) bool {
			if g != all[calls] {
				t.Fatalf("stop %d: gap %d is %v, want %v", stop, calls, g, all[calls])
			}
			calls++
			return calls < stop
		})
		if err != nil || calls != stop {
			t.Errorf("stop after %d: f called %d times, %v", stop, calls, err)
		}
	}
	// An empty view is one gap; refusing it ends the walk too.
	calls := 0
	if err := (View{}).EachGap(r, func(Range) bool { calls++; return false }); err != nil || calls != 1 {
		t.Errorf("empty view: f called %d times, %v", calls, err)
	}
	// An inverted range is refused before f is ever called.
	if err := v.EachGap(Range{5, 4}, func(Range) bool { t.Fatal("f called for an inverted range"); return false }); !errors.Is(err, ErrEmptyRange) {
		t.Errorf("inverted range: %v, want ErrEmptyRange", err)
	}
}
