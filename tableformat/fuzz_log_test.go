package tableformat

// Fuzz targets for opening a table from untrusted log files: FuzzCurrent
// (a fuzzed CURRENT, and a fuzzed commit file at some version, on top of
// a real log) and FuzzLog (a log made only of fuzzed commit files).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// fuzzBaseLog is the log the CURRENT target writes on: the reference
// package's add_columns table (five commits: create, appends, added
// columns), or a log written here when the reference tables are absent.
func fuzzBaseLog(f *testing.F) map[string][]byte {
	dir := filepath.Join("..", "testdata", "reference", "tables", "add_columns", LogDir)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	out := map[string][]byte{}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out[LogDir+"/"+filepath.Base(p)] = b
	}
	if len(out) == 0 {
		out[CommitPath(1)] = []byte(createOK)
		out[CommitPath(2)] = []byte(schemaOK)
	}
	out[currentPath] = []byte(strconv.Itoa(len(out)) + "\n")
	return out
}

// memTable lays files out in a fresh in-memory file system, all durable.
func memTable(t testing.TB, files map[string][]byte) *storage.MemFS {
	fsys := storage.NewMem()
	if err := fsys.MkdirAll(LogDir); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		w, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.SyncDir(LogDir); err != nil {
		t.Fatal(err)
	}
	return fsys
}

// memSnapshot maps every file of fsys to its content.
func memSnapshot(t testing.TB, fsys storage.FS) map[string]string {
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatalf("list %s: %v", dir, err)
		}
		for _, n := range names {
			p := path.Join(dir, n)
			info, err := fsys.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if info.IsDir {
				walk(p)
				continue
			}
			b, err := fsys.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = string(b)
		}
	}
	walk(".")
	return out
}

// openErrorOK reports whether err is one of the categories opening a
// table from a damaged or foreign log may give.
func openErrorOK(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrNeedsUpgrade) || errors.Is(err, ErrNotFound)
}

// openChecked opens fsys read-only (which must never write) and then
// read-write. Both must agree; a failed open must leave every file as it
// was; a successful read-write open may only move CURRENT forward to the
// version it loaded; a refresh of the handle finds nothing new.
func openChecked(t *testing.T, fsys storage.FS) (*State, error) {
	ctx := context.Background()
	before := memSnapshot(t, fsys)
	ro := DefaultOptions()
	ro.ReadOnly = true
	rt, rerr := Open(ctx, fsys, ro)
	if d := testkit.ChangedFiles(before, memSnapshot(t, fsys)); len(d) > 0 {
		t.Fatalf("read-only open (error %v) changed %v", rerr, d)
	}
	tb, err := Open(ctx, fsys, nil)
	after := memSnapshot(t, fsys)
	if (err == nil) != (rerr == nil) {
		t.Fatalf("read-only open: %v; read-write open: %v", rerr, err)
	}
	if err != nil {
		if !openErrorOK(err) {
			t.Fatalf("open error of no expected category: %v", err)
		}
		if d := testkit.ChangedFiles(before, after); len(d) > 0 {
			t.Fatalf("failed open (%v) changed %v", err, d)
		}
		return nil, err
	}
	st := tb.State()
	if rt.State().Version != st.Version {
		t.Fatalf("read-only open at version %d, read-write at %d", rt.State().Version, st.Version)
	}
	for _, p := range testkit.ChangedFiles(before, after) {
		if p != currentPath {
			t.Fatalf("open changed %s", p)
		}
		if got := strings.TrimSpace(after[p]); got != strconv.FormatUint(st.Version, 10) {
			t.Fatalf("open wrote CURRENT %q, loaded version %d", got, st.Version)
		}
	}
	again, err := tb.Refresh(ctx)
	if err != nil || again.Version != st.Version {
		t.Fatalf("refresh after open: %v, %v (opened at %d)", again, err, st.Version)
	}
	return st, nil
}

// FuzzCurrent writes fuzzed CURRENT bytes, and a fuzzed commit file at
// one version (replacing a real one or above the newest) when commit is
// not empty, over a real five-commit log, and opens it (see openChecked).
// With CURRENT alone fuzzed the outcome is known exactly: a decimal
// version up to the newest opens at the newest commit (commits above
// CURRENT are rolled forward); anything else is ErrCorrupt.
func FuzzCurrent(f *testing.F) {
	base := fuzzBaseLog(f)
	newest := uint64(len(base) - 1)
	for _, cur := range []string{"5\n", "0", "3", " 2 \n", "6", "", "\n", "18446744073709551615", "18446744073709551616", "-1", "+3", "0x5", "5\x00", "٣", "1e1", "05"} {
		f.Add([]byte(cur), uint8(0), []byte(nil))
	}
	f.Add([]byte("5\n"), uint8(5), []byte(commitJSON(6, `{"RemoveSegment":{"path":"data/x.parquet"}}`)))
	f.Add([]byte("5\n"), uint8(5), []byte(`{"version":6,"base_version":5,"timestamp":"2026-01-01T00:00:00Z","act`))
	f.Add([]byte("4\n"), uint8(4), []byte(commitJSON(5, metaJSON(8, "[]", "[]", "", ""))))
	f.Add([]byte("5\n"), uint8(2), []byte(commitJSON(3, `{"RemoveSegment":{"path":"../x"}}`)))
	f.Add([]byte("5\n"), uint8(0), []byte(createOK))
	f.Add([]byte("1\n"), uint8(1), []byte(schemaOK))
	f.Fuzz(func(t *testing.T, current []byte, at uint8, commit []byte) {
		files := make(map[string][]byte, len(base)+1)
		for k, v := range base {
			files[k] = v
		}
		files[currentPath] = current
		var commitV uint64
		if len(commit) > 0 {
			commitV = 1 + uint64(at)%(newest+1)
			files[CommitPath(commitV)] = commit
		}
		fsys := memTable(t, files)
		st, err := openChecked(t, fsys)
		if commitV != 0 {
			return
		}
		// CURRENT alone was fuzzed: the answer is known.
		v, perr := strconv.ParseUint(strings.TrimSpace(string(current)), 10, 64)
		switch {
		case perr == nil && v <= newest:
			if err != nil || st.Version != newest {
				t.Fatalf("CURRENT %q: %v, %v; want version %d", current, st, err, newest)
			}
		case !errors.Is(err, ErrCorrupt):
			t.Fatalf("CURRENT %q: %v, %v; want ErrCorrupt", current, st, err)
		}
	})
}

// fuzzLogSep separates the commit files in FuzzLog's input.
var fuzzLogSep = []byte{0, '|', 0}

// FuzzLog splits its input at fuzzLogSep into up to four commit files,
// versions 1..k with CURRENT at k, and opens the table (see openChecked).
// The answer is known: the open succeeds exactly when every file decodes
// and each applies on the one before, and then it is at version k and
// every older version can be read.
func FuzzLog(f *testing.F) {
	dirs, _ := filepath.Glob(filepath.Join("..", "testdata", "reference", "tables", "*", LogDir))
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		sort.Strings(files)
		var parts [][]byte
		for _, p := range files[:min(4, len(files))] {
			if b, err := os.ReadFile(p); err == nil {
				parts = append(parts, b)
			}
		}
		f.Add(bytes.Join(parts, fuzzLogSep))
	}
	f.Add([]byte(createOK + string(fuzzLogSep) + schemaOK))
	f.Add([]byte(createOK + string(fuzzLogSep) + schemaOK + string(fuzzLogSep) + commitJSON(3, `{"RemoveSegment":{"path":"data/a.parquet"}}`)))
	f.Add([]byte(createOK + string(fuzzLogSep) + commitJSON(2, metaJSON(7, `["schema_add_columns"]`, "[]", testSchema, ""))))
	f.Add([]byte(commitJSON(1, metaJSON(7, `["schema_metadata"]`, `["schema_metadata"]`, "", "")) + string(fuzzLogSep) + commitJSON(2, metaJSON(7, "[]", `["schema_metadata"]`, "", ""))))
	f.Fuzz(func(t *testing.T, data []byte) {
		parts := bytes.SplitN(data, fuzzLogSep, 5)
		if len(parts) > 4 {
			return
		}
		files := map[string][]byte{currentPath: []byte(fmt.Sprintf("%d\n", len(parts)))}
		for i, p := range parts {
			files[CommitPath(uint64(i+1))] = p
		}
		// The oracle: decode and apply in turn.
		var want *State
		wantOK := true
		for i, p := range parts {
			c, err := decodeCommit(p)
			if err == nil && c.Version != uint64(i+1) {
				err = fmt.Errorf("version %d", c.Version)
			}
			if err == nil {
				want, err = want.apply(c, CommitPath(uint64(i+1)))
			}
			if err != nil {
				wantOK = false
				break
			}
		}
		fsys := memTable(t, files)
		st, err := openChecked(t, fsys)
		if (err == nil) != wantOK {
			t.Fatalf("open: %v; the commits one by one say ok=%v", err, wantOK)
		}
		if err != nil {
			return
		}
		if st.Version != uint64(len(parts)) || st.Version != want.Version || len(st.Segments) != len(want.Segments) {
			t.Fatalf("opened at version %d with %d segments; want %d with %d", st.Version, len(st.Segments), want.Version, len(want.Segments))
		}
		// Every older version inside the keep window: a clock at the
		// year 1, before any commit's timestamp.
		opts := DefaultOptions()
		opts.Now = func() time.Time { return time.Time{} }
		tb, err := Open(context.Background(), fsys, opts)
		if err != nil {
			t.Fatal(err)
		}
		for v := uint64(1); v < st.Version; v++ {
			if old, err := tb.StateAt(context.Background(), v); err != nil || old.Version != v {
				t.Fatalf("StateAt(%d): %v, %v", v, old, err)
			}
		}
	})
}
