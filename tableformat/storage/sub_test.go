package storage

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// Sub of a MemFS works inside the directory: every call lands under it,
// names that would climb out are refused, and a crash of the wrapped
// FaultFS reaches calls made through it.
func TestSubMem(t *testing.T) {
	mem := NewMem()
	fault := NewFaultFS(mem)
	sub, err := Sub(fault, "t1")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sub.CreateExclusive("a/x.tmp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Link("a/x.tmp", "a/x"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Rename("a/x.tmp", "a/y"); err != nil {
		t.Fatal(err)
	}
	if err := sub.SyncDir("a"); err != nil {
		t.Fatal(err)
	}
	if b, err := mem.ReadFile("t1/a/x"); err != nil || string(b) != "data" {
		t.Fatalf("t1/a/x in the wrapped FS: %q, %v", b, err)
	}
	if names, err := sub.List("a"); err != nil || !slices.Equal(names, []string{"x", "y"}) {
		t.Fatalf("List(a): %v, %v", names, err)
	}
	if fi, err := sub.Stat("a"); err != nil || !fi.IsDir {
		t.Fatalf("Stat(a): %+v, %v", fi, err)
	}
	if err := sub.Remove("a/y"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../t2/x", "/abs", "a/../../x", ""} {
		if _, err := sub.ReadFile(bad); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ReadFile(%q): %v, want ErrInvalidPath", bad, err)
		}
	}
	if _, err := Sub(mem, "../up"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Sub(../up): %v, want ErrInvalidPath", err)
	}
	if s, err := Sub(mem, "."); err != nil || s != FS(mem) {
		t.Errorf("Sub(.) = %v, %v; want the FS itself", s, err)
	}
	var names []string
	for _, e := range fault.Trace() {
		names = append(names, e.Name)
	}
	for _, n := range names {
		if n != "t1/a/x.tmp" && n != "t1/a/x" && n != "t1/a/y" && n != "t1/a" {
			t.Errorf("a call reached %q, outside t1/a", n)
		}
	}
	fault.Inject(Fault{Op: OpStat})
	if _, err := sub.Stat("a/x"); !errors.Is(err, ErrCrashed) {
		t.Errorf("Stat after a crash: %v, want ErrCrashed", err)
	}
}

// Sub of a LocalFS is a LocalFS at the directory.
func TestSubLocal(t *testing.T) {
	dir := t.TempDir()
	sub, err := Sub(Local(dir), "t1")
	if err != nil {
		t.Fatal(err)
	}
	l, ok := sub.(*LocalFS)
	if !ok || l.Root() != filepath.Join(dir, "t1") {
		t.Fatalf("Sub(Local) = %T %v, want a LocalFS at %s", sub, sub, filepath.Join(dir, "t1"))
	}
}
