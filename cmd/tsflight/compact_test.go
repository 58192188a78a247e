// Tests of the compact command through the real binary and server.

package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestCompactCommand(t *testing.T) {
	f := newCLIFixture(t)
	scanBefore := cliLines(t, f.ok(t, "scan", "--format", "csv", cliTable))

	// A dry run lists the group and changes nothing.
	out := f.ok(t, "compact", "--dry-run", cliTable)
	lines := cliLines(t, out)
	if len(lines) != 7 || lines[0] != "table  m (version 3)" || lines[1] != "" ||
		lines[2] != "group  index_min             index_max             sources  source_bytes  rows" ||
		!strings.HasPrefix(lines[4], "    1  2024-06-01T00:00:00Z  2024-06-01T00:14:50Z        2 ") || !strings.HasSuffix(lines[4], " KiB   160") ||
		!strings.HasPrefix(lines[6], "dry run: would merge 2 segments (") || !strings.HasSuffix(lines[6], " KiB, 160 rows) in 1 group; run again without --dry-run to compact") {
		t.Fatalf("dry run:\n%s", out)
	}
	if d := f.describe(t, cliTable); d["version"] != float64(3) || d["segments"] != float64(2) {
		t.Fatalf("after the dry run: %v", d)
	}
	var res struct {
		Table   string `json:"table"`
		DryRun  bool   `json:"dry_run"`
		Version uint64 `json:"starting_version"`
		Groups  []struct {
			Sources []string `json:"sources"`
			Rows    uint64   `json:"rows"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(f.ok(t, "compact", "--dry-run", "--format", "json", cliTable)), &res); err != nil {
		t.Fatal(err)
	}
	if res.Table != cliTable || !res.DryRun || res.Version != 3 || len(res.Groups) != 1 || len(res.Groups[0].Sources) != 2 || res.Groups[0].Rows != 160 {
		t.Fatalf("json dry run: %+v", res)
	}
	csv := cliLines(t, f.ok(t, "compact", "--dry-run", "--format", "csv", cliTable))
	if len(csv) != 2 || csv[0] != "group,index_min,index_max,sources,source_bytes,rows,outputs,output_bytes" ||
		!strings.HasPrefix(csv[1], "1,2024-06-01T00:00:00Z,2024-06-01T00:14:50Z,2,") || !strings.HasSuffix(csv[1], ",160,0,0") {
		t.Fatalf("csv dry run:\n%s", strings.Join(csv, "\n"))
	}

	// The compaction: one segment, the same rows.
	out = f.ok(t, "compact", cliTable)
	lines = cliLines(t, out)
	if len(lines) != 7 || lines[0] != "table  m (version 3 → 4)" ||
		lines[2] != "group  index_min             index_max             sources  source_bytes  rows  outputs  output_bytes" ||
		!strings.Contains(lines[4], "  160        1  ") ||
		!strings.HasPrefix(lines[6], "merged 2 segments (") || !strings.Contains(lines[6], ") into 1 (") || !strings.HasSuffix(lines[6], "), 160 rows, in 1 group") {
		t.Fatalf("compact:\n%s", out)
	}
	if d := f.describe(t, cliTable); d["version"] != float64(4) || d["segments"] != float64(1) || d["rows"] != float64(160) {
		t.Fatalf("after the compaction: %v", d)
	}
	scanAfter := cliLines(t, f.ok(t, "scan", "--format", "csv", cliTable))
	slices.Sort(scanBefore)
	slices.Sort(scanAfter)
	if !slices.Equal(scanAfter, scanBefore) {
		t.Fatalf("scan after the compaction differs:\n%s", strings.Join(scanAfter, "\n"))
	}
	if out := f.ok(t, "gaps", "--start", cliTime(0), "--end", cliTime(90), "--entity", "host=b", "--format", "csv", cliTable); out != "start,end,intervals\n"+
		cliTime(10)+","+cliTime(20)+",10\n"+cliTime(30)+","+cliTime(35)+",5\n" {
		t.Fatalf("gaps after the compaction:\n%s", out)
	}

	// Again: nothing to do.
	out = f.ok(t, "compact", cliTable)
	if out != "table  m (version 4)\n\nnothing to compact: no run of at least 2 small segments\n" {
		t.Fatalf("second compact:\n%q", out)
	}
	if out := f.ok(t, "compact", "--format", "csv", cliTable); out != "group,index_min,index_max,sources,source_bytes,rows,outputs,output_bytes\n" {
		t.Fatalf("csv of a no-op: %q", out)
	}
	f.ok(t, "check", cliTable)
}

func TestCompactCommandErrors(t *testing.T) {
	f := newCLIServer(t)
	f.ok(t, "create", "--index-column", "ts", "--granularity", "10s", "t")
	f.fail(t, exitUsage, []string{"missing the table name"}, "compact")
	f.fail(t, exitUsage, []string{"--format"}, "compact", "--format", "parquet", "t")
	f.fail(t, exitUsage, []string{"--dry-run"}, "compact", "--dry-run=maybe", "t")
	f.fail(t, exitFail, []string{`"nope"`, "not found"}, "compact", "nope")
	f.fail(t, exitUnavailable, []string{"cannot reach a tsflight server"}, "compact", "--server", "grpc://"+cliClosedPort(t), "t")
	checkHelp(t, compactCmd, "--dry-run")
	// An empty table has nothing to compact.
	if out := f.ok(t, "compact", "t"); !strings.Contains(out, "nothing to compact") {
		t.Fatalf("empty table:\n%s", out)
	}
}
