package tableformat

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// These tests replace a table directory under a live handle (a restore from
// backup, a drop and re-create by another process) and check that the
// handle notices: Refresh shows the new table, Append rebases on it (its
// overlap checks apply against the new table's rows) and the log stays a
// valid chain that both tsflight and timeseries-table-format 0.9.0 open.

// rpBuild creates a table in dir with one one-row append per sec (host h).
func rpBuild(t *testing.T, dir, h string, secs ...int64) *Table {
	t.Helper()
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsIndex()}, nil)
	for _, s := range secs {
		if _, err := rpAppend(t, tb, h, s); err != nil {
			t.Fatal(err)
		}
	}
	return tb
}

func rpAppend(t *testing.T, tb *Table, h string, sec int64) (*AppendResult, error) {
	t.Helper()
	rec := inBatch(memory.DefaultAllocator, row{sec, h, sec})
	rdr, err := array.NewRecordReader(inSchema(), []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	return tb.Append(context.Background(), rdr, nil)
}

// rpAppendAt appends a row of h at sec through tb and checks that it
// lands as version.
func rpAppendAt(t *testing.T, tb *Table, h string, sec int64, version uint64) {
	t.Helper()
	res, err := rpAppend(t, tb, h, sec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != version {
		t.Fatalf("append landed as version %d, want %d", res.Version, version)
	}
}

// rpSwap replaces the directory live with other (the old one is removed).
func rpSwap(t *testing.T, live, other string) {
	t.Helper()
	if err := os.RemoveAll(live); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, live); err != nil {
		t.Fatal(err)
	}
}

func rpCopy(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// rpCheck opens dir with a fresh handle (which replays and validates the
// whole chain) and with timeseries-table-format when it is installed, and
// checks the version and row count; CURRENT must name the newest commit and
// no commit file may lie above it.
func rpCheck(t *testing.T, dir string, version uint64, rows int64) {
	t.Helper()
	fresh, err := Open(context.Background(), storage.Local(dir), &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("fresh open: %v", err)
	}
	if got := fresh.State().Version; got != version {
		t.Fatalf("fresh open: version %d, want %d", got, version)
	}
	if got := scanCount(t, fresh, ScanOptions{}); got != rows {
		t.Fatalf("fresh open: %d rows, want %d", got, rows)
	}
	if _, err := os.Stat(filepath.Join(dir, CommitPath(version+1))); !os.IsNotExist(err) {
		t.Fatalf("a commit file lies above version %d: %v", version, err)
	}
	if py := crashPython(t); py != "" {
		if got := pythonRowCount(t, py, dir); got != rows {
			t.Fatalf("timeseries-table-format counts %d rows, want %d", got, rows)
		}
	}
}

func rpRefresh(t *testing.T, tb *Table, version uint64, rows int64) {
	t.Helper()
	st, err := tb.Refresh(context.Background())
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if st.Version != version {
		t.Fatalf("refresh: version %d, want %d", st.Version, version)
	}
	if got := scanCount(t, tb, ScanOptions{}); got != rows {
		t.Fatalf("scan after refresh: %d rows, want %d", got, rows)
	}
}

// A shorter table (v2, 1 row) replaces a v5 one: Refresh shows v2 and the
// next append is v3 on top of it (not v6 on top of commits 1-2).
func TestReplacedByShorterTable(t *testing.T) {
	root := t.TempDir()
	live, other := filepath.Join(root, "t"), filepath.Join(root, "other")
	rpBuild(t, live, "a", 0, 10, 20, 30)
	var logged bytes.Buffer
	opts := DefaultOptions()
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Warn})
	tb := mustOpen(t, storage.Local(live), opts)
	if _, err := tb.StateAt(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	rpBuild(t, other, "b", 100)
	rpSwap(t, live, other)
	rpRefresh(t, tb, 2, 1)
	if !strings.Contains(logged.String(), "[WARN]") || !strings.Contains(logged.String(), "no longer holds the log") {
		t.Fatalf("the reload was not logged at Warn: %q", logged.String())
	}
	if _, ok := tb.pastLookup(3); ok {
		t.Fatal("a past snapshot of the replaced table survived")
	}
	if _, err := tb.StateAt(context.Background(), 4); !errors.Is(err, ErrNotFound) {
		t.Fatalf("StateAt(4) of the replaced table: %v, want ErrNotFound", err)
	}
	rpAppendAt(t, tb, "a", 0, 3) // overlapped the old table only
	rpCheck(t, live, 3, 2)
}

// An append through a stale handle, without a Refresh first, must not
// write commit 6 on top of a 2-commit log.
func TestReplacedByShorterTableAppendWithoutRefresh(t *testing.T) {
	root := t.TempDir()
	live, other := filepath.Join(root, "t"), filepath.Join(root, "other")
	tb := rpBuild(t, live, "a", 0, 10, 20, 30)
	rpBuild(t, other, "b", 100)
	rpSwap(t, live, other)
	rpAppendAt(t, tb, "b", 200, 3)
	rpCheck(t, live, 3, 2)
}

// A different table with as many commits: the commit path must notice that
// commit 5 is not the one the handle holds (a conflict), and the rebased
// append must be checked for overlap against the new table's rows.
func TestReplacedBySameLengthTable(t *testing.T) {
	root := t.TempDir()
	live, other := filepath.Join(root, "t"), filepath.Join(root, "other")
	tb := rpBuild(t, live, "a", 0, 10, 20, 30)
	rpBuild(t, other, "b", 100, 110, 120, 130)
	rpSwap(t, live, other)

	// Commit directly: the log check in the commit path refuses.
	if _, err := tb.Commit(context.Background(), 5, marker("stale")); !errors.Is(err, ErrConflict) {
		t.Fatalf("commit through the stale handle: %v, want ErrConflict", err)
	}
	if _, err := os.Stat(filepath.Join(live, CommitPath(6))); !os.IsNotExist(err) {
		t.Fatalf("the stale commit was written: %v", err)
	}
	// Append rebases on the new table and sees its rows.
	if _, err := rpAppend(t, tb, "b", 110); !errors.Is(err, ErrOverlap) {
		t.Fatalf("append overlapping the new table: %v, want ErrOverlap", err)
	}
	if got := tb.State().RowCount(); got != 4 {
		t.Fatalf("handle holds %d rows", got)
	}
	rpAppendAt(t, tb, "a", 0, 6)
	rpRefresh(t, tb, 6, 5)
	rpCheck(t, live, 6, 5)
}

// A longer different table: Refresh must not replay its commits 4.. on top
// of the old table's state.
func TestReplacedByLongerTable(t *testing.T) {
	root := t.TempDir()
	live, other := filepath.Join(root, "t"), filepath.Join(root, "other")
	tb := rpBuild(t, live, "a", 0, 10)
	rpBuild(t, other, "b", 100, 110, 120, 130, 140)
	rpSwap(t, live, other)
	rpRefresh(t, tb, 6, 5)
	for _, seg := range tb.State().Segments {
		if seg.Layout.Kind == LayoutSingle && seg.Layout.Identity[0].String() != "b" {
			// only host "b" rows may remain
			t.Fatalf("segment of the old table survived: %+v", seg.Layout)
		}
	}
	if _, err := rpAppend(t, tb, "b", 140); !errors.Is(err, ErrOverlap) {
		t.Fatalf("append overlapping the new table: %v, want ErrOverlap", err)
	}
	if _, err := rpAppend(t, tb, "a", 10); err != nil {
		t.Fatal(err)
	}
	rpCheck(t, live, 7, 6)
}

// The same table restored from an identical copy keeps working: no
// rebuild is needed (past snapshots stay), appends continue.
func TestRestoredSameTable(t *testing.T) {
	root := t.TempDir()
	live, backup := filepath.Join(root, "t"), filepath.Join(root, "backup")
	tb := rpBuild(t, live, "a", 0, 10, 20)
	rpCopy(t, live, backup)
	rpSwap(t, live, backup)
	rpRefresh(t, tb, 4, 3)
	if _, err := rpAppend(t, tb, "a", 10); !errors.Is(err, ErrOverlap) {
		t.Fatalf("append overlapping the table: %v, want ErrOverlap", err)
	}
	res, err := rpAppend(t, tb, "a", 30)
	if err != nil || res.Version != 5 || res.Retries != 0 {
		t.Fatalf("append: %+v %v", res, err)
	}
	rpCheck(t, live, 5, 4)
}

// The same table restored from an older backup: the log is shorter, so the
// handle reloads (v3), and appends continue from there.
func TestRestoredOlderBackup(t *testing.T) {
	root := t.TempDir()
	live, backup := filepath.Join(root, "t"), filepath.Join(root, "backup")
	tb := rpBuild(t, live, "a", 0, 10)
	rpCopy(t, live, backup)
	for _, s := range []int64{20, 30} {
		if _, err := rpAppend(t, tb, "a", s); err != nil {
			t.Fatal(err)
		}
	}
	rpSwap(t, live, backup)
	rpAppendAt(t, tb, "a", 20, 4) // was in the newer, lost history
	rpRefresh(t, tb, 4, 3)
	rpCheck(t, live, 4, 3)
}

// CURRENT moved backwards while the commit files are all there (a lagging
// CURRENT, as after a crash): not a replacement; the handle keeps its state
// and rolls CURRENT forward.
func TestCurrentBehindWithCommitsPresent(t *testing.T) {
	root := t.TempDir()
	live := filepath.Join(root, "t")
	tb := rpBuild(t, live, "a", 0, 10, 20, 30)
	if err := os.WriteFile(filepath.Join(live, currentPath), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := tb.State()
	st, err := tb.Refresh(context.Background())
	if err != nil || st != before {
		t.Fatalf("refresh: %v (state replaced: %v)", err, st != before)
	}
	if _, ok := tb.pastLookup(3); !ok {
		t.Fatal("past snapshots were dropped although the table was not replaced")
	}
	res, err := rpAppend(t, tb, "a", 40)
	if err != nil || res.Version != 6 {
		t.Fatalf("append: %+v %v", res, err)
	}
	rpCheck(t, live, 6, 5)
}

func (t *Table) pastLookup(v uint64) (*State, bool) {
	t.pastMu.Lock()
	defer t.pastMu.Unlock()
	st, ok := t.past[v]
	return st, ok
}

// BenchmarkRefreshUnchanged is the cost of a Refresh that finds nothing
// new on a local table: what the log check (two small commit reads) adds
// to every request of the server.
func BenchmarkRefreshUnchanged(b *testing.B) {
	fsys, _ := oneRowAppends(b, 20)
	dir := b.TempDir()
	copyFS(b, fsys, storage.Local(dir))
	tb := mustOpen(b, storage.Local(dir), nil)
	for b.Loop() {
		if _, err := tb.Refresh(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// copyFS writes every file of from into to.
func copyFS(tb testing.TB, from, to storage.FS) {
	tb.Helper()
	walkFS(tb, from, func(name string, data []byte) { ckWriteFile(tb, to, name, data) })
}
