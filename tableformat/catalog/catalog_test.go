package catalog

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

func intIndex() tableformat.CreateOptions {
	return tableformat.CreateOptions{Index: tableformat.IndexSpec{Column: "k", Kind: tableformat.IndexKind{Type: tableformat.IndexInt64, Width: 1}}}
}

// appendRows appends keys to tb.
func appendRows(t *testing.T, tb *tableformat.Table, keys ...int64) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.AppendValues(keys, nil)
	col := b.NewArray()
	defer col.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(len(keys)))
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if _, err := tb.Append(context.Background(), rdr, nil); err != nil {
		t.Fatal(err)
	}
}

func rows(t *testing.T, tb *tableformat.Table) uint64 {
	t.Helper()
	var n uint64
	for _, sg := range tb.State().Segments {
		n += sg.RowCount
	}
	return n
}

// The whole life of a catalog on the in-memory file system: create, list,
// open, reopen through a second catalog (another process), names that are
// no tables, a phantom, a table removed behind the catalog's back.
func TestCatalogInMemory(t *testing.T) {
	ctx := context.Background()
	root := storage.NewMem()
	c := New(root, nil)

	if names, err := c.Tables(); err != nil || len(names) != 0 {
		t.Fatalf("empty root: %v, %v", names, err)
	}
	a, err := c.Create(ctx, "cpu", intIndex())
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, a, 1, 2, 3)
	if _, err := c.Create(ctx, "mem", intIndex()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "cpu", intIndex()); !errors.Is(err, tableformat.ErrAlreadyExists) || !strings.Contains(err.Error(), `table "cpu"`) {
		t.Fatalf("second create of cpu: %v, want already exists naming the table", err)
	}

	// What is no table: a file, a directory without a log, a directory
	// whose name is not a table name, and a phantom (a log directory with
	// neither CURRENT nor a commit).
	mustWrite(t, root, "notes.txt")
	if err := root.MkdirAll("empty"); err != nil {
		t.Fatal(err)
	}
	if err := root.MkdirAll("bad-name/" + tableformat.LogDir); err != nil {
		t.Fatal(err)
	}
	if err := root.MkdirAll("ghost/" + tableformat.LogDir); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, root, "ghost/"+tableformat.LogDir+"/leftover.tmp")

	if names, err := c.Names(); err != nil || !slices.Equal(names, []string{"cpu", "ghost", "mem"}) {
		t.Fatalf("Names: %v, %v; want cpu, ghost (a phantom), mem", names, err)
	}
	if names, err := c.Tables(); err != nil || !slices.Equal(names, []string{"cpu", "mem"}) {
		t.Fatalf("Tables: %v, %v; want cpu, mem", names, err)
	}
	for name, want := range map[string]bool{"cpu": true, "mem": true, "ghost": false, "empty": false, "notes.txt": false, "bad-name": false, "nope": false, "": false} {
		if got := c.IsTable(name); got != want {
			t.Errorf("IsTable(%q) = %v, want %v", name, got, want)
		}
	}
	if _, err := c.Open(ctx, "ghost"); !errors.Is(err, tableformat.ErrNotFound) {
		t.Errorf("Open(ghost): %v, want not found", err)
	}
	// A create of a phantom's name succeeds in it.
	if _, err := c.Create(ctx, "ghost", intIndex()); err != nil {
		t.Fatalf("create over a phantom: %v", err)
	}

	// A second catalog on the same storage sees the first one's commits,
	// and the first sees the second's on its next Open.
	c2 := New(root, nil)
	b, err := c2.Open(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if n := rows(t, b); n != 3 {
		t.Fatalf("second catalog: %d rows, want 3", n)
	}
	appendRows(t, b, 4, 5)
	a2, err := c.Open(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if a2 != a {
		t.Error("Open did not return the cached handle")
	}
	if n := rows(t, a2); n != 5 {
		t.Fatalf("first catalog after the second's append: %d rows, want 5", n)
	}

	// Removed behind the catalog's back: not found, and the handle is
	// forgotten.
	if err := removeAll(root, "mem"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Cached("mem"); !ok {
		t.Fatal("mem is not cached before its removal")
	}
	if _, err := c.Open(ctx, "mem"); !errors.Is(err, tableformat.ErrNotFound) || !strings.Contains(err.Error(), `table "mem"`) {
		t.Fatalf("Open of a removed table: %v, want not found naming it", err)
	}
	if _, ok := c.Cached("mem"); ok {
		t.Error("the removed table's handle is still cached")
	}
}

// Bad names are refused before any storage call.
func TestCatalogRefusesBadNames(t *testing.T) {
	ctx := context.Background()
	fsys := storage.NewFaultFS(storage.NewMem())
	c := New(fsys, nil)
	for name, frag := range map[string]string{
		"":                       "table name is empty",
		"../x":                   "is not allowed",
		"a/b":                    "is not allowed",
		"9lives":                 "is not allowed",
		strings.Repeat("x", 129): "129 characters long; at most 128",
	} {
		_, err := c.Open(ctx, name)
		if !errors.Is(err, tableformat.ErrInvalidInput) || !strings.Contains(err.Error(), frag) {
			t.Errorf("Open(%.20q): %v, want invalid input saying %q", name, err, frag)
		}
		if _, err := c.Create(ctx, name, intIndex()); !errors.Is(err, tableformat.ErrInvalidInput) {
			t.Errorf("Create(%.20q): %v, want invalid input", name, err)
		}
		if _, err := c.TableFS(name); !errors.Is(err, tableformat.ErrInvalidInput) {
			t.Errorf("TableFS(%.20q): %v, want invalid input", name, err)
		}
	}
	if tr := fsys.Trace(); len(tr) != 0 {
		t.Errorf("bad names reached storage: %v", tr)
	}
}

// Storage faults: a root that cannot be listed is a storage error without
// the root's location; a failed create names the table and leaves no
// table behind; every call a table makes goes through the catalog's FS.
func TestCatalogStorageFaults(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	fsys := storage.NewFaultFS(mem)
	c := New(fsys, nil)

	fsys.Inject(storage.Fault{Op: storage.OpList, Match: func(n string) bool { return n == "." }, Err: &fs.PathError{Op: "open", Path: "/secret/root", Err: syscall.EACCES}})
	for _, list := range []func() ([]string, error){c.Names, c.Tables} {
		_, err := list()
		if !errors.Is(err, tableformat.ErrStorage) || !strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "/secret") {
			t.Errorf("listing an unreadable root: %v; want a storage error, permission denied, no path", err)
		}
	}

	fsys = storage.NewFaultFS(mem)
	c = New(fsys, nil)
	fsys.Inject(storage.Fault{Op: storage.OpLink, Nth: 1, Err: syscall.EIO})
	_, err := c.Create(ctx, "cpu", intIndex())
	if !errors.Is(err, tableformat.ErrStorage) || !strings.Contains(err.Error(), `table "cpu"`) {
		t.Fatalf("create whose commit link fails: %v, want a storage error naming the table", err)
	}
	if c.IsTable("cpu") {
		t.Error("a create that failed left a table")
	}
	before := len(fsys.Trace())
	if _, err := c.Create(ctx, "cpu", intIndex()); err != nil {
		t.Fatalf("create after the fault: %v", err)
	}
	var sawTableFile bool
	for _, e := range fsys.Trace()[before:] {
		sawTableFile = sawTableFile || strings.HasPrefix(e.Name, "cpu/"+tableformat.LogDir+"/")
	}
	if !sawTableFile {
		t.Errorf("the table's calls did not go through the catalog's FS: %v", fsys.Trace())
	}
}

// On the local disk: the table directory is a LocalFS rooted at the
// table (so segment paths are real files), and a symbolic link to a table
// directory is no table.
func TestCatalogLocal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := New(storage.Local(dir), nil)
	tb, err := c.Create(ctx, "cpu", intIndex())
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, tb, 7)
	fsys, err := c.TableFS("cpu")
	if err != nil {
		t.Fatal(err)
	}
	l, ok := fsys.(*storage.LocalFS)
	if !ok || l.Root() != filepath.Join(dir, "cpu") {
		t.Fatalf("TableFS(cpu) = %T %v, want a LocalFS at %s", fsys, fsys, filepath.Join(dir, "cpu"))
	}
	seg := tb.State().Segments[0].Path
	if _, err := os.Stat(filepath.Join(dir, "cpu", filepath.FromSlash(seg))); err != nil {
		t.Fatalf("segment %s is not under the table's directory: %v", seg, err)
	}
	if err := os.Symlink(filepath.Join(dir, "cpu"), filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	if names, err := c.Tables(); err != nil || !slices.Equal(names, []string{"cpu"}) {
		t.Errorf("Tables with a link to cpu: %v, %v; want cpu alone", names, err)
	}
	if c.IsTable("alias") {
		t.Error("a link to a table directory is a table")
	}
}

func mustWrite(t *testing.T, fsys storage.FS, name string) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// removeAll removes dir and everything below it, as a person deleting a
// table directory by hand would.
func removeAll(fsys storage.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := dir + "/" + n
		fi, err := fsys.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir {
			if err := removeAll(fsys, p); err != nil {
				return err
			}
			continue
		}
		if err := fsys.Remove(p); err != nil {
			return err
		}
	}
	return fsys.Remove(dir)
}

// IsTable on a table with a CURRENT does not list its log (which holds a
// commit file per version: listing 10,000 of them on every SQL statement
// cost a streamed table's count(*) 6 ms, bench stream workload).
func TestIsTableDoesNotListTheLog(t *testing.T) {
	ctx := context.Background()
	fsys := storage.NewFaultFS(storage.NewMem())
	c := New(fsys, nil)
	tb, err := c.Create(ctx, "cpu", intIndex())
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(5) {
		appendRows(t, tb, k)
	}
	fsys.Reset()
	if !c.IsTable("cpu") {
		t.Fatal("cpu is not a table")
	}
	if n := fsys.CountOps(storage.OpList); n != 0 {
		t.Errorf("IsTable listed %d directories: %v", n, fsys.Trace())
	}
}
