package flightserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/internal/testkit"
)

// root/t (v5, 400 rows) is swapped for another table (v2, 50 rows) behind
// the server's back: describe, scan and append must answer for the new
// table, the append must land as its version 3, and the 0.9.0 package must
// then open the table and count 60 rows.
func TestReplacedTableServedFresh(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "t")
	for i := range 4 {
		ts.mustPut(ctx, pathDesc("t"), genRows(t0.Add(time.Duration(i)*time.Hour), 10, 10), 1000, uint64(i+2))
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "t"})
	if d["version"] != float64(5) || d["rows"] != float64(400) {
		t.Fatalf("describe before the swap: %v", d)
	}
	// The replacement: another table, written through the same server.
	ts.createTSBS(ctx, "other")
	newRows := genRows(t0.Add(24*time.Hour), 5, 10)
	ts.mustPut(ctx, pathDesc("other"), newRows, 1000, 2)
	live := filepath.Join(ts.root, "t")
	if err := os.RemoveAll(live); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(ts.root, "other"), live); err != nil {
		t.Fatal(err)
	}

	d = ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "t"})
	if d["version"] != float64(2) || d["rows"] != float64(50) {
		t.Fatalf("describe after the swap: version %v rows %v, want 2 and 50", d["version"], d["rows"])
	}
	got, err := ts.fetchAll(ctx, ts.info(ctx, pathDesc("t")))
	if err != nil {
		t.Fatalf("scan after the swap: %v", err)
	}
	sameRows(t, "scan after the swap", got.rows, newRows)

	// Rows that overlapped only the old table append fine, as version 3.
	more := genRows(t0, 1, 10)
	ts.mustPut(ctx, pathDesc("t"), more, 1000, 3)
	// Rows overlapping the new table are refused.
	batches := buildBatches(ts.cliMem, newRows[:1], 1000)
	_, err = ts.put(ctx, pathDesc("t"), tsbsSchema, batches...)
	releaseAll(batches)
	if err == nil {
		t.Fatal("a put overlapping the new table was accepted")
	}
	d = ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "t"})
	if d["version"] != float64(3) || d["rows"] != float64(60) {
		t.Fatalf("describe after the append: version %v rows %v, want 3 and 60", d["version"], d["rows"])
	}
	if _, err := os.Stat(filepath.Join(live, "_timeseries_log", "0000000006.json")); !os.IsNotExist(err) {
		t.Fatalf("commit 6 was written on top of the new table: %v", err)
	}
	if py := testkit.CrashPython(t); py != "" {
		if n := testkit.PythonRowCount(t, py, live); n != 60 {
			t.Fatalf("timeseries-table-format counts %d rows, want 60", n)
		}
	}
}

// A segment file swapped for another valid segment of the table (fewer
// rows, another size) is not served: DoGet answers DATA_LOSS naming the
// segment's table-relative path, and no server path.
func TestSwappedSegmentIsDataLoss(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "s")
	a := ts.mustPut(ctx, pathDesc("s"), genRows(t0, 50, 10), 1000, 2)
	b := ts.mustPut(ctx, pathDesc("s"), genRows(t0.Add(time.Hour), 40, 10), 1000, 3)
	dir := filepath.Join(ts.root, "s")
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(b.Segment)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(a.Segment)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ts.fetchAll(ctx, ts.info(ctx, pathDesc("s")))
	wantCode(t, "scan of a swapped segment", err, codes.DataLoss, a.Segment, "tsflight check")
	if strings.Contains(err.Error(), ts.root) {
		t.Fatalf("the error names a server path: %v", err)
	}
}
