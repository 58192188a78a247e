package coverage

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSplitRange(t *testing.T) {
	for _, c := range []struct {
		r     Range
		parts int
		want  []Range
	}{
		{Range{0, 9}, 3, []Range{{0, 3}, {4, 6}, {7, 9}}},
		{Range{100, 107}, 4, []Range{{100, 101}, {102, 103}, {104, 105}, {106, 107}}},
		{Range{5, 7}, 10, []Range{{5, 5}, {6, 6}, {7, 7}}}, // fewer ids than parts
		{Range{5, 5}, 1, []Range{{5, 5}}},
		{Range{0, 10}, 1, []Range{{0, 10}}},
		{Range{math.MaxUint64 - 4, math.MaxUint64}, 2, []Range{{math.MaxUint64 - 4, math.MaxUint64 - 2}, {math.MaxUint64 - 1, math.MaxUint64}}},
		{Range{0, math.MaxUint64}, 1, []Range{{0, math.MaxUint64}}},
		// 2^64 ids in 3 bins: 6148914691236517206 + 2 × 6148914691236517205.
		{Range{0, math.MaxUint64}, 3, []Range{{0, 6148914691236517205}, {6148914691236517206, 12297829382473034410}, {12297829382473034411, math.MaxUint64}}},
	} {
		got, err := SplitRange(c.r, c.parts)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("SplitRange(%v, %d) = %v, %v; want %v", c.r, c.parts, got, err, c.want)
		}
	}
	// 8640 intervals in 200 bins: 40 bins of 44, 160 of 43.
	bins, err := SplitRange(Range{1000, 1000 + 8639}, 200)
	if err != nil || len(bins) != 200 {
		t.Fatalf("8640 in 200: %d bins, %v", len(bins), err)
	}
	for i, b := range bins {
		want := uint64(43)
		if i < 40 {
			want = 44
		}
		if n, _ := b.Len().Uint64(); n != want {
			t.Fatalf("bin %d has %d ids, want %d", i, n, want)
		}
		if i > 0 && b.First != bins[i-1].Last+1 {
			t.Fatalf("bin %d does not follow bin %d", i, i-1)
		}
	}
	if bins[0].First != 1000 || bins[199].Last != 1000+8639 {
		t.Fatalf("bins span [%d, %d]", bins[0].First, bins[199].Last)
	}
	for _, c := range []struct {
		r     Range
		parts int
		want  error
	}{
		{Range{0, 9}, 0, ErrInvalidGrid},
		{Range{0, 9}, -1, ErrInvalidGrid},
		{Range{9, 0}, 3, ErrEmptyRange},
	} {
		if _, err := SplitRange(c.r, c.parts); !errors.Is(err, c.want) {
			t.Errorf("SplitRange(%v, %d): %v, want %v", c.r, c.parts, err, c.want)
		}
	}
}

func TestSplitCount(t *testing.T) {
	for _, c := range []struct {
		n, parts int
		want     []int
	}{
		{5, 2, []int{3, 2}},
		{7, 3, []int{3, 2, 2}},
		{2, 5, []int{1, 1}},
		{4, 4, []int{1, 1, 1, 1}},
		{300, 100, slices.Repeat([]int{3}, 100)},
		{1, 200, []int{1}},
		{0, 3, []int{}},
	} {
		got, err := SplitCount(c.n, c.parts)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("SplitCount(%d, %d) = %v, %v; want %v", c.n, c.parts, got, err, c.want)
		}
	}
	if _, err := SplitCount(3, 0); !errors.Is(err, ErrInvalidGrid) {
		t.Errorf("SplitCount(3, 0): %v", err)
	}
	if _, err := SplitCount(-1, 2); !errors.Is(err, ErrInvalidGrid) {
		t.Errorf("SplitCount(-1, 2): %v", err)
	}
}

// bruteCount counts the covered ids of each bin one id at a time.
func bruteCount(v View, bins []Range) []uint64 {
	out := make([]uint64, len(bins))
	for i, b := range bins {
		for x := b.First; ; x++ {
			if v.bm != nil && v.bm.Contains(x) {
				out[i]++
			}
			if x == b.Last {
				break
			}
		}
	}
	return out
}

// TestCountBinsAgreesWithBruteForce checks every counting strategy (the
// sweep, the ranks, the full and empty shortcuts) against counting id by
// id, on contiguous and gapped bins.
func TestCountBinsAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	base := uint64(1)<<63 - 70_000 // the bitmaps cross a container and a high-key boundary
	for trial := range 60 {
		s := NewGlobal()
		density := []float64{0, 0.001, 0.05, 0.5, 0.97, 1}[trial%6]
		for x := base; x < base+150_000; x++ {
			if rng.Float64() < density {
				mustAdd(t, s, nil, x)
			}
		}
		v := viewOf(t, s, nil)
		r := Range{base + uint64(rng.IntN(1000)), base + 149_000 + uint64(rng.IntN(1000))}
		bins, err := SplitRange(r, 1+rng.IntN(300))
		if err != nil {
			t.Fatal(err)
		}
		if trial%2 == 1 { // leave gaps between the bins
			gapped := bins[:0:0]
			for _, b := range bins {
				if b.Last > b.First {
					b.First++
				}
				gapped = append(gapped, b)
			}
			bins = gapped
		}
		want := bruteCount(v, bins)
		got := make([]uint64, len(bins))
		if err := v.CountBins(bins, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (density %v, %d bins): CountBins differs from brute force", trial, density, len(bins))
		}
		// The same bitmap in run containers, as a decoded sidecar holds it.
		runs := View{bm: v.bm.Clone()}
		runs.bm.RunOptimize()
		got = make([]uint64, len(bins))
		if err := runs.CountBins(bins, got); err != nil || !slices.Equal(got, want) {
			t.Fatalf("trial %d: run containers: CountBins differs from brute force (%v)", trial, err)
		}
	}
}

func TestWalkRuns(t *testing.T) {
	// A long run (past the linear steps, so measured by galloping), short
	// runs, single ids and a run cut by the range's end.
	s := NewGlobal()
	if err := s.AddRange(nil, Range{10, 5000}); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, nil, 5002, 5003, 5005, 7000, 7001, 7002, 7003)
	v := viewOf(t, s, nil)
	var got []Range
	v.walkRuns(Range{12, 7001}, func(r Range) { got = append(got, r) })
	want := []Range{{12, 5000}, {5002, 5003}, {5005, 5005}, {7000, 7001}}
	if !slices.Equal(got, want) {
		t.Fatalf("walkRuns = %v, want %v", got, want)
	}
}

func TestCountBinsAddsAndValidates(t *testing.T) {
	v := viewOf(t, globalOf(t, 1, 2, 3, 10, 11, 20), nil)
	bins := []Range{{0, 4}, {5, 14}, {15, 24}}
	counts := []uint64{100, 200, 300}
	if err := v.CountBins(bins, counts); err != nil || !slices.Equal(counts, []uint64{103, 202, 301}) {
		t.Fatalf("CountBins added %v, %v", counts, err)
	}
	for _, c := range []struct {
		bins   []Range
		counts int
		want   error
	}{
		{[]Range{{0, 4}}, 2, ErrInvalidGrid},
		{[]Range{{0, 4}, {4, 8}}, 2, ErrInvalidGrid}, // overlapping
		{[]Range{{5, 8}, {0, 4}}, 2, ErrInvalidGrid}, // descending
		{[]Range{{5, 4}}, 1, ErrEmptyRange},
	} {
		if err := v.CountBins(c.bins, make([]uint64, c.counts)); !errors.Is(err, c.want) {
			t.Errorf("CountBins(%v): %v, want %v", c.bins, err, c.want)
		}
	}
	// An empty view counts nothing.
	empty := viewOf(t, NewEntity(), Identity{Utf8("nobody")})
	counts = []uint64{0, 0, 0}
	if err := empty.CountBins(bins, counts); err != nil || !slices.Equal(counts, []uint64{0, 0, 0}) {
		t.Fatalf("empty view: %v, %v", counts, err)
	}
}

func TestGridEntitySet(t *testing.T) {
	s := NewEntity()
	// Five hosts over ids 0..9: a full; b misses 2..4; c only 8..9; d
	// nothing (present, empty); e every even id.
	for _, h := range []struct {
		name string
		ids  []uint64
	}{
		{"a", []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"b", []uint64{0, 1, 5, 6, 7, 8, 9}},
		{"c", []uint64{8, 9}},
		{"e", []uint64{0, 2, 4, 6, 8}},
	} {
		mustAdd(t, s, Identity{Utf8(h.name)}, h.ids...)
	}
	if err := s.AddIdentity(Identity{Utf8("d")}); err != nil {
		t.Fatal(err)
	}
	// Ids outside the range do not count.
	mustAdd(t, s, Identity{Utf8("a")}, 10, 11)

	g, err := s.Grid(Range{0, 9}, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Bins, []Range{{0, 3}, {4, 6}, {7, 9}}) {
		t.Fatalf("bins %v", g.Bins)
	}
	// Rows: {a, b, c} and {d, e}.
	if len(g.Rows) != 2 || g.Rows[0].Identities != 3 || g.Rows[1].Identities != 2 ||
		!g.Rows[0].First.Equal(Identity{Utf8("a")}) || !g.Rows[0].Last.Equal(Identity{Utf8("c")}) ||
		!g.Rows[1].First.Equal(Identity{Utf8("d")}) || !g.Rows[1].Last.Equal(Identity{Utf8("e")}) {
		t.Fatalf("rows %+v", g.Rows)
	}
	// Row 0: bin [0,3] a4 + b2 + c0 = 6; [4,6] a3 + b2 + c0 = 5; [7,9] a3 + b3 + c2 = 8.
	// Row 1: bin [0,3] e2 = 2; [4,6] e2 = 2; [7,9] e1 = 1.
	want := [][]uint64{{6, 5, 8}, {2, 2, 1}}
	if len(g.Covered) != 2 || !slices.Equal(g.Covered[0], want[0]) || !slices.Equal(g.Covered[1], want[1]) {
		t.Fatalf("covered %v, want %v", g.Covered, want)
	}
	// One row per identity when rows >= identities.
	g, err = s.Grid(Range{0, 9}, 1, 100)
	if err != nil || len(g.Rows) != 5 || fmt.Sprint(g.Covered) != "[[10] [7] [2] [0] [5]]" {
		t.Fatalf("one row per identity: %+v %v", g, err)
	}
}

func TestGridGlobalAndEmptySets(t *testing.T) {
	g, err := globalOf(t, 3, 4, 5, 9).Grid(Range{2, 9}, 4, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Rows) != 1 || g.Rows[0].Identities != 1 || g.Rows[0].First != nil || fmt.Sprint(g.Covered) != "[[1 2 0 1]]" {
		t.Fatalf("global grid %+v", g)
	}
	g, err = NewEntity().Grid(Range{2, 9}, 4, 10)
	if err != nil || len(g.Rows) != 0 || len(g.Covered) != 0 || len(g.Bins) != 4 {
		t.Fatalf("empty entity set: %+v %v", g, err)
	}
	for _, c := range []struct {
		columns, rows int
	}{{0, 1}, {1, 0}, {-3, 5}} {
		if _, err := NewEntity().Grid(Range{0, 9}, c.columns, c.rows); !errors.Is(err, ErrInvalidGrid) {
			t.Errorf("Grid(%d columns, %d rows): %v", c.columns, c.rows, err)
		}
	}
	if _, err := NewGlobal().Grid(Range{9, 0}, 1, 1); !errors.Is(err, ErrEmptyRange) {
		t.Errorf("inverted range: %v", err)
	}
}

// BenchmarkGrid4000x4096 draws the benchmark table (4,000 identities, 30
// days at 10 s) as 4,096 bins by 4,000 rows: the largest grid.
func BenchmarkGrid4000x4096(b *testing.B) {
	loadBenchTable(b)
	s, r := benchTable.set, benchTable.r
	for b.Loop() {
		g, err := s.Grid(r, 4096, 4096)
		if err != nil || len(g.Rows) != benchHosts {
			b.Fatalf("%d rows: %v", len(g.Rows), err)
		}
	}
}

// BenchmarkGrid1000x4096DenseBitmaps: 1,000 identities over one day at
// 10 s held in bitmap containers (rows added one by one), 4,096 bins.
func BenchmarkGrid1000x4096DenseBitmaps(b *testing.B) {
	const hosts, intervals = 1000, 8640
	rng := rand.New(rand.NewPCG(3, 4))
	s := NewEntity()
	first := uint64(1)<<63 + 1_000_000
	for h := range hosts {
		id := Identity{Utf8(fmt.Sprintf("host_%04d", h))}
		for x := first; x < first+intervals; x++ {
			if rng.IntN(50) != 0 {
				mustAdd(b, s, id, x)
			}
		}
	}
	r := Range{first, first + intervals - 1}
	for b.Loop() {
		if _, err := s.Grid(r, 4096, 4096); err != nil {
			b.Fatal(err)
		}
	}
}
