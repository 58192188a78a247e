package coverage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// The benchmark table: 4,000 identities "host_<i>" over 30 days at 10 s
// (259,200 intervals from 2024-06-01T00:00Z), each missing a few random
// runs.
const (
	benchHosts     = 4000
	benchIntervals = 30 * 24 * 360
)

var benchTable struct {
	once  sync.Once
	set   *Set
	r     Range
	holes map[int][]Range // the gaps of each identity
}

func benchRandomHoles(rng *rand.Rand, first uint64) []Range {
	var holes []Range
	for range 3 + rng.IntN(4) {
		start := first + uint64(rng.IntN(benchIntervals))
		holes = append(holes, Range{start, min(start+uint64(rng.IntN(500)), first+benchIntervals-1)})
	}
	slices.SortFunc(holes, func(a, b Range) int { return int(a.First - b.First) })
	// Merge overlapping or touching holes so they are maximal runs.
	out := holes[:1]
	for _, h := range holes[1:] {
		last := &out[len(out)-1]
		if h.First <= last.Last+1 {
			last.Last = max(last.Last, h.Last)
		} else {
			out = append(out, h)
		}
	}
	return out
}

// addCovered records r minus holes for id.
func addCovered(tb testing.TB, s *Set, id Identity, r Range, holes []Range) {
	cur := r.First
	for _, h := range holes {
		if h.First > cur {
			if err := s.AddRange(id, Range{cur, h.First - 1}); err != nil {
				tb.Fatal(err)
			}
		}
		cur = h.Last + 1
	}
	if cur <= r.Last {
		if err := s.AddRange(id, Range{cur, r.Last}); err != nil {
			tb.Fatal(err)
		}
	}
}

func loadBenchTable(tb testing.TB) {
	benchTable.once.Do(func() {
		d := mustDomain(tb, KindTimestamp, 10)
		first, _ := d.TimestampID(baseS, Seconds)
		r := Range{first, first + benchIntervals - 1}
		rng := rand.New(rand.NewPCG(1, 2))
		s := NewEntity()
		holes := make(map[int][]Range, benchHosts)
		for i := range benchHosts {
			holes[i] = benchRandomHoles(rng, first)
			addCovered(tb, s, Identity{Utf8(fmt.Sprintf("host_%d", i))}, r, holes[i])
		}
		benchTable.set, benchTable.r, benchTable.holes = s, r, holes
	})
}

func BenchmarkGapsOneIdentity(b *testing.B) {
	loadBenchTable(b)
	s, r := benchTable.set, benchTable.r
	id := Identity{Utf8("host_1234")}
	want := benchTable.holes[1234]
	for b.Loop() {
		v, err := s.View(id)
		if err != nil {
			b.Fatal(err)
		}
		gaps, err := v.Gaps(r, 0)
		if err != nil || len(gaps) != len(want) {
			b.Fatalf("%d gaps, want %d: %v", len(gaps), len(want), err)
		}
	}
}

// The same query when the identity's bitmap holds dense bitmap containers,
// as after adding one row at a time (rather than run containers, as after
// decoding a sidecar).
func BenchmarkGapsOneIdentityBitmapContainers(b *testing.B) {
	loadBenchTable(b)
	r := benchTable.r
	want := benchTable.holes[1234]
	s := NewEntity()
	id := Identity{Utf8("host_1234")}
	hole := 0
	for x := r.First; x <= r.Last; x++ {
		for hole < len(want) && x > want[hole].Last {
			hole++
		}
		if hole < len(want) && want[hole].Contains(x) {
			continue
		}
		mustAdd(b, s, id, x)
	}
	v, _ := s.View(id)
	for b.Loop() {
		gaps, err := v.Gaps(r, 0)
		if err != nil || len(gaps) != len(want) {
			b.Fatalf("%d gaps, want %d: %v", len(gaps), len(want), err)
		}
	}
}

func BenchmarkRatioWholeTable(b *testing.B) {
	loadBenchTable(b)
	s, r := benchTable.set, benchTable.r
	var missing uint64
	for _, hs := range benchTable.holes {
		for _, h := range hs {
			missing += h.Last - h.First + 1
		}
	}
	want := float64(benchHosts*benchIntervals-missing) / float64(benchHosts*benchIntervals)
	for b.Loop() {
		st, err := s.Stats(r)
		if err != nil || st.Ratio() != want {
			b.Fatalf("ratio %v, want %v: %v", st.Ratio(), want, err)
		}
	}
}

// TestBenchTableQueries checks the benchmark data set answers correctly, so
// the benchmarks measure right answers.
func TestBenchTableQueries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 4,000-identity table")
	}
	loadBenchTable(t)
	s, r := benchTable.set, benchTable.r
	for _, i := range []int{0, 1234, 3999} {
		v, _ := s.View(Identity{Utf8(fmt.Sprintf("host_%d", i))})
		gaps, _ := v.Gaps(r, 0)
		if !slices.Equal(gaps, benchTable.holes[i]) {
			t.Errorf("host_%d: gaps %v, want %v", i, gaps, benchTable.holes[i])
		}
	}
}
