package flightserver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Helpers that look at what the service left on disk.

// snapshot maps every file under dir to a hash of its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changedFiles lists the paths created, removed or changed between two
// snapshots, sorted.
func changedFiles(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, h := range after {
		if b, ok := before[p]; !ok {
			t.Errorf("%s: file %s was created", what, p)
		} else if b != h {
			t.Errorf("%s: file %s was modified", what, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s: file %s was removed", what, p)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// segmentFiles lists the files of a table's segment directory.
func segmentFiles(t *testing.T, tableDir string) []string {
	t.Helper()
	var out []string
	for _, sub := range []string{"data/_managed/append", "_coverage/segments", "_coverage/table"} {
		entries, err := os.ReadDir(filepath.Join(tableDir, filepath.FromSlash(sub)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			out = append(out, sub+"/"+e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// onDiskBytes sums the sizes of a table's parquet segments.
func onDiskBytes(t *testing.T, tableDir string) int64 {
	t.Helper()
	var n int64
	for _, p := range segmentFiles(t, tableDir) {
		if strings.HasSuffix(p, ".parquet") {
			st, err := os.Stat(filepath.Join(tableDir, filepath.FromSlash(p)))
			if err != nil {
				t.Fatal(err)
			}
			n += st.Size()
		}
	}
	return n
}
