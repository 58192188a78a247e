package tableformat

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// gridHoles builds the grid test table (10 s intervals from t0, one
// entity column "host"): h1 covers intervals 0..59; h2 the same except
// 12..17 (the minute [120 s, 180 s)); h3 starts late, at interval 30.
// Version 2 holds h1 and h2, version 3 adds h3.
func gridHoles(t *testing.T) *appendEnv {
	e := newAppendEnv(t, tsIndex())
	var first, second []row
	for i := int64(0); i < 60; i++ {
		first = append(first, row{i * 10, "h1", i})
		if i < 12 || i >= 18 {
			first = append(first, row{i*10 + 7, "h2", i})
		}
		if i >= 30 {
			second = append(second, row{i * 10, "h3", i})
		}
	}
	for _, rows := range [][]row{first, second} {
		e.mustAppend(t, rows...)
	}
	return e
}

func gridQuery(columns, rows int) CoverageGridQuery {
	return CoverageGridQuery{Columns: columns, Rows: rows}
}

func tsp(sec int64) *IndexValue { v := tsAt(sec); return &v }

// edgeSeconds renders timestamp edges as seconds after t0.
func edgeSeconds(edges []IndexValue) string {
	parts := make([]string, len(edges))
	for i, e := range edges {
		parts[i] = fmt.Sprint(int64(e.Time.Sub(t0).Seconds()))
	}
	return strings.Join(parts, " ")
}

// wantGridRows checks g's rows (as rowLabels renders them) and the
// covered counts of each.
func wantGridRows(t *testing.T, g *CoverageGrid, rows, covered string) {
	t.Helper()
	if got := rowLabels(g.Rows); got != rows {
		t.Fatalf("rows %s", got)
	}
	if got := fmt.Sprint(g.Covered); got != covered {
		t.Fatalf("covered %s", got)
	}
}

func rowLabels(rows []CoverageGridRow) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = fmt.Sprintf("%s-%s:%d", r.First, r.Last, r.Identities)
	}
	return strings.Join(parts, " ")
}

func TestCoverageGridDefaultsToTheData(t *testing.T) {
	e := gridHoles(t)
	g, err := e.tb.CoverageGrid(e.ctx, e.tb.State(), gridQuery(4, DefaultGridRows))
	if err != nil {
		t.Fatal(err)
	}
	// The data runs from 0 s to 597 s: the range is [0 s, 600 s).
	if g.Start.String() != "2024-06-01T00:00:00Z" || g.End.String() != "2024-06-01T00:10:00Z" || g.EndInclusive {
		t.Fatalf("range [%s, %s) inclusive %v", g.Start, g.End, g.EndInclusive)
	}
	if g.Intervals != 60 || g.Identities != 3 || !slices.Equal(g.EntityColumns, []string{"host"}) {
		t.Fatalf("intervals %d identities %d entity columns %v", g.Intervals, g.Identities, g.EntityColumns)
	}
	if got := edgeSeconds(g.Edges); got != "0 150 300 450 600" {
		t.Fatalf("edges %s", got)
	}
	if !slices.Equal(g.ColumnIntervals, []uint64{15, 15, 15, 15}) {
		t.Fatalf("column intervals %v", g.ColumnIntervals)
	}
	// h2 misses 12..14 of bin 0 and 15..17 of bin 1; h3 has nothing
	// before interval 30.
	wantGridRows(t, g, "h1-h1:1 h2-h2:1 h3-h3:1", "[[15 15 15 15] [12 12 15 15] [0 0 15 15]]")
}

func TestCoverageGridBinsAndGroups(t *testing.T) {
	e := gridHoles(t)
	st := e.tb.State()
	// 60 intervals in 7 bins: 4 of 9, then 3 of 8.
	g, err := e.tb.CoverageGrid(e.ctx, st, gridQuery(7, 200))
	if err != nil {
		t.Fatal(err)
	}
	if got := edgeSeconds(g.Edges); got != "0 90 180 270 360 440 520 600" {
		t.Fatalf("edges %s", got)
	}
	if !slices.Equal(g.ColumnIntervals, []uint64{9, 9, 9, 9, 8, 8, 8}) {
		t.Fatalf("column intervals %v", g.ColumnIntervals)
	}
	// h2: bin 1 is intervals 9..17, of which 12..17 are missing.
	if got := fmt.Sprint(g.Covered[1]); got != "[9 3 9 9 8 8 8]" {
		t.Fatalf("h2 %s", got)
	}
	// Two rows for three hosts: {h1, h2} and {h3}, counts summed.
	g, err = e.tb.CoverageGrid(e.ctx, st, gridQuery(4, 2))
	if err != nil {
		t.Fatal(err)
	}
	wantGridRows(t, g, "h1-h2:2 h3-h3:1", "[[27 27 30 30] [0 0 15 15]]")
	// One row and one column: everything.
	g, err = e.tb.CoverageGrid(e.ctx, st, gridQuery(1, 1))
	if err != nil || fmt.Sprint(g.Covered) != "[[144]]" || rowLabels(g.Rows) != "h1-h3:3" || edgeSeconds(g.Edges) != "0 600" {
		t.Fatalf("1x1 grid %+v %v", g, err)
	}
}

func TestCoverageGridExplicitRange(t *testing.T) {
	e := gridHoles(t)
	st := e.tb.State()
	// Bounds off interval boundaries: [5 s, 125 s) touches intervals
	// 0..12, one bin each; the edges lie on interval boundaries.
	q := gridQuery(200, 200)
	q.Start, q.End = tsp(5), tsp(125)
	g, err := e.tb.CoverageGrid(e.ctx, st, q)
	if err != nil {
		t.Fatal(err)
	}
	if g.Start.String() != "2024-06-01T00:00:05Z" || g.End.String() != "2024-06-01T00:02:05Z" || g.Intervals != 13 || len(g.ColumnIntervals) != 13 {
		t.Fatalf("range [%s, %s) intervals %d bins %d", g.Start, g.End, g.Intervals, len(g.ColumnIntervals))
	}
	if g.Edges[0].String() != "2024-06-01T00:00:00Z" || g.Edges[13].String() != "2024-06-01T00:02:10Z" {
		t.Fatalf("edges %s", edgeSeconds(g.Edges))
	}
	if got := fmt.Sprint(g.Covered[1]); got != "[1 1 1 1 1 1 1 1 1 1 1 1 0]" {
		t.Fatalf("h2 %s", got)
	}
	// Only a start: the end defaults to the data's.
	q = gridQuery(2, 200)
	q.Start = tsp(300)
	if g, err = e.tb.CoverageGrid(e.ctx, st, q); err != nil || g.Intervals != 30 || g.End.String() != "2024-06-01T00:10:00Z" || edgeSeconds(g.Edges) != "300 450 600" {
		t.Fatalf("start only: %+v %v", g, err)
	}
	// Only an end: the start defaults to the data's.
	q = gridQuery(3, 200)
	q.End = tsp(150)
	if g, err = e.tb.CoverageGrid(e.ctx, st, q); err != nil || g.Intervals != 15 || g.Start.String() != "2024-06-01T00:00:00Z" || fmt.Sprint(g.Covered) != "[[5 5 5] [5 5 2] [0 0 0]]" {
		t.Fatalf("end only: %+v %v", g, err)
	}
	// Beyond the data: nothing covered, every identity still listed.
	q = gridQuery(2, 200)
	q.Start, q.End = tsp(3600), tsp(3700)
	if g, err = e.tb.CoverageGrid(e.ctx, st, q); err != nil || fmt.Sprint(g.Covered) != "[[0 0] [0 0] [0 0]]" || g.Identities != 3 {
		t.Fatalf("beyond the data: %+v %v", g, err)
	}
}

// TestCoverageGridAtVersion: an older snapshot has its own identities and
// bounds.
func TestCoverageGridAtVersion(t *testing.T) {
	e := gridHoles(t)
	st := mustStateAt(t, e.tb, 2)
	g, err := e.tb.CoverageGrid(e.ctx, st, gridQuery(2, 200))
	if err != nil {
		t.Fatal(err)
	}
	if g.Identities != 2 || rowLabels(g.Rows) != "h1-h1:1 h2-h2:1" || fmt.Sprint(g.Covered) != "[[30 30] [24 30]]" || g.End.String() != "2024-06-01T00:10:00Z" {
		t.Fatalf("version 2: %+v", g)
	}
}

func TestCoverageGridErrors(t *testing.T) {
	e := gridHoles(t)
	st := e.tb.State()
	i64 := Int64Value(0)
	cases := []struct {
		q    CoverageGridQuery
		frag string
	}{
		{gridQuery(0, 1), "columns: 0 is out of range"},
		{gridQuery(4097, 1), "columns: 4097 is out of range"},
		{gridQuery(-2, 1), "columns: -2"},
		{gridQuery(1, 0), "rows: 0 is out of range"},
		{gridQuery(1, 4097), "rows: 4097 is out of range"},
		{CoverageGridQuery{Columns: 1, Rows: 1, Start: tsp(10), End: tsp(10)}, "must be before end"},
		{CoverageGridQuery{Columns: 1, Rows: 1, Start: tsp(600)}, "start 2024-06-01T00:10:00Z must be before end 2024-06-01T00:10:00Z"},
		{CoverageGridQuery{Columns: 1, Rows: 1, End: tsp(0)}, "must be before end 2024-06-01T00:00:00Z"},
		{CoverageGridQuery{Columns: 1, Rows: 1, Start: &i64}, "must be timestamp values"},
		{CoverageGridQuery{Columns: 1, Rows: 1, End: &i64}, "must be timestamp values"},
	}
	for _, c := range cases {
		if _, err := e.tb.CoverageGrid(e.ctx, st, c.q); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), c.frag) {
			t.Errorf("%+v: %v, want ErrInvalidInput mentioning %q", c.q, err, c.frag)
		}
	}
}

func TestCoverageGridEmptyTable(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	st := e.tb.State()
	if _, _, ok := st.IndexBounds(); ok {
		t.Fatal("a new table has index bounds")
	}
	for _, q := range []CoverageGridQuery{gridQuery(1, 1), {Columns: 1, Rows: 1, Start: tsp(0)}, {Columns: 1, Rows: 1, End: tsp(10)}} {
		if _, err := e.tb.CoverageGrid(e.ctx, st, q); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "no data yet") {
			t.Errorf("%+v: %v, want ErrInvalidInput saying there is no data yet", q, err)
		}
	}
	// With both bounds the grid is empty: no identities, no rows.
	q := gridQuery(2, 2)
	q.Start, q.End = tsp(0), tsp(40)
	g, err := e.tb.CoverageGrid(e.ctx, st, q)
	if err != nil || g.Identities != 0 || len(g.Rows) != 0 || len(g.Covered) != 0 || !slices.Equal(g.ColumnIntervals, []uint64{2, 2}) {
		t.Fatalf("empty table with a range: %+v %v", g, err)
	}
}

// appendColumns appends one batch of the given columns (int64, uint64,
// int32 or string slices) to e's table.
func appendColumns(t *testing.T, e *appendEnv, schema *arrow.Schema, cols ...any) {
	t.Helper()
	b := array.NewRecordBuilder(e.mem, schema)
	defer b.Release()
	for i, c := range cols {
		switch v := c.(type) {
		case []int64:
			b.Field(i).(*array.Int64Builder).AppendValues(v, nil)
		case []uint64:
			b.Field(i).(*array.Uint64Builder).AppendValues(v, nil)
		case []int32:
			b.Field(i).(*array.Int32Builder).AppendValues(v, nil)
		case []string:
			b.Field(i).(*array.StringBuilder).AppendValues(v, nil)
		default:
			t.Fatalf("column %d: unsupported %T", i, c)
		}
	}
	rdr := readerOf(t, schema, b.NewRecordBatch())
	defer rdr.Release()
	if _, err := e.tb.Append(e.ctx, rdr, e.opts()); err != nil {
		t.Fatal(err)
	}
}

// TestCoverageGridIntegerIndexWithoutEntities: an int64 index (width 10)
// and no entity columns: one row, integer edges.
func TestCoverageGridIntegerIndexWithoutEntities(t *testing.T) {
	e := newAppendEnv(t, IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 10}})
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	appendColumns(t, e, schema, []int64{3, 10, 29, 55, 61})
	g, err := e.tb.CoverageGrid(e.ctx, e.tb.State(), gridQuery(3, 200))
	if err != nil {
		t.Fatal(err)
	}
	// Intervals 0, 1, 2, 5, 6 of [0, 70): bins [0, 30), [30, 50), [50, 70).
	if g.Start != Int64Value(0) || g.End != Int64Value(70) || g.Intervals != 7 || g.Identities != 1 {
		t.Fatalf("range [%s, %s) intervals %d identities %d", g.Start, g.End, g.Intervals, g.Identities)
	}
	if g.EntityColumns == nil || len(g.EntityColumns) != 0 {
		t.Fatalf("entity columns %#v, want empty", g.EntityColumns)
	}
	if !slices.Equal(g.Edges, []IndexValue{Int64Value(0), Int64Value(30), Int64Value(50), Int64Value(70)}) {
		t.Fatalf("edges %v", g.Edges)
	}
	if !slices.Equal(g.ColumnIntervals, []uint64{3, 2, 2}) || fmt.Sprint(g.Covered) != "[[3 0 2]]" || rowLabels(g.Rows) != "-:1" {
		t.Fatalf("column intervals %v covered %v rows %s", g.ColumnIntervals, g.Covered, rowLabels(g.Rows))
	}
	// A negative explicit range.
	q := gridQuery(2, 1)
	lo, hi := Int64Value(-20), Int64Value(15)
	q.Start, q.End = &lo, &hi
	if g, err = e.tb.CoverageGrid(e.ctx, e.tb.State(), q); err != nil || fmt.Sprint(g.Covered) != "[[0 2]]" || g.Edges[0] != Int64Value(-20) || g.Edges[2] != Int64Value(20) {
		t.Fatalf("negative range: %+v %v", g, err)
	}
}

// TestCoverageGridTopOfUint64Domain: data at math.MaxUint64 puts the
// default end at the top of the domain, written inclusive.
func TestCoverageGridTopOfUint64Domain(t *testing.T) {
	e := newAppendEnv(t, IndexSpec{Column: "k", Kind: IndexKind{Type: IndexUInt64, Width: 10}})
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Uint64}}, nil)
	appendColumns(t, e, schema, []uint64{math.MaxUint64 - 25, math.MaxUint64})
	g, err := e.tb.CoverageGrid(e.ctx, e.tb.State(), gridQuery(3, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := []IndexValue{Uint64Value(18446744073709551590), Uint64Value(18446744073709551600), Uint64Value(18446744073709551610), Uint64Value(math.MaxUint64)}
	if !slices.Equal(g.Edges, want) || !g.EndInclusive || g.End != Uint64Value(math.MaxUint64) || fmt.Sprint(g.Covered) != "[[1 0 1]]" {
		t.Fatalf("grid %+v", g)
	}
}

// TestCoverageGridMultiColumnIdentities: identities of two entity columns
// are labelled with their values joined by ",", in canonical order.
func TestCoverageGridMultiColumnIdentities(t *testing.T) {
	e := newAppendEnv(t, IndexSpec{Column: "k", EntityColumns: []string{"host", "dc"}, Kind: IndexKind{Type: IndexInt64, Width: 1}})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "dc", Type: arrow.PrimitiveTypes.Int32},
	}, nil)
	appendColumns(t, e, schema, []int64{0, 1, 0, 3, 2}, []string{"b", "b", "a", "a", "a"}, []int32{1, 1, 2, 10, 1})
	g, err := e.tb.CoverageGrid(e.ctx, e.tb.State(), gridQuery(2, 2))
	if err != nil {
		t.Fatal(err)
	}
	// Identities a,1 a,2 a,10 b,1 (dc compares as a number) in two rows.
	// Bins [0, 2) and [2, 4): a,1 has key 2; a,2 key 0; a,10 key 3; b,1
	// keys 0 and 1.
	wantGridRows(t, g, "a,1-a,2:2 a,10-b,1:2", "[[1 1] [2 1]]")
}
