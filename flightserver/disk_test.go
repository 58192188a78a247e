package flightserver

import (
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
