// Tests of the rollback command through the real binary and server.

package main

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestRollbackCommand(t *testing.T) {
	f := newCLIFixture(t)
	scan := func() []string {
		lines := cliLines(t, f.ok(t, "scan", "--format", "csv", cliTable))
		slices.Sort(lines)
		return lines
	}
	at3 := scan()
	f.ok(t, "compact", cliTable) // version 4: one segment
	if d := f.describe(t, cliTable); d["version"] != float64(4) || d["segments"] != float64(1) {
		t.Fatalf("after the compaction: %v", d)
	}

	// A dry run says what would change and changes nothing.
	out := f.ok(t, "rollback", "--dry-run", cliTable, "2")
	if out != "table  m (version 4)\n\ndry run: rolling back to version 2 would remove 1 segment, add 1 segment; 160 rows → 102 rows; run again without --dry-run to roll back\n" {
		t.Fatalf("dry run:\n%q", out)
	}
	var res struct {
		Table     string   `json:"table"`
		DryRun    bool     `json:"dry_run"`
		Starting  uint64   `json:"starting_version"`
		Target    uint64   `json:"target_version"`
		Committed uint64   `json:"committed_version"`
		Removed   []string `json:"removed"`
		Added     []string `json:"added"`
	}
	if err := json.Unmarshal([]byte(f.ok(t, "rollback", "--dry-run", "--format", "json", cliTable, "2")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Table != cliTable || !res.DryRun || res.Starting != 4 || res.Target != 2 || res.Committed != 0 || len(res.Removed) != 1 || len(res.Added) != 1 {
		t.Fatalf("json dry run: %+v", res)
	}
	csv := f.ok(t, "rollback", "--dry-run", "--format", "csv", cliTable, "2")
	if csv != "change,segment\nremoved,"+res.Removed[0]+"\nadded,"+res.Added[0]+"\n" {
		t.Fatalf("csv dry run:\n%s", csv)
	}
	if d := f.describe(t, cliTable); d["version"] != float64(4) {
		t.Fatalf("after the dry runs: %v", d)
	}

	// The rollback to version 3 (before the compaction): the same rows.
	out = f.ok(t, "rollback", cliTable, "3")
	if out != "table  m (version 4 → 5)\n\nrolled back to the content of version 3: removed 1 segment, added 2 segments; 160 rows → 160 rows (undo: tsflight rollback m 4)\n" {
		t.Fatalf("rollback:\n%q", out)
	}
	if d := f.describe(t, cliTable); d["version"] != float64(5) || d["segments"] != float64(2) || d["rows"] != float64(160) {
		t.Fatalf("after the rollback: %v", d)
	}
	if got := scan(); !slices.Equal(got, at3) {
		t.Fatalf("scan after the rollback differs")
	}
	// To version 2: the second append's rows are gone, and can be loaded
	// again.
	f.ok(t, "rollback", cliTable, "2")
	if d := f.describe(t, cliTable); d["version"] != float64(6) || d["rows"] != float64(102) {
		t.Fatalf("after the rollback to 2: %v", d)
	}
	// Undo: back to version 5's content.
	f.ok(t, "rollback", cliTable, "5")
	if got := scan(); !slices.Equal(got, at3) {
		t.Fatalf("scan after undoing the rollback differs")
	}
	f.ok(t, "check", cliTable)

	// Refusals from the server: exit 1 with its message.
	f.fail(t, exitFail, []string{"version 7 is the table's newest version", "nothing to roll back"}, "rollback", cliTable, "7")
	f.fail(t, exitFail, []string{"version 99 does not exist"}, "rollback", cliTable, "99")
	f.ok(t, "add-columns", cliTable, "temp:float64")
	f.fail(t, exitFail, []string{"cannot roll back to version 7: columns were added since (temp)"}, "rollback", cliTable, "7")
	f.fail(t, exitFail, []string{`"nope"`, "not found"}, "rollback", "nope", "2")
}

func TestRollbackCommandUsage(t *testing.T) {
	f := newCLIServer(t)
	f.fail(t, exitUsage, []string{"missing the table name and the version"}, "rollback")
	f.fail(t, exitUsage, []string{"the table name is empty"}, "rollback", "", "2")
	f.fail(t, exitUsage, []string{"missing the version to roll back to"}, "rollback", "t")
	f.fail(t, exitUsage, []string{`unexpected argument "x" after the version`}, "rollback", "t", "2", "x")
	for _, v := range []string{"0", "-1", "two", "2.5", ""} {
		f.fail(t, exitUsage, []string{"VERSION must be a positive integer", `"` + v + `"`}, "rollback", "t", v)
	}
	f.fail(t, exitUsage, []string{"--format"}, "rollback", "--format", "parquet", "t", "2")
	f.fail(t, exitUsage, []string{"--dry-run"}, "rollback", "--dry-run=maybe", "t", "2")
	f.fail(t, exitUnavailable, []string{"cannot reach a tsflight server"}, "rollback", "--server", "grpc://"+cliClosedPort(t), "t", "2")
	checkHelp(t, rollbackCmd, "--dry-run", "keep window")
}
