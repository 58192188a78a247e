// Crash trials with real processes (library mode): a writer process appends
// in a loop and is killed with SIGKILL at random moments, many of them
// inside an append or its commit; after every kill the table must open,
// hold every acknowledged batch exactly once and no partial batch, take the
// next append, and vacuum must find exactly the killed attempt's files.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 50; the long mode
// is 500), TSFLIGHT_CRASH_SEED the seed of the random delays (default: the
// clock, printed so that a failure can be replayed). The scaffolding the
// crash trials share is in crashtrial_test.go.

package tableformat

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCrashWriterProcess is the writer of TestCrashTrialsLibrary: it
// appends batches first, first+1, … to the table until it is killed, and
// after each acknowledged append writes "acked <batch> <version>" to the
// log file and fsyncs it before the next. On its own it does nothing.
func TestCrashWriterProcess(t *testing.T) {
	env := crashChildStart(t, "TestCrashWriterProcess", "TestCrashTrialsLibrary")
	ctx := context.Background()
	tb := env.openReady(t, nil, nil)
	for id := env.first; id < env.first+10000; id++ {
		env.appendAcked(t, ctx, tb, id)
	}
	t.Fatal("the writer was never killed")
}

// measureAppend returns the median duration of an append of one batch,
// measured in this process on a scratch table.
func measureAppend(t *testing.T, mem memory.Allocator) time.Duration {
	t.Helper()
	tb := scratchCrashTable(t, nil)
	id := int64(0)
	return medianDuration(7, func() {
		appendScratch(t, tb, mem, &id, 1)
	})
}

// TestCrashTrialsLibrary runs the library-mode crash trials.
func TestCrashTrialsLibrary(t *testing.T) {
	tally := &crashTally{mode: "library"}
	r := newCrashRun(t, crashRunSpec{title: "crash trials: mode=library", child: "TestCrashWriterProcess", role: "writer",
		defaultTrials: 50, salt: 0x9e3779b97f4a7c15, tally: tally})
	ctx, dir := r.ctx, r.dir
	perAppend := measureAppend(t, r.mem)
	t.Logf("one append takes about %s here; kills are drawn in [0, 3×) of it after the writer is ready", perAppend)

	for trial := 1; trial <= r.trials; trial++ {
		tally.trials = trial
		// One life of the writer, killed at a random moment.
		c := r.start(trial, 30*time.Second)
		c.killAfter(time.Duration(r.rng.Int64N(int64(3 * perAppend))))

		// What the kill left, before anything repairs it.
		cur, _ := os.ReadFile(filepath.Join(dir, LogDir, "CURRENT"))
		r.absorbAcked()

		// The table opens (and rolls CURRENT forward).
		tb := r.open(trial, nil)
		st := tb.State()
		counts, unacked := r.checkRows(trial, tb)

		// Vacuum finds exactly the killed attempt's files.
		want := r.strays(st.Version)
		inCommit := len(unacked) > 0 || strings.TrimSpace(string(cur)) != strconv.FormatUint(st.Version, 10)
		for _, p := range want {
			if strings.HasPrefix(p, LogDir+"/") {
				inCommit = true
			}
		}
		switch {
		case inCommit:
			tally.killsInCommit++
		case len(want) > 0:
			tally.killsInAppend++
		default:
			tally.killsBetween++
		}
		rep, err := tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
		if err != nil {
			t.Fatalf("trial %d: vacuum dry run: %v", trial, err)
		}
		if got := byDisposition(rep, VacuumRemovable); strings.Join(got, " ") != strings.Join(want, " ") {
			tally.vacuumMismatches++
			t.Errorf("trial %d: vacuum lists %v as removable, want %v", trial, got, want)
		}
		r.vacuumApply(trial, tb, want)
		if rep, err = tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()}); err != nil || rep.Removable != 0 {
			tally.vacuumMismatches++
			t.Errorf("trial %d: second dry run: %v, %d removable", trial, err, rep.Removable)
		}
		r.sameRows(trial, tb, counts, "vacuum")

		// The next append succeeds.
		r.nameThrough(r.appendNext(trial, tb, counts).Version)

		if r.pythonDue(trial, 50) {
			r.pythonCheck(trial)
		}
		r.endTrial(trial)
	}
}
