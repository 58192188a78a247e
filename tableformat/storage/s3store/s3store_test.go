package s3store_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tsflight/tsflight/tableformat/storage"
	"github.com/tsflight/tsflight/tableformat/storage/s3store"
)

// store writes content to name through Create, then closes the file
// (which stores it).
func store(t *testing.T, fsys storage.FS, name, content string) {
	t.Helper()
	w, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("Create %s: %v", name, err)
	}
	if _, err := io.WriteString(w, content); err != nil {
		t.Fatalf("Write %s: %v", name, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close %s: %v", name, err)
	}
}

// expect checks that name holds want ("<absent>" for a missing object).
func expect(t *testing.T, fsys storage.FS, name, want string) {
	t.Helper()
	got, err := fsys.ReadFile(name)
	switch {
	case want == "<absent>" && storage.IsNotExist(err):
	case want == "<absent>":
		t.Fatalf("%s: got %q, %v; want it absent", name, got, err)
	case err != nil:
		t.Fatalf("%s: %v", name, err)
	case string(got) != want:
		t.Fatalf("%s = %q, want %q", name, got, want)
	}
}

func expectNames(t *testing.T, fsys storage.FS, dir string, want ...string) {
	t.Helper()
	got, err := fsys.List(dir)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, %v; want %q", dir, got, err, want)
	}
}

func TestObjects(t *testing.T) {
	g := startGateway(t)
	fsys := g.newFS(t, nil, nil)

	t.Run("CreateAppearsAtSync", func(t *testing.T) {
		w, err := fsys.Create("a/b/c")
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, "first ")
		expect(t, fsys, "a/b/c", "<absent>")
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		expect(t, fsys, "a/b/c", "first ")
		io.WriteString(w, "second")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		expect(t, fsys, "a/b/c", "first second")
		if _, err := w.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("Write after Close = %v", err)
		}
		if err := w.Close(); !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("second Close = %v", err)
		}
		store(t, fsys, "a/b/c", "") // Create replaces
		expect(t, fsys, "a/b/c", "")
	})

	t.Run("Reader", func(t *testing.T) {
		store(t, fsys, "r", "abcdefghij")
		r, err := fsys.Open("r")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.Size() != 10 {
			t.Fatalf("Size = %d", r.Size())
		}
		p := make([]byte, 3)
		if n, err := r.ReadAt(p, 4); n != 3 || err != nil || string(p) != "efg" {
			t.Fatalf("ReadAt(3, 4) = %d, %v, %q", n, err, p[:n])
		}
		if n, err := r.ReadAt(p, 9); n != 1 || err != io.EOF || p[0] != 'j' {
			t.Fatalf("ReadAt at the end = %d, %v, %q", n, err, p[:n])
		}
		if n, err := r.ReadAt(p, 10); n != 0 || err != io.EOF {
			t.Fatalf("ReadAt past the end = %d, %v", n, err)
		}
		if pos, err := r.Seek(-4, io.SeekEnd); pos != 6 || err != nil {
			t.Fatalf("Seek = %d, %v", pos, err)
		}
		if rest, err := io.ReadAll(r); string(rest) != "ghij" || err != nil {
			t.Fatalf("ReadAll = %q, %v", rest, err)
		}
		// A reader reads the version it opened, or fails: never a mix.
		store(t, fsys, "r", "ABCDEFGHIJ")
		if n, err := r.ReadAt(p, 0); err == nil {
			t.Fatalf("ReadAt after the object was replaced = %d, %q, want an error", n, p[:n])
		}
		if _, err := fsys.Open("nothing"); !storage.IsNotExist(err) {
			t.Fatalf("Open(missing) = %v", err)
		}
	})

	t.Run("Stat", func(t *testing.T) {
		store(t, fsys, "s/f", "12345")
		fi, err := fsys.Stat("s/f")
		if err != nil || fi.Size != 5 || fi.IsDir || fi.ModTime.IsZero() {
			t.Fatalf("Stat(file) = %+v, %v", fi, err)
		}
		for _, d := range []string{"s", "."} {
			if fi, err := fsys.Stat(d); err != nil || !fi.IsDir {
				t.Fatalf("Stat(%s) = %+v, %v", d, fi, err)
			}
		}
		if _, err := fsys.Stat("s/g"); !storage.IsNotExist(err) {
			t.Fatalf("Stat(missing) = %v", err)
		}
	})

	t.Run("CreateExclusive", func(t *testing.T) {
		w, err := fsys.CreateExclusive("x/one")
		if err != nil {
			t.Fatal(err)
		}
		// The name is claimed at once, empty, as O_EXCL makes it.
		expect(t, fsys, "x/one", "")
		if _, err := fsys.CreateExclusive("x/one"); !storage.IsExist(err) {
			t.Fatalf("second CreateExclusive = %v, want fs.ErrExist", err)
		}
		io.WriteString(w, "payload")
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		expect(t, fsys, "x/one", "payload")
		io.WriteString(w, "+more")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		expect(t, fsys, "x/one", "payload+more")

		// A file whose object was replaced by someone else does not
		// overwrite it.
		w2, err := fsys.CreateExclusive("x/two")
		if err != nil {
			t.Fatal(err)
		}
		store(t, fsys, "x/two", "someone else")
		io.WriteString(w2, "mine")
		if err := w2.Sync(); err == nil {
			t.Fatal("Sync over a replaced object succeeded")
		}
		expect(t, fsys, "x/two", "someone else")
		if _, err := fsys.CreateExclusive("."); !storage.IsExist(err) {
			t.Fatalf("CreateExclusive(.) = %v", err)
		}
	})

	t.Run("Link", func(t *testing.T) {
		store(t, fsys, "l/src", "commit bytes")
		if err := fsys.Link("l/src", "l/log/0000000002.json"); err != nil {
			t.Fatal(err)
		}
		expect(t, fsys, "l/log/0000000002.json", "commit bytes")
		store(t, fsys, "l/other", "other bytes")
		if err := fsys.Link("l/other", "l/log/0000000002.json"); !storage.IsExist(err) {
			t.Fatalf("Link onto an existing key = %v, want fs.ErrExist", err)
		}
		expect(t, fsys, "l/log/0000000002.json", "commit bytes")
		if err := fsys.Link("l/none", "l/new"); !storage.IsNotExist(err) {
			t.Fatalf("Link of a missing key = %v", err)
		}
		expect(t, fsys, "l/new", "<absent>")
		if err := fsys.Remove("l/src"); err != nil {
			t.Fatal(err)
		}
		expect(t, fsys, "l/log/0000000002.json", "commit bytes")
	})

	t.Run("Rename", func(t *testing.T) {
		store(t, fsys, "n/CURRENT.tmp-1", "7\n")
		store(t, fsys, "n/CURRENT", "6\n")
		if err := fsys.Rename("n/CURRENT.tmp-1", "n/CURRENT"); err != nil {
			t.Fatal(err)
		}
		expect(t, fsys, "n/CURRENT", "7\n")
		expect(t, fsys, "n/CURRENT.tmp-1", "<absent>")
		if err := fsys.Rename("n/gone", "n/x"); !storage.IsNotExist(err) {
			t.Fatalf("Rename of a missing key = %v", err)
		}
		// A directory moves key by key.
		store(t, fsys, "n/d/a", "A")
		store(t, fsys, "n/d/e/b", "B")
		if err := fsys.Rename("n/d", "n/moved"); err != nil {
			t.Fatal(err)
		}
		expect(t, fsys, "n/moved/a", "A")
		expect(t, fsys, "n/moved/e/b", "B")
		expectNames(t, fsys, "n", "CURRENT", "moved")
	})

	t.Run("Exchange", func(t *testing.T) {
		store(t, fsys, "e/a", "a")
		store(t, fsys, "e/b", "b")
		if err := fsys.Exchange("e/a", "e/b"); !errors.Is(err, storage.ErrExchangeUnsupported) {
			t.Fatalf("Exchange = %v", err)
		}
		expect(t, fsys, "e/a", "a")
	})

	t.Run("Remove", func(t *testing.T) {
		store(t, fsys, "m/d/f", "x")
		if err := fsys.Remove("m/d"); err == nil || storage.IsNotExist(err) {
			t.Fatalf("Remove of a directory with a key under it = %v", err)
		}
		if err := fsys.Remove("m/d/f"); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove("m/d/f"); !storage.IsNotExist(err) {
			t.Fatalf("second Remove = %v, want fs.ErrNotExist", err)
		}
		// The directory went with its last key.
		if err := fsys.Remove("m/d"); !storage.IsNotExist(err) {
			t.Fatalf("Remove of the emptied directory = %v", err)
		}
		if err := fsys.Remove("."); err == nil {
			t.Fatal("Remove(.) succeeded")
		}
	})

	t.Run("InvalidPaths", func(t *testing.T) {
		for _, bad := range []string{"", "/a", "a/", "a//b", "../a", "a/./b"} {
			_, e1 := fsys.ReadFile(bad)
			_, e2 := fsys.Open(bad)
			_, e3 := fsys.Stat(bad)
			_, e4 := fsys.Create(bad)
			_, e5 := fsys.CreateExclusive(bad)
			_, e6 := fsys.List(bad)
			for i, err := range []error{e1, e2, e3, e4, e5, e6, fsys.Link("r", bad), fsys.Link(bad, "z"),
				fsys.Rename("r", bad), fsys.Rename(bad, "z"), fsys.Exchange(bad, "r"), fsys.Remove(bad),
				fsys.MkdirAll(bad), fsys.SyncDir(bad)} {
				if !errors.Is(err, storage.ErrInvalidPath) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
					t.Errorf("call %d on %q = %v, want ErrInvalidPath naming it", i, bad, err)
				}
			}
		}
	})
}

func TestList(t *testing.T) {
	g := startGateway(t)
	// Pages of 3 keys, so that paging is exercised.
	fsys := g.newFS(t, nil, &s3store.Options{ListPageSize: 3})
	for _, k := range []string{"d/b", "d/a", "d/c/x", "d/B", "d/c/y", "d/e/f/g", "d/h", "d/i", "top"} {
		store(t, fsys, k, k)
	}
	expectNames(t, fsys, "d", "B", "a", "b", "c", "e", "h", "i")
	expectNames(t, fsys, ".", "d", "top")
	expectNames(t, fsys, "d/e", "f")
	if _, err := fsys.List("nothing"); !storage.IsNotExist(err) {
		t.Fatalf("List(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := fsys.List("d/a"); err == nil || storage.IsNotExist(err) {
		t.Fatalf("List(file) = %v, want a not-a-directory error", err)
	}
	// MkdirAll and SyncDir change nothing: no marker objects.
	if err := fsys.MkdirAll("d/new/dir"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	expectNames(t, fsys, "d", "B", "a", "b", "c", "e", "h", "i")

	// The prefix isolates the FS from the rest of the same bucket: a
	// sibling prefix sees nothing of it, and the bucket's root sees it
	// only as the directory of its prefix.
	bucket, _ := fsys.Location()
	sibling, err := s3store.New(g.client(nil), bucket, "tables/t2", nil)
	if err != nil {
		t.Fatal(err)
	}
	expectNames(t, sibling, ".")
	whole, err := s3store.New(g.client(nil), bucket, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	expectNames(t, whole, "tables", "t1")
}

// TestCreateRace: 16 writers create one key at once, through
// CreateExclusive and through Link, in several rounds. Exactly one wins
// each round, every other one gets fs.ErrExist, and the key holds the
// winner's bytes.
func TestCreateRace(t *testing.T) {
	g := startGateway(t)
	fsys := g.newFS(t, nil, nil)
	const writers, rounds = 16, 5
	for _, how := range []string{"CreateExclusive", "Link"} {
		for round := range rounds {
			key := fmt.Sprintf("race/%s/%010d.json", how, round)
			if how == "Link" {
				for w := range writers {
					store(t, fsys, fmt.Sprintf("race/tmp/%d-%d", round, w), fmt.Sprintf("writer %d", w))
				}
			}
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				wins   []int
				others []error
			)
			start := make(chan struct{})
			for w := range writers {
				wg.Go(func() {
					<-start
					var err error
					if how == "Link" {
						err = fsys.Link(fmt.Sprintf("race/tmp/%d-%d", round, w), key)
					} else {
						var f storage.File
						if f, err = fsys.CreateExclusive(key); err == nil {
							io.WriteString(f, fmt.Sprintf("writer %d", w))
							err = f.Close()
						}
					}
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						wins = append(wins, w)
					} else if !storage.IsExist(err) {
						others = append(others, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(wins) != 1 || len(others) != 0 {
				t.Fatalf("%s round %d: winners %v, errors other than fs.ErrExist %v", how, round, wins, others)
			}
			expect(t, fsys, key, fmt.Sprintf("writer %d", wins[0]))
		}
	}
}

// TestSyncedSurvivesRestart: what Sync, Close and Link stored is there
// after the server was killed (SIGKILL) and started again, and a File
// open across the restart still stores the rest on Close. (A killed
// process, not a power loss: that the store's acknowledgement means
// durable on its disks is the store's promise.)
func TestSyncedSurvivesRestart(t *testing.T) {
	g := startGateway(t)
	fsys := g.newFS(t, nil, fastRetries)
	w, err := fsys.Create("data/seg")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "synced")
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, " then closed")
	store(t, fsys, "log/.tmp", "commit 2")
	if err := fsys.Link("log/.tmp", "log/0000000002.json"); err != nil {
		t.Fatal(err)
	}

	g.restart(t)
	expect(t, fsys, "data/seg", "synced")
	expect(t, fsys, "log/0000000002.json", "commit 2")
	if err := fsys.Link("log/.tmp", "log/0000000002.json"); !storage.IsExist(err) {
		t.Fatalf("Link onto the commit after the restart = %v, want fs.ErrExist", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, fsys, "data/seg", "synced then closed")
}

// TestNewRefuses: New refuses what it cannot work with before any request.
func TestNewRefuses(t *testing.T) {
	g := startGateway(t)
	for _, c := range []struct {
		name           string
		client         bool
		bucket, prefix string
		want           string
	}{
		{"no client", false, "b", "", "no S3 client"},
		{"no bucket", true, "", "", "empty bucket name"},
		{"bad prefix", true, "b", "../x", `prefix "../x"`},
	} {
		var cl *s3.Client
		if c.client {
			cl = g.client(nil)
		}
		fsys, err := s3store.New(cl, c.bucket, c.prefix, nil)
		if err == nil || fsys != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, %v; want an error naming %q", c.name, fsys, err, c.want)
		}
	}
	if _, err := s3store.New(g.client(nil), "b", "../x", nil); !errors.Is(err, storage.ErrInvalidPath) {
		t.Errorf("bad prefix: %v, want storage.ErrInvalidPath", err)
	}
}
