package flightserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat"
)

// The maintenance loop persists the last-value index of a table that
// moved, and a handle opened afterwards starts from it with the right rows.
func TestMaintenanceKeepsLastValues(t *testing.T) {
	ts, ctx := startWithCPU(t)
	startMaintenance(t, ts, &MaintenanceOptions{Interval: 50 * time.Millisecond, MinSmallSegments: 1000, BytesPerSecond: -1})
	ts.putSmall(ctx, 0, 3)
	tb, err := ts.svc.Table(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	v := tb.State().Version
	file := filepath.Join(ts.root, "cpu", filepath.FromSlash(tableformat.LastValuesPath(v)))
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(file); return err == nil }) {
		t.Fatalf("no last-value index of version %d after the appends", v)
	}
	// A new handle answers from it: the same rows as the server's handle.
	fresh, err := tableformat.Open(context.Background(), tb.FS(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	a, err := fresh.LastValues(ctx, nil, tableformat.LastOptions{Alloc: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := tb.LastValues(ctx, nil, tableformat.LastOptions{Alloc: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if a.NumRows() == 0 || a.NumRows() != b.NumRows() {
		t.Fatalf("%d rows from the persisted index, %d from the server's", a.NumRows(), b.NumRows())
	}
	for c := range int(a.NumCols()) {
		for r := range int(a.NumRows()) {
			if a.Column(c).ValueStr(r) != b.Column(c).ValueStr(r) {
				t.Fatalf("row %d column %s: %s vs %s", r, a.Schema().Field(c).Name, a.Column(c).ValueStr(r), b.Column(c).ValueStr(r))
			}
		}
	}
}
