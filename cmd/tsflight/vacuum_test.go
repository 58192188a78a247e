// Tests of the vacuum command through the real binary and server.

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/internal/testkit"
)

// cliPlantStray writes, in table dir, the files an append killed before
// its commit leaves (a copy of a live segment under a new name, two
// sidecars, a commit temporary file) and returns their paths, sorted.
func cliPlantStray(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "data", "_managed", "append", "*.parquet"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	const id = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	files := map[string][]byte{
		"data/_managed/append/" + id + ".parquet":                                    data,
		"_coverage/segments/segcov-0123456789abcdef0123456789abcdef-" + id + ".roar": []byte("roar"),
		"_coverage/table/4-tblcov-0123456789abcdef0123456789abcdef-" + id + ".roar":  []byte("roar"),
		"_timeseries_log/.0000000004.json.tmp-00112233445566ff":                      []byte(`{"version":4}`),
	}
	return testkit.WriteFiles(t, dir, files)
}

func TestVacuumCommand(t *testing.T) {
	f := newCLIFixture(t)
	dir := filepath.Join(f.root, cliTable)
	stray := cliPlantStray(t, dir)

	// The default cutoff keeps young files.
	out := f.ok(t, "vacuum", cliTable)
	lines := cliLines(t, out)
	if lines[0] != "table   m (version 3)" || !strings.HasPrefix(lines[1], "cutoff  files modified before ") ||
		!strings.Contains(out, "\ndry run: nothing to remove\n") || !strings.Contains(out, "9 files kept: 5 referenced by commits, 4 other\n") {
		t.Fatalf("default dry run:\n%s", out)
	}
	for _, p := range stray {
		if !strings.Contains(out, p) {
			t.Fatalf("dry run does not list %s:\n%s", p, out)
		}
	}
	if strings.Count(out, "within_retention") != 4 || strings.Contains(out, "referenced_by_commit") {
		t.Fatalf("default dry run lists:\n%s", out)
	}

	// A cutoff of now: the four files are removable; json and csv agree.
	out = f.ok(t, "vacuum", "--older-than", "0s", cliTable)
	if !strings.Contains(out, "\ndry run: 4 files removable (") || strings.Count(out, "  removable  ") != 4 {
		t.Fatalf("dry run at now:\n%s", out)
	}
	var res struct {
		Applied   bool `json:"applied"`
		Artifacts []struct {
			Path, Disposition, Reason string
		} `json:"artifacts"`
		Totals map[string]int64 `json:"totals"`
	}
	if err := json.Unmarshal([]byte(f.ok(t, "vacuum", "--older-than", time.Now().UTC().Format(time.RFC3339Nano), "--format", "json", cliTable)), &res); err != nil {
		t.Fatal(err)
	}
	var removable []string
	for _, a := range res.Artifacts {
		if a.Disposition == "removable" {
			removable = append(removable, a.Path)
		}
	}
	if res.Applied || strings.Join(removable, " ") != strings.Join(stray, " ") || res.Totals["files"] != 9 || res.Totals["referenced"] != 5 {
		t.Fatalf("json dry run: %+v", res)
	}
	csv := cliLines(t, f.ok(t, "vacuum", "--older-than", "0s", "--format", "csv", cliTable))
	if len(csv) != 10 || csv[0] != "path,kind,size,modified,disposition,reason" || strings.Count(strings.Join(csv, "\n"), ",referenced_by_commit") != 5 {
		t.Fatalf("csv:\n%s", strings.Join(csv, "\n"))
	}
	for _, p := range stray {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Fatalf("a dry run removed %s", p)
		}
	}
	// --max-rows trims the listing.
	if out := f.ok(t, "vacuum", "--older-than", "0s", "--max-rows", "1", cliTable); !strings.Contains(out, "… 3 more (--max-rows 0 shows all)\n") {
		t.Fatalf("--max-rows 1:\n%s", out)
	}

	// Apply deletes them; the table reads the same and takes an append.
	out = f.ok(t, "vacuum", "--older-than", "0s", "--apply", cliTable)
	if !strings.Contains(out, "\ndeleted 4 files (") || strings.Count(out, "  deleted  ") != 4 {
		t.Fatalf("apply:\n%s", out)
	}
	for _, p := range stray {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); !os.IsNotExist(err) {
			t.Fatalf("%s survived --apply: %v", p, err)
		}
	}
	if out := f.ok(t, "vacuum", "--older-than", "0s", cliTable); !strings.Contains(out, "dry run: nothing to remove") || !strings.Contains(out, "5 files kept: 5 referenced by commits, 0 other") {
		t.Fatalf("after apply:\n%s", out)
	}
	if d := f.describe(t, cliTable); d["rows"] != float64(160) || d["version"] != float64(3) {
		t.Fatalf("table after vacuum: %v", d)
	}
}

func TestVacuumCommandErrors(t *testing.T) {
	f := newCLIServer(t)
	f.ok(t, "create", "--index-column", "ts", "--granularity", "10s", "t")
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	f.fail(t, exitUsage, []string{"missing the table name"}, "vacuum")
	f.fail(t, exitUsage, []string{`--older-than "yesterday" is neither an RFC 3339 time nor a duration`}, "vacuum", "--older-than", "yesterday", "t")
	f.fail(t, exitUsage, []string{`--older-than "-1h" is a negative duration`}, "vacuum", "--older-than", "-1h", "t")
	f.fail(t, exitUsage, []string{"--format"}, "vacuum", "--format", "parquet", "t")
	f.fail(t, exitFail, []string{"older_than", "future", "invalid argument"}, "vacuum", "--older-than", future, "t")
	f.fail(t, exitFail, []string{`"nope"`, "not found"}, "vacuum", "nope")
	checkHelp(t, vacuumCmd, "--apply")
	// An empty table has nothing to vacuum.
	if out := f.ok(t, "vacuum", "--older-than", "0s", "--apply", "t"); !strings.Contains(out, "deleted 0 files (0 B)") {
		t.Fatalf("empty table:\n%s", out)
	}
}
