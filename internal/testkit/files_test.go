package testkit

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotAndChanges: a snapshot holds every file by its slash path
// (no directories); ChangedFiles and SnapshotDiff name what was created,
// removed and modified, and nothing else.
func TestSnapshotAndChanges(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), "1")
	writeFile(t, filepath.Join(dir, "sub", "b"), "2")
	writeFile(t, filepath.Join(dir, "sub", "c"), "3")
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := Snapshot(t, dir)
	if keys := slices.Sorted(maps.Keys(before)); !slices.Equal(keys, []string{"a", "sub/b", "sub/c"}) {
		t.Fatalf("snapshot holds %v", keys)
	}
	if d := ChangedFiles(before, Snapshot(t, dir)); d != nil {
		t.Fatalf("nothing changed, ChangedFiles says %v", d)
	}
	writeFile(t, filepath.Join(dir, "a"), "one")
	if err := os.Remove(filepath.Join(dir, "sub", "b")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub", "d"), "4")
	after := Snapshot(t, dir)
	if d := ChangedFiles(before, after); !slices.Equal(d, []string{"a", "sub/b", "sub/d"}) {
		t.Fatalf("ChangedFiles: %v", d)
	}
	if d := SnapshotDiff(before, after); !slices.Equal(d, []string{"modified a", "removed sub/b", "created sub/d"}) {
		t.Fatalf("SnapshotDiff: %v", d)
	}
}

// TestCopyDir: the copy holds the same files with the same content.
func TestCopyDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "src", "x"), "x")
	writeFile(t, filepath.Join(dir, "src", "d", "y"), "y")
	CopyDir(t, filepath.Join(dir, "src"), filepath.Join(dir, "dst"))
	if d := ChangedFiles(Snapshot(t, filepath.Join(dir, "src")), Snapshot(t, filepath.Join(dir, "dst"))); d != nil {
		t.Fatalf("copy differs: %v", d)
	}
}
