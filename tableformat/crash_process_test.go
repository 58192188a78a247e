// Crash trials with real processes (library mode): a writer process appends
// in a loop and is killed with SIGKILL at random moments, many of them
// inside an append or its commit; after every kill the table must open,
// hold every acknowledged batch exactly once and no partial batch, take the
// next append, and vacuum must find exactly the killed attempt's files.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 50; the long mode
// is 500), TSFLIGHT_CRASH_SEED the seed of the random delays (default: the
// clock, printed so that a failure can be replayed).

package tableformat

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// crashRows is the number of rows of each batch.
const crashRows = 8

// crashTrialSettings reads the trial count and seed from the environment.
func crashTrialSettings(t *testing.T) (trials int, seed uint64) {
	t.Helper()
	trials = 50
	if s := os.Getenv("TSFLIGHT_CRASH_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("TSFLIGHT_CRASH_TRIALS=%q is not a positive integer", s)
		}
		trials = n
	}
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("TSFLIGHT_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TSFLIGHT_CRASH_SEED=%q is not an unsigned integer", s)
		}
		seed = n
	}
	return trials, seed
}

// crashSchema: ts (ms, UTC), host, batch (the batch id), v.
func crashSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "batch", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
}

// crashBatch is batch id: crashRows rows of host w at 10 s steps, in a time
// range no other batch touches.
func crashBatch(mem memory.Allocator, id int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, crashSchema())
	defer b.Release()
	for i := range int64(crashRows) {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(id*crashRows+i) * 10 * time.Second).UnixMilli()))
		b.Field(1).(*array.StringBuilder).Append("w")
		b.Field(2).(*array.Int64Builder).Append(id)
		b.Field(3).(*array.Int64Builder).Append(id*1000 + i)
	}
	return b.NewRecordBatch()
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

// TestCrashWriterProcess is the writer of TestCrashTrialsLibrary: it
// appends batches first, first+1, … to the table until it is killed, and
// after each acknowledged append writes "acked <batch> <version>" to the
// log file and fsyncs it before the next. On its own it does nothing.
func TestCrashWriterProcess(t *testing.T) {
	dir := os.Getenv("TSFLIGHT_CRASH_WRITER_DIR")
	if dir == "" {
		t.Skip("only runs as a child of TestCrashTrialsLibrary")
	}
	first, _ := strconv.ParseInt(os.Getenv("TSFLIGHT_CRASH_WRITER_FIRST"), 10, 64)
	ctx := context.Background()
	log, err := os.OpenFile(os.Getenv("TSFLIGHT_CRASH_WRITER_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Open(ctx, storage.Local(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	for id := first; id < first+10000; id++ {
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
	}
	t.Fatal("the writer was never killed")
}

// lockedBuffer collects a child's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// readAcked parses an acked log: batch id -> version. A last line without
// its newline is ignored.
func readAcked(t *testing.T, path string) map[int64]uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[int64]uint64{}
	text := string(data)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i+1]
	} else {
		text = ""
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var id int64
		var v uint64
		if _, err := fmt.Sscanf(sc.Text(), "acked %d %d", &id, &v); err != nil {
			t.Fatalf("acked log line %q: %v", sc.Text(), err)
		}
		out[id] = v
	}
	return out
}

var reTempName = regexp.MustCompile(`\.tmp-`)

// strayCandidates lists, independently of Vacuum, the files a writer may
// leave: every file under data/ and _coverage/ and the temporary files of
// the log. Paths are slash-separated, table-relative.
func strayCandidates(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasPrefix(rel, "data/"), strings.HasPrefix(rel, "_coverage/"):
			out = append(out, rel)
		case strings.HasPrefix(rel, LogDir+"/") && !strings.Contains(rel, "_orphaned") && reTempName.MatchString(rel):
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// namedPaths adds to named the paths commits from+1..to name, read with
// encoding/json rather than the table's own decoder: segments, their
// coverage sidecars and table coverage snapshots.
func namedPaths(t *testing.T, dir string, from, to uint64, named map[string]bool) {
	t.Helper()
	for v := from + 1; v <= to; v++ {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(CommitPath(v))))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Actions []struct {
				AddSegment *struct {
					Path         string `json:"path"`
					CoveragePath string `json:"coverage_path"`
				}
				UpdateTableCoverage *struct {
					CoveragePath string `json:"coverage_path"`
				}
			} `json:"actions"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
		for _, a := range c.Actions {
			if a.AddSegment != nil {
				named[a.AddSegment.Path], named[a.AddSegment.CoveragePath] = true, true
			}
			if a.UpdateTableCoverage != nil {
				named[a.UpdateTableCoverage.CoveragePath] = true
			}
		}
	}
}

// expectedStrays is what a vacuum with the cutoff at now must remove: the
// candidates no commit names.
func expectedStrays(t *testing.T, dir string, named map[string]bool) []string {
	t.Helper()
	var out []string
	for _, p := range strayCandidates(t, dir) {
		if !named[p] {
			out = append(out, p)
		}
	}
	return out
}

// crashTally counts what the trials saw.
type crashTally struct {
	mode                                    string
	trials, killsInCommit, killsInAppend    int
	killsBetween, acked, unackedCommitted   int
	strayRemoved, unreadable, lost, dups    int
	partial, appendFailed, vacuumMismatches int
	pythonChecks                            int
}

func (c *crashTally) failures() int {
	return c.unreadable + c.lost + c.dups + c.partial + c.appendFailed + c.vacuumMismatches
}

// line is the summary the closing note quotes.
func (c *crashTally) line(seed uint64) string {
	return fmt.Sprintf("crash trials: mode=%s trials=%d kills_in_commit=%d acked=%d unacked_committed=%d stray_files_removed=%d unreadable=%d lost=%d duplicates=%d"+
		" (kills_in_append=%d kills_between_appends=%d partial=%d append_failed=%d vacuum_mismatches=%d python_checks=%d seed=%d)",
		c.mode, c.trials, c.killsInCommit, c.acked, c.unackedCommitted, c.strayRemoved, c.unreadable, c.lost, c.dups,
		c.killsInAppend, c.killsBetween, c.partial, c.appendFailed, c.vacuumMismatches, c.pythonChecks, seed)
}

// crashPython returns the python that has timeseries-table-format, or ""
// when there is none (a failure in CI, where it is installed).
func crashPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TSFLIGHT_PYTHON")
	if py == "" {
		py = "python3"
	}
	out, err := exec.Command(py, "-c", "import timeseries_table_format as m; print(m.__version__)").CombinedOutput()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must have timeseries-table-format 0.9.0: %v: %s", err, out)
		}
		t.Logf("timeseries-table-format is not installed (%v): the Python checks are skipped", err)
		return ""
	}
	if v := strings.TrimSpace(string(out)); v != "0.9.0" {
		t.Fatalf("timeseries-table-format %s, want 0.9.0", v)
	}
	return py
}

// pythonRowCount opens the table with timeseries-table-format and counts
// its rows with SQL.
func pythonRowCount(t *testing.T, py, dir string) int64 {
	t.Helper()
	const script = `import sys, timeseries_table_format as ttf
ttf.TimeSeriesTable.open(sys.argv[1])
s = ttf.Session()
s.register_tstable("t", sys.argv[1])
print(s.sql("SELECT count(*) AS n FROM t").to_pylist()[0]["n"])`
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("timeseries-table-format could not read the table: %v\n%s", err, out)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("python count %q: %v", out, err)
	}
	return n
}

// batchCounts scans the batch column: rows per batch id.
func batchCounts(t *testing.T, ctx context.Context, tb *Table, mem memory.Allocator) (map[int64]int, error) {
	t.Helper()
	if tb.State().Schema() == nil {
		// Killed before the first append committed: the table has no
		// schema and no rows yet.
		if n := len(tb.State().Segments); n != 0 {
			return nil, fmt.Errorf("a table without a schema lists %d segments", n)
		}
		return map[int64]int{}, nil
	}
	rdr, err := tb.Scan(ctx, tb.State(), ScanOptions{Columns: []string{"batch"}, Alloc: mem})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	out := map[int64]int{}
	for rdr.Next() {
		col := rdr.RecordBatch().Column(0).(*array.Int64)
		for i := 0; i < col.Len(); i++ {
			out[col.Value(i)]++
		}
	}
	return out, rdr.Err()
}

// checkBatches compares the rows per batch with what was acknowledged:
// every acked batch exactly once and whole, others whole or absent. It
// returns the unacked batches found committed.
func checkBatches(t *testing.T, tally *crashTally, counts map[int64]int, acked map[int64]uint64) []int64 {
	t.Helper()
	for id := range acked {
		switch n := counts[id]; {
		case n == 0:
			tally.lost++
			t.Errorf("acknowledged batch %d is missing", id)
		case n > crashRows:
			tally.dups++
			t.Errorf("acknowledged batch %d has %d rows, want %d (duplicated)", id, n, crashRows)
		case n < crashRows:
			tally.partial++
			t.Errorf("acknowledged batch %d has %d rows, want %d", id, n, crashRows)
		}
	}
	var unacked []int64
	for id, n := range counts {
		if _, ok := acked[id]; ok {
			continue
		}
		switch {
		case n == crashRows:
			unacked = append(unacked, id)
		case n > crashRows:
			tally.dups++
			t.Errorf("unacknowledged batch %d has %d rows (duplicated)", id, n)
		default:
			tally.partial++
			t.Errorf("unacknowledged batch %d is partly visible: %d of %d rows", id, n, crashRows)
		}
	}
	slices.Sort(unacked)
	return unacked
}

// measureAppend returns the median duration of an append of one batch,
// measured in this process on a scratch table.
func measureAppend(t *testing.T, mem memory.Allocator) time.Duration {
	t.Helper()
	ctx := context.Background()
	tb, err := Create(ctx, storage.Local(t.TempDir()), CreateOptions{Index: crashIndex()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ds []time.Duration
	for id := range int64(7) {
		start := time.Now()
		if _, err := appendCrashBatch(ctx, tb, mem, id); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func crashIndex() IndexSpec {
	return IndexSpec{Column: "ts", EntityColumns: []string{"host"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}}
}

// TestCrashTrialsLibrary runs the library-mode crash trials.
func TestCrashTrialsLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials spawn processes")
	}
	trials, seed := crashTrialSettings(t)
	t.Logf("crash trials: mode=library trials=%d seed=%d (replay with TSFLIGHT_CRASH_SEED=%d)", trials, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	py := crashPython(t)

	dir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "acked.log")
	if _, err := Create(ctx, storage.Local(dir), CreateOptions{Index: crashIndex()}, nil); err != nil {
		t.Fatal(err)
	}
	perAppend := measureAppend(t, mem)
	t.Logf("one append takes about %s here; kills are drawn in [0, 3×) of it after the writer is ready", perAppend)

	tally := &crashTally{mode: "library"}
	acked := map[int64]uint64{}
	next := int64(0)
	named, namedUpTo := map[string]bool{}, uint64(0)
	defer func() {
		t.Log(tally.line(seed))
		fmt.Println(tally.line(seed))
	}()
	for trial := 1; trial <= trials; trial++ {
		tally.trials = trial
		// One life of the writer, killed at a random moment.
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriterProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TSFLIGHT_CRASH_WRITER_DIR="+dir, "TSFLIGHT_CRASH_WRITER_LOG="+logPath,
			"TSFLIGHT_CRASH_WRITER_FIRST="+strconv.FormatInt(next, 10))
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
				t.Fatalf("trial %d: the writer exited (%v) before it was ready:\n%s", trial, err, out)
			default:
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("trial %d: the writer was not ready in 30 s:\n%s", trial, out)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(3 * perAppend))))
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("trial %d: the writer ended on its own (%v) before the kill:\n%s", trial, err, out)
		}

		// What the kill left, before anything repairs it.
		cur, _ := os.ReadFile(filepath.Join(dir, LogDir, "CURRENT"))
		lifeAcked := readAcked(t, logPath)
		for id, v := range lifeAcked {
			if _, ok := acked[id]; !ok {
				tally.acked++
			}
			acked[id] = v
		}

		// The table opens (and rolls CURRENT forward).
		tb, err := Open(ctx, storage.Local(dir), nil)
		if err != nil {
			tally.unreadable++
			t.Fatalf("trial %d: the table does not open after the kill: %v\n%s", trial, err, tally.line(seed))
		}
		st := tb.State()
		counts, err := batchCounts(t, ctx, tb, mem)
		if err != nil {
			tally.unreadable++
			t.Fatalf("trial %d: scan after the kill: %v", trial, err)
		}
		unacked := checkBatches(t, tally, counts, acked)
		for _, id := range unacked {
			acked[id] = st.Version // committed: from now on it must stay
		}
		tally.unackedCommitted += len(unacked)

		// Vacuum finds exactly the killed attempt's files.
		namedPaths(t, dir, namedUpTo, st.Version, named)
		namedUpTo = st.Version
		want := expectedStrays(t, dir, named)
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
		rep, err = tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true})
		if err != nil {
			t.Fatalf("trial %d: vacuum apply: %v", trial, err)
		}
		if got := byDisposition(rep, VacuumDeleted); strings.Join(got, " ") != strings.Join(want, " ") {
			tally.vacuumMismatches++
			t.Errorf("trial %d: vacuum deleted %v, want %v", trial, got, want)
		}
		tally.strayRemoved += rep.Deleted
		if rep, err = tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()}); err != nil || rep.Removable != 0 {
			tally.vacuumMismatches++
			t.Errorf("trial %d: second dry run: %v, %d removable", trial, err, rep.Removable)
		}
		after, err := batchCounts(t, ctx, tb, mem)
		if err != nil || !mapsEqual(after, counts) {
			tally.unreadable++
			t.Errorf("trial %d: the table reads differently after vacuum (%v)", trial, err)
		}

		// The next append succeeds.
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
		namedPaths(t, dir, namedUpTo, res.Version, named)
		namedUpTo = res.Version
		next++

		if py != "" && (trial == trials || trial%50 == 0) {
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
}

func mapsEqual(a, b map[int64]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
