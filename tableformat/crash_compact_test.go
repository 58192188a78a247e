// Crash trials of compaction with real processes: a worker process appends
// small batches and compacts the table, round after round, and is killed
// with SIGKILL at random moments, many of them inside Compact (reading,
// writing the outputs, committing). After every kill the table must open,
// hold every acknowledged batch exactly once and no partial batch, its
// coverage must be exactly that of its rows, vacuum must find exactly the
// files no commit names, and the next compaction and append must succeed.
// Every other round compacts under a bound so small that the rows are
// spilled in many runs: after every kill the spill directory must be
// empty (runs have no name, and die with the process).
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 50; the long
// mode is 500), TSFLIGHT_CRASH_SEED the seed of the random delays
// (printed; the scaffolding is crashtrial_test.go's).

package tableformat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// crashCompactAppends is the number of appends of each worker round
// before it compacts.
const crashCompactAppends = 4

// crashSpillLimit is the memory bound of the worker's spilled compactions.
const crashSpillLimit = 16 << 10

// crashCompactTrials is the number of compaction trials when
// TSFLIGHT_CRASH_TRIALS is unset (CI).
const crashCompactTrials = 50

// TestCompactCrashWorkerProcess is the worker of TestCrashTrialsCompact:
// rounds of crashCompactAppends appends ("acked <batch> <version>" logged
// and fsynced after each) and one Compact (announced on stdout with
// "compacting" and "compacted"), until it is killed.
func TestCompactCrashWorkerProcess(t *testing.T) {
	env := crashChildStart(t, "TestCompactCrashWorkerProcess", "TestCrashTrialsCompact")
	ctx := context.Background()
	tb := env.openReady(t, nil, nil)
	id := env.first
	for round := 0; round < 10000; round++ {
		for range crashCompactAppends {
			env.appendAcked(t, ctx, tb, id)
			id++
		}
		fmt.Println("compacting")
		if spill := os.Getenv("TSFLIGHT_CRASH_SPILL"); spill != "" && round%2 == 0 {
			// Every other round under a bound so small that the rows are
			// spilled in runs of a few batches, so that kills land
			// while runs are open.
			testHookCompactSpilled = func(runs int) {
				if runs == 1 {
					fmt.Println("spilling")
				}
			}
			o := DefaultCompactOptions()
			o.SpillDir = spill
			if _, err := compactWithLimit(ctx, tb, o, crashSpillLimit); err != nil {
				t.Fatalf("spilled compaction: %v", err)
			}
			testHookCompactSpilled = nil
		} else if _, err := tb.Compact(ctx, nil); err != nil {
			t.Fatalf("compaction: %v", err)
		}
		fmt.Println("compacted")
	}
	t.Fatal("the worker was never killed")
}

// measureCompactRound returns the median duration of one worker round,
// measured in this process on a scratch table.
func measureCompactRound(t *testing.T, mem memory.Allocator) time.Duration {
	t.Helper()
	tb := scratchCrashTable(t, nil)
	id := int64(0)
	return medianDuration(5, func() {
		appendScratch(t, tb, mem, &id, crashCompactAppends)
		compactScratch(t, tb, mem)
	})
}

// compactCrashTally counts what the compaction trials saw.
type compactCrashTally struct {
	crashTally
	killsInCompact, compactions, covMismatches, compactFailed int
	killsInSpill, spillLeft                                   int
}

func (c *compactCrashTally) failures() int {
	return c.crashTally.failures() + c.covMismatches + c.compactFailed + c.spillLeft
}

func (c *compactCrashTally) line(seed uint64) string {
	return fmt.Sprintf("compaction crash trials: trials=%d kills_in_compact=%d kills_in_spill=%d spill_files_left=%d compactions_committed=%d acked=%d unacked_committed=%d stray_files_removed=%d unreadable=%d lost=%d duplicates=%d coverage_mismatches=%d"+
		" (kills_in_commit=%d partial=%d append_failed=%d compact_failed=%d vacuum_mismatches=%d python_checks=%d seed=%d)",
		c.trials, c.killsInCompact, c.killsInSpill, c.spillLeft, c.compactions, c.acked, c.unackedCommitted, c.strayRemoved, c.unreadable, c.lost, c.dups, c.covMismatches,
		c.killsInCommit, c.partial, c.appendFailed, c.compactFailed, c.vacuumMismatches, c.pythonChecks, seed)
}

// killedInside says whether the last "begin" line of out has no "end"
// line after it: the child was killed between the two.
func killedInside(out, begin, end string) bool {
	return strings.LastIndex(out, begin) > strings.LastIndex(out, end)
}

// TestCrashTrialsCompact runs the compaction crash trials.
func TestCrashTrialsCompact(t *testing.T) {
	tally := &compactCrashTally{crashTally: crashTally{mode: "compact"}}
	r := newCrashRun(t, crashRunSpec{title: "compaction crash trials:", child: "TestCompactCrashWorkerProcess", role: "worker",
		defaultTrials: crashCompactTrials, salt: 0x5851f42d4c957f2d, tally: tally})
	ctx, dir, mem := r.ctx, r.dir, r.mem
	spill := filepath.Join(t.TempDir(), "spill")
	if err := os.Mkdir(spill, 0o755); err != nil {
		t.Fatal(err)
	}
	perRound := measureCompactRound(t, mem)
	t.Logf("one round (%d appends and a compaction) takes about %s here; kills are drawn in [0, 3×) of it", crashCompactAppends, perRound)

	for trial := 1; trial <= r.trials; trial++ {
		tally.trials = trial
		c := r.start(trial, 30*time.Second, "TSFLIGHT_CRASH_SPILL="+spill)
		c.killAfter(time.Duration(r.rng.Int64N(int64(3 * perRound))))
		if killedInside(c.output(), "compacting\n", "compacted\n") {
			tally.killsInCompact++
		}
		if killedInside(c.output(), "spilling\n", "compacted\n") {
			tally.killsInSpill++
		}
		// The killed process's runs went with it: they were unlinked at
		// once, and the kernel freed them at its death.
		if ents, err := os.ReadDir(spill); err != nil || len(ents) != 0 {
			tally.spillLeft++
			t.Errorf("trial %d: the spill directory holds %d entries after the kill (%v)", trial, len(ents), err)
		}

		cur, _ := os.ReadFile(filepath.Join(dir, LogDir, "CURRENT"))
		r.absorbAcked()

		// The table opens, and holds every acknowledged batch once.
		tb := r.open(trial, nil)
		st := tb.State()
		tally.compactions += compactionCommits(t, tb, r.namedTo, st.Version)
		counts, unacked := r.checkRows(trial, tb)
		rows := rowTotal(counts)
		if err := checkCrashCoverage(t, ctx, tb, rows); err != nil {
			tally.covMismatches++
			t.Errorf("trial %d: coverage after the kill: %v", trial, err)
		}
		if len(unacked) > 0 || strings.TrimSpace(string(cur)) != strconv.FormatUint(st.Version, 10) {
			tally.killsInCommit++
		}

		// Vacuum finds exactly the files no commit names (a killed
		// compaction's outputs and sidecars, a killed append's files).
		r.vacuumApply(trial, tb, r.strays(st.Version))

		// The next compaction and append succeed, and change no row.
		r.compactAfterKill(trial, tb, &tally.compactFailed, &tally.compactions)
		r.sameRows(trial, tb, counts, "compacting")
		r.nameThrough(r.appendNext(trial, tb, counts).Version)
		if err := checkCrashCoverage(t, ctx, tb, rows+crashRows); err != nil {
			tally.covMismatches++
			t.Errorf("trial %d: coverage after the next append: %v", trial, err)
		}

		if r.pythonDue(trial, 25) {
			r.pythonCheck(trial)
		}
		r.endTrial(trial)
	}
	if r.trials >= 10 && tally.killsInCompact == 0 {
		t.Errorf("no kill landed inside a compaction in %d trials", r.trials)
	}
	// About a quarter of the kills land while runs are spilled (14 of 50
	// measured); none in 50 would mean the spilled rounds went untested.
	if r.trials >= 50 && tally.killsInSpill == 0 {
		t.Errorf("no kill landed while a compaction's runs were spilled in %d trials", r.trials)
	}
}
