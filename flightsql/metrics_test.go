//go:build duckdb_arrow

package flightsql

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tsflight/tsflight/flightserver"
)

// gathered reads the registry of m as a scrape would.
func gathered(t *testing.T, m *flightserver.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// sample is the value of the one sample of name whose labels include
// label ("k=v", or "" for any); ok is false when there is none.
func sample(mfs map[string]*dto.MetricFamily, name, label string) (v float64, ok bool) {
	k, want, _ := strings.Cut(label, "=")
	for _, m := range mfs[name].GetMetric() {
		match := label == ""
		for _, lp := range m.GetLabel() {
			match = match || (lp.GetName() == k && lp.GetValue() == want)
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		}
	}
	return 0, false
}

// The Flight SQL metrics: queries running (1 while a result streams, 0
// after), DuckDB's memory, and ingested and returned rows in the
// service's row counters.
func TestSQLMetrics(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	m, err := flightserver.NewMetrics(s.svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Register(s.sql.Collectors()...); err != nil {
		t.Fatal(err)
	}
	s.makeCPU(ctx, 1)

	// Hold a result stream at its start and look.
	entered, release := make(chan struct{}), make(chan struct{})
	hold := func() {
		close(entered)
		<-release
	}
	streamTestHook.Store(&hold)
	done := make(chan error, 1)
	go func() {
		r, err := s.query(ctx, "SELECT host, count(*) FROM cpu GROUP BY host ORDER BY host")
		if err == nil {
			r.release()
		}
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the query's stream did not start")
	}
	streamTestHook.Store(nil)
	if v, ok := sample(gathered(t, m), "tsflight_sql_queries_running", ""); !ok || v != 1 {
		t.Errorf("sql_queries_running %v (present %v) during a query, want 1", v, ok)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	mfs := gathered(t, m)
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"tsflight_sql_queries_running", "", 0},
		{"tsflight_sql_queries_started_ahead", "", 0},
		{"tsflight_rows_received_total", "via=sql_ingest", 7200},
		{"tsflight_rows_sent_total", "via=sql", 2},
		{"tsflight_append_commits_total", "", 1},
	} {
		if v, ok := sample(mfs, c.name, c.label); !ok || v != c.want {
			t.Errorf("%s{%s} = %v (present %v), want %v", c.name, c.label, v, ok, c.want)
		}
	}
	for _, name := range []string{"tsflight_sql_duckdb_memory_bytes", "tsflight_sql_duckdb_temp_storage_bytes"} {
		if v, ok := sample(mfs, name, ""); !ok || v < 0 {
			t.Errorf("%s = %v (present %v), want a byte count", name, v, ok)
		}
	}
	// A second reading within the second is the cached one: no query.
	before := s.sql.duckMem.at
	gathered(t, m)
	if s.sql.duckMem.at != before {
		t.Error("DuckDB's memory was read again within a second")
	}
}
