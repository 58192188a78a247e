//go:build duckdb_arrow

package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/bench/tsbs"
)

// duck serve answers query after query from one process, a bad query
// with its error and without ending, and exits at its input's end.
func TestDuckServe(t *testing.T) {
	dir := t.TempDir()
	p := tsbs.DefaultParams()
	p.Hosts, p.Duration = 3, time.Hour
	files, err := p.WriteParquet(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var rows int64
	for _, f := range files {
		paths = append(paths, f.Path)
		rows += f.Rows
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d, err := startDuckServe(self, map[string]any{"root": dir, "files": paths})
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	if !strings.HasPrefix(d.version, "v") {
		t.Errorf("DuckDB version %q", d.version)
	}
	for range 2 {
		a, err := d.query("SELECT count(*) AS n FROM cpu", true)
		if err != nil {
			t.Fatal(err)
		}
		if a.Rows != 1 || len(a.Result) != 1 || a.Result[0][0] != float64(rows) {
			t.Fatalf("count(*): %d rows %v, want [[%d]]", a.Rows, a.Result, rows)
		}
		if !(a.Secs > 0) || a.PeakRSS <= 0 {
			t.Errorf("answer's time %v s, peak RSS %d", a.Secs, a.PeakRSS)
		}
	}
	if _, err := d.query("SELECT nope FROM cpu", false); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a bad query: %v, want DuckDB's error naming the column", err)
	}
	a, err := d.query("SELECT hostname FROM cpu WHERE hostname = 'host_1' LIMIT 2", false)
	if err != nil || a.Rows != 2 || a.Result != nil {
		t.Errorf("after an error: %d rows, result %v, %v; want 2 rows, no result kept", a.Rows, a.Result, err)
	}
	if err := d.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
