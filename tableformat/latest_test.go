package tableformat

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestLatestSegments(t *testing.T) {
	spec := IndexSpec{Column: "ts", EntityColumns: []string{"host"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Unit: Seconds, N: 1}}}
	e := newAppendEnv(t, spec)
	// Segment 0: a, b, c at 0 s; 1: a, b at 10 s; 2: a at 20 s; 3: b at 15 s.
	// Newest: a → 2, b → 3, c → 0; segment 1 holds nobody's newest row.
	for i, rows := range [][]row{
		{{0, "a", 1}, {0, "b", 1}, {0, "c", 1}},
		{{10, "a", 2}, {10, "b", 2}},
		{{20, "a", 3}},
		{{15, "b", 3}},
	} {
		if _, err := e.append(rows...); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	st := e.tb.State()
	got, err := e.tb.LatestSegments(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{st.Segments[0].Path, st.Segments[2].Path, st.Segments[3].Path}
	if fmt.Sprint(paths(got)) != fmt.Sprint(want) {
		t.Fatalf("latest segments %v, want %v (segments %v)", paths(got), want, paths(st.Segments))
	}
	// Cached the second time, same answer.
	again, err := e.tb.LatestSegments(context.Background(), st)
	if err != nil || fmt.Sprint(paths(again)) != fmt.Sprint(want) {
		t.Fatalf("second call %v, %v", paths(again), err)
	}
	// A segment without a sidecar is always read.
	st2 := *st
	st2.Segments = append([]SegmentMeta(nil), st.Segments...)
	st2.Segments[1].CoveragePath = ""
	got, err = e.tb.LatestSegments(context.Background(), &st2)
	if err != nil || len(got) != 4 {
		t.Fatalf("with a sidecar missing: %v, %v; want all 4", paths(got), err)
	}
}

func TestLatestSegmentsNeedsEntityColumns(t *testing.T) {
	spec := IndexSpec{Column: "ts", Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Unit: Seconds, N: 1}}}
	e := newAppendEnv(t, spec)
	e.mustAppend(t, row{0, "a", 1})
	if _, err := e.tb.LatestSegments(context.Background(), e.tb.State()); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("err %v, want ErrInvalidInput", err)
	}
}

func paths(segs []SegmentMeta) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = s.Path
	}
	return out
}
