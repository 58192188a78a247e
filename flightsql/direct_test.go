//go:build duckdb_arrow

package flightsql

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Direct runs SQL with the server's settings: it reads and writes Parquet
// under its root, refuses paths outside it, and is unusable once closed.
func TestDirect(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := OpenDirect(ctx, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "x.parquet")
	if err := d.Exec(ctx, "COPY (SELECT range AS n FROM range(1000)) TO "+QuoteString(out)+" (FORMAT parquet)"); err != nil {
		t.Fatalf("COPY: %v", err)
	}
	rdr, err := d.Query(ctx, "SELECT sum(n) AS s, current_setting('TimeZone') AS tz FROM read_parquet("+QuoteString(out)+")")
	if err != nil {
		t.Fatal(err)
	}
	if !rdr.Next() {
		t.Fatalf("no result: %v", rdr.Err())
	}
	rec := rdr.RecordBatch()
	if got := rec.Column(0).ValueStr(0); got != "499500" {
		t.Errorf("sum = %s", got)
	}
	if got := rec.Column(1).ValueStr(0); got != "UTC" {
		t.Errorf("TimeZone = %s", got)
	}
	rdr.Release()
	outside := filepath.Join(t.TempDir(), "y.parquet")
	err = d.Exec(ctx, "COPY (SELECT 1) TO "+QuoteString(outside)+" (FORMAT parquet)")
	if err == nil || !strings.Contains(err.Error(), "ermission") {
		t.Errorf("COPY outside the root: %v, want a permission error", err)
	}
	if _, serr := os.Stat(outside); serr == nil {
		t.Errorf("%s was written", outside)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Exec(ctx, "SELECT 1"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Exec after Close: %v", err)
	}
	if _, err := d.Query(ctx, "SELECT 1"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Query after Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
