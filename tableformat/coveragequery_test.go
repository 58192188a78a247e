package tableformat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func tsAt(sec int64) IndexValue { return TimeValue(t0.Add(time.Duration(sec) * time.Second)) }

func spans(ss []Span) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, fmt.Sprintf("[%ds,%ds)", s.Start.Time.Sub(t0)/time.Second, s.End.Time.Sub(t0)/time.Second))
	}
	return strings.Join(parts, " ")
}

// coverageTable: h1 covers intervals 0..99 except 10..19 and 50..54; h2
// covers 0..99 except 90..99 (10 s intervals from t0).
func coverageTable(t *testing.T) *appendEnv {
	e := newAppendEnv(t, tsIndex())
	var rows []row
	for i := int64(0); i < 100; i++ {
		if !(i >= 10 && i < 20) && !(i >= 50 && i < 55) {
			rows = append(rows, row{i*10 + 3, "h1", i})
		}
		if i < 90 {
			rows = append(rows, row{i * 10, "h2", i})
		}
	}
	e.mustAppend(t, rows[:60]...)
	e.mustAppend(t, rows[60:]...)
	return e
}

func TestCoverageAndGaps(t *testing.T) {
	e := coverageTable(t)
	st := e.tb.State()
	h1 := Identity{{Type: EntityUtf8, Str: "h1"}}
	q := CoverageQuery{Start: tsAt(0), End: tsAt(1000), Entity: h1}
	c, err := e.tb.Coverage(e.ctx, st, q)
	if err != nil {
		t.Fatal(err)
	}
	if c.Intervals != 100 || c.Covered != 85 || c.Expected != 100 || c.Ratio != 0.85 {
		t.Fatalf("h1 coverage %+v", c)
	}
	g, err := e.tb.Gaps(e.ctx, st, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := spans(g.Gaps); got != "[100s,200s) [500s,550s)" {
		t.Fatalf("h1 gaps %s", got)
	}
	if g.Longest == nil || g.Longest.Intervals != 10 || spans([]Span{*g.Longest}) != "[100s,200s)" || g.MissingIntervals != 15 {
		t.Fatalf("h1 longest %+v missing %d", g.Longest, g.MissingIntervals)
	}
	if g.LastCovered == nil || spans([]Span{*g.LastCovered}) != "[550s,1000s)" {
		t.Fatalf("h1 last covered %+v", g.LastCovered)
	}
	if g.Gaps[0].Start.String() != "2024-06-01T00:01:40Z" {
		t.Fatalf("gap start renders as %s", g.Gaps[0].Start)
	}
	// Whole table.
	all := CoverageQuery{Start: tsAt(0), End: tsAt(1000)}
	c, err = e.tb.Coverage(e.ctx, st, all)
	if err != nil || c.Identities != 2 || c.Expected != 200 || c.Covered != 175 {
		t.Fatalf("table coverage %+v %v", c, err)
	}
	g, err = e.tb.Gaps(e.ctx, st, all)
	if err != nil || spans(g.Gaps) != "[100s,200s) [500s,550s) [900s,1000s)" || spans([]Span{*g.LastCovered}) != "[550s,900s)" {
		t.Fatalf("table gaps %s last %v %v", spans(g.Gaps), g.LastCovered, err)
	}
	// Limit, sub-interval bounds, a minimum window.
	g, err = e.tb.Gaps(e.ctx, st, CoverageQuery{Start: tsAt(105), End: tsAt(551), Entity: h1, Limit: 1, MinWindow: 50})
	if err != nil || spans(g.Gaps) != "[100s,200s)" || !g.Truncated || g.MissingIntervals != 15 || g.LastCovered != nil {
		t.Fatalf("limited gaps %s truncated %v missing %d last %v %v", spans(g.Gaps), g.Truncated, g.MissingIntervals, g.LastCovered, err)
	}
	// An identity with no rows is all gap.
	g, err = e.tb.Gaps(e.ctx, st, CoverageQuery{Start: tsAt(0), End: tsAt(100), Entity: Identity{{Type: EntityUtf8, Str: "nobody"}}})
	if err != nil || spans(g.Gaps) != "[0s,100s)" || g.LastCovered != nil {
		t.Fatalf("unknown entity gaps %s %v", spans(g.Gaps), err)
	}
}

func TestCoverageQueryErrors(t *testing.T) {
	e := coverageTable(t)
	st := e.tb.State()
	cases := []struct {
		q   CoverageQuery
		msg string
	}{
		{CoverageQuery{Start: tsAt(10), End: tsAt(10)}, "must be before end"},
		{CoverageQuery{Start: tsAt(10), End: tsAt(0)}, "must be before end"},
		{CoverageQuery{Start: Int64Value(0), End: Int64Value(10)}, "must be timestamp values"},
		{CoverageQuery{Start: tsAt(0), End: tsAt(10), Entity: Identity{{Type: EntityUtf8, Str: "a"}, {Type: EntityUtf8, Str: "b"}}}, "a value for each entity column"},
		{CoverageQuery{Start: tsAt(0), End: tsAt(10), Entity: Identity{{Type: EntityInt64, Int: 1}}}, ""},
	}
	for _, c := range cases {
		_, err1 := e.tb.Coverage(e.ctx, st, c.q)
		_, err2 := e.tb.Gaps(e.ctx, st, c.q)
		_, _, err3 := e.tb.ListGaps(e.ctx, st, c.q)
		if c.msg == "" { // a well-formed identity of another type is simply absent
			if err1 != nil || err2 != nil || err3 != nil {
				t.Errorf("%+v: %v / %v / %v", c.q, err1, err2, err3)
			}
			continue
		}
		for _, err := range []error{err1, err2, err3} {
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%+v: %v, want ErrInvalidInput mentioning %q", c.q, err, c.msg)
			}
		}
	}
}

// TestCoverageRecoversFromMissingSnapshot: with the table snapshot gone,
// queries and the next append rebuild coverage from segment sidecars; a
// missing segment sidecar is corruption.
func TestCoverageRecoversFromMissingSnapshot(t *testing.T) {
	e := coverageTable(t)
	st := e.tb.State()
	if err := os.Remove(filepath.Join(e.dir, st.Coverage.Path)); err != nil {
		t.Fatal(err)
	}
	fresh := mustOpen(t, e.tb.fs, nil)
	c, err := fresh.Coverage(e.ctx, fresh.State(), CoverageQuery{Start: tsAt(0), End: tsAt(1000)})
	if err != nil || c.Covered != 175 {
		t.Fatalf("rebuilt coverage %+v %v", c, err)
	}
	// The next append still detects overlap against the rebuilt coverage.
	e.tb = fresh
	if _, err := e.append(row{995, "h1", 1}); !errors.Is(err, ErrOverlap) {
		t.Fatalf("append over rebuilt coverage: %v, want ErrOverlap", err)
	}
	res, err := e.append(row{2000, "h1", 1})
	if err != nil {
		t.Fatal(err)
	}
	// The append wrote the segment-union marker again.
	if _, err := os.Stat(filepath.Join(e.dir, fresh.State().Coverage.Path)); err != nil || res.Version != 4 || fresh.State().Coverage.Path != unionCoveragePath {
		t.Fatalf("marker after the append: %v (pointer %v)", err, fresh.State().Coverage)
	}
	// Now remove a segment sidecar as well as the snapshot: corruption.
	st = fresh.State()
	os.Remove(filepath.Join(e.dir, st.Coverage.Path))
	os.Remove(filepath.Join(e.dir, st.Segments[0].CoveragePath))
	again, _ := Open(e.ctx, e.tb.fs, nil)
	if _, err := again.Coverage(e.ctx, again.State(), CoverageQuery{Start: tsAt(0), End: tsAt(10)}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), st.Segments[0].CoveragePath) {
		t.Fatalf("missing sidecar: %v, want ErrCorrupt naming it", err)
	}
	if _, _, err := again.ListGaps(e.ctx, again.State(), CoverageQuery{Start: tsAt(0), End: tsAt(10)}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("missing sidecar: ListGaps %v, want ErrCorrupt", err)
	}
}
