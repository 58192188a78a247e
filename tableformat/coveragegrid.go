package tableformat

import (
	"context"
	"errors"
	"strings"

	"github.com/tsflight/tsflight/coverage"
)

// Coverage grid sizes: the defaults a server applies when a request leaves
// them out, and the largest accepted.
const (
	DefaultGridColumns = 200
	DefaultGridRows    = 200
	MaxGridColumns     = 4096
	MaxGridRows        = 4096
)

// CoverageGridQuery asks for a coverage heat map of a table: time bins
// across, groups of entities down.
type CoverageGridQuery struct {
	// Start and End bound the half-open index range [Start, End). A nil
	// Start is the start of the interval holding the table's smallest
	// index value, a nil End the end of the interval holding its largest
	// (see State.IndexBounds); a table without data has neither.
	Start, End *IndexValue
	// Columns is the most time bins, 1 to MaxGridColumns. The range's
	// intervals are cut into min(Columns, intervals) contiguous bins of
	// near-equal interval counts, the first ones one interval longer.
	Columns int
	// Rows is the most entity rows, 1 to MaxGridRows. The table's
	// identities, in canonical order, are cut into min(Rows, identities)
	// contiguous groups of near-equal size, the first ones one larger. A
	// table without entity columns has one row.
	Rows int
}

// CoverageGrid is the coverage heat map of a table. The ratio of a cell is
// Covered[r][c] / (Rows[r].Identities × ColumnIntervals[c]).
type CoverageGrid struct {
	// Start and End are the range's bounds: as asked, or the defaults
	// (on interval boundaries).
	Start, End IndexValue
	// EndInclusive is set when the last bin reaches the very top of the
	// index domain, which cannot be written half-open: the last edge (and
	// End, when it was defaulted) is then the domain's last value,
	// inclusive.
	EndInclusive bool
	// Intervals is the number of index intervals in the range.
	Intervals uint64
	// Identities is the number of identities of the table (1 for a table
	// without entity columns).
	Identities uint64
	// EntityColumns are the table's entity columns (empty, not nil, when
	// it has none).
	EntityColumns []string
	// Edges are the bins' boundaries in index units, one more than there
	// are bins: bin c is [Edges[c], Edges[c+1]). They lie on interval
	// boundaries, so the first and last edge enclose Start and End.
	Edges []IndexValue
	// ColumnIntervals is the number of intervals of each bin.
	ColumnIntervals []uint64
	// Rows are the entity groups, top to bottom.
	Rows []CoverageGridRow
	// Covered counts the covered (identity, interval) pairs of each cell,
	// one slice per row with one count per bin.
	Covered [][]uint64
}

// CoverageGridRow is one group of identities of a CoverageGrid.
type CoverageGridRow struct {
	// First and Last are the group's first and last identity, each
	// written as its entity values joined with "," ("" for a table without
	// entity columns).
	First, Last string
	// Identities is the number of identities in the group.
	Identities uint64
}

// IndexBounds returns the smallest and largest index value of the live
// segments, and false when the snapshot has no segments.
func (s *State) IndexBounds() (lo, hi IndexValue, ok bool) {
	for i := range s.Segments {
		seg := &s.Segments[i]
		if !ok || seg.IndexMin.Compare(lo) < 0 {
			lo = seg.IndexMin
		}
		if !ok || seg.IndexMax.Compare(hi) > 0 {
			hi = seg.IndexMax
		}
		ok = true
	}
	return lo, hi, ok
}

// CoverageGrid computes the coverage heat map of st over q's range from
// the table's coverage bitmaps, without reading data.
func (t *Table) CoverageGrid(ctx context.Context, st *State, q CoverageGridQuery) (*CoverageGrid, error) {
	if q.Columns < 1 || q.Columns > MaxGridColumns {
		return nil, invalidf("columns: %d is out of range (1 to %d)", q.Columns, MaxGridColumns)
	}
	if q.Rows < 1 || q.Rows > MaxGridRows {
		return nil, invalidf("rows: %d is out of range (1 to %d)", q.Rows, MaxGridRows)
	}
	ix := st.Index()
	d := indexDomain(ix)
	r, out, err := t.gridRange(st, d, q)
	if err != nil {
		return nil, err
	}
	var ok bool
	if out.Intervals, ok = r.Len().Uint64(); !ok {
		return nil, invalidf("range [%s, %s) spans more than 2^64 intervals; narrow it", out.Start, out.End)
	}
	cov, err := t.loadCoverage(ctx, st)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g, err := cov.set.Grid(r, q.Columns, q.Rows)
	if err != nil {
		return nil, invalidf("coverage grid of [%s, %s): %v", out.Start, out.End, err)
	}
	out.EntityColumns = append([]string{}, ix.EntityColumns...)
	out.Identities = 1
	if cov.set.IsEntity() {
		out.Identities = uint64(cov.set.Len())
	}
	out.Edges = make([]IndexValue, 0, len(g.Bins)+1)
	out.ColumnIntervals = make([]uint64, len(g.Bins))
	for c, b := range g.Bins {
		span := spanOf(ix, d, b)
		out.Edges = append(out.Edges, span.Start)
		out.ColumnIntervals[c] = span.Intervals
		if c == len(g.Bins)-1 {
			out.Edges = append(out.Edges, span.End)
			out.EndInclusive = span.EndInclusive
		}
	}
	out.Rows = make([]CoverageGridRow, len(g.Rows))
	for i, row := range g.Rows {
		out.Rows[i] = CoverageGridRow{First: gridLabel(row.First), Last: gridLabel(row.Last), Identities: uint64(row.Identities)}
	}
	out.Covered = g.Covered
	return out, nil
}

// gridRange resolves the grid's range to interval ids and fills in the
// grid's Start and End, taking a missing bound from the table's data.
func (t *Table) gridRange(st *State, d coverage.Domain, q CoverageGridQuery) (coverage.Range, *CoverageGrid, error) {
	ix := st.Index()
	if q.Start != nil && q.End != nil {
		_, r, err := t.queryRange(st, CoverageQuery{Start: *q.Start, End: *q.End})
		if err != nil {
			return coverage.Range{}, nil, err
		}
		return r, &CoverageGrid{Start: *q.Start, End: *q.End}, nil
	}
	lo, hi, ok := st.IndexBounds()
	if !ok {
		return coverage.Range{}, nil, invalidf("the table has no data yet, so the grid's range cannot default to it; give start and end")
	}
	for _, b := range []*IndexValue{q.Start, q.End} {
		if b != nil && b.Type != ix.Kind.Type {
			return coverage.Range{}, nil, invalidf("start and end must be %s values for this table", ix.Kind.Type)
		}
	}
	out := &CoverageGrid{}
	var r coverage.Range
	var err error
	if q.Start != nil {
		out.Start = *q.Start
		if r.First, err = intervalID(d, *q.Start, false); err != nil {
			return coverage.Range{}, nil, invalidf("start %s: %v", q.Start, err)
		}
	} else {
		if r.First, err = intervalID(d, lo, false); err != nil {
			return coverage.Range{}, nil, corruptf("", st.Version, err, "smallest index value %s lies outside the index domain", lo)
		}
		out.Start = spanOf(ix, d, coverage.Range{First: r.First, Last: r.First}).Start
	}
	if q.End != nil {
		out.End = *q.End
		r.Last, err = intervalID(d, *q.End, true)
		if errors.Is(err, coverage.ErrEmptyRange) { // nothing lies before End
			return coverage.Range{}, nil, invalidf("start %s (the start of the table's data) must be before end %s", out.Start, out.End)
		}
		if err != nil {
			return coverage.Range{}, nil, invalidf("end %s: %v", q.End, err)
		}
	} else {
		if r.Last, err = intervalID(d, hi, false); err != nil {
			return coverage.Range{}, nil, corruptf("", st.Version, err, "largest index value %s lies outside the index domain", hi)
		}
		last := spanOf(ix, d, coverage.Range{First: r.Last, Last: r.Last})
		out.End, out.EndInclusive = last.End, last.EndInclusive
	}
	if r.First > r.Last {
		if q.Start == nil {
			return coverage.Range{}, nil, invalidf("start %s (the start of the table's data) must be before end %s", out.Start, out.End)
		}
		return coverage.Range{}, nil, invalidf("start %s must be before end %s (the end of the table's data)", out.Start, out.End)
	}
	return r, out, nil
}

// intervalID returns the id of the interval holding v or, with before, of
// the interval holding the last value before v (v as an exclusive end).
func intervalID(d coverage.Domain, v IndexValue, before bool) (uint64, error) {
	switch v.Type {
	case IndexTimestamp:
		raw, ups := v.Time.UnixNano(), int64(1e9)
		if !inNanoRange(v.Time) {
			raw, ups = v.Time.Unix(), 1
		}
		if before {
			return d.TimestampIDBefore(raw, ups)
		}
		return d.TimestampID(raw, ups)
	case IndexInt64:
		if before {
			return d.Int64IDBefore(v.Int)
		}
		return d.Int64ID(v.Int)
	default:
		if before {
			return d.UInt64IDBefore(v.Uint)
		}
		return d.UInt64ID(v.Uint)
	}
}

// gridLabel writes an identity as its entity values joined with ","
// ("" for none).
func gridLabel(id coverage.Identity) string {
	parts := make([]string, len(id))
	for i, c := range identityFromCoverage(id) {
		parts[i] = c.String()
	}
	return strings.Join(parts, ",")
}
