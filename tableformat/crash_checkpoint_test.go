// Crash trials for checkpoints with real processes: a writer process
// appends in a loop with a checkpoint after (almost) every commit
// (CheckpointInterval 1 or 2) and is killed with SIGKILL at random moments,
// many of them inside a checkpoint write. After every kill the table must
// open with exactly the state a full replay of the log gives, every
// checkpoint name must hold a whole checkpoint, every acknowledged batch
// must be there exactly once and no partial batch at all, and the next
// append must succeed.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 20 here),
// TSFLIGHT_CRASH_SEED the seed of the random delays (see
// crash_process_test.go, whose helpers this reuses).

package tableformat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// TestCrashCheckpointWriterProcess is the writer of
// TestCrashCheckpointTrials: it appends batches first, first+1, … with a
// checkpoint after each commit whose version is a multiple of the interval,
// logging "acked <batch> <version>" and fsyncing the log after each append,
// and printing "checkpoint <version>" before and "done <version>" after
// each checkpoint, until it is killed.
func TestCrashCheckpointWriterProcess(t *testing.T) {
	dir := os.Getenv("TSFLIGHT_CKCRASH_DIR")
	if dir == "" {
		t.Skip("only runs as a child of TestCrashCheckpointTrials")
	}
	first, _ := strconv.ParseInt(os.Getenv("TSFLIGHT_CKCRASH_FIRST"), 10, 64)
	interval, _ := strconv.Atoi(os.Getenv("TSFLIGHT_CKCRASH_INTERVAL"))
	ctx := context.Background()
	log, err := os.OpenFile(os.Getenv("TSFLIGHT_CKCRASH_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	tb, err := Open(ctx, storage.Local(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	for id := first; id < first+10000; id++ {
		// The interval is switched on only around the explicit call, so
		// that the checkpoint is written here, right after the line that
		// tells the parent it starts, whether or not the committer asks
		// for one itself.
		opts.CheckpointInterval = 0
		res, err := appendCrashBatch(ctx, tb, memory.DefaultAllocator, id)
		if err != nil {
			t.Fatalf("append of batch %d: %v", id, err)
		}
		if _, err := fmt.Fprintf(log, "acked %d %d\n", id, res.Version); err != nil {
			t.Fatal(err)
		}
		if err := log.Sync(); err != nil {
			t.Fatal(err)
		}
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
	trials, killsMidCheckpoint, tempsLeft, openedFromCheckpoint int
	acked, unackedCommitted, checkpointsSeen                    int
	wrongState, badCheckpoint, lost, dups, partial              int
	unreadable, appendFailed, pythonChecks                      int
}

func (c *ckCrashTally) failures() int {
	return c.wrongState + c.badCheckpoint + c.lost + c.dups + c.partial + c.unreadable + c.appendFailed
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
	tb, err := Create(ctx, storage.Local(t.TempDir()), CreateOptions{Index: crashIndex()}, opts)
	if err != nil {
		t.Fatal(err)
	}
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
	if testing.Short() {
		t.Skip("crash trials spawn processes")
	}
	trials, seed := crashTrialSettings(t)
	if os.Getenv("TSFLIGHT_CRASH_TRIALS") == "" {
		trials = 20
	}
	t.Logf("checkpoint crash trials: trials=%d seed=%d (replay with TSFLIGHT_CRASH_SEED=%d)", trials, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	py := crashPython(t)

	dir := t.TempDir()
	fsys := storage.Local(dir)
	logPath := filepath.Join(t.TempDir(), "acked.log")
	if _, err := Create(ctx, fsys, CreateOptions{Index: crashIndex()}, nil); err != nil {
		t.Fatal(err)
	}
	appendTime, ckTime := measureCheckpointedAppend(t, mem)
	t.Logf("an append takes about %s here and the checkpoint after it %s; odd trials kill in [0, 3×) of both after the writer is ready, even ones in [0, 1.5×) of a checkpoint after one starts", appendTime, ckTime)

	tally := &ckCrashTally{}
	acked := map[int64]uint64{}
	seenTemps := map[string]bool{}
	next := int64(0)
	defer func() {
		t.Log(tally.line(seed))
		fmt.Println(tally.line(seed))
	}()
	for trial := 1; trial <= trials; trial++ {
		tally.trials = trial
		interval := 1 + trial%2
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashCheckpointWriterProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TSFLIGHT_CKCRASH_DIR="+dir, "TSFLIGHT_CKCRASH_LOG="+logPath,
			"TSFLIGHT_CKCRASH_FIRST="+strconv.FormatInt(next, 10), "TSFLIGHT_CKCRASH_INTERVAL="+strconv.Itoa(interval))
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), "ready\n") {
			select {
			case err := <-done:
				t.Fatalf("trial %d: the writer exited (%v) before it was ready:\n%s", trial, err, out)
			default:
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("trial %d: the writer was not ready in 60 s:\n%s", trial, out)
			}
			time.Sleep(time.Millisecond)
		}
		if trial%2 == 1 {
			time.Sleep(time.Duration(rng.Int64N(int64(3 * (appendTime + ckTime)))))
		} else {
			// Aim at a checkpoint write: wait for the line announcing one.
			seen := strings.Count(out.String(), "checkpoint ")
			for strings.Count(out.String(), "checkpoint ") == seen {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("trial %d: no checkpoint started in time:\n%s", trial, out)
				}
				time.Sleep(50 * time.Microsecond)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(3*ckTime/2) + 1)))
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("trial %d: the writer ended on its own (%v) before the kill:\n%s", trial, err, out)
		}

		// What the kill left, before anything reads or repairs it.
		vs, temps := ckList(t, fsys)
		for _, n := range temps {
			if !seenTemps[n] {
				tally.tempsLeft++
			}
			seenTemps[n] = true
		}
		if strings.Count(out.String(), "checkpoint ") > strings.Count(out.String(), "done ") {
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
		for id, v := range readAcked(t, logPath) {
			if _, ok := acked[id]; !ok {
				tally.acked++
			}
			acked[id] = v
		}

		// The table opens with the state of a full replay.
		tb, err := Open(ctx, fsys, ckOptions(nil))
		if err != nil {
			tally.unreadable++
			t.Fatalf("trial %d: the table does not open after the kill: %v\n%s", trial, err, tally.line(seed))
		}
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
		counts, err := batchCounts(t, ctx, tb, mem)
		if err != nil {
			tally.unreadable++
			t.Fatalf("trial %d: scan after the kill: %v", trial, err)
		}
		ct := &crashTally{}
		unacked := checkBatches(t, ct, counts, acked)
		tally.lost, tally.dups, tally.partial = tally.lost+ct.lost, tally.dups+ct.dups, tally.partial+ct.partial
		for _, id := range unacked {
			acked[id] = st.Version // committed: from now on it must stay
		}
		tally.unackedCommitted += len(unacked)

		// The next append succeeds, from a handle opened on a checkpoint.
		for id := range counts {
			next = max(next, id+1)
		}
		for id := range acked {
			next = max(next, id+1)
		}
		res, err := appendCrashBatch(ctx, tb, mem, next)
		if err != nil {
			tally.appendFailed++
			t.Fatalf("trial %d: the append after the kill failed: %v", trial, err)
		}
		acked[next] = res.Version
		tally.acked++
		next++

		if py != "" && (trial == trials || trial%10 == 0) {
			if n := pythonRowCount(t, py, dir); n != int64(len(acked)*crashRows) {
				tally.unreadable++
				t.Errorf("trial %d: timeseries-table-format counts %d rows, Go %d", trial, n, len(acked)*crashRows)
			}
			tally.pythonChecks++
		}
		if tally.failures() > 0 {
			t.Fatalf("trial %d failed; replay with TSFLIGHT_CRASH_SEED=%d\n%s", trial, seed, tally.line(seed))
		}
	}
	if tally.openedFromCheckpoint == 0 {
		t.Fatal("no open started from a checkpoint: the trials tested nothing")
	}
}
