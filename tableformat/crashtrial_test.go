// The scaffolding the crash trials with real processes share
// (crash_process_test.go, crash_compact_test.go, crash_checkpoint_test.go,
// crash_vacuum_test.go): the trial count and seed, the child process (this
// test binary re-executed to run one test), its readiness and its SIGKILL,
// the acknowledged-batch log, the row checks after a kill, the next append,
// the checks with the timeseries-table-format 0.9.0 package, and the tally
// line printed at the end whatever happened.
//
// A trial's parent creates a crashRun, and for each trial starts a child
// (crashRun.start), kills it (crashChild.kill or killAfter), folds in what
// the child acknowledged (absorbAcked), opens the table (open), checks its
// rows (checkRows) and whatever its trial is about, appends the next batch
// (appendNext), has the 0.9.0 package read (pythonCheck) and possibly
// append (pythonAppend), and ends the trial (endTrial: any failure so far
// stops the run with the replay seed). The child calls crashChildStart and
// logs each acknowledged append with ack.

package tableformat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// crashRows is the number of rows of each batch.
const crashRows = testkit.CrashRows

// crashSchema: ts (ms, UTC), host, batch (the batch id), v.
func crashSchema() *arrow.Schema { return testkit.CrashSchema() }

// crashBatch is batch id: crashRows rows of host w at 10 s steps from t0,
// in a time range no other batch touches.
func crashBatch(mem memory.Allocator, id int64) arrow.RecordBatch {
	return testkit.CrashBatch(mem, t0.UnixMilli(), id)
}

func appendCrashBatch(ctx context.Context, tb *Table, mem memory.Allocator, id int64) (*AppendResult, error) {
	rec := crashBatch(mem, id)
	rdr, err := array.NewRecordReader(crashSchema(), []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	opts := DefaultAppendOptions()
	opts.Alloc = mem
	return tb.Append(ctx, rdr, opts)
}

func crashIndex() IndexSpec {
	return IndexSpec{Column: "ts", EntityColumns: []string{"host"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}}
}

// appendScratch appends the n crash batches from *next on to tb (a
// scratch table a parent measures on) and moves *next past them; a
// failure fails the test.
func appendScratch(t *testing.T, tb *Table, mem memory.Allocator, next *int64, n int) {
	t.Helper()
	for range n {
		if _, err := appendCrashBatch(context.Background(), tb, mem, *next); err != nil {
			t.Fatal(err)
		}
		*next++
	}
}

// compactScratch compacts tb (a scratch table) with mem; a failure fails
// the test.
func compactScratch(t *testing.T, tb *Table, mem memory.Allocator) {
	t.Helper()
	o := DefaultCompactOptions()
	o.Alloc = mem
	if _, err := tb.Compact(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// crashTally counts what the trials saw; the tallies of the other trials
// embed it.
type crashTally struct {
	mode                                    string
	trials, killsInCommit, killsInAppend    int
	killsBetween, acked, unackedCommitted   int
	strayRemoved, unreadable, lost, dups    int
	partial, appendFailed, vacuumMismatches int
	pythonChecks, pythonAppends             int
}

func (c *crashTally) base() *crashTally { return c }

func (c *crashTally) failures() int {
	return c.unreadable + c.lost + c.dups + c.partial + c.appendFailed + c.vacuumMismatches
}

// line is the summary of the library trials (docs/reliability.md quotes
// it).
func (c *crashTally) line(seed uint64) string {
	return fmt.Sprintf("crash trials: mode=%s trials=%d kills_in_commit=%d acked=%d unacked_committed=%d stray_files_removed=%d unreadable=%d lost=%d duplicates=%d"+
		" (kills_in_append=%d kills_between_appends=%d partial=%d append_failed=%d vacuum_mismatches=%d python_checks=%d seed=%d)",
		c.mode, c.trials, c.killsInCommit, c.acked, c.unackedCommitted, c.strayRemoved, c.unreadable, c.lost, c.dups,
		c.killsInAppend, c.killsBetween, c.partial, c.appendFailed, c.vacuumMismatches, c.pythonChecks, seed)
}

// crashTallier is a trial's tally: the shared counts, its failures (any
// stops the run) and its summary line.
type crashTallier interface {
	base() *crashTally
	failures() int
	line(seed uint64) string
}

// crashRunSpec describes one kind of trial.
type crashRunSpec struct {
	// title starts the first log line ("compaction crash trials:").
	title string
	// child is the name of the test the child process runs, role what the
	// messages call it ("writer", "worker").
	child, role string
	// defaultTrials applies when TSFLIGHT_CRASH_TRIALS is unset.
	defaultTrials int
	// salt is mixed into the seed of the delays (each trial its own, so
	// that a seed replays the run it was printed by).
	salt  uint64
	tally crashTallier
}

// crashRun is one run of crash trials: the table, the acknowledged log,
// what was acknowledged, the random delays and the tally.
type crashRun struct {
	t                 *testing.T
	ctx               context.Context
	spec              crashRunSpec
	trials            int
	seed              uint64
	rng               *rand.Rand
	mem               *memory.CheckedAllocator
	py                string // "" when the 0.9.0 package is missing (not in CI)
	dir, logPath      string
	tally             crashTallier
	acked             map[int64]uint64 // batch id -> version that holds it
	next              int64            // the next batch id to append
	pythonAppendFiles string           // a directory for the batches the package appends
	named             map[string]bool  // the paths commits 1..namedTo name
	namedTo           uint64
}

// newCrashRun skips in -short mode, reads the settings, logs them, creates
// the table (an empty one with crashIndex) and arranges for the tally line
// to be logged and printed and for the allocator to be checked at the end,
// whatever happens.
func newCrashRun(t *testing.T, spec crashRunSpec) *crashRun {
	t.Helper()
	if testing.Short() {
		t.Skip("crash trials spawn processes")
	}
	trials, seed := testkit.CrashSettings(t, spec.defaultTrials)
	t.Logf("%s trials=%d seed=%d (replay with TSFLIGHT_CRASH_SEED=%d)", spec.title, trials, seed, seed)
	r := &crashRun{
		t: t, ctx: context.Background(), spec: spec, trials: trials, seed: seed,
		rng:   rand.New(rand.NewPCG(seed, seed^spec.salt)),
		mem:   memory.NewCheckedAllocator(memory.DefaultAllocator),
		tally: spec.tally, acked: map[int64]uint64{}, named: map[string]bool{},
	}
	t.Cleanup(func() { r.mem.AssertSize(t, 0) })
	r.py = crashPython(t)
	r.dir = t.TempDir()
	r.logPath = filepath.Join(t.TempDir(), "acked.log")
	r.pythonAppendFiles = t.TempDir()
	if _, err := Create(r.ctx, storage.Local(r.dir), CreateOptions{Index: crashIndex()}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		line := r.tally.line(r.seed)
		t.Log(line)
		fmt.Println(line)
	})
	return r
}

// crashChild is one life of a child process.
type crashChild struct {
	r        *crashRun
	trial    int
	cmd      *exec.Cmd
	out      *lockedBuffer
	done     chan error
	deadline time.Time
}

// start runs the child test in a new process, with the table, the log and
// the first batch id to append (r.next) in its environment, and env, and
// returns once it printed "ready", which it must do within readyWithin.
func (r *crashRun) start(trial int, readyWithin time.Duration, env ...string) *crashChild {
	r.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+r.spec.child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TSFLIGHT_CRASH_CHILD="+r.spec.child, "TSFLIGHT_CRASH_DIR="+r.dir,
		"TSFLIGHT_CRASH_LOG="+r.logPath, "TSFLIGHT_CRASH_FIRST="+strconv.FormatInt(r.next, 10))
	cmd.Env = append(cmd.Env, env...)
	c := &crashChild{r: r, trial: trial, cmd: cmd, out: &lockedBuffer{}, done: make(chan error, 1), deadline: time.Now().Add(readyWithin)}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	for !strings.Contains(c.out.String(), "ready\n") {
		select {
		case err := <-c.done:
			r.t.Fatalf("trial %d: the %s exited (%v) before it was ready:\n%s", trial, r.spec.role, err, c.out)
		default:
		}
		if time.Now().After(c.deadline) {
			_ = cmd.Process.Kill()
			r.t.Fatalf("trial %d: the %s was not ready in %s:\n%s", trial, r.spec.role, readyWithin, c.out)
		}
		time.Sleep(time.Millisecond)
	}
	return c
}

// output is what the child printed so far.
func (c *crashChild) output() string { return c.out.String() }

// waitUntil polls the child's output every poll until cond holds; the
// child must not exit, and cond must hold before the deadline of start.
func (c *crashChild) waitUntil(what string, poll time.Duration, cond func(out string) bool) {
	c.r.t.Helper()
	for !cond(c.out.String()) {
		select {
		case err := <-c.done:
			c.r.t.Fatalf("trial %d: the %s exited (%v) while the test waited for %s:\n%s", c.trial, c.r.spec.role, err, what, c.out)
		default:
		}
		if time.Now().After(c.deadline) {
			_ = c.cmd.Process.Kill()
			c.r.t.Fatalf("trial %d: no %s in time:\n%s", c.trial, what, c.out)
		}
		time.Sleep(poll)
	}
}

// kill sends SIGKILL and checks that the child died of it (it never ends
// on its own).
func (c *crashChild) kill() {
	c.r.t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		c.r.t.Fatal(err)
	}
	if err := <-c.done; err == nil || !strings.Contains(err.Error(), "killed") {
		c.r.t.Fatalf("trial %d: the %s ended on its own (%v) before the kill:\n%s", c.trial, c.r.spec.role, err, c.out)
	}
}

// killAfter sleeps d and kills.
func (c *crashChild) killAfter(d time.Duration) {
	c.r.t.Helper()
	time.Sleep(d)
	c.kill()
}

// absorbAcked folds the batches the child acknowledged into r.acked.
func (r *crashRun) absorbAcked() {
	r.t.Helper()
	for id, v := range readAcked(r.t, r.logPath) {
		if _, ok := r.acked[id]; !ok {
			r.tally.base().acked++
		}
		r.acked[id] = v
	}
}

// open opens the table after a kill; a table that does not open fails
// the run.
func (r *crashRun) open(trial int, opts *Options) *Table {
	r.t.Helper()
	tb, err := Open(r.ctx, storage.Local(r.dir), opts)
	if err != nil {
		r.tally.base().unreadable++
		r.t.Fatalf("trial %d: the table does not open after the kill: %v\n%s", trial, err, r.tally.line(r.seed))
	}
	return tb
}

// checkRows scans tb's state and compares the rows per batch with what
// was acknowledged (checkBatches); the unacknowledged batches it finds
// whole are acknowledged from now on. It returns the rows per batch and
// those batches.
func (r *crashRun) checkRows(trial int, tb *Table) (map[int64]int, []int64) {
	r.t.Helper()
	st := tb.State()
	counts, err := batchCounts(r.t, r.ctx, tb, r.mem)
	if err != nil {
		r.tally.base().unreadable++
		r.t.Fatalf("trial %d: scan after the kill: %v", trial, err)
	}
	unacked := checkBatches(r.t, r.tally.base(), counts, r.acked)
	for _, id := range unacked {
		r.acked[id] = st.Version // committed: from now on it must stay
	}
	r.tally.base().unackedCommitted += len(unacked)
	return counts, unacked
}

// nameThrough adds to r.named the paths that the commits after r.namedTo
// through version v name.
func (r *crashRun) nameThrough(v uint64) {
	r.t.Helper()
	testkit.NamedPaths(r.t, r.dir, CommitPath, r.namedTo, v, r.named)
	r.namedTo = v
}

// strays names the commits through version v and returns the files a
// vacuum with the cutoff at now must remove: those no commit names.
func (r *crashRun) strays(v uint64) []string {
	r.t.Helper()
	r.nameThrough(v)
	return testkit.ExpectedStrays(r.t, r.dir, LogDir, r.named)
}

// vacuumApply runs a vacuum of tb with the cutoff at now that deletes: it
// must delete exactly want.
func (r *crashRun) vacuumApply(trial int, tb *Table, want []string) {
	r.t.Helper()
	rep, err := tb.Vacuum(r.ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true})
	if err != nil {
		r.t.Fatalf("trial %d: vacuum apply: %v", trial, err)
	}
	if got := byDisposition(rep, VacuumDeleted); strings.Join(got, " ") != strings.Join(want, " ") {
		r.tally.base().vacuumMismatches++
		r.t.Errorf("trial %d: vacuum deleted %v, want %v", trial, got, want)
	}
	r.tally.base().strayRemoved += rep.Deleted
}

// sameRows checks that tb still reads counts rows per batch after what
// it names (a vacuum, a compaction).
func (r *crashRun) sameRows(trial int, tb *Table, counts map[int64]int, after string) {
	r.t.Helper()
	if got, err := batchCounts(r.t, r.ctx, tb, r.mem); err != nil || !maps.Equal(got, counts) {
		r.tally.base().unreadable++
		r.t.Errorf("trial %d: the table reads differently after %s (%v)", trial, after, err)
	}
}

// compactAfterKill compacts tb with r's allocator; it must succeed
// (failed counts a failure, which stops the run), and compactions counts
// the compaction when it committed.
func (r *crashRun) compactAfterKill(trial int, tb *Table, failed, compactions *int) *CompactReport {
	r.t.Helper()
	o := DefaultCompactOptions()
	o.Alloc = r.mem
	rep, err := tb.Compact(r.ctx, o)
	if err != nil {
		*failed++
		r.t.Fatalf("trial %d: the compaction after the kill failed: %v", trial, err)
	}
	if !rep.NoOp {
		*compactions++
	}
	return rep
}

// nextAfter moves r.next past every batch in counts and every acknowledged
// one.
func (r *crashRun) nextAfter(counts map[int64]int) {
	for id := range counts {
		r.next = max(r.next, id+1)
	}
	for id := range r.acked {
		r.next = max(r.next, id+1)
	}
}

// appendNext appends the next batch through tb (it must succeed) and
// acknowledges it.
func (r *crashRun) appendNext(trial int, tb *Table, counts map[int64]int) *AppendResult {
	r.t.Helper()
	r.nextAfter(counts)
	res, err := appendCrashBatch(r.ctx, tb, r.mem, r.next)
	if err != nil {
		r.tally.base().appendFailed++
		r.t.Fatalf("trial %d: the append after the kill failed: %v", trial, err)
	}
	r.acked[r.next] = res.Version
	r.tally.base().acked++
	r.next++
	return res
}

// pythonDue says whether this trial checks with the 0.9.0 package: every
// every-th trial and the last, when the package is there.
func (r *crashRun) pythonDue(trial, every int) bool {
	return r.py != "" && (trial == r.trials || trial%every == 0)
}

// pythonCheck has the 0.9.0 package open the table and count its rows
// with SQL: every acknowledged batch, whole.
func (r *crashRun) pythonCheck(trial int) {
	r.t.Helper()
	if n := pythonRowCount(r.t, r.py, r.dir); n != int64(len(r.acked)*crashRows) {
		r.tally.base().unreadable++
		r.t.Errorf("trial %d: timeseries-table-format counts %d rows, Go %d", trial, n, len(r.acked)*crashRows)
	}
	r.tally.base().pythonChecks++
}

// pythonAppend has the 0.9.0 package append the next batch to the table
// (testdata/reference/interop.py) and acknowledges it at the version the
// package reports. It returns that version.
func (r *crashRun) pythonAppend(trial int) uint64 {
	r.t.Helper()
	for id := range r.acked {
		r.next = max(r.next, id+1)
	}
	p := filepath.Join(r.pythonAppendFiles, fmt.Sprintf("batch%d.arrows", r.next))
	rec := crashBatch(r.mem, r.next)
	writeIPC(r.t, p, rec)
	rec.Release()
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.py, filepath.Join("..", "testdata", "reference", "interop.py"), "append", "{}", r.dir, p)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rep struct {
		Appends []struct {
			Version uint64 `json:"version"`
		} `json:"appends"`
	}
	if err == nil {
		err = json.Unmarshal(out, &rep)
	}
	if err == nil && len(rep.Appends) != 1 {
		err = fmt.Errorf("%d appends reported", len(rep.Appends))
	}
	if err != nil {
		r.tally.base().appendFailed++
		r.t.Fatalf("trial %d: timeseries-table-format could not append batch %d: %v\n%s%s", trial, r.next, err, out, stderr.String())
	}
	v := rep.Appends[0].Version
	r.acked[r.next] = v
	r.tally.base().acked++
	r.tally.base().pythonAppends++
	r.next++
	return v
}

// endTrial stops the run at the first failure, with the seed to replay it.
func (r *crashRun) endTrial(trial int) {
	r.t.Helper()
	if r.tally.failures() > 0 {
		r.t.Fatalf("trial %d failed; replay with TSFLIGHT_CRASH_SEED=%d\n%s", trial, r.seed, r.tally.line(r.seed))
	}
}

// crashChildEnv is what a child process gets from its parent.
type crashChildEnv struct {
	dir   string
	first int64
	log   *os.File
}

// crashChildStart skips the test unless this process is the child
// process name that parent started, and opens the acknowledged log.
func crashChildStart(t *testing.T, name, parent string) *crashChildEnv {
	t.Helper()
	if os.Getenv("TSFLIGHT_CRASH_CHILD") != name {
		t.Skip("only runs as a child of " + parent)
	}
	first, err := strconv.ParseInt(os.Getenv("TSFLIGHT_CRASH_FIRST"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(os.Getenv("TSFLIGHT_CRASH_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return &crashChildEnv{dir: os.Getenv("TSFLIGHT_CRASH_DIR"), first: first, log: log}
}

// ack logs "acked <batch> <version>" and fsyncs the log, before the child
// does anything else.
func (c *crashChildEnv) ack(t *testing.T, id int64, v uint64) {
	t.Helper()
	testkit.WriteAck(t, c.log, id, v)
}

// openReady opens the table the parent made, on fsys (the local
// directory when nil) with opts, and tells the parent the child is ready.
func (c *crashChildEnv) openReady(t *testing.T, fsys storage.FS, opts *Options) *Table {
	t.Helper()
	if fsys == nil {
		fsys = storage.Local(c.dir)
	}
	tb, err := Open(context.Background(), fsys, opts)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	return tb
}

// appendAcked appends batch id (a failure fails the child) and
// acknowledges it.
func (c *crashChildEnv) appendAcked(t *testing.T, ctx context.Context, tb *Table, id int64) *AppendResult {
	t.Helper()
	res, err := appendCrashBatch(ctx, tb, memory.DefaultAllocator, id)
	if err != nil {
		t.Fatalf("append of batch %d: %v", id, err)
	}
	c.ack(t, id, res.Version)
	return res
}

// scratchCrashTable creates an empty table with crashIndex in a
// temporary directory, for the measurements a parent makes in its own
// process.
func scratchCrashTable(t *testing.T, opts *Options) *Table {
	t.Helper()
	tb, err := Create(context.Background(), storage.Local(t.TempDir()), CreateOptions{Index: crashIndex()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// lockedBuffer collects a child's output while it runs.
type lockedBuffer = testkit.Buffer

// readAcked parses an acked log: batch id -> version. A last line without
// its newline is ignored.
func readAcked(t *testing.T, path string) map[int64]uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[int64]uint64{}
	for _, line := range testkit.CompleteLines(string(data)) {
		var id int64
		var v uint64
		if _, err := fmt.Sscanf(line, "acked %d %d", &id, &v); err != nil {
			t.Fatalf("acked log line %q: %v", line, err)
		}
		out[id] = v
	}
	return out
}

// crashPython returns the python that has timeseries-table-format, or ""
// when there is none (a failure in CI, where it is installed).
var crashPython = testkit.CrashPython

// pythonRowCount opens the table with timeseries-table-format and counts
// its rows with SQL.
var pythonRowCount = testkit.PythonRowCount

// batchCounts scans the batch column: rows per batch id.
func batchCounts(t *testing.T, ctx context.Context, tb *Table, mem memory.Allocator) (map[int64]int, error) {
	t.Helper()
	return batchCountsAt(t, ctx, tb, tb.State(), mem)
}

// batchCountsAt scans the batch column of state st.
func batchCountsAt(t *testing.T, ctx context.Context, tb *Table, st *State, mem memory.Allocator) (map[int64]int, error) {
	t.Helper()
	if st.Schema() == nil {
		// Killed before the first append committed: the table has no
		// schema and no rows yet.
		if n := len(st.Segments); n != 0 {
			return nil, fmt.Errorf("a table without a schema lists %d segments", n)
		}
		return map[int64]int{}, nil
	}
	rdr, err := tb.Scan(ctx, st, ScanOptions{Columns: []string{"batch"}, Alloc: mem})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	out := map[int64]int{}
	return out, testkit.AddBatchCounts(out, rdr)
}

// checkBatches compares the rows per batch with what was acknowledged
// (testkit.CheckBatches) and adds what it finds wrong to tally. It
// returns the unacked batches found committed.
func checkBatches(t *testing.T, tally *crashTally, counts map[int64]int, acked map[int64]uint64) []int64 {
	t.Helper()
	unacked, f := testkit.CheckBatches(t, "", counts, acked)
	tally.lost += f.Lost
	tally.dups += f.Dups
	tally.partial += f.Partial
	return unacked
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

// medianDuration runs f n times and returns the median of its durations.
func medianDuration(n int, f func()) time.Duration {
	ds := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		f()
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func rowTotal(counts map[int64]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
