// Crash trials of Upgrade with real processes: a child process upgrades a
// format-6 table and is killed (SIGKILL) at a random moment; the table
// must then be either the old format-6 table, byte for byte, or the new
// protocol-7 one, never a mix; the next upgrade must finish the job,
// leaving no staging directory and exactly one backup holding the old log;
// and the rows must be the same throughout (checked with
// timeseries-table-format 0.9.0 too, when installed).

package tableformat

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// crashUpgradeTrials is the default trial count (TSFLIGHT_CRASH_TRIALS
// overrides it); crashUpgradeCommits the length of the log upgraded.
const (
	crashUpgradeTrials  = 12
	crashUpgradeCommits = 40
)

// TestUpgradeCrashWorkerProcess is the child: it upgrades the table in
// TSFLIGHT_CRASH_DIR and waits to be killed.
func TestUpgradeCrashWorkerProcess(t *testing.T) {
	if os.Getenv("TSFLIGHT_CRASH_CHILD") != "TestUpgradeCrashWorkerProcess" {
		t.Skip("only runs as a child of TestCrashTrialsUpgrade")
	}
	ctx := context.Background()
	tb, err := Open(ctx, storage.Local(os.Getenv("TSFLIGHT_CRASH_DIR")), nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	if _, err := tb.Upgrade(ctx, nil); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	fmt.Println("upgraded")
	time.Sleep(time.Hour)
}

// makeFormat6Log builds a protocol-7 table of n commits with tsflight and
// rewrites its log into the format-6 spelling (the inverse of the
// conversion), returning the protocol-7 commits as they were.
func makeFormat6Log(t *testing.T, dir string, n int) [][]byte {
	t.Helper()
	ctx := context.Background()
	opts := DefaultOptions()
	opts.CheckpointInterval = 0
	tb, err := Create(ctx, storage.Local(dir), CreateOptions{Index: crashIndex()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for id := int64(0); id < int64(n-1); id++ {
		if _, err := appendCrashBatch(ctx, tb, mem, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, checkpointDir)); err != nil {
		t.Fatal(err)
	}
	var v7 [][]byte
	for v := 1; v <= n; v++ {
		p := filepath.Join(dir, CommitPath(uint64(v)))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		v7 = append(v7, b)
		old := bytes.ReplaceAll(b, []byte(`"protocol_version":7,"required_reader_features":[],"required_writer_features":[]`), []byte(`"format_version":6`))
		old = bytes.ReplaceAll(old, []byte(`"index_granularity":`), []byte(`"bucket":`))
		if err := os.WriteFile(p, old, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return v7
}

// upgradeCrashTally counts what the trials saw.
type upgradeCrashTally struct {
	trials, killedBefore, killedAfter, killedDone    int
	leftoversRemoved, backupsRecovered, wrongLog     int
	wrongRows, unreadable, wrongBackups, pythonCheck int
}

func (c *upgradeCrashTally) line(seed uint64) string {
	return fmt.Sprintf("upgrade crash trials: trials=%d killed_before_swap=%d killed_after_swap=%d killed_after_upgrade=%d leftovers_removed=%d backups_recovered=%d wrong_log=%d wrong_rows=%d unreadable=%d wrong_backups=%d python_checks=%d seed=%d",
		c.trials, c.killedBefore, c.killedAfter, c.killedDone, c.leftoversRemoved, c.backupsRecovered, c.wrongLog, c.wrongRows, c.unreadable, c.wrongBackups, c.pythonCheck, seed)
}

func TestCrashTrialsUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials spawn processes")
	}
	trials, seed := testkit.CrashSettings(t, crashUpgradeTrials)
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	tally := &upgradeCrashTally{}
	t.Cleanup(func() {
		line := tally.line(seed)
		t.Log(line)
		fmt.Println(line)
	})
	py := crashPython(t)
	ctx := context.Background()
	template := filepath.Join(t.TempDir(), "template")
	v7 := makeFormat6Log(t, template, crashUpgradeCommits)
	v6 := make([][]byte, len(v7))
	for i := range v7 {
		var err error
		if v6[i], err = os.ReadFile(filepath.Join(template, CommitPath(uint64(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	rows := int64((crashUpgradeCommits - 1) * crashRows)

	// How long an upgrade takes here: kills are drawn in [0, 1.5×) of it.
	scratch := filepath.Join(t.TempDir(), "scratch")
	rpCopy(t, template, scratch)
	began := time.Now()
	stb, err := Open(ctx, storage.Local(scratch), nil)
	if err == nil {
		_, err = stb.Upgrade(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	t.Logf("upgrade crash trials=%d seed=%d (replay with TSFLIGHT_CRASH_SEED=%d); one upgrade takes about %s", trials, seed, seed, took)

	dir := filepath.Join(t.TempDir(), "t")
	for trial := 1; trial <= trials && !t.Failed(); trial++ {
		tally.trials = trial
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		rpCopy(t, template, dir)
		cmd := exec.Command(os.Args[0], "-test.run=^TestUpgradeCrashWorkerProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TSFLIGHT_CRASH_CHILD=TestUpgradeCrashWorkerProcess", "TSFLIGHT_CRASH_DIR="+dir)
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
				t.Fatalf("trial %d: the child exited (%v) before it was ready:\n%s", trial, err, out)
			default:
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("trial %d: the child was not ready:\n%s", trial, out)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(took * 3 / 2))))
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("trial %d: the child ended on its own (%v):\n%s", trial, err, out)
		}
		checkAfterUpgradeKill(t, ctx, trial, dir, v6, v7, rows, tally)
		// The next upgrade finishes the job.
		tb, err := Open(ctx, storage.Local(dir), nil)
		if err != nil {
			tally.unreadable++
			t.Fatalf("trial %d: open before the second upgrade: %v", trial, err)
		}
		rep, err := tb.Upgrade(ctx, nil)
		if err != nil {
			t.Fatalf("trial %d: the upgrade after the kill: %v", trial, err)
		}
		tally.leftoversRemoved += len(rep.Leftovers)
		tally.backupsRecovered += len(rep.LeftoverBackups)
		if tb.State().Meta.NeedsUpgrade() {
			t.Fatalf("trial %d: still format 6 after the second upgrade", trial)
		}
		if got := scanCount(t, tb, ScanOptions{}); got != rows {
			tally.wrongRows++
			t.Errorf("trial %d: %d rows after the second upgrade, want %d", trial, got, rows)
		}
		checkUpgradeBackup(t, trial, dir, v6, tally)
		if py != "" && trial%4 == 1 {
			tally.pythonCheck++
			if got := pythonRowCount(t, py, dir); got != rows {
				tally.wrongRows++
				t.Errorf("trial %d: timeseries-table-format counts %d rows, want %d", trial, got, rows)
			}
		}
	}
	if tally.wrongLog+tally.wrongRows+tally.unreadable+tally.wrongBackups > 0 {
		t.Errorf("failures: %s", tally.line(seed))
	}
}

// side counts which side of the upgrade st is on (not begun, converted
// but not compacted, done) and returns the commits the log must then hold
// word for word: the old ones before, else the converted ones.
func (c *upgradeCrashTally) side(st *State, v6, v7 [][]byte) [][]byte {
	switch {
	case st.Meta.NeedsUpgrade():
		c.killedBefore++
		return v6
	case st.Version == uint64(len(v7)):
		c.killedAfter++
	default:
		c.killedDone++
	}
	return v7
}

// checkAfterUpgradeKill: the killed upgrade left the old table (every
// commit as it was) or the new one (every commit converted), and the rows.
func checkAfterUpgradeKill(t *testing.T, ctx context.Context, trial int, dir string, v6, v7 [][]byte, rows int64, tally *upgradeCrashTally) {
	t.Helper()
	tb, err := Open(ctx, storage.Local(dir), &Options{ReadOnly: true})
	if err != nil {
		tally.unreadable++
		t.Errorf("trial %d: the table does not open after the kill: %v", trial, err)
		return
	}
	st := tb.State()
	want := tally.side(st, v6, v7)
	for v, w := range want {
		got, err := os.ReadFile(filepath.Join(dir, CommitPath(uint64(v+1))))
		if err != nil || !bytes.Equal(got, w) {
			tally.wrongLog++
			t.Errorf("trial %d: commit %d is neither all old nor all new (legacy %d): %v\n%s", trial, v+1, st.Meta.LegacyFormat, err, got)
			return
		}
	}
	if got := scanCount(t, tb, ScanOptions{}); got != rows {
		tally.wrongRows++
		t.Errorf("trial %d: %d rows after the kill, want %d", trial, got, rows)
	}
}

// checkUpgradeBackup: no staging directory is left, and exactly one backup
// holds the old log's commits.
func checkUpgradeBackup(t *testing.T, trial int, dir string, v6 [][]byte, tally *upgradeCrashTally) {
	t.Helper()
	staging, _ := filepath.Glob(filepath.Join(dir, UpgradeStagingPrefix+"*"))
	backups, _ := filepath.Glob(filepath.Join(dir, UpgradeBackupPrefix+"*"))
	if len(staging) != 0 || len(backups) != 1 {
		tally.wrongBackups++
		t.Errorf("trial %d: staging %v, backups %v; want none and one", trial, staging, backups)
		return
	}
	for v, w := range v6 {
		got, err := os.ReadFile(filepath.Join(backups[0], filepath.Base(CommitPath(uint64(v+1)))))
		if err != nil || !bytes.Equal(got, w) {
			tally.wrongBackups++
			t.Errorf("trial %d: backup commit %d differs from the old log: %v", trial, v+1, err)
			return
		}
	}
}

// durableMemCopy copies the table under dir into a new MemFS, every file and
// directory durable.
func durableMemCopy(t *testing.T, dir string) *storage.MemFS {
	t.Helper()
	m := storage.NewMem()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return m.MkdirAll(rel)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := m.Create(rel)
		if err == nil {
			_, err = f.Write(b)
		}
		if err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = f.Close()
		}
		if err == nil {
			err = m.SyncDir(filepath.ToSlash(filepath.Dir(rel)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A crash at every storage call of an upgrade (in process, on a MemFS that
// keeps only what was made durable) leaves the old table or the new one;
// the next upgrade finishes with one backup and no staging directory.
func TestUpgradeCrashEveryStep(t *testing.T) {
	src, want := copyFormat6(t, "ts_entity")
	ctx := context.Background()
	var v6, v7 [][]byte
	for v := uint64(1); v <= want.Version; v++ {
		b, err := os.ReadFile(filepath.Join(src, CommitPath(v)))
		if err != nil {
			t.Fatal(err)
		}
		v6, v7 = append(v6, b), append(v7, v6Oracle(b))
	}
	rows := int64(len(want.Rows))
	// The calls of a whole upgrade.
	probe := storage.NewFaultFS(durableMemCopy(t, src))
	tb, err := Open(ctx, probe, nil)
	if err != nil {
		t.Fatal(err)
	}
	probe.Reset()
	if _, err := tb.Upgrade(ctx, nil); err != nil {
		t.Fatal(err)
	}
	trace := probe.Trace()
	tally := &upgradeCrashTally{}
	for k, e := range trace {
		nth := 0
		for _, p := range trace[:k+1] {
			if p.Op == e.Op {
				nth++
			}
		}
		m := durableMemCopy(t, src)
		f := storage.NewFaultFS(m)
		tb, err := Open(ctx, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		f.Reset()
		f.Inject(storage.Fault{Op: e.Op, Nth: nth})
		// A crash in the compaction's last steps (publishing CURRENT after
		// the commit file) may still count as a success.
		_, _ = tb.Upgrade(ctx, nil)
		if !f.Crashed() {
			t.Fatalf("crash at call %d (%v): the crash never fired", k+1, e)
		}
		c := m.CrashClone()
		tally.trials++
		checkMemAfterCrash(t, ctx, k+1, e, c, v6, v7, rows, tally)
		tb2, err := Open(ctx, c, nil)
		if err != nil {
			t.Fatalf("crash at call %d (%v): open: %v", k+1, e, err)
		}
		rep, err := tb2.Upgrade(ctx, nil)
		if err != nil {
			t.Fatalf("crash at call %d (%v): the next upgrade: %v", k+1, e, err)
		}
		tally.leftoversRemoved += len(rep.Leftovers)
		tally.backupsRecovered += len(rep.LeftoverBackups)
		names, _ := c.List(".")
		backups := 0
		for _, n := range names {
			switch {
			case strings.HasPrefix(n, UpgradeStagingPrefix):
				t.Errorf("crash at call %d (%v): %s left after the next upgrade", k+1, e, n)
			case strings.HasPrefix(n, UpgradeBackupPrefix):
				backups++
				for v, w := range v6 {
					if got, err := c.ReadFile(n + "/" + filepath.Base(CommitPath(uint64(v+1)))); err != nil || !bytes.Equal(got, w) {
						t.Errorf("crash at call %d (%v): backup %s commit %d differs: %v", k+1, e, n, v+1, err)
					}
				}
			}
		}
		if backups != 1 {
			t.Errorf("crash at call %d (%v): %d backups after the next upgrade, want 1", k+1, e, backups)
		}
	}
	t.Log(tally.line(0))
	if tally.backupsRecovered == 0 || tally.leftoversRemoved == 0 || tally.killedBefore == 0 || tally.killedAfter == 0 {
		t.Errorf("the crash points missed a window: %s", tally.line(0))
	}
}

// checkMemAfterCrash: the crash left the old log or the new one, whole.
func checkMemAfterCrash(t *testing.T, ctx context.Context, k int, e storage.Event, c *storage.MemFS, v6, v7 [][]byte, rows int64, tally *upgradeCrashTally) {
	t.Helper()
	tb, err := Open(ctx, c, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("crash at call %d (%v): the table does not open: %v", k, e, err)
	}
	st := tb.State()
	want := tally.side(st, v6, v7)
	for v, w := range want {
		if got, err := c.ReadFile(CommitPath(uint64(v + 1))); err != nil || !bytes.Equal(got, w) {
			t.Fatalf("crash at call %d (%v): commit %d is neither all old nor all new (legacy %d): %v", k, e, v+1, st.Meta.LegacyFormat, err)
		}
	}
	if got := scanCount(t, tb, ScanOptions{}); got != rows {
		t.Errorf("crash at call %d (%v): %d rows, want %d", k, e, got, rows)
	}
}
