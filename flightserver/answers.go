package flightserver

import (
	"encoding/json"
	"strconv"

	"github.com/tsflight/tsflight/tableformat"
)

// The answers of the coverage actions, typed: the Flight handler encodes
// them, the SQL table functions build their rows from them, and the
// command line decodes them. Members are in the order the contract
// (docs/flight.md) lists them. Index values are raw JSON: an RFC 3339
// string for a timestamp index, an integer for the others.

// TableVersion is the answer of create-table and add-columns: the table
// and the version the action committed.
type TableVersion struct {
	Table   string `json:"table"`
	Version uint64 `json:"version"`
}

// RangeAnswer opens the coverage and gaps answers: the table, the version
// read, the range [Start, End) and the entity asked about, if any.
type RangeAnswer struct {
	Table   string                     `json:"table"`
	Version uint64                     `json:"version"`
	Start   json.RawMessage            `json:"start"`
	End     json.RawMessage            `json:"end"`
	Entity  map[string]json.RawMessage `json:"entity,omitempty"`
}

// CoverageAnswer is the answer of the coverage action.
type CoverageAnswer struct {
	RangeAnswer
	// Intervals in the range, entities counted (1 for an entity query),
	// Expected = Intervals × Identities, Covered (entity, interval) pairs
	// and Ratio = Covered / Expected.
	Intervals  uint64  `json:"intervals"`
	Identities uint64  `json:"identities"`
	Expected   uint64  `json:"expected"`
	Covered    uint64  `json:"covered"`
	Ratio      float64 `json:"ratio"`
}

// GapsAnswer is the answer of the gaps action. Longest and LastCovered
// are null when there is none.
type GapsAnswer struct {
	RangeAnswer
	Gaps             []Span `json:"gaps"`
	Truncated        bool   `json:"truncated"`
	MissingIntervals uint64 `json:"missing_intervals"`
	Longest          *Span  `json:"longest"`
	LastCovered      *Span  `json:"last_covered"`
}

// Span is a [Start, End) stretch of the index in its own units (]
// when EndInclusive: a span reaching the top of an integer domain).
type Span struct {
	Start        json.RawMessage `json:"start"`
	End          json.RawMessage `json:"end"`
	EndInclusive bool            `json:"end_inclusive,omitempty"`
	Intervals    uint64          `json:"intervals"`
}

// IndexJSON is an index value as the answers write it.
func IndexJSON(v tableformat.IndexValue) json.RawMessage {
	switch v.Type {
	case tableformat.IndexTimestamp:
		b, _ := json.Marshal(v.String()) // a string always encodes
		return b
	case tableformat.IndexInt64:
		return json.RawMessage(strconv.FormatInt(v.Int, 10))
	default:
		return json.RawMessage(strconv.FormatUint(v.Uint, 10))
	}
}

// IndexText is an index value of an answer as a person reads it: the
// timestamp without its quotes, the integer as written.
func IndexText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func spanOf(s tableformat.Span) Span {
	return Span{Start: IndexJSON(s.Start), End: IndexJSON(s.End), EndInclusive: s.EndInclusive, Intervals: s.Intervals}
}

func spanPtr(s *tableformat.Span) *Span {
	if s == nil {
		return nil
	}
	sp := spanOf(*s)
	return &sp
}

// rangeAnswer is the opening of an answer about table at version over
// [q.Start, q.End); the caller sets Entity.
func rangeAnswer(table string, version uint64, q tableformat.CoverageQuery) RangeAnswer {
	return RangeAnswer{Table: table, Version: version, Start: IndexJSON(q.Start), End: IndexJSON(q.End)}
}

// NewCoverageAnswer is the answer for a coverage report of table at
// version over [q.Start, q.End).
func NewCoverageAnswer(table string, version uint64, q tableformat.CoverageQuery, rep *tableformat.CoverageReport) *CoverageAnswer {
	return &CoverageAnswer{RangeAnswer: rangeAnswer(table, version, q),
		Intervals: rep.Intervals, Identities: rep.Identities, Expected: rep.Expected, Covered: rep.Covered, Ratio: rep.Ratio}
}

// newGapsAnswer is the answer for a gaps report.
func newGapsAnswer(table string, version uint64, q tableformat.CoverageQuery, rep *tableformat.GapsReport) *GapsAnswer {
	a := &GapsAnswer{RangeAnswer: rangeAnswer(table, version, q),
		Gaps: make([]Span, len(rep.Gaps)), Truncated: rep.Truncated, MissingIntervals: rep.MissingIntervals,
		Longest: spanPtr(rep.Longest), LastCovered: spanPtr(rep.LastCovered)}
	for i, g := range rep.Gaps {
		a.Gaps[i] = spanOf(g)
	}
	return a
}

// GridAnswer is the answer of the coverage-grid action: [Start, End) cut
// into len(ColumnIntervals) columns at Edges, the identities into
// len(Rows) groups, and Covered the covered (entity, interval) pairs of
// each cell, row by row.
type GridAnswer struct {
	Table           string            `json:"table"`
	Version         uint64            `json:"version"`
	Start           json.RawMessage   `json:"start"`
	End             json.RawMessage   `json:"end"`
	EndInclusive    bool              `json:"end_inclusive,omitempty"`
	Intervals       uint64            `json:"intervals"`
	Identities      uint64            `json:"identities"`
	EntityColumns   []string          `json:"entity_columns"`
	Edges           []json.RawMessage `json:"edges"`
	ColumnIntervals []uint64          `json:"column_intervals"`
	Rows            []GridRow         `json:"rows"`
	Covered         [][]uint64        `json:"covered"`
}

// GridRow is one entity group of the grid: its first and last entity
// (as the table orders them) and how many it holds.
type GridRow struct {
	First      string `json:"first"`
	Last       string `json:"last"`
	Identities uint64 `json:"identities"`
}

func newGridAnswer(table string, version uint64, g *tableformat.CoverageGrid) *GridAnswer {
	a := &GridAnswer{
		Table: table, Version: version, Start: IndexJSON(g.Start), End: IndexJSON(g.End), EndInclusive: g.EndInclusive,
		Intervals: g.Intervals, Identities: g.Identities, EntityColumns: g.EntityColumns,
		Edges: make([]json.RawMessage, len(g.Edges)), ColumnIntervals: g.ColumnIntervals,
		Rows: make([]GridRow, len(g.Rows)), Covered: g.Covered,
	}
	for i, e := range g.Edges {
		a.Edges[i] = IndexJSON(e)
	}
	for i, r := range g.Rows {
		a.Rows[i] = GridRow{First: r.First, Last: r.Last, Identities: r.Identities}
	}
	if a.Covered == nil {
		a.Covered = [][]uint64{}
	}
	return a
}
