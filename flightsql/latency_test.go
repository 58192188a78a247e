//go:build duckdb_arrow

package flightsql

import (
	"os"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestNoTableNoListing: a statement that names no table (SELECT 1) does
// not list the root (the catalog's cost, a directory read and a stat per
// table, is paid only by statements that name tables); one that names a
// table still does, and fails when the root cannot be read.
func TestNoTableNoListing(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	s.makeCPU(ctx, 1)
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "7200" {
		t.Fatalf("count(*) = %s, want 7200", got)
	}
	moved := s.root + ".away"
	if err := os.Rename(s.root, moved); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(moved, s.root)
	if got := s.scalar(ctx, "SELECT 1 + 1"); got != "2" {
		t.Fatalf("SELECT 1 + 1 = %s, want 2", got)
	}
	_, err := s.query(ctx, "SELECT count(*) FROM cpu")
	wantCode(t, "a table query with the root gone", err, codes.Unavailable, "reading the root directory")
}
