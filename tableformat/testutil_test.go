package tableformat

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// tsIndex is the index of most test tables: timestamps at 10 s, one entity.
func tsIndex() IndexSpec {
	return IndexSpec{Column: "ts", EntityColumns: []string{"host"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}}
}

func tsSchema(extra ...Field) *Schema {
	s := &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Nanos, Timezone: strp("UTC")}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
	}}
	s.Columns = append(s.Columns, extra...)
	return s
}

// adoptSchema is a valid commit on a fresh table: it installs tsSchema.
func adoptSchema(st *State) []Action {
	m := st.Meta.Clone()
	m.Schema = tsSchema()
	return []Action{UpdateTableMeta{Meta: *m}}
}

// marker is a valid commit that changes nothing but names itself, so a
// test can find out afterwards which writer made which version.
func marker(name string) []Action {
	return []Action{RemoveSegment{Path: "data/markers/" + name + ".parquet"}}
}

// mustCreate creates a table of tsIndex in fsys.
func mustCreate(t *testing.T, fsys storage.FS) *Table {
	t.Helper()
	return mustCreateTable(t, fsys, CreateOptions{Index: tsIndex()}, nil)
}

// mustCreateTable creates a table in fsys, failing the test if it cannot.
func mustCreateTable(t testing.TB, fsys storage.FS, co CreateOptions, opts *Options) *Table {
	t.Helper()
	tb, err := Create(context.Background(), fsys, co, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// mustOpen opens the table in fsys, failing the test if it cannot.
func mustOpen(t testing.TB, fsys storage.FS, opts *Options) *Table {
	t.Helper()
	tb, err := Open(context.Background(), fsys, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// appendReader appends what rdr reads to tb with the default options and
// the allocator mem, fails the test if the append fails, and releases rdr.
func appendReader(t testing.TB, ctx context.Context, tb *Table, rdr array.RecordReader, mem memory.Allocator) {
	t.Helper()
	defer rdr.Release()
	o := DefaultAppendOptions()
	o.Alloc = mem
	if _, err := tb.Append(ctx, rdr, o); err != nil {
		t.Fatal(err)
	}
}

// mustStateAt is tb's state at version v, failing the test without it.
func mustStateAt(t testing.TB, tb *Table, v uint64) *State {
	t.Helper()
	st, err := tb.StateAt(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// openFaulty wraps fsys in a FaultFS and opens the table through it, so
// that the test can inject faults into what the handle does next.
func openFaulty(t testing.TB, fsys storage.FS, opts *Options) (*storage.FaultFS, *Table) {
	t.Helper()
	ffs := storage.NewFaultFS(fsys)
	return ffs, mustOpen(t, ffs, opts)
}

// peakGauge is a level that goes up and down (add) and the highest it
// has been.
type peakGauge struct {
	cur, peak atomic.Int64
}

func (g *peakGauge) add(n int64) {
	v := g.cur.Add(n)
	for {
		old := g.peak.Load()
		if v <= old || g.peak.CompareAndSwap(old, v) {
			return
		}
	}
}

// scanEach scans st (nil: the newest) of tb with opts and calls fn with
// each batch; the batch is the scan's, valid until fn returns.
func scanEach(t testing.TB, ctx context.Context, tb *Table, st *State, opts ScanOptions, fn func(rec arrow.RecordBatch)) {
	t.Helper()
	rdr, err := tb.Scan(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	for rdr.Next() {
		fn(rdr.RecordBatch())
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
}

// diffMaps calls changed(k) for each key of after whose value before lacks
// or holds otherwise, and gone(k) for each key of before that after lacks.
func diffMaps(before, after map[string]string, changed, gone func(k string)) {
	for k, v := range after {
		if w, ok := before[k]; !ok || w != v {
			changed(k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			gone(k)
		}
	}
}

// reportDiff fails the test with "<what>: <key> <changed>" for each key
// diffMaps finds changed and "<what>: <key> <gone>" for each it finds gone.
func reportDiff(t *testing.T, what string, before, after map[string]string, changed, gone string) {
	t.Helper()
	diffMaps(before, after,
		func(k string) { t.Errorf("%s: %s %s", what, k, changed) },
		func(k string) { t.Errorf("%s: %s %s", what, k, gone) })
}

// walkFiles calls fn with the path and content of every file under root.
func walkFiles(t *testing.T, root string, fn func(p string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fn(p, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeFSFile creates name in fsys with data; durable syncs the file and
// its directory too.
func writeFSFile(t testing.TB, fsys storage.FS, name string, data []byte, durable bool) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if durable {
		if err := fsys.SyncDir(path.Dir(name)); err != nil {
			t.Fatal(err)
		}
	}
}

// walkFS calls fn with the name and content of every file of fsys.
func walkFS(t testing.TB, fsys storage.FS, fn func(name string, data []byte)) {
	t.Helper()
	var walk func(p string)
	walk = func(p string) {
		names, err := fsys.List(p)
		if err != nil {
			t.Fatalf("list %s: %v", p, err)
		}
		for _, n := range names {
			child := path.Join(p, n)
			info, err := fsys.Stat(child)
			if err != nil {
				t.Fatal(err)
			}
			if info.IsDir {
				walk(child)
				continue
			}
			data, err := fsys.ReadFile(child)
			if err != nil {
				t.Fatal(err)
			}
			fn(child, data)
		}
	}
	walk(".")
}

// writeTableFile writes data to the table-relative path p under dir,
// making its directories.
func writeTableFile(t *testing.T, dir, p string, data []byte) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyToDisk writes every file of fsys under dir.
func copyToDisk(t *testing.T, fsys storage.FS, dir string) {
	t.Helper()
	walkFS(t, fsys, func(name string, data []byte) {
		writeTableFile(t, dir, name, data)
	})
}

// referenceResult is one line of testdata/reference/inspect_tables.py.
type referenceResult struct {
	Dir               string         `json:"dir"`
	OK                bool           `json:"ok"`
	Version           uint64         `json:"version"`
	VersionAfterProbe uint64         `json:"version_after_probe"`
	ProbeSkipped      string         `json:"probe_skipped"`
	IndexSpec         map[string]any `json:"index_spec"`
	Error             string         `json:"error"`
}

// requireReference returns the python interpreter that has the reference
// package, skipping the test when there is none, except in CI, where the
// package is installed and its absence is a failure.
func requireReference(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TSFLIGHT_PYTHON")
	if py == "" {
		py = "python3"
	}
	out, err := exec.Command(py, "-c", "import timeseries_table_format as m; print(m.__version__)").CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have timeseries-table-format installed: %v: %s", err, out)
		}
		t.Skipf("timeseries-table-format is not installed (%v); CI runs this test", err)
	}
	if v := string(bytes.TrimSpace(out)); v != "0.9.0" {
		t.Fatalf("reference package version %s, want 0.9.0", v)
	}
	return py
}

// inspectWithReference opens each dir with the reference package.
func inspectWithReference(t *testing.T, probe bool, dirs ...string) map[string]referenceResult {
	t.Helper()
	py := requireReference(t)
	args := []string{filepath.Join("..", "testdata", "reference", "inspect_tables.py")}
	if probe {
		args = append(args, "--append-probe")
	}
	args = append(args, dirs...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspect_tables.py: %v\n%s", err, stderr.String())
	}
	res := map[string]referenceResult{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var r referenceResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("inspect output: %v\n%s", err, out)
		}
		res[filepath.Clean(r.Dir)] = r
	}
	for _, d := range dirs {
		if _, ok := res[filepath.Clean(d)]; !ok {
			t.Fatalf("inspect_tables.py said nothing about %s:\n%s", d, out)
		}
	}
	return res
}
