package testkit

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The pieces the crash trials of the library (tableformat) and of the
// server (cmd/tsflight) share: their settings, their batches, the checks
// of the rows after a kill, the files a vacuum must remove, and the
// timeseries-table-format 0.9.0 package that reads the table too.

// CrashRows is the number of rows of each crash batch.
const CrashRows = 8

// CrashSettings reads the number of trials (def when
// TSFLIGHT_CRASH_TRIALS is unset) and the seed (the clock when
// TSFLIGHT_CRASH_SEED is unset) from the environment; a value that does
// not parse fails the test.
func CrashSettings(t testing.TB, def int) (trials int, seed uint64) {
	t.Helper()
	trials = def
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

// CrashSchema is the schema of the crash batches: ts (ms, UTC), host,
// batch (the batch id), v.
func CrashSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "batch", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
}

// CrashBatch is batch id: CrashRows rows of host w at 10 s steps from
// startMs (milliseconds since the epoch), in a time range no other batch
// touches; v is id*1000 plus the row.
func CrashBatch(mem memory.Allocator, startMs, id int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, CrashSchema())
	defer b.Release()
	for i := range int64(CrashRows) {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(startMs + (id*CrashRows+i)*10_000))
		b.Field(1).(*array.StringBuilder).Append("w")
		b.Field(2).(*array.Int64Builder).Append(id)
		b.Field(3).(*array.Int64Builder).Append(id*1000 + i)
	}
	return b.NewRecordBatch()
}

// BatchFaults counts what CheckBatches found wrong.
type BatchFaults struct {
	// Lost: acknowledged batches missing; Dups: batches with more than
	// CrashRows rows; Partial: batches with some of their rows.
	Lost, Dups, Partial int
}

// CheckBatches compares the rows per batch id (counts) with the
// acknowledged batches: each acknowledged batch must be there exactly
// once and whole, any other whole or absent. Each fault fails the test
// (its message starts with prefix) and is counted in the answer. It also
// returns the unacknowledged batches found whole (committed), in order.
func CheckBatches(t testing.TB, prefix string, counts map[int64]int, acked map[int64]uint64) ([]int64, BatchFaults) {
	t.Helper()
	var f BatchFaults
	for id := range acked {
		switch n := counts[id]; {
		case n == 0:
			f.Lost++
			t.Errorf("%sacknowledged batch %d is missing", prefix, id)
		case n > CrashRows:
			f.Dups++
			t.Errorf("%sacknowledged batch %d has %d rows, want %d (duplicated)", prefix, id, n, CrashRows)
		case n < CrashRows:
			f.Partial++
			t.Errorf("%sacknowledged batch %d has %d rows, want %d", prefix, id, n, CrashRows)
		}
	}
	var unacked []int64
	for id, n := range counts {
		if _, ok := acked[id]; ok {
			continue
		}
		switch {
		case n == CrashRows:
			unacked = append(unacked, id)
		case n > CrashRows:
			f.Dups++
			t.Errorf("%sunacknowledged batch %d has %d rows (duplicated)", prefix, id, n)
		default:
			f.Partial++
			t.Errorf("%sunacknowledged batch %d is partly visible: %d of %d rows", prefix, id, n, CrashRows)
		}
	}
	slices.Sort(unacked)
	return unacked, f
}

// WriteAck appends "acked <batch> <version>" to the acknowledged log and
// fsyncs it, so that the line survives the kill that may follow.
func WriteAck(t testing.TB, log *os.File, id int64, v uint64) {
	t.Helper()
	if _, err := fmt.Fprintf(log, "acked %d %d\n", id, v); err != nil {
		t.Fatal(err)
	}
	if err := log.Sync(); err != nil {
		t.Fatal(err)
	}
}

// NamedPaths adds to named the paths that commits from+1..to of the
// table in dir name, read with encoding/json rather than the table's own
// decoder: segments, their coverage sidecars and table coverage
// snapshots. commitPath is the table-relative, slash-separated path of a
// commit (tableformat.CommitPath).
func NamedPaths(t testing.TB, dir string, commitPath func(uint64) string, from, to uint64, named map[string]bool) {
	t.Helper()
	for v := from + 1; v <= to; v++ {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(commitPath(v))))
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

// StrayCandidates lists, independently of vacuum, the files a writer may
// leave in the table in dir: every file under data/ and _coverage/ and
// the temporary files (".tmp-") of the log in logDir, outside its
// _orphaned folder. Paths are slash-separated, table-relative, sorted.
func StrayCandidates(t testing.TB, dir, logDir string) []string {
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
		case strings.HasPrefix(rel, logDir+"/") && !strings.Contains(rel, "_orphaned") && strings.Contains(rel, ".tmp-"):
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

// ExpectedStrays is what a vacuum with the cutoff at now must remove from
// the table in dir: the StrayCandidates no commit names.
func ExpectedStrays(t testing.TB, dir, logDir string, named map[string]bool) []string {
	t.Helper()
	var out []string
	for _, p := range StrayCandidates(t, dir, logDir) {
		if !named[p] {
			out = append(out, p)
		}
	}
	return out
}

// CrashPython returns the python (TSFLIGHT_PYTHON, else python3) that has
// timeseries-table-format 0.9.0, or "" when it has none; that is a
// failure in CI, where the package is installed, and so is another
// version of it.
func CrashPython(t testing.TB) string {
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

// PythonRowCount opens the table in dir with timeseries-table-format and
// counts its rows with SQL; a failure fails the test.
func PythonRowCount(t testing.TB, py, dir string) int64 {
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

// The files of a table on disk, as the crash, vacuum and damage tests
// plant, copy and compare them.

// WriteFiles writes each file of files (slash-separated paths relative
// to dir, whose folders exist) and returns the paths sorted.
func WriteFiles(t testing.TB, dir string, files map[string][]byte) []string {
	t.Helper()
	var out []string
	for p, b := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// CompleteLines splits text into its lines, leaving out a last line
// without its newline (a process killed while it wrote it).
func CompleteLines(text string) []string {
	i := strings.LastIndexByte(text, '\n')
	if i < 0 {
		return nil
	}
	return strings.Split(text[:i], "\n")
}

// BatchReader is what AddBatchCounts reads: an array.RecordReader, or a
// flight.Reader.
type BatchReader interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}

// AddBatchCounts reads rdr to its end and adds to counts the rows of each
// value of its int64 column "batch" (the crash batch id).
func AddBatchCounts(counts map[int64]int, rdr BatchReader) error {
	for rdr.Next() {
		rec := rdr.RecordBatch()
		idx := rec.Schema().FieldIndices("batch")
		if len(idx) == 0 {
			return fmt.Errorf("no column batch in %s", rec.Schema())
		}
		col := rec.Column(idx[0]).(*array.Int64)
		for i := range col.Len() {
			counts[col.Value(i)]++
		}
	}
	return rdr.Err()
}
