package tableformat

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tsflight/tsflight/coverage"
)

// CoverageQuery selects what a coverage or gap query looks at: the
// half-open index range [Start, End) and, optionally, one complete entity
// identity (nil means the whole table).
type CoverageQuery struct {
	Start, End IndexValue
	Entity     Identity
	// Limit caps the number of gaps returned (0 = no cap). Gaps computes
	// the longest gap and the last covered window over the whole range
	// regardless; ListGaps stops walking at the limit.
	Limit int
	// MinWindow is the shortest run, in intervals, that counts as the last
	// fully covered window (0 or 1 = any run). ListGaps ignores it.
	MinWindow uint64
}

// CoverageReport answers "how much of the range is covered?".
type CoverageReport struct {
	// Intervals is the number of index intervals in the range.
	Intervals uint64
	// Identities is how many identities the report spans (1 for an entity
	// query or a table without entity columns).
	Identities uint64
	// Expected = Intervals × Identities; Covered counts the covered
	// (identity, interval) pairs.
	Expected, Covered uint64
	Ratio             float64
}

// Span is a half-open stretch [Start, End) of the index, in index units.
// EndInclusive is set only for a span reaching the very end of the index
// domain, which cannot be written half-open.
type Span struct {
	Start, End   IndexValue
	EndInclusive bool
	// Intervals is the length of the span in index intervals.
	Intervals uint64
}

// GapsReport answers "where are my gaps?".
type GapsReport struct {
	// Gaps are the maximal missing runs in ascending order.
	Gaps []Span
	// Truncated is true when Limit cut the list.
	Truncated bool
	// Longest is the longest gap (the earliest on a tie), nil if none.
	Longest *Span
	// LastCovered is the latest maximal fully covered run inside the range
	// (at least MinWindow intervals long), nil if none.
	LastCovered *Span
	// MissingIntervals sums the lengths of all gaps.
	MissingIntervals uint64
}

// queryRange validates q against st and maps it to interval ids.
func (t *Table) queryRange(st *State, q CoverageQuery) (coverage.Domain, coverage.Range, error) {
	ix := st.Index()
	d := indexDomain(ix)
	if q.Start.Type != ix.Kind.Type || q.End.Type != ix.Kind.Type {
		return d, coverage.Range{}, invalidf("start and end must be %s values for this table", ix.Kind.Type)
	}
	if q.Start.Compare(q.End) >= 0 {
		return d, coverage.Range{}, invalidf("start %s must be before end %s", q.Start, q.End)
	}
	if q.Entity != nil {
		if len(ix.EntityColumns) == 0 {
			return d, coverage.Range{}, invalidf("the table has no entity columns; query without an entity")
		}
		if len(q.Entity) != len(ix.EntityColumns) {
			return d, coverage.Range{}, invalidf("entity needs a value for each entity column %v", ix.EntityColumns)
		}
	}
	var r coverage.Range
	var err error
	switch ix.Kind.Type {
	case IndexTimestamp:
		ups := int64(1e9)
		s, e := q.Start.Time.UnixNano(), q.End.Time.UnixNano()
		if !inNanoRange(q.Start.Time) || !inNanoRange(q.End.Time) {
			ups, s, e = 1, q.Start.Time.Unix(), q.End.Time.Unix()
		}
		r, err = d.TimestampRange(s, e, ups)
	case IndexInt64:
		r, err = d.Int64Range(q.Start.Int, q.End.Int)
	default:
		r, err = d.UInt64Range(q.Start.Uint, q.End.Uint)
	}
	if err != nil {
		return d, coverage.Range{}, invalidf("range [%s, %s): %v", q.Start, q.End, err)
	}
	return d, r, nil
}

func inNanoRange(t time.Time) bool {
	return t.After(time.Unix(0, math.MinInt64)) && t.Before(time.Unix(0, math.MaxInt64))
}

// view returns the coverage view a query looks at.
func (t *Table) view(ctx context.Context, st *State, q CoverageQuery) (*segmentCoverage, coverage.View, error) {
	cov, err := t.loadCoverage(ctx, st)
	if err != nil {
		return nil, coverage.View{}, err
	}
	if q.Entity == nil {
		return cov, cov.set.ViewAll(), nil
	}
	v, err := cov.set.View(identityToCoverage(q.Entity))
	if err != nil {
		return nil, coverage.View{}, invalidf("entity %s: %v", q.Entity, err)
	}
	return cov, v, nil
}

// Coverage reports how much of [q.Start, q.End) is covered, for one entity
// or for the whole table (the mean over its identities).
func (t *Table) Coverage(ctx context.Context, st *State, q CoverageQuery) (*CoverageReport, error) {
	_, r, err := t.queryRange(st, q)
	if err != nil {
		return nil, err
	}
	cov, err := t.loadCoverage(ctx, st)
	if err != nil {
		return nil, err
	}
	var stats coverage.Stats
	ids := uint64(1)
	if q.Entity == nil {
		stats, err = cov.set.Stats(r)
		if cov.set.IsEntity() {
			ids = uint64(cov.set.Len())
		}
	} else {
		var v coverage.View
		if v, err = cov.set.View(identityToCoverage(q.Entity)); err == nil {
			stats, err = v.Stats(r)
		}
	}
	if err != nil {
		return nil, invalidf("coverage of [%s, %s): %v", q.Start, q.End, err)
	}
	intervals, ok1 := r.Len().Uint64()
	expected, ok2 := stats.Expected.Uint64()
	if !ok1 || !ok2 {
		return nil, invalidf("range [%s, %s) spans more than 2^64 intervals; narrow it", q.Start, q.End)
	}
	return &CoverageReport{Intervals: intervals, Identities: ids, Expected: expected, Covered: stats.Covered, Ratio: stats.Ratio()}, nil
}

// Gaps lists the missing runs of [q.Start, q.End), the longest one and the
// last fully covered window, for one entity or for the whole table (where
// an interval is covered only when every identity covers it). The longest
// gap needs every gap of the range, so the walk crosses the whole range
// whatever q.Limit is; it stops with ctx's error when ctx ends. A caller
// that wants only the list uses ListGaps.
func (t *Table) Gaps(ctx context.Context, st *State, q CoverageQuery) (*GapsReport, error) {
	d, r, err := t.queryRange(st, q)
	if err != nil {
		return nil, err
	}
	_, v, err := t.view(ctx, st, q)
	if err != nil {
		return nil, err
	}
	ix := st.Index()
	rep := &GapsReport{}
	// One walk lists the gaps up to the limit (memory follows the limit,
	// not the range) and keeps the longest (the earliest on a tie). The
	// missing total and the last covered window come from ranks.
	var listed []coverage.Range
	var longest coverage.Range
	var longestLen coverage.Count
	found := false
	err = walkGaps(ctx, v, r, q, func(g coverage.Range) bool {
		if q.Limit <= 0 || len(listed) < q.Limit {
			listed = append(listed, g)
		} else {
			rep.Truncated = true
		}
		if n := g.Len(); !found || n.Cmp(longestLen) > 0 {
			longest, longestLen, found = g, n, true
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	rep.Gaps = spansOf(ix, d, listed)
	if found {
		s := spanOf(ix, d, longest)
		rep.Longest = &s
	}
	stats, err := v.Stats(r)
	if err != nil {
		return nil, invalidf("gaps of [%s, %s): %v", q.Start, q.End, err)
	}
	if n, ok := stats.Missing().Uint64(); ok {
		rep.MissingIntervals = n
	} else {
		rep.MissingIntervals = math.MaxUint64
	}
	minWin := max(q.MinWindow, 1)
	if w, ok := v.LastWindow(r.Last, minWin); ok && w.First >= r.First {
		// Extend the window back to the start of its covered run (not
		// before r.First): the least first with [first, w.First] fully
		// covered, found by bisection on ranks.
		lo, hi := r.First, w.First
		for lo < hi {
			mid := lo + (hi-lo)/2
			c, _ := v.Covered(coverage.Range{First: mid, Last: w.First})
			if c == w.First-mid+1 {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		s := spanOf(ix, d, coverage.Range{First: lo, Last: w.Last})
		rep.LastCovered = &s
	}
	return rep, nil
}

// ListGaps lists the missing runs of [q.Start, q.End) in ascending order,
// as Gaps does, and nothing else: no longest gap, missing total or last
// covered window (q.MinWindow is ignored). With q.Limit > 0 it returns at
// most q.Limit gaps and reports truncated when there are more; the walk
// stops at the gap after the limit, so its cost follows the limit and not
// the number of gaps in the range. It stops with ctx's error when ctx
// ends, looking at ctx every few hundred gaps.
func (t *Table) ListGaps(ctx context.Context, st *State, q CoverageQuery) (gaps []Span, truncated bool, err error) {
	d, r, err := t.queryRange(st, q)
	if err != nil {
		return nil, false, err
	}
	_, v, err := t.view(ctx, st, q)
	if err != nil {
		return nil, false, err
	}
	var listed []coverage.Range
	err = walkGaps(ctx, v, r, q, func(g coverage.Range) bool {
		if q.Limit > 0 && len(listed) == q.Limit {
			truncated = true
			return false
		}
		listed = append(listed, g)
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return spansOf(st.Index(), d, listed), truncated, nil
}

// spansOf converts gaps to index units. The walks collect ids, which are
// small and hold no pointers, and convert them once: growing a slice of
// Spans gap by gap made a 200,000-gap ts_gaps call 2.5 times slower.
func spansOf(ix *IndexSpec, d coverage.Domain, gaps []coverage.Range) []Span {
	out := make([]Span, len(gaps))
	for i, g := range gaps {
		out[i] = spanOf(ix, d, g)
	}
	return out
}

// gapCheckEvery is how many gaps a walk visits between looks at its
// context: often enough to stop within a fraction of a millisecond, rarely
// enough to cost nothing next to the walk.
const gapCheckEvery = 256

// walkGaps calls f with the gaps of r in v in ascending order until f
// returns false. It looks at ctx at the first gap and every gapCheckEvery
// gaps after it, and returns ctx's error, the walk abandoned, when ctx has
// ended. (Between two gaps lies one covered run, which the coverage
// package crosses in a number of steps logarithmic in its length.)
func walkGaps(ctx context.Context, v coverage.View, r coverage.Range, q CoverageQuery, f func(coverage.Range) bool) error {
	seen := 0
	var stopped error
	err := v.EachGap(r, func(g coverage.Range) bool {
		if seen%gapCheckEvery == 0 {
			if stopped = ctx.Err(); stopped != nil {
				return false
			}
		}
		seen++
		return f(g)
	})
	if err != nil {
		return invalidf("gaps of [%s, %s): %v", q.Start, q.End, err)
	}
	return stopped
}

// spanOf converts an inclusive id range to index units.
func spanOf(ix *IndexSpec, d coverage.Domain, g coverage.Range) Span {
	n, ok := g.Len().Uint64()
	if !ok {
		n = math.MaxUint64
	}
	s := Span{Intervals: n}
	if ix.Kind.Type == IndexUInt64 {
		a, err1 := d.UnsignedInterval(g.First)
		b, err2 := d.UnsignedInterval(g.Last)
		if errors.Join(err1, err2) == nil {
			s.Start, s.End, s.EndInclusive = Uint64Value(a.Start), Uint64Value(b.End), b.EndInclusive
		}
		return s
	}
	a, err1 := d.SignedInterval(g.First)
	b, err2 := d.SignedInterval(g.Last)
	if errors.Join(err1, err2) != nil {
		return s
	}
	if ix.Kind.Type == IndexTimestamp {
		s.Start, s.End = TimeValue(unixUTC(a.Start)), TimeValue(unixUTC(b.End))
	} else {
		s.Start, s.End = Int64Value(a.Start), Int64Value(b.End)
	}
	s.EndInclusive = b.EndInclusive
	return s
}

func (s Span) String() string {
	closing := ")"
	if s.EndInclusive {
		closing = "]"
	}
	return fmt.Sprintf("[%s, %s%s", s.Start, s.End, closing)
}
