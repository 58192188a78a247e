package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Snapshot maps every regular file under dir, by its slash-separated path
// relative to dir, to the SHA-256 of its content. Directories are left
// out. Compare two with ChangedFiles, SnapshotDiff or SameSnapshot.
func Snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ChangedFiles lists, sorted, the keys created, removed or changed
// between two snapshots: maps from a file's name to its content or to a
// digest of it.
func ChangedFiles(before, after map[string]string) []string {
	var out []string
	for k, v := range before {
		if w, ok := after[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// SnapshotDiff is ChangedFiles with each file said as "created f",
// "removed f" or "modified f".
func SnapshotDiff(before, after map[string]string) []string {
	out := ChangedFiles(before, after)
	for i, p := range out {
		_, was := before[p]
		_, is := after[p]
		switch {
		case !was:
			out[i] = "created " + p
		case !is:
			out[i] = "removed " + p
		default:
			out[i] = "modified " + p
		}
	}
	return out
}

// SameSnapshot reports an error on t for every file created, removed or
// modified between two snapshots, and then ends the test if it has
// failed; what names the step that should have written nothing.
func SameSnapshot(t testing.TB, what string, before, after map[string]string) {
	t.Helper()
	for _, d := range SnapshotDiff(before, after) {
		t.Errorf("%s: %s", what, d)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// CopyDir copies the tree under src to dst (created as needed): a table
// directory copied to another name, to be damaged or kept as it was.
func CopyDir(t testing.TB, src, dst string) {
	t.Helper()
	CopyDirEdit(t, src, dst, nil)
}

// CopyDirEdit is CopyDir writing each file as edit returns it, given the
// file's slash-separated path relative to src and its content; a nil edit
// copies files as they are.
func CopyDirEdit(t testing.TB, src, dst string, edit func(rel string, data []byte) []byte) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit != nil {
			data = edit(filepath.ToSlash(rel), data)
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
