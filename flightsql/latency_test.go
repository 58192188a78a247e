//go:build duckdb_arrow

package flightsql

import (
	"fmt"
	"os"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestNoTableNoListing: a statement that names no table (SELECT 1) does
// not list the root (the catalog's cost, a directory read and a stat per
// table, is paid only by statements that name tables); one that names a
// table still does, and fails when the root cannot be read.
func TestNoTableNoListing(t *testing.T) {
	s, ctx := startCPU(t, 1)
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

// TestTableNamesFor: the names a statement is resolved against are the
// exact names it mentions when each is a table of the root (no listing),
// and the whole listing when one matches only without case, is unknown,
// is not in our catalog, or the statement calls a table function.
func TestTableNamesFor(t *testing.T) {
	s, ctx := startCPU(t, 1)
	rec := cpuBatch(s.cliMem, t0, 10, "a")
	if _, err := s.ingest(ctx, "mem", "create", cpuOpts, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	sess, err := s.sql.engine.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	for _, c := range []struct{ q, want string }{
		{"SELECT 1", "[]"},
		{"SELECT count(*) FROM cpu", "[cpu]"},
		{"SELECT count(*) FROM tsflight.main.cpu c JOIN main.cpu d USING (ts)", "[cpu]"},
		{`SELECT count(*) FROM "cpu@v1"`, "[cpu]"},
		{"SELECT count(*) FROM CPU", "[cpu mem]"},
		{"SELECT count(*) FROM nosuch", "[cpu mem]"},
		{"SELECT count(*) FROM other.cpu", "[cpu mem]"},
		{"WITH x AS (SELECT 1) SELECT * FROM x", "[cpu mem]"},
		{"SELECT * FROM ts_coverage('cpu', TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-02')", "[cpu mem]"},
	} {
		a, err := analyze(ctx, sess, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		names, err := s.sql.tableNamesFor(a)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if got := fmt.Sprint(names); got != c.want {
			t.Errorf("%s: names %s, want %s", c.q, got, c.want)
		}
	}
	// Answers are the same either way.
	for _, q := range []string{"SELECT count(*) FROM cpu", "SELECT count(*) FROM CPU"} {
		if got := s.scalar(ctx, q); got != "7200" {
			t.Errorf("%s = %s, want 7200", q, got)
		}
	}
}
