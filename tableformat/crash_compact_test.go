// Crash trials of compaction with real processes: a worker process appends
// small batches and compacts the table, round after round, and is killed
// with SIGKILL at random moments, many of them inside Compact (reading,
// writing the outputs, committing). After every kill the table must open,
// hold every acknowledged batch exactly once and no partial batch, its
// coverage must be exactly that of its rows, vacuum must find exactly the
// files no commit names, and the next compaction and append must succeed.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 20 here),
// TSFLIGHT_CRASH_SEED the seed of the random delays (printed).

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

// crashCompactAppends is the number of appends of each worker round
// before it compacts.
const crashCompactAppends = 4

// TestCompactCrashWorkerProcess is the worker of TestCrashTrialsCompact:
// rounds of crashCompactAppends appends ("acked <batch> <version>" logged
// and fsynced after each) and one Compact (announced on stdout with
// "compacting" and "compacted"), until it is killed.
func TestCompactCrashWorkerProcess(t *testing.T) {
	dir := os.Getenv("TSFLIGHT_COMPACT_CRASH_DIR")
	if dir == "" {
		t.Skip("only runs as a child of TestCrashTrialsCompact")
	}
	first, _ := strconv.ParseInt(os.Getenv("TSFLIGHT_COMPACT_CRASH_FIRST"), 10, 64)
	ctx := context.Background()
	log, err := os.OpenFile(os.Getenv("TSFLIGHT_COMPACT_CRASH_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Open(ctx, storage.Local(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	id := first
	for round := 0; round < 10000; round++ {
		for range crashCompactAppends {
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
			id++
		}
		fmt.Println("compacting")
		if _, err := tb.Compact(ctx, nil); err != nil {
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
	ctx := context.Background()
	tb, err := Create(ctx, storage.Local(t.TempDir()), CreateOptions{Index: crashIndex()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ds []time.Duration
	id := int64(0)
	for range 5 {
		start := time.Now()
		for range crashCompactAppends {
			if _, err := appendCrashBatch(ctx, tb, mem, id); err != nil {
				t.Fatal(err)
			}
			id++
		}
		o := DefaultCompactOptions()
		o.Alloc = mem
		if _, err := tb.Compact(ctx, o); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// compactCrashTally counts what the compaction trials saw.
type compactCrashTally struct {
	crashTally
	killsInCompact, compactions, covMismatches, compactFailed int
}

func (c *compactCrashTally) failures() int {
	return c.crashTally.failures() + c.covMismatches + c.compactFailed
}

func (c *compactCrashTally) line(seed uint64) string {
	return fmt.Sprintf("compaction crash trials: trials=%d kills_in_compact=%d compactions_committed=%d acked=%d unacked_committed=%d stray_files_removed=%d unreadable=%d lost=%d duplicates=%d coverage_mismatches=%d"+
		" (kills_in_commit=%d partial=%d append_failed=%d compact_failed=%d vacuum_mismatches=%d python_checks=%d seed=%d)",
		c.trials, c.killsInCompact, c.compactions, c.acked, c.unackedCommitted, c.strayRemoved, c.unreadable, c.lost, c.dups, c.covMismatches,
		c.killsInCommit, c.partial, c.appendFailed, c.compactFailed, c.vacuumMismatches, c.pythonChecks, seed)
}

// compactionCommits counts the commits in (from, to] that remove segments.
func compactionCommits(t *testing.T, tb *Table, from, to uint64) int {
	t.Helper()
	n := 0
	for v := from + 1; v <= to; v++ {
		c, err := tb.log.readCommit(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range c.Actions {
			if _, ok := a.(RemoveSegment); ok {
				n++
				break
			}
		}
	}
	return n
}

// checkCrashCoverage: the table checks clean (every sidecar is its
// segment's rows' coverage, the table coverage their union), and the union
// has exactly one pair per row (every crash batch row has its own
// interval).
func checkCrashCoverage(t *testing.T, ctx context.Context, tb *Table, rows int) error {
	t.Helper()
	rep, err := tb.Check(ctx, CheckOptions{})
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("check: %+v", rep.Findings)
	}
	st := tb.State()
	if st.Schema() == nil {
		return nil
	}
	u := liveUnion(t, tb, st)
	cov, err := tb.loadCoverage(ctx, st)
	if err != nil {
		return err
	}
	if u.Cardinality() != uint64(rows) || !cov.set.Equal(u) {
		return fmt.Errorf("coverage has %d pairs (table coverage %d) for %d rows", u.Cardinality(), cov.set.Cardinality(), rows)
	}
	return nil
}

// TestCrashTrialsCompact runs the compaction crash trials.
func TestCrashTrialsCompact(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials spawn processes")
	}
	trials, seed := crashTrialSettings(t)
	if os.Getenv("TSFLIGHT_CRASH_TRIALS") == "" {
		trials = 20
	}
	t.Logf("compaction crash trials: trials=%d seed=%d (replay with TSFLIGHT_CRASH_SEED=%d)", trials, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	py := crashPython(t)

	dir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "acked.log")
	if _, err := Create(ctx, storage.Local(dir), CreateOptions{Index: crashIndex()}, nil); err != nil {
		t.Fatal(err)
	}
	perRound := measureCompactRound(t, mem)
	t.Logf("one round (%d appends and a compaction) takes about %s here; kills are drawn in [0, 3×) of it", crashCompactAppends, perRound)

	tally := &compactCrashTally{crashTally: crashTally{mode: "compact"}}
	acked := map[int64]uint64{}
	next := int64(0)
	named, namedUpTo := map[string]bool{}, uint64(0)
	defer func() {
		t.Log(tally.line(seed))
		fmt.Println(tally.line(seed))
	}()
	for trial := 1; trial <= trials; trial++ {
		tally.trials = trial
		cmd := exec.Command(os.Args[0], "-test.run=^TestCompactCrashWorkerProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TSFLIGHT_COMPACT_CRASH_DIR="+dir, "TSFLIGHT_COMPACT_CRASH_LOG="+logPath,
			"TSFLIGHT_COMPACT_CRASH_FIRST="+strconv.FormatInt(next, 10))
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), "ready\n") {
			select {
			case err := <-done:
				t.Fatalf("trial %d: the worker exited (%v) before it was ready:\n%s", trial, err, out)
			default:
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("trial %d: the worker was not ready in 30 s:\n%s", trial, out)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(3 * perRound))))
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("trial %d: the worker ended on its own (%v) before the kill:\n%s", trial, err, out)
		}
		output := out.String()
		if strings.LastIndex(output, "compacting\n") > strings.LastIndex(output, "compacted\n") {
			tally.killsInCompact++
		}

		cur, _ := os.ReadFile(filepath.Join(dir, LogDir, "CURRENT"))
		for id, v := range readAcked(t, logPath) {
			if _, ok := acked[id]; !ok {
				tally.acked++
			}
			acked[id] = v
		}

		// The table opens, and holds every acknowledged batch once.
		tb, err := Open(ctx, storage.Local(dir), nil)
		if err != nil {
			tally.unreadable++
			t.Fatalf("trial %d: the table does not open after the kill: %v\n%s", trial, err, tally.line(seed))
		}
		st := tb.State()
		tally.compactions += compactionCommits(t, tb, namedUpTo, st.Version)
		counts, err := batchCounts(t, ctx, tb, mem)
		if err != nil {
			tally.unreadable++
			t.Fatalf("trial %d: scan after the kill: %v", trial, err)
		}
		unacked := checkBatches(t, &tally.crashTally, counts, acked)
		for _, id := range unacked {
			acked[id] = st.Version
		}
		tally.unackedCommitted += len(unacked)
		rows := 0
		for _, n := range counts {
			rows += n
		}
		if err := checkCrashCoverage(t, ctx, tb, rows); err != nil {
			tally.covMismatches++
			t.Errorf("trial %d: coverage after the kill: %v", trial, err)
		}
		if len(unacked) > 0 || strings.TrimSpace(string(cur)) != strconv.FormatUint(st.Version, 10) {
			tally.killsInCommit++
		}

		// Vacuum finds exactly the files no commit names (a killed
		// compaction's outputs and sidecars, a killed append's files).
		namedPaths(t, dir, namedUpTo, st.Version, named)
		namedUpTo = st.Version
		want := expectedStrays(t, dir, named)
		rep, err := tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true})
		if err != nil {
			t.Fatalf("trial %d: vacuum: %v", trial, err)
		}
		if got := byDisposition(rep, VacuumDeleted); strings.Join(got, " ") != strings.Join(want, " ") {
			tally.vacuumMismatches++
			t.Errorf("trial %d: vacuum deleted %v, want %v", trial, got, want)
		}
		tally.strayRemoved += rep.Deleted

		// The next compaction and append succeed, and change no row.
		o := DefaultCompactOptions()
		o.Alloc = mem
		crep, err := tb.Compact(ctx, o)
		if err != nil {
			tally.compactFailed++
			t.Fatalf("trial %d: the compaction after the kill failed: %v", trial, err)
		}
		if !crep.NoOp {
			tally.compactions++
		}
		after, err := batchCounts(t, ctx, tb, mem)
		if err != nil || !mapsEqual(after, counts) {
			tally.unreadable++
			t.Errorf("trial %d: the table reads differently after compacting (%v)", trial, err)
		}
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
		namedPaths(t, dir, namedUpTo, res.Version, named)
		namedUpTo = res.Version
		if err := checkCrashCoverage(t, ctx, tb, rows+crashRows); err != nil {
			tally.covMismatches++
			t.Errorf("trial %d: coverage after the next append: %v", trial, err)
		}

		if py != "" && (trial == trials || trial%25 == 0) {
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
	if trials >= 10 && tally.killsInCompact == 0 {
		t.Errorf("no kill landed inside a compaction in %d trials", trials)
	}
}
