package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/internal/testkit"

	"github.com/tsflight/tsflight/tableformat"
)

// TestTablesDamaged: tsflight tables against a live server whose root
// holds a healthy table (m), one whose CURRENT holds garbage (garbled),
// one whose commit 1 is gone (nocommit) and a phantom log directory
// (ghost) lists m and both damaged tables, marked damaged with the reason,
// in every format, leaves the phantom out, and exits 1 naming the damaged
// tables after printing the whole listing. Without the fix the damaged
// tables were silently left out and the command succeeded.
func TestTablesDamaged(t *testing.T) {
	f := newCLIFixture(t)
	testkit.CopyDir(t, filepath.Join(f.root, cliTable), filepath.Join(f.root, "garbled"))
	if err := os.WriteFile(filepath.Join(f.root, "garbled", tableformat.LogDir, "CURRENT"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.CopyDir(t, filepath.Join(f.root, cliTable), filepath.Join(f.root, "nocommit"))
	if err := os.Remove(filepath.Join(f.root, "nocommit", filepath.FromSlash(tableformat.CommitPath(1)))); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.root, "ghost", tableformat.LogDir), 0o755); err != nil {
		t.Fatal(err)
	}
	wantErr := "tsflight tables: error: 2 tables of 3 cannot be read: garbled, nocommit (tsflight check TABLE says what is wrong)\n"
	for _, format := range []string{"table", "csv", "json"} {
		stdout, stderr, code := f.run(t, "tables", "--format", format)
		if code != 1 || stderr != wantErr {
			t.Errorf("tables --format %s: exit %d, stderr %q; want 1 and %q", format, code, stderr, wantErr)
		}
		if strings.Contains(stdout, "ghost") || strings.Contains(stdout, f.root) {
			t.Errorf("tables --format %s lists the phantom or names the root:\n%s", format, stdout)
		}
		lines := cliLines(t, stdout)
		switch format {
		case "table":
			if len(lines) != 5 || !strings.HasPrefix(lines[0], "table ") || !strings.HasSuffix(lines[0], "columns  state    error") ||
				strings.Join(strings.Fields(lines[2])[:5], " ") != "garbled - - - damaged" ||
				!strings.HasSuffix(lines[2], `  damaged  corrupt table: _timeseries_log/CURRENT: CURRENT holds "garbage", not a version number`) ||
				!strings.HasPrefix(lines[3], "m ") || !strings.HasSuffix(lines[3], "4  ok") ||
				!strings.Contains(lines[4], "nocommit") || !strings.Contains(lines[4], "damaged  corrupt table: _timeseries_log/0000000001.json") {
				t.Errorf("tables:\n%s", stdout)
			}
		case "csv":
			if len(lines) != 4 || lines[0] != "table,rows,bytes,columns,state,error" ||
				lines[1] != `garbled,,,,damaged,"corrupt table: _timeseries_log/CURRENT: CURRENT holds ""garbage"", not a version number"` ||
				!strings.HasPrefix(lines[2], "m,160,") || !strings.HasSuffix(lines[2], ",4,ok,") || !strings.HasPrefix(lines[3], "nocommit,,,,damaged,") {
				t.Errorf("tables --format csv:\n%s", stdout)
			}
		case "json":
			if len(lines) != 3 {
				t.Fatalf("tables --format json:\n%s", stdout)
			}
			var r map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
				t.Fatal(err)
			}
			if r["table"] != "garbled" || r["rows"] != nil || r["bytes"] != nil || r["columns"] != nil || r["state"] != "damaged" || r["code"] != "DATA_LOSS" ||
				!strings.HasPrefix(r["error"].(string), `table "garbled": corrupt table: _timeseries_log/CURRENT`) {
				t.Errorf("tables --format json, garbled: %s", lines[0])
			}
			r = nil
			if err := json.Unmarshal([]byte(lines[1]), &r); err != nil {
				t.Fatal(err)
			}
			if len(r) != 4 || r["table"] != "m" || r["rows"] != 160.0 || r["columns"] != 4.0 {
				t.Errorf("tables --format json, m: %s", lines[1])
			}
		}
	}
}
