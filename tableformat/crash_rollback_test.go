// Crash trials of rollback with real processes: a worker process appends a
// batch, rolls the append back (the batch is gone), rolls that rollback
// back (the batch is there again), and so on, and is killed with SIGKILL at
// random moments, many of them inside a rollback. After every kill the
// table must open and scan; every batch must be as the worker's last
// finished operation on it left it, or, when it was killed inside a
// rollback, as before or as after that rollback, whole; the coverage must be
// exactly that of the rows; and the next append must succeed.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 20),
// TSFLIGHT_CRASH_SEED the seed of the random delays (printed; the
// scaffolding is crashtrial_test.go's).

package tableformat

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// crashRollbackTrials is the number of rollback trials when
// TSFLIGHT_CRASH_TRIALS is unset (CI).
const crashRollbackTrials = 20

// TestRollbackCrashWorkerProcess is the worker of TestCrashTrialsRollback:
// it appends batch id ("acked <id> <version>" logged and fsynced), then
// twice rolls back the newest commit: "flip <id>" is logged and fsynced
// (and "flipping" printed) before each rollback, "flipped <id>" (and
// "flipped" printed) after it. The first rollback removes the batch, the
// second restores it. It runs until it is killed.
func TestRollbackCrashWorkerProcess(t *testing.T) {
	env := crashChildStart(t, "TestRollbackCrashWorkerProcess", "TestCrashTrialsRollback")
	ctx := context.Background()
	flips, err := os.OpenFile(os.Getenv("TSFLIGHT_CRASH_FLIPS"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	note := func(format string, args ...any) {
		if _, err := fmt.Fprintf(flips, format+"\n", args...); err != nil {
			t.Fatal(err)
		}
		if err := flips.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	tb := env.openReady(t, nil, nil)
	for id := env.first; id < env.first+10000; id++ {
		env.appendAcked(t, ctx, tb, id)
		for range 2 {
			note("flip %d", id)
			fmt.Println("flipping")
			if _, err := tb.Rollback(ctx, tb.State().Version-1, nil); err != nil {
				t.Fatalf("rollback over batch %d: %v", id, err)
			}
			note("flipped %d", id)
			fmt.Println("flipped")
		}
	}
	t.Fatal("the worker was never killed")
}

// measureRollbackRound returns the median duration of one worker round
// (an append and two rollbacks), measured in this process.
func measureRollbackRound(t *testing.T, mem memory.Allocator) time.Duration {
	t.Helper()
	ctx := context.Background()
	tb := scratchCrashTable(t, nil)
	id := int64(0)
	return medianDuration(5, func() {
		appendScratch(t, tb, mem, &id, 1)
		for range 2 {
			if _, err := tb.Rollback(ctx, tb.State().Version-1, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// rollbackCrashTally counts what the rollback trials saw.
type rollbackCrashTally struct {
	crashTally
	killsInRollback, rollbacks, wrongContent, covMismatches int
}

func (c *rollbackCrashTally) failures() int {
	return c.crashTally.failures() + c.wrongContent + c.covMismatches
}

func (c *rollbackCrashTally) line(seed uint64) string {
	return fmt.Sprintf("rollback crash trials: trials=%d kills_in_rollback=%d rollbacks_committed=%d acked=%d unacked_committed=%d unreadable=%d wrong_content=%d partial=%d coverage_mismatches=%d"+
		" (append_failed=%d python_checks=%d seed=%d)",
		c.trials, c.killsInRollback, c.rollbacks, c.acked, c.unackedCommitted, c.unreadable, c.wrongContent, c.partial, c.covMismatches,
		c.appendFailed, c.pythonChecks, seed)
}

// rollbackModel is what the parent knows of every batch: whether it is
// in the table, and whether a rollback over it was begun and not known
// to be finished.
type rollbackModel struct {
	present, pending map[int64]bool
	flipped          int // rollbacks the worker finished
}

// absorb folds in the acknowledged appends (new ones are present) and
// the flip log, which it then empties (the worker is dead).
func (m *rollbackModel) absorb(t *testing.T, acked map[int64]uint64, flipsPath string) {
	t.Helper()
	for id := range acked {
		if _, known := m.present[id]; !known {
			m.present[id] = true
		}
	}
	data, err := os.ReadFile(flipsPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	text := string(data)
	text = text[:strings.LastIndexByte(text, '\n')+1] // a torn last line never happened
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var id int64
		switch {
		case strings.HasPrefix(sc.Text(), "flip "):
			fmt.Sscanf(sc.Text(), "flip %d", &id)
			m.pending[id] = true
		case strings.HasPrefix(sc.Text(), "flipped "):
			fmt.Sscanf(sc.Text(), "flipped %d", &id)
			delete(m.pending, id)
			m.present[id] = !m.present[id]
			m.flipped++
		default:
			t.Fatalf("flip log line %q", sc.Text())
		}
	}
	if err := os.WriteFile(flipsPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCrashTrialsRollback runs the rollback crash trials.
func TestCrashTrialsRollback(t *testing.T) {
	tally := &rollbackCrashTally{crashTally: crashTally{mode: "rollback"}}
	r := newCrashRun(t, crashRunSpec{title: "rollback crash trials:", child: "TestRollbackCrashWorkerProcess", role: "worker",
		defaultTrials: crashRollbackTrials, salt: 0x2545f4914f6cdd1d, tally: tally})
	ctx, mem := r.ctx, r.mem
	perRound := measureRollbackRound(t, mem)
	t.Logf("one round (an append and two rollbacks) takes about %s here; kills are drawn in [0, 3×) of it", perRound)
	flips := filepath.Join(t.TempDir(), "flips.log")
	m := &rollbackModel{present: map[int64]bool{}, pending: map[int64]bool{}}

	for trial := 1; trial <= r.trials; trial++ {
		tally.trials = trial
		c := r.start(trial, 30*time.Second, "TSFLIGHT_CRASH_FLIPS="+flips)
		c.killAfter(time.Duration(r.rng.Int64N(int64(3 * perRound))))
		if killedInside(c.output(), "flipping\n", "flipped\n") {
			tally.killsInRollback++
		}
		acked := readAcked(t, r.logPath)
		for id := range acked {
			if _, ok := m.present[id]; !ok {
				tally.acked++
			}
		}
		m.absorb(t, acked, flips)
		tally.rollbacks = m.flipped

		// The table opens, scans, and every batch is as the worker's last
		// operation on it left it (either way when the kill cut the
		// operation), whole.
		tb := r.open(trial, nil)
		counts, err := batchCounts(t, ctx, tb, mem)
		if err != nil {
			tally.unreadable++
			t.Fatalf("trial %d: scan after the kill: %v", trial, err)
		}
		for id, n := range counts {
			if n != crashRows {
				tally.partial++
				t.Errorf("trial %d: batch %d has %d rows, want %d", trial, id, n, crashRows)
			}
			if _, known := m.present[id]; !known {
				// Committed, killed before its acknowledgement.
				m.present[id] = true
				tally.unackedCommitted++
			}
		}
		for id, want := range m.present {
			got := counts[id] > 0
			if m.pending[id] {
				m.present[id] = got // before or after the cut rollback
				delete(m.pending, id)
				continue
			}
			if got != want {
				tally.wrongContent++
				t.Errorf("trial %d: batch %d is present=%v, the worker's last finished operation left present=%v", trial, id, got, want)
			}
		}
		rows := rowTotal(counts)
		if err := checkCrashCoverage(t, ctx, tb, rows); err != nil {
			tally.covMismatches++
			t.Errorf("trial %d: coverage after the kill: %v", trial, err)
		}

		// The next append succeeds and is covered.
		for id := range m.present {
			r.next = max(r.next, id+1)
		}
		if _, err := appendCrashBatch(ctx, tb, mem, r.next); err != nil {
			tally.appendFailed++
			t.Fatalf("trial %d: the append after the kill failed: %v", trial, err)
		}
		m.present[r.next] = true
		r.next++
		rows += crashRows
		if err := checkCrashCoverage(t, ctx, tb, rows); err != nil {
			tally.covMismatches++
			t.Errorf("trial %d: coverage after the next append: %v", trial, err)
		}
		if r.pythonDue(trial, 10) {
			if n := pythonRowCount(t, r.py, r.dir); n != int64(rows) {
				tally.unreadable++
				t.Errorf("trial %d: timeseries-table-format counts %d rows, Go %d", trial, n, rows)
			}
			tally.pythonChecks++
		}
		r.endTrial(trial)
	}
	if r.trials >= 10 && tally.killsInRollback == 0 {
		t.Errorf("no kill landed inside a rollback in %d trials", r.trials)
	}
}
