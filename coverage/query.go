package coverage

import (
	"math"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// View is the coverage of one identity (or of a whole global set, or of the
// intervals every identity covers) that queries run against. Ids are
// inclusive interval ids; convert them with Domain.
//
// All queries work on runs, not ids: counts use bitmap ranks, gap searches
// step through covered runs and skip long ones with rank-based galloping,
// so their cost grows with the number of runs they cross, not with the
// width of the range.
//
// A View shares its bitmap with the Set it came from and reflects later
// changes to it; do not query it while the Set is being modified.
type View struct {
	bm *roaring64.Bitmap // nil: nothing covered
}

// View returns the coverage of ident (nil for a global set). An identity
// that is absent from an entity set has an empty view: nothing covered.
func (s *Set) View(ident Identity) (View, error) {
	bm, err := s.bitmapFor(ident, false)
	if err != nil {
		return View{}, err
	}
	return View{bm: bm}, nil
}

// ViewAll returns the intervals covered for the whole table: for a global
// set its coverage; for an entity set the intervals that every identity of
// the set covers (their intersection), so a gap in ViewAll is an interval
// where at least one known identity has no row. An entity set with no
// identities has an empty ViewAll.
func (s *Set) ViewAll() View {
	if !s.entity {
		return View{bm: s.global}
	}
	var out *roaring64.Bitmap
	for _, e := range s.byKey {
		if out == nil {
			out = e.bm.Clone()
		} else {
			out.And(e.bm)
		}
		if out.IsEmpty() {
			break
		}
	}
	return View{bm: out}
}

func (v View) empty() bool { return v.bm == nil || v.bm.IsEmpty() }

// rankBelow is the number of ids < x.
func (v View) rankBelow(x uint64) uint64 {
	if x == 0 {
		return 0
	}
	return v.bm.Rank(x - 1)
}

// Covered returns the number of covered ids in r.
func (v View) Covered(r Range) (uint64, error) {
	if err := r.valid(); err != nil {
		return 0, err
	}
	return v.covered(r), nil
}

func (v View) covered(r Range) uint64 {
	if v.empty() {
		return 0
	}
	return v.bm.Rank(r.Last) - v.rankBelow(r.First)
}

// Stats summarizes how much of a range is covered.
type Stats struct {
	// Covered is the number of covered (identity, interval) pairs.
	Covered uint64
	// Expected is the number of pairs the range asks for: the number of
	// intervals times the number of identities.
	Expected Count
}

// Ratio returns Covered / Expected in [0, 1], and 0 when nothing is
// expected (an entity set with no identities).
func (s Stats) Ratio() float64 {
	if s.Expected.IsZero() {
		return 0
	}
	return float64(s.Covered) / s.Expected.Float64()
}

// Missing returns Expected - Covered.
func (s Stats) Missing() Count { return s.Expected.sub(CountOf(s.Covered)) }

// Stats returns the covered and expected interval counts of r.
func (v View) Stats(r Range) (Stats, error) {
	if err := r.valid(); err != nil {
		return Stats{}, err
	}
	return Stats{Covered: v.covered(r), Expected: r.Len()}, nil
}

// IdentityStats is the Stats of one identity.
type IdentityStats struct {
	Identity Identity
	Stats
}

// Stats returns the coverage of r for the whole set: for a global set the
// covered intervals; for an entity set the covered (identity, interval)
// pairs over all identities of the set, with Expected = identities x
// intervals. The ratio is thus the mean of the per-identity ratios.
func (s *Set) Stats(r Range) (Stats, error) {
	if err := r.valid(); err != nil {
		return Stats{}, err
	}
	if !s.entity {
		return View{bm: s.global}.Stats(r)
	}
	var covered uint64
	for _, e := range s.byKey {
		covered += View{bm: e.bm}.covered(r)
	}
	return Stats{Covered: covered, Expected: r.Len().mul(uint64(len(s.byKey)))}, nil
}

// StatsByIdentity returns the Stats of r for every identity of an entity
// set, in canonical identity order (nil for a global set).
func (s *Set) StatsByIdentity(r Range) ([]IdentityStats, error) {
	if err := r.valid(); err != nil {
		return nil, err
	}
	if !s.entity {
		return nil, nil
	}
	es := s.sortedEntries()
	out := make([]IdentityStats, len(es))
	for i, e := range es {
		out[i] = IdentityStats{Identity: e.ident, Stats: Stats{Covered: View{bm: e.bm}.covered(r), Expected: r.Len()}}
	}
	return out, nil
}

// linearSteps is how many ids of a covered run are stepped through with the
// iterator before switching to rank-based galloping.
const linearSteps = 32

// walkGaps calls f with every maximal missing run of r, in order, until f
// returns false.
func (v View) walkGaps(r Range, f func(Range) bool) {
	if v.empty() {
		f(r)
		return
	}
	it := v.bm.Iterator()
	it.AdvanceIfNeeded(r.First)
	cursor := r.First
	for it.HasNext() {
		id := it.PeekNext()
		if id > r.Last {
			break
		}
		if id > cursor && !f(Range{First: cursor, Last: id - 1}) {
			return
		}
		end := v.runEnd(it, id, r.Last)
		if end == r.Last {
			return
		}
		cursor = end + 1
	}
	f(Range{First: cursor, Last: r.Last})
}

// runEnd returns the last id of the covered run that starts at first (the
// iterator's next id), not looking beyond limit, and leaves the iterator
// after it. Short runs are stepped through; long ones are measured with
// ranks by exponential then binary search.
func (v View) runEnd(it roaring64.IntPeekable64, first, limit uint64) uint64 {
	it.Next()
	end := first
	for range linearSteps {
		if end == limit || !it.HasNext() || it.PeekNext() != end+1 {
			return end
		}
		end = it.Next()
	}
	below := v.rankBelow(first)
	full := func(x uint64) bool { return v.bm.Rank(x)-below == x-first+1 }
	end += gallop(limit-end, func(k uint64) bool { return full(end + k) })
	if end < math.MaxUint64 {
		it.AdvanceIfNeeded(end + 1)
	}
	return end
}

// gallop returns the largest k <= n for which ok(k) holds, given that ok(0)
// does and that ok, once false, stays false for every larger k: an
// exponential search for a k where it fails, then a binary search between
// the last k where it held and that one.
func gallop(n uint64, ok func(k uint64) bool) uint64 {
	lo, hi := uint64(0), uint64(0) // lo: known to hold; hi: known not to (if > lo)
	for step := uint64(1); lo < n; step = min(step<<1, 1<<62) {
		cand := n
		if n-lo > step {
			cand = lo + step
		}
		if !ok(cand) {
			hi = cand
			break
		}
		lo = cand
	}
	for hi > lo && hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// EachGap calls f with the maximal missing runs of r in ascending order
// and stops as soon as f returns false. The walk goes no further than the
// gap f refused, so a caller that wants the first n gaps, or checks for
// cancellation between gaps, pays for the runs it reached and not for the
// rest of the range.
func (v View) EachGap(r Range, f func(Range) bool) error {
	if err := r.valid(); err != nil {
		return err
	}
	v.walkGaps(r, f)
	return nil
}

// Gaps returns the maximal missing runs of r in ascending order, at most
// limit of them (all when limit <= 0).
func (v View) Gaps(r Range, limit int) ([]Range, error) {
	if err := r.valid(); err != nil {
		return nil, err
	}
	var out []Range
	v.walkGaps(r, func(g Range) bool {
		out = append(out, g)
		return limit <= 0 || len(out) < limit
	})
	return out, nil
}

// LongestGap returns the longest missing run of r (the earliest one on a
// tie) and whether there is any. Its length is gap.Len().
func (v View) LongestGap(r Range) (gap Range, found bool, err error) {
	if err := r.valid(); err != nil {
		return Range{}, false, err
	}
	var best Count
	v.walkGaps(r, func(g Range) bool {
		if l := g.Len(); !found || l.Cmp(best) > 0 {
			gap, best, found = g, l, true
		}
		return true
	})
	return gap, found, nil
}

// LastWindow returns the last fully covered window of n consecutive
// intervals ending at or before id end, with the reference's meaning: walk
// the covered runs backwards from end (a run that extends past end counts
// only up to end); the first run with at least n ids yields the window of
// its last n ids, [runEnd-n+1, runEnd]. It reports false when n is 0 or no
// run before end is long enough. The search is not bounded below.
//
// To ask for a window ending before an exclusive value, pass the id from
// Domain.TimestampIDBefore (or the Int64/UInt64 variants).
func (v View) LastWindow(end, n uint64) (Range, bool) {
	if n == 0 || v.empty() {
		return Range{}, false
	}
	cur := end
	for {
		rank := v.bm.Rank(cur)
		if rank == 0 {
			return Range{}, false
		}
		last, err := v.bm.Select(rank - 1)
		if err != nil {
			return Range{}, false
		}
		first := v.runStart(last, rank)
		if last-first >= n-1 {
			return Range{First: last - (n - 1), Last: last}, true
		}
		if first == 0 {
			return Range{}, false
		}
		cur = first - 1
	}
}

// runStart returns the first id of the covered run ending at last, given
// rank = Rank(last).
func (v View) runStart(last, rank uint64) uint64 {
	full := func(x uint64) bool { return rank-v.rankBelow(x) == last-x+1 }
	return last - gallop(last, func(k uint64) bool { return full(last - k) })
}
