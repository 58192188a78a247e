package tableformat

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// splitFixture is a plan of synthetic segments with these row counts (Split
// looks at nothing else).
func splitFixture(rows ...uint64) *ScanPlan {
	segs := make([]SegmentMeta, len(rows))
	for i, r := range rows {
		segs[i] = SegmentMeta{Path: fmt.Sprintf("seg-%02d", i), RowCount: r}
	}
	return &ScanPlan{scan: &scanPlan{segments: segs}}
}

// checkSplit checks the rules of Split(n) on p: at least one part, at most
// n and never more than the segments (exactly that many when there are
// enough segments); the parts, in order, are the plan's segments, each once;
// no part is empty unless the plan is; and each part holds at most its share
// of the rows, ceil(total/n), plus the largest segment. It returns the
// number of segments of each part.
func checkSplit(t *testing.T, p *ScanPlan, n int) []int {
	t.Helper()
	segs := p.Segments()
	parts := p.Split(n)
	want := max(1, min(n, len(segs)))
	if len(parts) != want {
		t.Fatalf("Split(%d) of %d segments: %d parts, want %d", n, len(segs), len(parts), want)
	}
	var total, largest uint64
	for _, s := range segs {
		total += s.RowCount
		largest = max(largest, s.RowCount)
	}
	share := (total + uint64(want) - 1) / uint64(want)
	var joined []SegmentMeta
	sizes := make([]int, len(parts))
	for i, part := range parts {
		ps := part.Segments()
		if len(ps) == 0 && len(segs) > 0 {
			t.Fatalf("Split(%d): part %d is empty", n, i)
		}
		var rows uint64
		for _, s := range ps {
			rows += s.RowCount
		}
		if rows > share+largest {
			t.Fatalf("Split(%d) of %d rows: part %d holds %d rows, more than a share of %d plus the largest segment's %d", n, total, i, rows, share, largest)
		}
		if part.Schema() != p.Schema() || part.State() != p.State() {
			t.Fatalf("Split(%d): part %d does not keep the plan's schema and state", n, i)
		}
		sizes[i] = len(ps)
		joined = append(joined, ps...)
	}
	if !slices.EqualFunc(joined, segs, func(a, b SegmentMeta) bool { return a.Path == b.Path }) {
		t.Fatalf("Split(%d): the parts read %v, the plan %v", n, scSegPaths(joined), scSegPaths(segs))
	}
	again := p.Split(n)
	for i := range parts {
		if !slices.Equal(scSegPaths(again[i].Segments()), scSegPaths(parts[i].Segments())) {
			t.Fatalf("Split(%d) twice: part %d differs", n, i)
		}
	}
	return sizes
}

// TestScanPlanSplit: Split keeps the rule the Flight server used before the
// plan was a value (these part sizes are what it gave), so that a ticket
// names the same part as before; and on random plans it keeps its rules.
func TestScanPlanSplit(t *testing.T) {
	for _, c := range []struct {
		rows  []uint64
		n     int
		sizes []int
	}{
		{[]uint64{10, 1000, 10, 10, 500, 10}, 3, []int{2, 2, 2}},
		{[]uint64{100, 100, 100, 100, 100, 100, 100}, 3, []int{3, 2, 2}},
		{[]uint64{100, 100, 100, 100, 100, 100}, 3, []int{2, 2, 2}},
		{[]uint64{5000, 1, 1, 1, 1}, 4, []int{1, 1, 1, 2}},
		{[]uint64{1, 1, 1, 1, 5000}, 2, []int{4, 1}},
		{[]uint64{0, 0, 0, 0}, 3, []int{1, 1, 2}},
		{[]uint64{7, 3, 9, 1, 1, 12, 4, 4, 8, 2, 6}, 4, []int{3, 3, 3, 2}},
		{[]uint64{7, 3, 9}, 8, []int{1, 1, 1}},
		{[]uint64{3, 3}, 0, []int{2}},
		{[]uint64{3, 3}, -2, []int{2}},
		{nil, 4, []int{0}},
		{nil, 0, []int{0}},
	} {
		if got := checkSplit(t, splitFixture(c.rows...), c.n); !slices.Equal(got, c.sizes) {
			t.Errorf("Split(%d) of %v: parts of %v segments, want %v", c.n, c.rows, got, c.sizes)
		}
	}
	rnd := rand.New(rand.NewPCG(22, 4))
	for range 2000 {
		rows := make([]uint64, rnd.IntN(14))
		for i := range rows {
			switch rnd.IntN(4) {
			case 0:
				rows[i] = 0
			case 1:
				rows[i] = rnd.Uint64N(100000) // a large segment among small ones
			default:
				rows[i] = rnd.Uint64N(1000)
			}
		}
		checkSplit(t, splitFixture(rows...), rnd.IntN(18)-2)
	}
}

// scanPlanTable is a table of eight segments (one per append) of 5 to 26
// rows, three hosts, and rows that are all different.
func scanPlanTable(t *testing.T) *appendEnv {
	e := newAppendEnv(t, tsIndex())
	for s := range int64(8) {
		var rows []row
		for i := range 5 + s*3 {
			rows = append(rows, row{s*200 + i*7, fmt.Sprintf("h%d", (s+i)%3), s*1000 + i})
		}
		if _, err := e.append(rows...); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.tb.State().Segments); n != 8 {
		t.Fatalf("%d segments, want 8", n)
	}
	return e
}

// readPlanRows reads a plan with ReadPlan and renders its rows.
func readPlanRows(t *testing.T, e *appendEnv, p *ScanPlan) []string {
	t.Helper()
	rr, err := e.tb.ReadPlan(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if !rr.Schema().Equal(p.Schema()) {
		t.Fatalf("reader schema %s, plan schema %s", rr.Schema(), p.Schema())
	}
	var out []string
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			out = append(out, scRenderRow(rec, i))
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestScanPlanPartsReadTheScan: for several options and every part count,
// the parts of a plan, read with ReadPlan, return together exactly the rows
// of the whole scan, none twice, and reading plans no scan again.
func TestScanPlanPartsReadTheScan(t *testing.T) {
	e := scanPlanTable(t)
	st := e.tb.State()
	h1 := EntityValue{Type: EntityUtf8, Str: "h1"}
	from, to, after := tsAt(150), tsAt(650), tsAt(5000)
	for _, c := range []struct {
		name string
		opts ScanOptions
	}{
		{"all", ScanOptions{}},
		{"range", ScanOptions{Start: &from, End: &to}},
		{"entity and columns", ScanOptions{Entities: map[string]EntityValue{"host": h1}, Columns: []string{"v", "ts"}}},
		{"small batches", ScanOptions{BatchRows: 3, Parallelism: 3}},
		{"nothing in range", ScanOptions{Start: &after}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Alloc = e.mem
			whole := scRunScan(t, e.tb, c.opts).rows
			plan, err := st.Plan(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			segs := plan.Segments()
			if c.name == "nothing in range" && len(segs) != 0 {
				t.Fatalf("a range after every row plans %d segments", len(segs))
			}
			for n := 1; n <= len(segs)+2; n++ {
				before := ScanPlansMade()
				var got []string
				for _, part := range plan.Split(n) {
					got = append(got, readPlanRows(t, e, part)...)
				}
				if d := ScanPlansMade() - before; d != 0 {
					t.Fatalf("splitting and reading the parts planned %d scans", d)
				}
				slices.Sort(got)
				for i := 1; i < len(got); i++ {
					if got[i] == got[i-1] {
						t.Fatalf("%d parts: row %q read twice", n, got[i])
					}
				}
				scSameRows(t, got, whole)
			}
		})
	}
}

// TestScanPlanPartReadsOnlyItsSegments: a part reads its segments and no
// other; Scan plans once; a segment the plan does not select is refused
// by the restricted read of compaction and the last-value index.
func TestScanPlanPartReadsOnlyItsSegments(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	for i := int64(0); i < 3; i++ {
		if _, err := e.append(row{i * 100, "h", i}, row{i*100 + 10, "h", i}); err != nil {
			t.Fatal(err)
		}
	}
	st := e.tb.State()
	plan, err := st.Plan(ScanOptions{Columns: []string{"v"}, Alloc: e.mem})
	if err != nil || len(plan.Segments()) != 3 {
		t.Fatalf("plan: %v", err)
	}
	parts := plan.Split(3)
	rr, err := e.tb.ReadPlan(e.ctx, parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var vals []int64
	for rr.Next() {
		vals = append(vals, rr.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if n := rr.(*scanReader).run.stats.segments.Load(); n != 1 {
		t.Fatalf("the part opened %d segment files, want 1", n)
	}
	rr.Release()
	if len(vals) != 2 || vals[0] != 1 || vals[1] != 1 {
		t.Fatalf("the middle part returned %v", vals)
	}

	before := ScanPlansMade()
	rr, err = e.tb.Scan(e.ctx, st, ScanOptions{Columns: []string{}, Alloc: e.mem})
	if err != nil {
		t.Fatal(err)
	}
	rr.Release()
	if d := ScanPlansMade() - before; d != 1 {
		t.Fatalf("Scan planned %d times, want once", d)
	}

	segs := plan.Segments()
	start := tsAt(205)
	_, err = e.tb.scanOnly(e.ctx, st, []string{segs[2].Path, segs[0].Path}, ScanOptions{Start: &start})
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), segs[0].Path) {
		t.Fatalf("unplanned segment: %v", err)
	}
	rr, err = e.tb.scanOnly(e.ctx, st, []string{segs[2].Path, segs[2].Path}, ScanOptions{Start: &start, Columns: []string{"v"}, Alloc: e.mem})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	vals = vals[:0]
	for rr.Next() {
		vals = append(vals, rr.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := rr.Err(); err != nil || len(vals) != 1 || vals[0] != 2 {
		t.Fatalf("the last segment from 205 s returned %v (%v), want [2]", vals, err)
	}
}
