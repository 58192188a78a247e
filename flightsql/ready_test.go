//go:build duckdb_arrow

package flightsql

import (
	"runtime"
	"testing"
	"time"
)

// TestUnfetchedQueryIsStopped: GetFlightInfo starts the query for its
// DoGet; when no DoGet comes, the query is interrupted and its connection
// freed once the entry expires.
func TestUnfetchedQueryIsStopped(t *testing.T) {
	old := readyTTL
	readyTTL = 300 * time.Millisecond
	t.Cleanup(func() { readyTTL = old })
	s := startSQL(t)
	ctx := ctxT(t)
	s.scalar(ctx, "SELECT 1") // connect first: the client's own goroutines stay
	base := runtime.NumGoroutine()
	// An aggregation that would run for minutes if left alone.
	info := s.mustExecute(t, ctx, "SELECT count(*) FROM range(0, 10000000000000) t(i) WHERE i % 7 = 3")
	if len(info.Endpoint) != 1 {
		t.Fatalf("%d endpoints", len(info.Endpoint))
	}
	s.sql.ready.mu.Lock()
	started := len(s.sql.ready.m)
	s.sql.ready.mu.Unlock()
	if started != 1 {
		t.Fatalf("%d started queries, want 1", started)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.sql.ready.mu.Lock()
		left := len(s.sql.ready.m)
		s.sql.ready.mu.Unlock()
		if left == 0 && runtime.NumGoroutine() <= base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %d started queries left, %d goroutines (baseline %d)", left, runtime.NumGoroutine(), base)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The server still answers.
	if got := s.scalar(ctx, "SELECT 1"); got != "1" {
		t.Fatalf("SELECT 1 = %s", got)
	}
}
