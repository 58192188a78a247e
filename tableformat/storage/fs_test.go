package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The conformance suite runs against every implementation.

func TestLocalConformance(t *testing.T) {
	runFSConformance(t, func(t *testing.T) FS { return Local(t.TempDir()) })
}

func TestMemConformance(t *testing.T) {
	runFSConformance(t, func(t *testing.T) FS { return NewMem() })
}

func TestFaultConformance(t *testing.T) {
	runFSConformance(t, func(t *testing.T) FS { return NewFaultFS(NewMem()) })
}

// writeFile creates name with content, syncs and closes it.
func writeFile(t *testing.T, fsys FS, name, content string) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	if n, err := f.Write([]byte(content)); err != nil || n != len(content) {
		t.Fatalf("Write(%q) = %d, %v", name, n, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync(%q): %v", name, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close(%q): %v", name, err)
	}
}

// readString returns the content of name, failing the test on error.
func readString(t *testing.T, fsys FS, name string) string {
	t.Helper()
	b, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatalf("ReadFile(%q): %v", name, err)
	}
	return string(b)
}

func wantContent(t *testing.T, fsys FS, name, want string) {
	t.Helper()
	if got := readString(t, fsys, name); got != want {
		t.Fatalf("ReadFile(%q) = %q, want %q", name, got, want)
	}
}

func wantNotExist(t *testing.T, fsys FS, name string) {
	t.Helper()
	b, err := fsys.ReadFile(name)
	if !IsNotExist(err) {
		t.Fatalf("ReadFile(%q) = %q, %v; want an fs.ErrNotExist error", name, b, err)
	}
}

func wantList(t *testing.T, fsys FS, dir string, want ...string) {
	t.Helper()
	got, err := fsys.List(dir)
	if err != nil {
		t.Fatalf("List(%q): %v", dir, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", dir, got, want)
	}
}

func runFSConformance(t *testing.T, newFS func(t *testing.T) FS) {
	t.Run("ReadBack", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "a/b/c.txt", "hello, world")
		wantContent(t, fsys, "a/b/c.txt", "hello, world")
		writeFile(t, fsys, "empty", "")
		wantContent(t, fsys, "empty", "")
	})

	t.Run("OpenReadAtSize", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "f", "0123456789")
		r, err := fsys.Open("f")
		if err != nil {
			t.Fatal(err)
		}
		if r.Size() != 10 {
			t.Errorf("Size = %d, want 10", r.Size())
		}
		buf := make([]byte, 4)
		if n, err := r.ReadAt(buf, 3); n != 4 || err != nil || string(buf) != "3456" {
			t.Errorf("ReadAt(4, 3) = %d, %v, %q", n, err, buf[:n])
		}
		if n, err := r.ReadAt(buf, 8); n != 2 || err != io.EOF || string(buf[:n]) != "89" {
			t.Errorf("ReadAt past end = %d, %v, %q; want 2, io.EOF, \"89\"", n, err, buf[:n])
		}
		if pos, err := r.Seek(5, io.SeekStart); pos != 5 || err != nil {
			t.Errorf("Seek = %d, %v", pos, err)
		}
		rest, err := io.ReadAll(r)
		if err != nil || string(rest) != "56789" {
			t.Errorf("ReadAll after Seek = %q, %v", rest, err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := fsys.Open("missing"); !IsNotExist(err) {
			t.Errorf("Open(missing) = %v, want fs.ErrNotExist", err)
		}
		if err := fsys.MkdirAll("d"); err != nil {
			t.Fatal(err)
		}
		if r, err := fsys.Open("d"); err == nil {
			r.Close()
			t.Errorf("Open(dir) succeeded")
		}
	})

	t.Run("CreateTruncates", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "f", "a long first content")
		writeFile(t, fsys, "f", "x")
		wantContent(t, fsys, "f", "x")
	})

	t.Run("CreateExclusive", func(t *testing.T) {
		fsys := newFS(t)
		f, err := fsys.CreateExclusive("new/dir/f")
		if err != nil {
			t.Fatalf("CreateExclusive of a new file: %v", err)
		}
		if _, err := f.Write([]byte("first")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		f2, err := fsys.CreateExclusive("new/dir/f")
		if !IsExist(err) {
			if f2 != nil {
				f2.Close()
			}
			t.Fatalf("CreateExclusive of an existing file = %v, want fs.ErrExist", err)
		}
		wantContent(t, fsys, "new/dir/f", "first")
		if _, err := fsys.CreateExclusive("new"); !IsExist(err) {
			t.Fatalf("CreateExclusive of an existing dir = %v, want fs.ErrExist", err)
		}
	})

	t.Run("Link", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "a", "content of a")
		if err := fsys.Link("a", "sub/dir/b"); err != nil {
			t.Fatalf("Link: %v", err)
		}
		wantContent(t, fsys, "sub/dir/b", "content of a")
		wantContent(t, fsys, "a", "content of a")

		writeFile(t, fsys, "c", "content of c")
		if err := fsys.Link("c", "a"); !IsExist(err) {
			t.Fatalf("Link onto an existing name = %v, want fs.ErrExist", err)
		}
		wantContent(t, fsys, "a", "content of a")
		wantContent(t, fsys, "c", "content of c")

		if err := fsys.Link("missing", "d"); !IsNotExist(err) {
			t.Fatalf("Link of a missing file = %v, want fs.ErrNotExist", err)
		}
		wantNotExist(t, fsys, "d")

		// The second name outlives the first.
		if err := fsys.Remove("a"); err != nil {
			t.Fatal(err)
		}
		wantContent(t, fsys, "sub/dir/b", "content of a")
	})

	t.Run("Rename", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "a", "A")
		writeFile(t, fsys, "d/b", "B")
		if err := fsys.Rename("a", "d/b"); err != nil {
			t.Fatalf("Rename: %v", err)
		}
		wantContent(t, fsys, "d/b", "A")
		wantNotExist(t, fsys, "a")
		wantList(t, fsys, ".", "d")
		if err := fsys.Rename("a", "c"); !IsNotExist(err) {
			t.Fatalf("Rename of a missing file = %v, want fs.ErrNotExist", err)
		}
		if err := fsys.MkdirAll("e"); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename("d/b", "e"); err == nil {
			t.Fatalf("Rename of a file onto a directory succeeded")
		}
		wantContent(t, fsys, "d/b", "A")
		// A whole directory moves.
		if err := fsys.Rename("d", "moved"); err != nil {
			t.Fatalf("Rename of a directory: %v", err)
		}
		wantContent(t, fsys, "moved/b", "A")
	})

	t.Run("Remove", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "d/f", "x")
		if err := fsys.Remove("d"); err == nil {
			t.Fatalf("Remove of a non-empty directory succeeded")
		}
		if err := fsys.Remove("d/f"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		wantNotExist(t, fsys, "d/f")
		if err := fsys.Remove("d/f"); !IsNotExist(err) {
			t.Fatalf("Remove of a missing file = %v, want fs.ErrNotExist", err)
		}
		if err := fsys.Remove("d"); err != nil {
			t.Fatalf("Remove of an empty directory: %v", err)
		}
		wantList(t, fsys, ".")
		if err := fsys.Remove("."); err == nil {
			t.Fatalf("Remove of the root succeeded")
		}
	})

	t.Run("List", func(t *testing.T) {
		fsys := newFS(t)
		for _, name := range []string{"d/b", "d/a", "d/c/x", "d/B"} {
			writeFile(t, fsys, name, name)
		}
		if err := fsys.MkdirAll("d/e/f"); err != nil {
			t.Fatal(err)
		}
		wantList(t, fsys, "d", "B", "a", "b", "c", "e")
		wantList(t, fsys, ".", "d")
		wantList(t, fsys, "d/e", "f")
		wantList(t, fsys, "d/e/f")
		if _, err := fsys.List("missing"); !IsNotExist(err) {
			t.Fatalf("List of a missing directory = %v, want fs.ErrNotExist", err)
		}
		if _, err := fsys.List("d/a"); err == nil {
			t.Fatalf("List of a file succeeded")
		}
	})

	t.Run("StatAndMkdirAll", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "d/f", "12345")
		fi, err := fsys.Stat("d/f")
		if err != nil || fi.Size != 5 || fi.IsDir || fi.ModTime.IsZero() {
			t.Fatalf("Stat(file) = %+v, %v", fi, err)
		}
		for _, dir := range []string{"d", "."} {
			if fi, err := fsys.Stat(dir); err != nil || !fi.IsDir {
				t.Fatalf("Stat(%q) = %+v, %v; want a directory", dir, fi, err)
			}
		}
		if _, err := fsys.Stat("d/missing"); !IsNotExist(err) {
			t.Fatalf("Stat(missing) = %v, want fs.ErrNotExist", err)
		}
		for range 2 { // MkdirAll of an existing directory is fine
			if err := fsys.MkdirAll("x/y/z"); err != nil {
				t.Fatal(err)
			}
		}
		if fi, err := fsys.Stat("x/y/z"); err != nil || !fi.IsDir {
			t.Fatalf("Stat after MkdirAll = %+v, %v", fi, err)
		}
		if err := fsys.MkdirAll("d/f/g"); err == nil {
			t.Fatalf("MkdirAll through a file succeeded")
		}
		if _, err := fsys.Create("d/f/g"); err == nil {
			t.Fatalf("Create under a file succeeded")
		}
	})

	t.Run("SyncDir", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "d/f", "x")
		for _, dir := range []string{".", "d"} {
			if err := fsys.SyncDir(dir); err != nil {
				t.Fatalf("SyncDir(%q): %v", dir, err)
			}
		}
		if err := fsys.SyncDir("missing"); !IsNotExist(err) {
			t.Fatalf("SyncDir(missing) = %v, want fs.ErrNotExist", err)
		}
	})

	t.Run("FileFollowsItsNode", func(t *testing.T) {
		// An open file keeps writing into the file it created, not into
		// whatever is now at its path.
		fsys := newFS(t)
		f1, err := fsys.Create("a")
		if err != nil {
			t.Fatal(err)
		}
		defer f1.Close()
		if _, err := f1.Write([]byte("1")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename("a", "b"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, fsys, "a", "new")
		if _, err := f1.Write([]byte("2")); err != nil {
			t.Fatal(err)
		}
		wantContent(t, fsys, "b", "12")
		wantContent(t, fsys, "a", "new")
		if err := fsys.Remove("b"); err != nil {
			t.Fatal(err)
		}
		if _, err := f1.Write([]byte("3")); err != nil {
			t.Fatalf("Write to a removed file: %v", err)
		}
		wantContent(t, fsys, "a", "new")
		wantNotExist(t, fsys, "b")
	})

	t.Run("Closed", func(t *testing.T) {
		fsys := newFS(t)
		f, err := fsys.Create("f")
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("Write after Close = %v, want fs.ErrClosed", err)
		}
		if err := f.Close(); err == nil {
			t.Fatalf("second Close succeeded")
		}
		wantContent(t, fsys, "f", "")
	})

	t.Run("InvalidPaths", func(t *testing.T) {
		fsys := newFS(t)
		writeFile(t, fsys, "ok", "untouched")
		for _, bad := range []string{"../x", "/abs", "a//b", "", "a/", "a/../b", "./a", ".."} {
			var errs []error
			add := func(err error) { errs = append(errs, err) }
			_, err := fsys.ReadFile(bad)
			add(err)
			_, err = fsys.Open(bad)
			add(err)
			_, err = fsys.Stat(bad)
			add(err)
			_, err = fsys.Create(bad)
			add(err)
			_, err = fsys.CreateExclusive(bad)
			add(err)
			add(fsys.Link("ok", bad))
			add(fsys.Link(bad, "new"))
			add(fsys.Rename("ok", bad))
			add(fsys.Rename(bad, "new"))
			add(fsys.Remove(bad))
			_, err = fsys.List(bad)
			add(err)
			add(fsys.MkdirAll(bad))
			add(fsys.SyncDir(bad))
			for i, err := range errs {
				if !errors.Is(err, ErrInvalidPath) {
					t.Errorf("call %d with %q = %v, want ErrInvalidPath", i, bad, err)
				} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
					t.Errorf("call %d: error %q does not name %q", i, err, bad)
				}
			}
		}
		wantList(t, fsys, ".", "ok")
		wantContent(t, fsys, "ok", "untouched")
	})

	t.Run("Concurrent", func(t *testing.T) {
		fsys := newFS(t)
		var wg sync.WaitGroup
		errc := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := range 20 {
					name := fmt.Sprintf("g%d/f%d", g, i)
					content := strings.Repeat(name, i)
					f, err := fsys.Create(name)
					if err == nil {
						_, err = f.Write([]byte(content))
						f.Close()
					}
					var b []byte
					if err == nil {
						b, err = fsys.ReadFile(name)
					}
					if err == nil && string(b) != content {
						err = fmt.Errorf("%s: read %q, want %q", name, b, content)
					}
					if err == nil {
						_, err = fsys.List(".")
					}
					if err != nil {
						errc <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		names, err := fsys.List(".")
		if err != nil || len(names) != 8 {
			t.Fatalf("List(.) = %q, %v", names, err)
		}
	})
}
