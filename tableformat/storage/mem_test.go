package storage

import (
	"io"
	"strings"
	"testing"
	"time"
)

// create creates name on m and writes content, without syncing or closing.
func create(t *testing.T, m FS, name, content string) File {
	t.Helper()
	f, err := m.Create(name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	if _, err := f.Write([]byte(content)); err != nil {
		t.Fatalf("Write(%q): %v", name, err)
	}
	return f
}

func mustSync(t *testing.T, f File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func mustSyncDir(t *testing.T, fsys FS, dir string) {
	t.Helper()
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatalf("SyncDir(%q): %v", dir, err)
	}
}

func TestMemCrashNewFile(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sync, syncDir bool
		want          string // "" with present false: absent
		present       bool
	}{
		{name: "a/no Sync, no SyncDir: absent"},
		{name: "b/Sync, no SyncDir: absent", sync: true},
		{name: "c/SyncDir, no Sync: present and empty", syncDir: true, present: true},
		{name: "d/Sync then SyncDir: present with content", sync: true, syncDir: true, present: true, want: "data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			f := create(t, m, "dir/f", "data")
			defer f.Close()
			if tc.sync {
				mustSync(t, f)
			}
			if tc.syncDir {
				mustSyncDir(t, m, "dir")
			}
			wantContent(t, m, "dir/f", "data") // the live view has it all
			c := m.CrashClone()
			if !tc.present {
				wantNotExist(t, c, "dir/f")
				wantList(t, c, "dir")
				return
			}
			wantContent(t, c, "dir/f", tc.want)
			wantList(t, c, "dir", "f")
		})
	}
}

func TestMemCrashUnsyncedTailIsLost(t *testing.T) {
	// (e) what was written after the last Sync is lost.
	m := NewMem()
	f := create(t, m, "f", "synced")
	mustSync(t, f)
	f.Write([]byte(" and lost"))
	mustSyncDir(t, m, ".")
	wantContent(t, m, "f", "synced and lost")
	wantContent(t, m.CrashClone(), "f", "synced")

	// Truncation is not durable either until the next Sync.
	g, err := m.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("new"))
	wantContent(t, m.CrashClone(), "f", "synced")
	mustSync(t, g)
	wantContent(t, m.CrashClone(), "f", "new")
}

func TestMemCrashRename(t *testing.T) {
	// (f) a rename is durable only once both directories are synced.
	setup := func(t *testing.T) *MemFS {
		m := NewMem()
		f := create(t, m, "tmp/x", "payload")
		mustSync(t, f)
		f.Close()
		if err := m.MkdirAll("data"); err != nil {
			t.Fatal(err)
		}
		mustSyncDir(t, m, "tmp")
		if err := m.Rename("tmp/x", "data/y"); err != nil {
			t.Fatal(err)
		}
		wantNotExist(t, m, "tmp/x")
		wantContent(t, m, "data/y", "payload")
		return m
	}

	t.Run("no SyncDir", func(t *testing.T) {
		c := setup(t).CrashClone()
		wantContent(t, c, "tmp/x", "payload")
		wantNotExist(t, c, "data/y")
	})
	t.Run("SyncDir of both", func(t *testing.T) {
		m := setup(t)
		mustSyncDir(t, m, "data")
		mustSyncDir(t, m, "tmp")
		c := m.CrashClone()
		wantNotExist(t, c, "tmp/x")
		wantContent(t, c, "data/y", "payload")
	})
	t.Run("SyncDir of the new one only", func(t *testing.T) {
		// The model is strict: both names survive, like a link.
		m := setup(t)
		mustSyncDir(t, m, "data")
		c := m.CrashClone()
		wantContent(t, c, "tmp/x", "payload")
		wantContent(t, c, "data/y", "payload")
	})
	t.Run("SyncDir of the old one only", func(t *testing.T) {
		m := setup(t)
		mustSyncDir(t, m, "tmp")
		c := m.CrashClone()
		wantNotExist(t, c, "tmp/x")
		wantNotExist(t, c, "data/y")
	})
	t.Run("replacing a durable file", func(t *testing.T) {
		m := NewMem()
		writeFile(t, m, "cur", "old")
		writeFile(t, m, "next", "new")
		mustSyncDir(t, m, ".")
		if err := m.Rename("next", "cur"); err != nil {
			t.Fatal(err)
		}
		c := m.CrashClone()
		wantContent(t, c, "cur", "old")
		wantContent(t, c, "next", "new")
		mustSyncDir(t, m, ".")
		c = m.CrashClone()
		wantContent(t, c, "cur", "new")
		wantNotExist(t, c, "next")
	})
}

func TestMemCrashLinkSharesNode(t *testing.T) {
	// (g) two names of one file stay one file in the clone.
	m := NewMem()
	f := create(t, m, "a", "shared")
	mustSync(t, f)
	if err := m.Link("a", "d/b"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, ".")
	mustSyncDir(t, m, "d")
	c := m.CrashClone()
	wantContent(t, c, "a", "shared")
	wantContent(t, c, "d/b", "shared")
	if c.root.live["a"] != c.root.live["d"].live["b"] {
		t.Fatalf("the two names point at different nodes in the clone")
	}
	if c.root.live["a"] == m.root.live["a"] {
		t.Fatalf("the clone shares a node with the original")
	}
	// Writing through one name shows through the other.
	g, err := c.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("rewritten"))
	wantContent(t, c, "d/b", "rewritten")
	// The original is untouched, and so is a further clone of it.
	wantContent(t, m, "d/b", "shared")
	f.Write([]byte("+more"))
	wantContent(t, c, "a", "rewritten")
}

func TestMemCrashRemove(t *testing.T) {
	// (h) a removal is durable only after SyncDir.
	m := NewMem()
	writeFile(t, m, "d/f", "kept")
	mustSyncDir(t, m, "d")
	if err := m.Remove("d/f"); err != nil {
		t.Fatal(err)
	}
	wantNotExist(t, m, "d/f")
	wantContent(t, m.CrashClone(), "d/f", "kept")
	mustSyncDir(t, m, "d")
	wantNotExist(t, m.CrashClone(), "d/f")
}

func TestMemCrashDirectoriesAreDurable(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("a/b"); err != nil {
		t.Fatal(err)
	}
	f := create(t, m, "c/d/f", "x")
	f.Close()
	c := m.CrashClone()
	wantList(t, c, ".", "a", "c")
	wantList(t, c, "a", "b")
	wantList(t, c, "c", "d")
	wantList(t, c, "c/d")
}

func TestMemWriteToRemovedFileSurvivesIfNameDurable(t *testing.T) {
	// A file removed without SyncDir comes back after a crash with
	// whatever was synced through a handle still open on it.
	m := NewMem()
	f := create(t, m, "f", "v1")
	mustSync(t, f)
	mustSyncDir(t, m, ".")
	if err := m.Remove("f"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "f", "other")
	f.Write([]byte("+v2"))
	mustSync(t, f)
	wantContent(t, m, "f", "other")
	wantContent(t, m.CrashClone(), "f", "v1+v2")
}

func TestMemOpenIsSnapshot(t *testing.T) {
	m := NewMem()
	f := create(t, m, "f", "before")
	r, err := m.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(" after"))
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "before" || r.Size() != 6 {
		t.Fatalf("read %q (size %d), %v; want the content at Open", b, r.Size(), err)
	}
	r.Close()
	if _, err := r.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatalf("ReadAt after Close succeeded")
	}
}

func TestMemSetModTime(t *testing.T) {
	m := NewMem()
	writeFile(t, m, "d/f", "x")
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, name := range []string{"d/f", "d"} {
		if err := m.SetModTime(name, when); err != nil {
			t.Fatal(err)
		}
		fi, err := m.Stat(name)
		if err != nil || !fi.ModTime.Equal(when) {
			t.Fatalf("Stat(%q).ModTime = %v, %v; want %v", name, fi.ModTime, err, when)
		}
	}
	if err := m.SetModTime("missing", when); !IsNotExist(err) {
		t.Fatalf("SetModTime(missing) = %v, want fs.ErrNotExist", err)
	}
	// The mod time survives a crash with the file.
	mustSyncDir(t, m, "d")
	fi, err := m.CrashClone().Stat("d/f")
	if err != nil || !fi.ModTime.Equal(when) {
		t.Fatalf("Stat after crash = %v, %v; want %v", fi.ModTime, err, when)
	}
}

func TestMemString(t *testing.T) {
	m := NewMem()
	writeFile(t, m, "d/synced", "12345")
	mustSyncDir(t, m, "d")
	f := create(t, m, "d/new", "abc")
	defer f.Close()
	writeFile(t, m, "gone", "zz")
	mustSyncDir(t, m, ".")
	if err := m.Remove("gone"); err != nil {
		t.Fatal(err)
	}
	got := m.String()
	want := strings.Join([]string{
		"d/",
		"d/new 3 bytes, 0 synced [name not synced]",
		"d/synced 5 bytes, 5 synced",
		"gone [gone, name not synced] 2 synced",
		"",
	}, "\n")
	if got != want {
		t.Fatalf("String() =\n%s\nwant\n%s", got, want)
	}
}

func TestMemRenameDirectory(t *testing.T) {
	m := NewMem()
	writeFile(t, m, "a/f", "x")
	mustSyncDir(t, m, "a")
	if err := m.Rename("a", "a/b"); err == nil {
		t.Fatalf("Rename of a directory into itself succeeded")
	}
	if err := m.MkdirAll("full/g"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("a", "full"); err == nil {
		t.Fatalf("Rename onto a non-empty directory succeeded")
	}
	if err := m.Rename("a", "b"); err != nil {
		t.Fatal(err)
	}
	// The directory move is durable at once; its entries keep their state.
	c := m.CrashClone()
	wantList(t, c, ".", "b", "full")
	wantContent(t, c, "b/f", "x")
}
