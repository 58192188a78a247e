//go:build duckdb_arrow

package flightsql

import (
	"context"
	"testing"
)

// BenchmarkAnalyze measures the per-query cost of asking DuckDB's parser
// about a statement (json_serialize_sql and decoding its answer).
func BenchmarkAnalyze(b *testing.B) {
	ctx := context.Background()
	eng, err := newEngine(ctx, b.TempDir(), &Options{Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.close()
	sess, err := eng.open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer sess.close()
	q := "SELECT * FROM cpu WHERE usage_user > 90.0 AND time >= '2016-01-01T05:00:00Z' AND time < '2016-01-01T17:00:00Z' AND hostname IN ('host_42')"
	for b.Loop() {
		a, err := analyze(ctx, sess, q)
		if err != nil || len(a.refs) != 1 || len(a.refs[0].conds) != 4 {
			b.Fatalf("analysis %+v, %v", a, err)
		}
	}
}
