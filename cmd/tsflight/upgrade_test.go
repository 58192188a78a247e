// Tests of the upgrade command through the real binary and server, on a
// table written by timeseries-table-format 0.4.0 (testdata/format6).

package main

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/internal/testkit"

	"github.com/tsflight/tsflight/tableformat"
)

func TestUpgradeCommand(t *testing.T) {
	f := newCLIServer(t)
	src := filepath.Join("..", "..", "testdata", "format6", "tables", "ts_entity")
	if out, err := exec.Command("cp", "-a", src, filepath.Join(f.root, "old")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	scanBefore := cliLines(t, f.ok(t, "scan", "--format", "csv", "old"))
	if len(scanBefore) != 1+17 {
		t.Fatalf("scan of the format-6 table: %d lines, want a header and the fixture's 17 rows", len(scanBefore))
	}
	desc := f.ok(t, "describe", "old")
	if !strings.Contains(desc, "format    6, read-only until upgraded: tsflight upgrade old\n") {
		t.Fatalf("describe of a format-6 table:\n%s", desc)
	}
	if d := f.describe(t, "old"); d["format"].(map[string]any)["needs_upgrade"] != true {
		t.Fatalf("describe json: %v", d)
	}
	f.fail(t, exitFail, []string{"format-6", "tsflight upgrade TABLE"}, "compact", "old")

	before := testkit.Snapshot(t, f.root)
	out := f.ok(t, "upgrade", "--dry-run", "old")
	lines := cliLines(t, out)
	if len(lines) < 6 || lines[0] != "table  old (version 5)" || !strings.HasPrefix(lines[4], "convert-log  planned  convert 5 format-6 commits to protocol 7") ||
		!strings.HasPrefix(lines[5], "compact      planned  merge ") || lines[len(lines)-1] != "dry run: nothing changed; run again without --dry-run to upgrade" {
		t.Fatalf("dry run:\n%s", out)
	}
	csv := cliLines(t, f.ok(t, "upgrade", "--dry-run", "--format", "csv", "old"))
	if len(csv) != 4 || csv[0] != "step,state,detail" || !strings.HasPrefix(csv[1], "convert-log,planned,") ||
		!strings.HasPrefix(csv[3], "last-values,planned,write the last-value index") {
		t.Fatalf("csv dry run:\n%s", strings.Join(csv, "\n"))
	}
	if after := testkit.Snapshot(t, f.root); !maps.Equal(after, before) {
		t.Fatalf("the dry run changed files:\nbefore %v\nafter  %v", before, after)
	}

	var res struct {
		Converted uint64 `json:"converted_commits"`
		Backup    string `json:"backup"`
		Committed uint64 `json:"committed_version"`
	}
	if err := json.Unmarshal([]byte(f.ok(t, "upgrade", "--format", "json", "old")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Converted != 5 || !strings.HasPrefix(res.Backup, "_timeseries_log.format6-") || res.Committed != 6 {
		t.Fatalf("upgrade: %+v", res)
	}
	for p, sum := range before {
		if strings.HasPrefix(p, filepath.Join("old", "_timeseries_log")+"/") {
			continue
		}
		if after := testkit.Snapshot(t, f.root); after[p] != sum {
			t.Errorf("%s changed by the upgrade", p)
		}
	}
	if d := f.describe(t, "old"); d["format"].(map[string]any)["needs_upgrade"] != false || d["version"] != 6.0 {
		t.Fatalf("describe after the upgrade: %v", d)
	}
	scanAfter := cliLines(t, f.ok(t, "scan", "--format", "csv", "old"))
	slices.Sort(scanBefore)
	slices.Sort(scanAfter)
	if !slices.Equal(scanAfter, scanBefore) {
		t.Fatalf("scan after the upgrade differs:\n%s", strings.Join(scanAfter, "\n"))
	}
	// The upgrade wrote the last-value index of its version.
	if _, err := os.Stat(filepath.Join(f.root, "old", filepath.FromSlash(tableformat.LastValuesPath(6)))); err != nil {
		t.Fatalf("no last-value index after the upgrade: %v", err)
	}
	// Again: protocol 7 already, nothing to compact.
	out = f.ok(t, "upgrade", "old")
	if !strings.Contains(out, "convert-log  not-needed  the log is protocol 7 already") || !strings.HasSuffix(out, "the table is protocol 7 already: nothing converted\n") {
		t.Fatalf("second upgrade:\n%s", out)
	}
	f.ok(t, "check", "old")

	f.fail(t, exitUsage, []string{"missing the table name"}, "upgrade")
	f.fail(t, exitUsage, []string{"--dry-run"}, "upgrade", "--dry-run=maybe", "old")
	f.fail(t, exitFail, []string{`"nope"`, "not found"}, "upgrade", "nope")
}
