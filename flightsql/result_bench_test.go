//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"testing"

	"github.com/tsflight/tsflight/bench/tsbs"
)

// BenchmarkResultRows is what a result's rows cost beyond running the
// query: the same 52,000-row aggregate answer (a timestamp, a host name
// and a double a row, the shape of TSBS double-groupby-1's answer over the
// benchmark's full-scale data, bench/tsbs's 4,000 hosts × 13 hours) fetched
// whole ("rows") and counted by DuckDB ("count"), through a real server on
// loopback and arrow-go's client. Their difference is the result path:
// DuckDB's Arrow conversion, merging, IPC, gRPC and the client's decode.
func BenchmarkResultRows(b *testing.B) {
	s := startSQLServer(b, sqlStart{})
	ctx := context.Background()
	hosts := tsbs.DefaultParams().Hosts
	const hours = 13 // a 12-hour window that does not start on the hour touches 13
	rows := int64(hosts * hours)
	q := fmt.Sprintf("SELECT TIMESTAMPTZ '2016-01-01 00:00:00+00' + INTERVAL (i // %d) HOUR AS hour, 'host_' || (i %% %d) AS hostname, (i %% 997) / 7.0 AS mean_usage_user FROM range(%d) t(i) ORDER BY hour, hostname",
		hosts, hosts, rows)
	for _, c := range []struct {
		name, sql string
		rows      int64
	}{{"rows", q, rows}, {"count", "SELECT count(*) FROM (" + q + ")", 1}} {
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
