// Crash trials for the persisted last-value index with real processes: a
// writer process appends in a loop and persists the index after every
// commit (PersistLastValues), and is killed with SIGKILL at random moments,
// half of them aimed inside an index write. After every kill every index
// file under its final name must be whole and of this log, a new handle
// must answer LastValues exactly as a scan of every row does (whether it
// starts from a persisted index or not), every acknowledged batch must be
// there exactly once and no partial batch at all, the next append must
// succeed and the index must follow it; every tenth trial the 0.9.0
// package appends a batch and counts the rows, and the index must follow
// its append too.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 50), and
// TSFLIGHT_CRASH_SEED the seed of the random delays (crashtrial_test.go).

package tableformat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// crashLastTrials is the number of trials when TSFLIGHT_CRASH_TRIALS is
// unset (CI).
const crashLastTrials = 50

// TestCrashLastValuesWriterProcess is the writer of
// TestCrashLastValuesTrials: it appends batches first, first+1, …, logging
// "acked <batch> <version>", then prints "index <version>", persists the
// index and prints "indexed <version>", until it is killed.
func TestCrashLastValuesWriterProcess(t *testing.T) {
	env := crashChildStart(t, "TestCrashLastValuesWriterProcess", "TestCrashLastValuesTrials")
	ctx := context.Background()
	tb := env.openReady(t, nil, nil)
	for id := env.first; id < env.first+10000; id++ {
		res := env.appendAcked(t, ctx, tb, id)
		fmt.Printf("index %d\n", res.Version)
		if _, _, err := tb.PersistLastValues(ctx); err != nil {
			t.Fatalf("persist the index of version %d: %v", res.Version, err)
		}
		fmt.Printf("indexed %d\n", res.Version)
	}
	t.Fatal("the writer was never killed")
}

// lvCrashTally counts what the index crash trials saw.
type lvCrashTally struct {
	crashTally
	killsMidIndex, tempsLeft, indexesSeen, startedFromIndex int
	badIndex, wrongLast                                     int
}

func (c *lvCrashTally) failures() int {
	return c.crashTally.failures() + c.badIndex + c.wrongLast
}

func (c *lvCrashTally) line(seed uint64) string {
	return fmt.Sprintf("last-value index crash trials: trials=%d kills_mid_index=%d temp_files_left=%d indexes_seen=%d started_from_index=%d acked=%d unacked_committed=%d"+
		" bad_index=%d wrong_last=%d lost=%d duplicates=%d partial=%d unreadable=%d append_failed=%d python_appends=%d python_checks=%d seed=%d",
		c.trials, c.killsMidIndex, c.tempsLeft, c.indexesSeen, c.startedFromIndex, c.acked, c.unackedCommitted,
		c.badIndex, c.wrongLast, c.lost, c.dups, c.partial, c.unreadable, c.appendFailed, c.pythonAppends, c.pythonChecks, seed)
}

// measureIndexedAppend returns the median times of an append and of the
// index write after it, in this process on a scratch table.
func measureIndexedAppend(t *testing.T, mem memory.Allocator) (appendTime, indexTime time.Duration) {
	t.Helper()
	ctx := context.Background()
	tb := scratchCrashTable(t, nil)
	var as, is []time.Duration
	for id := range int64(9) {
		start := time.Now()
		if _, err := appendCrashBatch(ctx, tb, mem, id); err != nil {
			t.Fatal(err)
		}
		mid := time.Now()
		if _, _, err := tb.PersistLastValues(ctx); err != nil {
			t.Fatal(err)
		}
		as, is = append(as, mid.Sub(start)), append(is, time.Since(mid))
	}
	slices.Sort(as)
	slices.Sort(is)
	return as[len(as)/2], is[len(is)/2]
}

// TestCrashLastValuesTrials runs the index crash trials.
func TestCrashLastValuesTrials(t *testing.T) {
	tally := &lvCrashTally{}
	r := newCrashRun(t, crashRunSpec{title: "last-value index crash trials:", child: "TestCrashLastValuesWriterProcess", role: "writer",
		defaultTrials: crashLastTrials, salt: 0x27d4eb2f, tally: tally})
	ctx := r.ctx
	appendTime, indexTime := measureIndexedAppend(t, r.mem)
	t.Logf("an append takes about %s here and the index write after it %s; odd trials kill in [0, 3×) of both after the writer is ready, even ones in [0, 1.5×) of an index write after one starts", appendTime, indexTime)

	seenTemps := map[string]bool{}
	for trial := 1; trial <= r.trials; trial++ {
		tally.trials = trial
		c := r.start(trial, 60*time.Second)
		if trial%2 == 1 {
			c.killAfter(time.Duration(r.rng.Int64N(int64(3 * (appendTime + indexTime)))))
		} else {
			seen := strings.Count(c.output(), "index ")
			c.waitUntil("index write", 50*time.Microsecond, func(out string) bool { return strings.Count(out, "index ") > seen })
			c.killAfter(time.Duration(r.rng.Int64N(int64(3*indexTime/2) + 1)))
		}
		if out := c.output(); strings.Count(out, "index ") > strings.Count(out, "indexed ") {
			tally.killsMidIndex++
		}
		r.absorbAcked()

		// Every index under its final name is whole and of this log.
		probe := r.open(trial, nil)
		versions, temps, err := probe.listLastFiles()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range temps {
			if !seenTemps[n] {
				tally.tempsLeft++
			}
			seenTemps[n] = true
		}
		tally.indexesSeen += len(versions)
		var cache logDigests
		for _, v := range versions {
			st, err := probe.StateAt(ctx, v)
			if err == nil {
				var x *lastIndex
				if x, err = probe.readLastIndex(ctx, st, v, &cache); err == nil {
					x.release()
				}
			}
			if err != nil {
				tally.badIndex++
				t.Errorf("trial %d: index %d is not whole: %v", trial, v, err)
			}
		}

		// A new handle answers as a scan of every row does.
		tb := r.open(trial, nil)
		if x := tb.loadLastIndex(ctx, tb.State()); x != nil {
			tally.startedFromIndex++
			x.release()
		}
		r.checkLast(trial, tb, tally, "after the kill")
		counts, _ := r.checkRows(trial, tb)

		// The next append succeeds and the index follows it.
		r.appendNext(trial, tb, counts)
		r.checkLast(trial, tb, tally, "after the next append")

		if r.pythonDue(trial, 10) {
			r.pythonAppend(trial)
			if _, err := tb.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			r.checkLast(trial, tb, tally, "after a 0.9.0 append")
			r.pythonCheck(trial)
		}
		r.endTrial(trial)
	}
	if tally.startedFromIndex == 0 || tally.killsMidIndex == 0 {
		t.Fatalf("no handle started from a persisted index, or no kill landed in an index write: the trials tested nothing\n%s", tally.line(r.seed))
	}
}

// checkLast compares tb's LastValues with a scan of every row.
func (r *crashRun) checkLast(trial int, tb *Table, tally *lvCrashTally, when string) {
	r.t.Helper()
	st := tb.State()
	want := bruteLast(r.t, r.ctx, tb, st)
	rec, err := tb.LastValues(r.ctx, st, LastOptions{Alloc: r.mem})
	if err != nil {
		tally.wrongLast++
		r.t.Errorf("trial %d: LastValues %s: %v", trial, when, err)
		return
	}
	got := renderRows(rec)
	rec.Release()
	if !slices.Equal(got, want) {
		tally.wrongLast++
		r.t.Errorf("trial %d: LastValues %s at version %d:\n%s\nwant\n%s", trial, when, st.Version, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
