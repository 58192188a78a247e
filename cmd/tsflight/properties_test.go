// Tests of the set-properties command, and of vacuum --keep-snapshots on a
// table where a commit replaced a segment, through the real binary and
// server.

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// cliReplaceSegment commits, from the test process, the replacement of
// table dir's first segment by a byte copy of it under new names (same
// rows, so the table reads the same), as a compaction's commit replaces
// segments. It returns the replaced segment's two files.
func cliReplaceSegment(t *testing.T, dir string) []string {
	t.Helper()
	ctx := context.Background()
	tb, err := tableformat.Open(ctx, storage.Local(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := tb.State()
	old := st.Segments[0]
	const id = "5d1c9e2a-7425-40de-944b-e07fc1f90ae7"
	nw := old
	nw.Path = "data/_managed/append/" + id + ".parquet"
	content := strings.TrimPrefix(filepath.Base(old.CoveragePath), "segcov-")[:32]
	nw.CoveragePath = "_coverage/segments/segcov-" + content + "-" + id + ".roar"
	for from, to := range map[string]string{old.Path: nw.Path, old.CoveragePath: nw.CoveragePath} {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(from)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(to)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.Commit(ctx, st.Version, []tableformat.Action{tableformat.RemoveSegment{Path: old.Path}, tableformat.AddSegment{Segment: nw}}); err != nil {
		t.Fatal(err)
	}
	return []string{old.Path, old.CoveragePath}
}

func TestSetPropertiesCommand(t *testing.T) {
	f := newCLIFixture(t)
	out := f.ok(t, "set-properties", cliTable, "tsflight.keep-snapshots=1h", "owner=ops team", "note=a=b")
	want := cliText(
		"set the properties of m (version 4)",
		"",
		"property                 value",
		"-----------------------  --------",
		"note                     a=b",
		"owner                    ops team",
		"tsflight.keep-snapshots  1h",
	)
	if out != want {
		t.Fatalf("set-properties:\n%s\nwant:\n%s", out, want)
	}
	d := f.describe(t, cliTable)
	if p, _ := json.Marshal(d["properties"]); string(p) != `{"note":"a=b","owner":"ops team","tsflight.keep-snapshots":"1h"}` || d["version"] != float64(4) {
		t.Fatalf("describe: properties %s, version %v", p, d["version"])
	}
	out = f.ok(t, "set-properties", "--format", "json", cliTable, "owner=", "note=")
	var res struct {
		Table      string            `json:"table"`
		Version    int64             `json:"version"`
		Properties map[string]string `json:"properties"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil || res.Table != cliTable || res.Version != 5 || len(res.Properties) != 1 || res.Properties["tsflight.keep-snapshots"] != "1h" {
		t.Fatalf("set-properties --format json: %q (%v)", out, err)
	}
	if out := f.ok(t, "set-properties", cliTable, "tsflight.keep-snapshots="); out != "set the properties of m (version 6)\nthe table has no properties\n" {
		t.Fatalf("remove the last: %q", out)
	}

	f.fail(t, exitUsage, []string{"missing the table name"}, "set-properties")
	f.fail(t, exitUsage, []string{"missing the properties to set"}, "set-properties", cliTable)
	f.fail(t, exitUsage, []string{`property "owner" is not NAME=VALUE`}, "set-properties", cliTable, "owner")
	f.fail(t, exitUsage, []string{`property "=x" is not NAME=VALUE`}, "set-properties", cliTable, "=x")
	f.fail(t, exitUsage, []string{`property "owner" is given twice`}, "set-properties", cliTable, "owner=a", "owner=b")
	f.fail(t, exitUsage, []string{"--format"}, "set-properties", "--format", "csv", cliTable, "owner=a")
	f.fail(t, exitFail, []string{`"tsflight.keep-snapshot"`, "reserved", "invalid argument"}, "set-properties", cliTable, "tsflight.keep-snapshot=1h")
	f.fail(t, exitFail, []string{"tsflight.keep-snapshots", `"a week"`, "invalid argument"}, "set-properties", cliTable, "tsflight.keep-snapshots=a week")
	f.fail(t, exitFail, []string{`"nope"`, "not found"}, "set-properties", "nope", "owner=x")
	if d := f.describe(t, cliTable); d["version"] != float64(6) {
		t.Fatalf("refused commands committed: version %v", d["version"])
	}
	checkHelp(t, setPropertiesCmd, "tsflight.keep-snapshots")
}

func TestVacuumCommandKeepSnapshots(t *testing.T) {
	f := newCLIFixture(t)
	dir := filepath.Join(f.root, cliTable)
	replaced := cliReplaceSegment(t, dir) // version 4
	f.ok(t, "set-properties", cliTable, "tsflight.keep-snapshots=1h")

	// Inside the table's window the replaced files are kept.
	out := f.ok(t, "vacuum", cliTable)
	lines := cliLines(t, out)
	if !strings.HasPrefix(lines[2], "expiry  versions replaced before ") || !strings.HasSuffix(lines[2], " (keep 1h0m0s)") ||
		!strings.Contains(out, "dry run: nothing to remove") || strings.Contains(out, "expired") {
		t.Fatalf("inside the window:\n%s", out)
	}
	// --keep-snapshots 0s expires them.
	out = f.ok(t, "vacuum", "--keep-snapshots", "0s", cliTable)
	if !strings.Contains(out, " (keep 0s)\n") || !strings.Contains(out, "\ndry run: 2 files removable (") || !strings.Contains(out, "; 2 of expired versions); run again with --apply") ||
		len(regexp.MustCompile(`(?m)  removable +expired$`).FindAllString(out, -1)) != 2 {
		t.Fatalf("--keep-snapshots 0s:\n%s", out)
	}
	for _, p := range replaced {
		if !strings.Contains(out, p) {
			t.Fatalf("the dry run does not list %s:\n%s", p, out)
		}
	}
	out = f.ok(t, "vacuum", "--keep-snapshots", "0s", "--apply", cliTable)
	if !strings.Contains(out, "\ndeleted 2 files (") || !strings.Contains(out, "; 2 of expired versions)") {
		t.Fatalf("--apply:\n%s", out)
	}
	for _, p := range replaced {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); !os.IsNotExist(err) {
			t.Fatalf("%s survived --apply: %v", p, err)
		}
	}
	if d := f.describe(t, cliTable); d["rows"] != float64(160) || d["version"] != float64(5) {
		t.Fatalf("table after vacuum: %v", d)
	}
	var res struct {
		KeepSnapshots string           `json:"keep_snapshots"`
		Totals        map[string]int64 `json:"totals"`
	}
	if err := json.Unmarshal([]byte(f.ok(t, "vacuum", "--keep-snapshots", "90m", "--format", "json", cliTable)), &res); err != nil || res.KeepSnapshots != "1h30m0s" || res.Totals["expired"] != 0 {
		t.Fatalf("--format json: %+v, %v", res, err)
	}

	f.fail(t, exitUsage, []string{`--keep-snapshots "a week" is not a duration`}, "vacuum", "--keep-snapshots", "a week", cliTable)
	f.fail(t, exitUsage, []string{`--keep-snapshots "-1h" is negative`}, "vacuum", "--keep-snapshots", "-1h", cliTable)
	stdout, _, _ := runCLI(t, nil, "vacuum", "--help")
	if !strings.Contains(stdout, "--keep-snapshots") {
		t.Fatalf("vacuum --help:\n%s", stdout)
	}
}
