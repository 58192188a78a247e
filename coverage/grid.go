package coverage

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrInvalidGrid reports a grid shape that cannot be built: fewer than one
// column or row, or bins that are not ascending and disjoint.
var ErrInvalidGrid = errors.New("coverage: invalid grid shape")

// Grid is a coverage heat map: the interval ids of a range cut into
// columns (bins of consecutive intervals) and the identities of a set cut
// into rows (groups of consecutive identities in canonical order). Each
// cell counts the covered (identity, interval) pairs of its row's
// identities in its column's intervals.
type Grid struct {
	// Bins are the columns, contiguous and ascending; together they are
	// the whole range.
	Bins []Range
	// Rows are the identity groups, top to bottom.
	Rows []GridRow
	// Covered holds one slice per row with one count per bin. A cell's
	// ratio is Covered[r][c] / (Rows[r].Identities × Bins[c].Len()).
	Covered [][]uint64
}

// GridRow is one group of identities of a Grid.
type GridRow struct {
	// First and Last are the group's first and last identity in canonical
	// order (both nil for a global set). They are shared with the Set: do
	// not modify them.
	First, Last Identity
	// Identities is the size of the group (1 for a global set).
	Identities int
}

// SplitRange cuts r into min(parts, r.Len()) contiguous bins of
// near-equal length: with N ids and k bins, every bin holds N / k ids and
// the first N % k bins one more. It works for any valid range, including
// the whole id space.
func SplitRange(r Range, parts int) ([]Range, error) {
	if err := r.valid(); err != nil {
		return nil, err
	}
	if parts < 1 {
		return nil, fmt.Errorf("%w: %d bins (at least 1)", ErrInvalidGrid, parts)
	}
	n := r.Len()
	k := uint64(parts)
	if n.hi == 0 && n.lo < k {
		k = n.lo
	}
	if k == 1 {
		return []Range{r}, nil
	}
	// n <= 2^64 and k >= 2, so n.hi < k and the quotient fits.
	size, extra := bits.Div64(n.hi, n.lo, k)
	out := make([]Range, k)
	first := r.First
	for i := range out {
		length := size
		if uint64(i) < extra {
			length++
		}
		out[i] = Range{First: first, Last: first + (length - 1)}
		first = out[i].Last + 1 // wraps only after the last bin
	}
	return out, nil
}

// SplitCount cuts n items into min(parts, n) contiguous groups of
// near-equal size, the first n % k of them one larger, and returns the
// group sizes (none for n = 0).
func SplitCount(n, parts int) ([]int, error) {
	if parts < 1 {
		return nil, fmt.Errorf("%w: %d groups (at least 1)", ErrInvalidGrid, parts)
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: %d items", ErrInvalidGrid, n)
	}
	k := min(parts, n)
	out := make([]int, k)
	for i := range out {
		out[i] = n / k
		if i < n%k {
			out[i]++
		}
	}
	return out, nil
}

// CountBins adds to counts[i] the number of covered ids of v in bins[i].
// The bins must be valid, ascending and disjoint (gaps between them are
// allowed); counts must have one element per bin.
//
// It walks the covered runs of v across the bins: short runs id by id,
// long ones measured with rank-based galloping (as Gaps does), and adds
// each run to the bins it overlaps. The cost grows with the number of
// runs and bins, not with the width of the bins: a roaring rank is not
// logarithmic (it walks the containers before the id, then popcounts or
// sums runs), so two ranks per bin would cost more for wide grids.
func (v View) CountBins(bins []Range, counts []uint64) error {
	if len(counts) != len(bins) {
		return fmt.Errorf("%w: %d counts for %d bins", ErrInvalidGrid, len(counts), len(bins))
	}
	contiguous := true
	for i, b := range bins {
		if err := b.valid(); err != nil {
			return err
		}
		if i > 0 && b.First <= bins[i-1].Last {
			return fmt.Errorf("%w: bin %d [%d, %d] does not follow bin %d [%d, %d]", ErrInvalidGrid, i, b.First, b.Last, i-1, bins[i-1].First, bins[i-1].Last)
		}
		if i > 0 && b.First != bins[i-1].Last+1 {
			contiguous = false
		}
	}
	if len(bins) == 0 || v.empty() {
		return nil
	}
	span := Range{First: bins[0].First, Last: bins[len(bins)-1].Last}
	total := v.covered(span)
	switch {
	case total == 0:
	case contiguous && span.Len() == CountOf(total):
		// Fully covered: every bin is full (and its length fits).
		for i, b := range bins {
			counts[i] += b.Len().lo
		}
	default:
		v.walkRuns(span, binAdder(bins, counts))
	}
	return nil
}

// walkRuns calls f with every maximal covered run of r, in order.
func (v View) walkRuns(r Range, f func(Range)) {
	it := v.bm.Iterator()
	it.AdvanceIfNeeded(r.First)
	for it.HasNext() {
		first := it.PeekNext()
		if first > r.Last {
			return
		}
		last := v.runEnd(it, first, r.Last)
		f(Range{First: first, Last: last})
		if last == r.Last {
			return
		}
	}
}

// binAdder returns a function that adds the ids of ascending, disjoint
// runs to the counts of the ascending, disjoint bins they overlap.
func binAdder(bins []Range, counts []uint64) func(Range) {
	bin := 0
	return func(run Range) {
		first := run.First
		for bin < len(bins) {
			b := bins[bin]
			if b.Last < first {
				bin++
				continue
			}
			if run.Last < b.First {
				return
			}
			lo, hi := max(first, b.First), min(run.Last, b.Last)
			counts[bin] += hi - lo + 1
			if hi == run.Last {
				return
			}
			first = hi + 1
			bin++
		}
	}
}

// Grid builds the coverage heat map of s over r with at most columns bins
// and at most rows identity groups (see SplitRange and SplitCount). A
// global set has one row; an entity set with no identities has none.
// Identities are grouped in canonical order. The cost grows with the
// number of identities, of their covered runs in r and of bins (see
// CountBins), not with the width of r.
func (s *Set) Grid(r Range, columns, rows int) (*Grid, error) {
	bins, err := SplitRange(r, columns)
	if err != nil {
		return nil, err
	}
	if rows < 1 {
		return nil, fmt.Errorf("%w: %d rows (at least 1)", ErrInvalidGrid, rows)
	}
	g := &Grid{Bins: bins}
	if !s.entity {
		counts := make([]uint64, len(bins))
		if err := (View{bm: s.global}).CountBins(bins, counts); err != nil {
			return nil, err
		}
		g.Rows = []GridRow{{Identities: 1}}
		g.Covered = [][]uint64{counts}
		return g, nil
	}
	es := s.sortedEntries()
	sizes, err := SplitCount(len(es), rows)
	if err != nil {
		return nil, err
	}
	g.Rows = make([]GridRow, len(sizes))
	g.Covered = make([][]uint64, len(sizes))
	cells := make([]uint64, len(sizes)*len(bins))
	next := 0
	for row, size := range sizes {
		group := es[next : next+size]
		next += size
		counts := cells[row*len(bins) : (row+1)*len(bins) : (row+1)*len(bins)]
		for _, e := range group {
			if err := (View{bm: e.bm}).CountBins(bins, counts); err != nil {
				return nil, err
			}
		}
		g.Rows[row] = GridRow{First: group[0].ident, Last: group[size-1].ident, Identities: size}
		g.Covered[row] = counts
	}
	return g, nil
}
