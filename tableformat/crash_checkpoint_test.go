// Crash trials for checkpoints with real processes: a writer process
// appends in a loop with a checkpoint after (almost) every commit
// (CheckpointInterval 1 or 2) and is killed with SIGKILL at random moments,
// many of them inside a checkpoint write. After every kill the table must
// open with exactly the state a full replay of the log gives, every
// checkpoint name must hold a whole checkpoint, every acknowledged batch
// must be there exactly once and no partial batch at all, and the next
// append must succeed.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 50; the long
// mode is 500), TSFLIGHT_CRASH_SEED the seed of the random delays
// (printed; the scaffolding is crashtrial_test.go's).

package tableformat

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// crashCheckpointTrials is the number of checkpoint trials when
// TSFLIGHT_CRASH_TRIALS is unset (CI).
const crashCheckpointTrials = 50

// TestCrashCheckpointWriterProcess is the writer of
// TestCrashCheckpointTrials: it appends batches first, first+1, … with a
// checkpoint after each commit whose version is a multiple of the interval,
// logging "acked <batch> <version>" and fsyncing the log after each append,
// and printing "checkpoint <version>" before and "done <version>" after
// each checkpoint, until it is killed.
func TestCrashCheckpointWriterProcess(t *testing.T) {
	env := crashChildStart(t, "TestCrashCheckpointWriterProcess", "TestCrashCheckpointTrials")
	interval, err := strconv.Atoi(os.Getenv("TSFLIGHT_CKCRASH_INTERVAL"))
	if err != nil || interval <= 0 {
		t.Fatalf("TSFLIGHT_CKCRASH_INTERVAL: %v", err)
	}
	ctx := context.Background()
	opts := DefaultOptions()
	tb := env.openReady(t, nil, opts)
	for id := env.first; id < env.first+10000; id++ {
		// The interval is switched on only around the explicit call, so
		// that the checkpoint is written here, right after the line that
		// tells the parent it starts, whether or not the committer asks
		// for one itself.
		opts.CheckpointInterval = 0
		res := env.appendAcked(t, ctx, tb, id)
		if res.Version%uint64(interval) == 0 {
			fmt.Printf("checkpoint %d\n", res.Version)
		}
		opts.CheckpointInterval = interval
		tb.maybeCheckpoint(ctx, tb.State())
		if res.Version%uint64(interval) == 0 {
			fmt.Printf("done %d\n", res.Version)
		}
	}
	t.Fatal("the writer was never killed")
}

// ckCrashTally counts what the checkpoint crash trials saw.
type ckCrashTally struct {
	crashTally
	killsMidCheckpoint, tempsLeft, openedFromCheckpoint int
	checkpointsSeen, wrongState, badCheckpoint          int
}

func (c *ckCrashTally) failures() int {
	return c.crashTally.failures() + c.wrongState + c.badCheckpoint
}

func (c *ckCrashTally) line(seed uint64) string {
	return fmt.Sprintf("checkpoint crash trials: trials=%d kills_mid_checkpoint=%d temp_files_left=%d opened_from_checkpoint=%d checkpoints_seen=%d acked=%d unacked_committed=%d"+
		" wrong_state=%d bad_checkpoint=%d lost=%d duplicates=%d partial=%d unreadable=%d append_failed=%d python_checks=%d seed=%d",
		c.trials, c.killsMidCheckpoint, c.tempsLeft, c.openedFromCheckpoint, c.checkpointsSeen, c.acked, c.unackedCommitted,
		c.wrongState, c.badCheckpoint, c.lost, c.dups, c.partial, c.unreadable, c.appendFailed, c.pythonChecks, seed)
}

// measureCheckpointedAppend returns the median times of an append and of
// the checkpoint written after it, in this process on a scratch table.
func measureCheckpointedAppend(t *testing.T, mem memory.Allocator) (appendTime, checkpointTime time.Duration) {
	t.Helper()
	ctx := context.Background()
	opts := DefaultOptions()
	tb := scratchCrashTable(t, opts)
	var as, cs []time.Duration
	for id := range int64(9) {
		opts.CheckpointInterval = 0
		start := time.Now()
		if _, err := appendCrashBatch(ctx, tb, mem, id); err != nil {
			t.Fatal(err)
		}
		mid := time.Now()
		opts.CheckpointInterval = 1
		tb.maybeCheckpoint(ctx, tb.State())
		as, cs = append(as, mid.Sub(start)), append(cs, time.Since(mid))
	}
	slices.Sort(as)
	slices.Sort(cs)
	return as[len(as)/2], cs[len(cs)/2]
}

// TestCrashCheckpointTrials runs the checkpoint crash trials.
func TestCrashCheckpointTrials(t *testing.T) {
	tally := &ckCrashTally{}
	r := newCrashRun(t, crashRunSpec{title: "checkpoint crash trials:", child: "TestCrashCheckpointWriterProcess", role: "writer",
		defaultTrials: crashCheckpointTrials, salt: 0x5bd1e995, tally: tally})
	ctx, fsys := r.ctx, storage.Local(r.dir)
	appendTime, ckTime := measureCheckpointedAppend(t, r.mem)
	t.Logf("an append takes about %s here and the checkpoint after it %s; odd trials kill in [0, 3×) of both after the writer is ready, even ones in [0, 1.5×) of a checkpoint after one starts", appendTime, ckTime)

	seenTemps := map[string]bool{}
	for trial := 1; trial <= r.trials; trial++ {
		tally.trials = trial
		interval := 1 + trial%2
		c := r.start(trial, 60*time.Second, "TSFLIGHT_CKCRASH_INTERVAL="+strconv.Itoa(interval))
		if trial%2 == 1 {
			c.killAfter(time.Duration(r.rng.Int64N(int64(3 * (appendTime + ckTime)))))
		} else {
			// Aim at a checkpoint write: wait for the line announcing one.
			seen := strings.Count(c.output(), "checkpoint ")
			c.waitUntil("checkpoint start", 50*time.Microsecond, func(out string) bool { return strings.Count(out, "checkpoint ") > seen })
			c.killAfter(time.Duration(r.rng.Int64N(int64(3*ckTime/2) + 1)))
		}

		// What the kill left, before anything reads or repairs it.
		vs, temps := ckList(t, fsys)
		for _, n := range temps {
			if !seenTemps[n] {
				tally.tempsLeft++
			}
			seenTemps[n] = true
		}
		if out := c.output(); strings.Count(out, "checkpoint ") > strings.Count(out, "done ") {
			tally.killsMidCheckpoint++ // after "checkpoint v", before "done v"
		}
		tally.checkpointsSeen += len(vs)
		for _, v := range vs {
			data, err := fsys.ReadFile(checkpointPath(v))
			if err == nil {
				_, _, err = decodeCheckpoint(data)
			}
			if err != nil {
				tally.badCheckpoint++
				t.Errorf("trial %d: checkpoint %d is not whole: %v", trial, v, err)
			}
		}
		r.absorbAcked()

		// The table opens with the state of a full replay.
		tb := r.open(trial, ckOptions(nil))
		st := tb.State()
		want := ckFull(t, fsys, st.Version)
		if !ckEqual(st, want) {
			tally.wrongState++
			t.Errorf("trial %d: the state at version %d is not the full replay's", trial, st.Version)
		}
		l := ckStore(fsys, nil)
		if again, _, err := l.replay(ctx, nil); err != nil || !ckEqual(again, want) {
			tally.wrongState++
			t.Errorf("trial %d: a second replay differs (%v)", trial, err)
		}
		if ck, _ := l.takeCheckpointSeed(); ck != nil {
			tally.openedFromCheckpoint++
		}
		counts, _ := r.checkRows(trial, tb)

		// The next append succeeds, from a handle opened on a checkpoint.
		r.appendNext(trial, tb, counts)

		if r.pythonDue(trial, 10) {
			r.pythonCheck(trial)
		}
		r.endTrial(trial)
	}
	if tally.openedFromCheckpoint == 0 {
		t.Fatal("no open started from a checkpoint: the trials tested nothing")
	}
}
