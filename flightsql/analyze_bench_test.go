//go:build duckdb_arrow

package flightsql

import (
	"context"
	"testing"

	"github.com/tsflight/tsflight/bench/tsbs"
)

// BenchmarkAnalyze measures the per-query cost of asking DuckDB's parser
// about a statement (json_serialize_sql and decoding its answer): TSBS's
// high-cpu-1 over the benchmark's full-scale data (bench/tsbs), a filter of
// four conditions.
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
	var q string
	for _, tq := range tsbs.DefaultParams().Queries("cpu") {
		if tq.Name == "high-cpu-1" {
			q = tq.SQL
		}
	}
	if q == "" {
		b.Fatal("bench/tsbs has no high-cpu-1 query")
	}
	for b.Loop() {
		a, err := analyze(ctx, sess, q)
		if err != nil || len(a.refs) != 1 || len(a.refs[0].conds) != 4 {
			b.Fatalf("analysis %+v, %v", a, err)
		}
	}
}
