package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocalRootAndLayout(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "table")
	l := Local(root + string(filepath.Separator))
	if l.Root() != root {
		t.Fatalf("Root() = %q, want %q", l.Root(), root)
	}
	// The root is created by the first file.
	writeFile(t, l, "a/b", "content")
	b, err := os.ReadFile(filepath.Join(root, "a", "b"))
	if err != nil || string(b) != "content" {
		t.Fatalf("the file on disk = %q, %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(root, "a", "b"))
	if err != nil || fi.Mode().Perm()&0o600 != 0o600 {
		t.Fatalf("file mode = %v, %v", fi.Mode(), err)
	}
	if err := l.Link("a/b", "c/d"); err != nil {
		t.Fatal(err)
	}
	fa, _ := os.Stat(filepath.Join(root, "a", "b"))
	fc, err := os.Stat(filepath.Join(root, "c", "d"))
	if err != nil || !os.SameFile(fa, fc) {
		t.Fatalf("Link did not make a hard link: %v", err)
	}
}

func TestLocalErrorsAreRelative(t *testing.T) {
	root := t.TempDir()
	l := Local(root)
	writeFile(t, l, "f", "x")
	_, rerr := l.ReadFile("d/missing")
	_, oerr := l.Open("missing")
	errs := []error{
		rerr, oerr,
		l.Rename("missing", "other"),
		l.Link("f", "f"),
		l.Remove("missing"),
		l.SyncDir("f"),
	}
	for i, err := range errs {
		if err == nil {
			t.Fatalf("call %d succeeded", i)
		}
		if strings.Contains(err.Error(), root) {
			t.Errorf("call %d: error %q names the root", i, err)
		}
	}
	if !IsNotExist(errs[0]) || !strings.Contains(errs[0].Error(), "d/missing") {
		t.Errorf("ReadFile error = %v", errs[0])
	}
	var pe *os.PathError
	if !errors.As(errs[0], &pe) || pe.Path != "d/missing" {
		t.Errorf("ReadFile error %#v is not an *os.PathError with a relative path", errs[0])
	}
	if !IsExist(errs[3]) {
		t.Errorf("Link error = %v, want fs.ErrExist", errs[3])
	}
}

func TestLocalInvalidPathsStayInside(t *testing.T) {
	dir := t.TempDir()
	l := Local(filepath.Join(dir, "root"))
	for _, bad := range []string{"../escaped", "/escaped", "a/../../escaped"} {
		if _, err := l.Create(bad); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Create(%q) = %v, want ErrInvalidPath", bad, err)
		}
		if err := l.MkdirAll(bad); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("MkdirAll(%q) = %v, want ErrInvalidPath", bad, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("the parent of the root holds %v, %v; want nothing", entries, err)
	}
}

// TestLocalStatReportsLinks: Stat describes a link's target and says that
// the name is a link; a plain file or directory is not one; a dangling
// link does not exist.
func TestLocalStatReportsLinks(t *testing.T) {
	dir := t.TempDir()
	l := Local(dir)
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"to-file": "file", "to-dir": "dir", "dangling": "nowhere"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		link, isDir bool
		size        int64
	}{
		{"file", false, false, 3}, {"dir", false, true, -1}, {"to-file", true, false, 3}, {"to-dir", true, true, -1},
	} {
		fi, err := l.Stat(tc.name)
		if err != nil || fi.Symlink != tc.link || fi.IsDir != tc.isDir || (tc.size >= 0 && fi.Size != tc.size) {
			t.Errorf("Stat(%s) = %+v, %v; want link %v, dir %v", tc.name, fi, err, tc.link, tc.isDir)
		}
	}
	if _, err := l.Stat("dangling"); !IsNotExist(err) {
		t.Errorf("Stat of a dangling link: %v, want not-exist", err)
	}
}
