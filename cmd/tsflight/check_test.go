// Tests of the check command through the real binary and server.

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// cliTableFiles returns the first live segment and the table coverage
// snapshot of the table in dir (table-relative).
func cliTableFiles(t *testing.T, dir string) (segment, snapshot string) {
	t.Helper()
	tb, err := tableformat.Open(context.Background(), storage.Local(dir), &tableformat.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	st := tb.State()
	return st.Segments[0].Path, st.Coverage.Path
}

func TestCheckCommand(t *testing.T) {
	f := newCLIFixture(t)
	dir := filepath.Join(f.root, cliTable)
	segment, snapshot := cliTableFiles(t, dir)
	full := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }

	// A sound table: exit 0, with and without names.
	for _, args := range [][]string{{"check"}, {"check", cliTable}} {
		out := f.ok(t, args...)
		if out != cliText("table m (version 3, 2 segments, 160 rows): ok", "", "1 table checked, no problems") {
			t.Fatalf("tsflight %q:\n%s", args, out)
		}
	}

	// Damage: CURRENT lags and a segment is gone.
	segBytes, err := os.ReadFile(full(segment))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(full(segment)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full(tableformat.LogDir+"/CURRENT"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := f.run(t, "check", cliTable)
	if code != exitFail || stderr != "tsflight check: error: problems found in 1 of 1 table\n" {
		t.Fatalf("check of a damaged table: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	for _, want := range []string{
		"table m (version 3, 2 segments, 160 rows): 2 problems\n",
		"  warning  current_lagging _timeseries_log/CURRENT (commit 3)\n",
		"  error    segment_missing " + segment + " (commit 2)\n",
		"           problem: CURRENT says 2 but commits up to 3 are valid",
		"           to do:   restore the file from a backup",
		"           to do:   tsflight check --repair republishes CURRENT as 3",
		"\n1 of 1 table with problems\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("check output lacks %q:\n%s", want, stdout)
		}
	}
	t.Logf("check of the damaged table:\n%s", stdout)
	// json: the server's answer, exit 1 too.
	stdout, _, code = f.run(t, "check", "--format", "json", cliTable)
	var res struct {
		OK     bool `json:"ok"`
		Tables []struct {
			Table    string `json:"table"`
			OK       bool   `json:"ok"`
			Findings []struct {
				Code, Path string
				Repaired   bool
			} `json:"findings"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitFail || res.OK || len(res.Tables) != 1 || len(res.Tables[0].Findings) != 2 {
		t.Fatalf("check --format json: exit %d, %v, %+v\n%s", code, err, res, stdout)
	}

	// --repair fixes CURRENT, not the segment: still exit 1.
	stdout, stderr, code = f.run(t, "check", "--repair", cliTable)
	if code != exitFail || stderr != "tsflight check: error: problems remain in 1 of 1 table\n" ||
		!strings.Contains(stdout, "  repaired current_lagging _timeseries_log/CURRENT (commit 3)\n           problem: ") ||
		!strings.Contains(stdout, "           repair:  republished CURRENT as 3\n") ||
		!strings.Contains(stdout, "(version 3, 2 segments, 160 rows): 1 problem\n") ||
		!strings.Contains(stdout, "  error    segment_missing "+segment) {
		t.Fatalf("check --repair: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	t.Logf("check --repair:\n%s", stdout)
	if b, _ := os.ReadFile(full(tableformat.LogDir + "/CURRENT")); string(b) != "3\n" {
		t.Fatalf("CURRENT after --repair: %q", b)
	}
	if _, err := os.Stat(full(segment)); !os.IsNotExist(err) {
		t.Fatalf("--repair made a segment: %v", err)
	}
	// The segment restored from the "backup": sound again.
	if err := os.WriteFile(full(segment), segBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	f.ok(t, "check", cliTable)

	// A lost segment-union marker (the file the coverage pointer names
	// since the first append) is repaired: exit 0, no new version.
	if err := os.Remove(full(snapshot)); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = f.run(t, "check")
	if code != exitFail || !strings.Contains(stdout, "  warning  table_coverage_missing "+snapshot+" (commit 2)\n") {
		t.Fatalf("check without the marker: exit %d:\n%s", code, stdout)
	}
	out := f.ok(t, "check", "--repair")
	if !strings.Contains(out, "table m (version 3, 2 segments, 160 rows): ok after repair\n") ||
		!strings.Contains(out, "  repaired table_coverage_missing "+snapshot) ||
		!strings.Contains(out, "wrote the segment-union marker") || !strings.HasSuffix(out, "\n1 table checked, no problems\n") {
		t.Fatalf("check --repair of the marker:\n%s", out)
	}
	if out := f.ok(t, "check", cliTable); !strings.HasPrefix(out, "table m (version 3, 2 segments, 160 rows): ok\n") {
		t.Fatalf("check after the repair:\n%s", out)
	}
	if d := f.describe(t, cliTable); d["rows"] != float64(160) || d["version"] != float64(3) {
		t.Fatalf("table after the repair: %v", d)
	}
}

func TestCheckCommandErrors(t *testing.T) {
	f := newCLIFixture(t)
	f.fail(t, exitFail, []string{`table "nope"`, "not found"}, "check", cliTable, "nope")
	f.fail(t, exitUsage, []string{"--format"}, "check", "--format", "csv")
	f.fail(t, exitUsage, []string{"a table name is empty"}, "check", "")
	f.fail(t, exitUsage, []string{"flag provided but not defined: --apply"}, "check", "--apply")
	addr := cliClosedPort(t)
	stdout, stderr, code := runCLI(t, nil, "check", "--server", "grpc://"+addr)
	cliCheckFailure(t, []string{"check"}, stdout, stderr, code, exitUnavailable, []string{"cannot reach a tsflight server at " + addr})

	stdout, stderr, code = runCLI(t, nil, "help", "check")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage:\n  "+checkCmd.Usage+"\n") ||
		!strings.Contains(stdout, "Example:\n  tsflight check\n  tsflight check --repair cpu mem\n") || !strings.Contains(stdout, "--repair") {
		t.Fatalf("tsflight help check: exit %d, stderr %q:\n%s", code, stderr, stdout)
	}
	if stdout, _, _ := runCLI(t, nil, "--help"); !strings.Contains(stdout, "\n  check ") {
		t.Fatalf("tsflight --help does not list check:\n%s", stdout)
	}
}
