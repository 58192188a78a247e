package tableformat

import (
	"sync"
	"testing"
	"time"
)

// waitHook records the waits of group leaders until the test ends.
func waitHook(t *testing.T) func() []int {
	t.Helper()
	var mu sync.Mutex
	var wants []int
	testHookGroupWait = func(want, queued int, wait time.Duration) {
		mu.Lock()
		wants = append(wants, want)
		mu.Unlock()
	}
	t.Cleanup(func() { testHookGroupWait = nil })
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), wants...)
	}
}

// TestGroupWaitAloneNeverWaits: a writer alone never waits for company,
// however long GroupWait allows: each of its appends is in flight alone.
func TestGroupWaitAloneNeverWaits(t *testing.T) {
	waits := waitHook(t)
	e := newAppendEnv(t, tsIndex())
	defer e.mem.AssertSize(t, 0)
	o := e.opts()
	o.GroupWait = time.Hour
	for i := range 20 {
		rdr := readerOf(t, inSchema(), inBatch(e.mem, row{int64(i * 10), "a", 1}))
		res, err := e.tb.Append(e.ctx, rdr, o)
		rdr.Release()
		if err != nil {
			t.Fatal(err)
		}
		if res.Grouped != 1 {
			t.Fatalf("append %d grouped with %d", i, res.Grouped)
		}
	}
	if w := waits(); len(w) != 0 {
		t.Fatalf("a lone writer's leaders waited %d times (for %v)", len(w), w)
	}
}

// TestGroupWaitGathersTheExpected: a leader whose previous group had three
// appends in flight waits for three, and commits as soon as they are
// queued, long before GroupWait ends.
func TestGroupWaitGathersTheExpected(t *testing.T) {
	waits := waitHook(t)
	var g appendGroups
	g.committed(3, time.Hour) // the previous group: 3 in flight, a long commit
	a, b, c := &groupMember{}, &groupMember{}, &groupMember{}
	if !g.enqueue(a) {
		t.Fatal("the first queued append does not lead")
	}
	got := make(chan []*groupMember, 1)
	start := time.Now()
	go func() { got <- g.gather(time.Minute) }()
	for len(waits()) == 0 { // the leader waits
		time.Sleep(time.Millisecond)
	}
	if g.enqueue(b) || g.enqueue(c) {
		t.Fatal("an append queued behind a leader leads")
	}
	batch := <-got
	if len(batch) != 3 || batch[0] != a || batch[1] != b || batch[2] != c {
		t.Fatalf("gathered %d appends, want a, b, c", len(batch))
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the leader waited %s: it did not notice the queue was complete", d)
	}
	if w := waits(); len(w) != 1 || w[0] != 3 {
		t.Fatalf("waits %v, want one for 3", w)
	}
}

// TestGroupWaitBounds: the leader waits at most GroupWait and at most half
// the previous commit's duration, and not at all once the table has been
// quiet for longer than a commit (the writers of the estimate are gone) or
// with GroupWait 0.
func TestGroupWaitBounds(t *testing.T) {
	cases := []struct {
		name      string
		took      time.Duration
		ago       time.Duration
		wait      time.Duration
		wantWaits int
	}{
		{"half the commit", 40 * time.Millisecond, 0, time.Hour, 1},
		{"GroupWait", time.Hour, 0, 30 * time.Millisecond, 1},
		{"quiet table", 10 * time.Millisecond, time.Second, time.Hour, 0},
		{"GroupWait 0", time.Hour, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var bound time.Duration
			n := 0
			testHookGroupWait = func(want, queued int, wait time.Duration) { n, bound = n+1, wait }
			t.Cleanup(func() { testHookGroupWait = nil })
			var g appendGroups
			g.committed(4, tc.took)
			g.ended = g.ended.Add(-tc.ago)
			g.enqueue(&groupMember{})
			start := time.Now()
			if batch := g.gather(tc.wait); len(batch) != 1 {
				t.Fatalf("gathered %d, want the leader alone", len(batch))
			}
			if n != tc.wantWaits {
				t.Fatalf("%d waits, want %d", n, tc.wantWaits)
			}
			if n == 1 {
				if want := min(tc.wait, tc.took/2); bound != want {
					t.Fatalf("waited up to %s, want %s", bound, want)
				}
				if d := time.Since(start); d < bound {
					t.Fatalf("returned after %s, before the bound %s with the queue incomplete", d, bound)
				}
			}
		})
	}
}
