//go:build duckdb_arrow

package flightsql

import (
	"context"
	"testing"
)

// BenchmarkResultRows is what a result's rows cost beyond running the
// query: the same 52,000-row aggregate answer (a timestamp, a host name
// and a double a row, the shape of TSBS double-groupby-1's answer) fetched
// whole ("rows") and counted by DuckDB ("count"), through a real server on
// loopback and arrow-go's client. Their difference is the result path:
// DuckDB's Arrow conversion, merging, IPC, gRPC and the client's decode.
func BenchmarkResultRows(b *testing.B) {
	s := startSQLServer(b, sqlStart{})
	ctx := context.Background()
	const q = "SELECT TIMESTAMPTZ '2016-01-01 00:00:00+00' + INTERVAL (i // 4000) HOUR AS hour, 'host_' || (i % 4000) AS hostname, (i % 997) / 7.0 AS mean_usage_user FROM range(52000) t(i) ORDER BY hour, hostname"
	for _, c := range []struct {
		name, sql string
		rows      int64
	}{{"rows", q, 52000}, {"count", "SELECT count(*) FROM (" + q + ")", 1}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				info, err := s.client.Execute(ctx, c.sql)
				if err != nil {
					b.Fatal(err)
				}
				r, err := s.fetch(ctx, info)
				if err != nil {
					b.Fatal(err)
				}
				if r.rows != c.rows {
					b.Fatalf("%d rows, want %d", r.rows, c.rows)
				}
				r.release()
			}
		})
	}
}
