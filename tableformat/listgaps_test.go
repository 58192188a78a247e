package tableformat

import (
	"context"
	"errors"
	"testing"
)

// errCounter is a context that counts the calls of its Err method and,
// when cancelAt > 0, cancels itself at that call. A gap walk looks at its
// context once every gapCheckEvery gaps, so the count bounds how many
// gaps the walk visited.
type errCounter struct {
	context.Context
	cancel   context.CancelFunc
	calls    int
	cancelAt int
}

func newErrCounter(cancelAt int) *errCounter {
	ctx, cancel := context.WithCancel(context.Background())
	return &errCounter{Context: ctx, cancel: cancel, cancelAt: cancelAt}
}

func (c *errCounter) Err() error {
	c.calls++
	if c.calls == c.cancelAt {
		c.cancel()
	}
	return c.Context.Err()
}

// manyGapsTable: host h1 has a row in every other 10 s interval of
// [0, 20n s), so that range holds n gaps of one interval each.
func manyGapsTable(t *testing.T, n int) *appendEnv {
	e := newAppendEnv(t, tsIndex())
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{int64(20 * i), "h1", int64(i)}
	}
	e.mustAppend(t, rows...)
	return e
}

// TestListGapsStopsAtTheLimit: ListGaps walks no further than the gap after
// its limit (the context, looked at every gapCheckEvery gaps, is asked
// once for a limit of 10 among 20,000 gaps, against some 80 times for the
// whole list), reports truncation exactly when gaps are left, and lists
// what Gaps lists.
func TestListGapsStopsAtTheLimit(t *testing.T) {
	const n = 20_000
	e := manyGapsTable(t, n)
	st := e.tb.State()
	h1 := Identity{{Type: EntityUtf8, Str: "h1"}}
	q := CoverageQuery{Start: tsAt(0), End: tsAt(20 * n), Entity: h1}
	if _, _, err := e.tb.ListGaps(e.ctx, st, q); err != nil { // loads the coverage
		t.Fatal(err)
	}
	for _, c := range []struct {
		limit, want int
		truncated   bool
	}{
		{10, 10, true}, {1000, 1000, true}, {n - 1, n - 1, true}, {n, n, false}, {n + 1, n, false}, {0, n, false},
	} {
		ctx := newErrCounter(0)
		q.Limit = c.limit
		gaps, truncated, err := e.tb.ListGaps(ctx, st, q)
		if err != nil || len(gaps) != c.want || truncated != c.truncated {
			t.Fatalf("limit %d: %d gaps, truncated %v, %v; want %d, %v", c.limit, len(gaps), truncated, err, c.want, c.truncated)
		}
		if gaps[0].Intervals != 1 || spans(gaps[:1]) != "[10s,20s)" || spans(gaps[len(gaps)-1:]) != spans([]Span{{Start: tsAt(int64(20*c.want - 10)), End: tsAt(int64(20 * c.want))}}) {
			t.Fatalf("limit %d: first gap %s, last %s", c.limit, spans(gaps[:1]), spans(gaps[len(gaps)-1:]))
		}
		visited := min(c.want+1, n) // the walk stops at the gap after the limit
		if most := visited/gapCheckEvery + 1; ctx.calls > most {
			t.Errorf("limit %d: the context was asked %d times, want at most %d: the walk went past the limit", c.limit, ctx.calls, most)
		}
		if c.limit == 0 && ctx.calls < n/gapCheckEvery {
			t.Errorf("the whole list asked the context %d times, want at least %d: it is not looked at during the walk", ctx.calls, n/gapCheckEvery)
		}
	}

	// The list is Gaps' list, with and without an entity and a limit.
	ce := coverageTable(t)
	cst := ce.tb.State()
	for _, q := range []CoverageQuery{
		{Start: tsAt(0), End: tsAt(1000), Entity: h1},
		{Start: tsAt(0), End: tsAt(1000)},
		{Start: tsAt(105), End: tsAt(551), Entity: h1, Limit: 1, MinWindow: 50},
		{Start: tsAt(0), End: tsAt(100), Entity: Identity{{Type: EntityUtf8, Str: "nobody"}}},
		{Start: tsAt(200), End: tsAt(500), Entity: h1}, // no gap
	} {
		rep, err := ce.tb.Gaps(ce.ctx, cst, q)
		if err != nil {
			t.Fatal(err)
		}
		gaps, truncated, err := ce.tb.ListGaps(ce.ctx, cst, q)
		if err != nil || gaps == nil || spans(gaps) != spans(rep.Gaps) || truncated != rep.Truncated {
			t.Errorf("%+v: ListGaps %s (truncated %v, %v), Gaps %s (truncated %v)", q, spans(gaps), truncated, err, spans(rep.Gaps), rep.Truncated)
		}
	}
}

// TestGapWalksStopOnCancel: a cancelled context stops ListGaps and Gaps with
// its error, before the first gap when it ended before the call, and
// within gapCheckEvery gaps when it ends during the walk.
func TestGapWalksStopOnCancel(t *testing.T) {
	const n = 20_000
	e := manyGapsTable(t, n)
	st := e.tb.State()
	q := CoverageQuery{Start: tsAt(0), End: tsAt(20 * n), Entity: Identity{{Type: EntityUtf8, Str: "h1"}}}
	if _, err := e.tb.Gaps(e.ctx, st, q); err != nil { // loads the coverage
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if gaps, truncated, err := e.tb.ListGaps(done, st, q); !errors.Is(err, context.Canceled) || gaps != nil || truncated {
		t.Errorf("ListGaps, cancelled before: %d gaps, truncated %v, %v; want context.Canceled", len(gaps), truncated, err)
	}
	if rep, err := e.tb.Gaps(done, st, q); !errors.Is(err, context.Canceled) || rep != nil {
		t.Errorf("Gaps, cancelled before: %v, %v; want context.Canceled", rep, err)
	}
	// Cancelled at the third look: the walk ends there, some 2 ×
	// gapCheckEvery gaps in, well short of n.
	for name, run := range map[string]func(context.Context) error{
		"ListGaps": func(ctx context.Context) error { _, _, err := e.tb.ListGaps(ctx, st, q); return err },
		"Gaps":     func(ctx context.Context) error { _, err := e.tb.Gaps(ctx, st, q); return err },
	} {
		ctx := newErrCounter(3)
		if err := run(ctx); !errors.Is(err, context.Canceled) || ctx.calls != 3 {
			t.Errorf("%s, cancelled during the walk: %v after %d looks at the context; want context.Canceled after 3", name, err, ctx.calls)
		}
	}
}
