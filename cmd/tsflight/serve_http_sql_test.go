//go:build duckdb_arrow

package main

import (
	"testing"
)

// TestServeHTTPSQLMetrics: serve registers the Flight SQL collectors with
// its metrics: after a query /metrics has the queries running (0 again),
// DuckDB's memory and the rows the query returned.
func TestServeHTTPSQLMetrics(t *testing.T) {
	p := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	url := p.opsURL()
	rdr := sqlDoGet(t, p.addr, "SELECT * FROM range(5)")
	rows := int64(0)
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
	}
	rdr.Release()
	if rows != 5 {
		t.Fatalf("the query returned %d rows (err %v), want 5", rows, rdr.Err())
	}
	code, body := httpGet(t, nil, url+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	if v, ok := metricValue(t, body, "tsflight_sql_queries_running"); !ok || v != 0 {
		t.Errorf("sql_queries_running %v (present %v) after the query, want 0", v, ok)
	}
	if v, ok := metricValue(t, body, "tsflight_sql_duckdb_memory_bytes"); !ok || v < 0 {
		t.Errorf("sql_duckdb_memory_bytes %v (present %v)", v, ok)
	}
	if v, ok := metricValue(t, body, "tsflight_rows_sent_total", "via=sql"); !ok || v != 5 {
		t.Errorf("rows sent via sql %v (present %v), want 5", v, ok)
	}
	if v, ok := metricValue(t, body, "tsflight_grpc_calls_total", "method=DoGet", "code=OK"); !ok || v != 1 {
		t.Errorf("DoGet OK calls %v (present %v), want 1", v, ok)
	}
	p.stop()
}
