//go:build duckdb_arrow

package flightsql

// The Flight SQL side's metrics: queries running, queries started ahead
// for their DoGet, and DuckDB's memory. Result rows and ingested rows are
// counted into the flightserver.Service's row counters (CountRows), so
// that tsflight_rows_sent_total and tsflight_rows_received_total cover
// both protocols. DuckDB stays behind this package: cmd/tsflight
// registers Collectors with the server's flightserver.Metrics.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsflight/tsflight/flightserver"
)

const (
	// duckMemCacheFor is how long one reading of DuckDB's memory serves
	// scrapes: a scrape costs at most one small query a second.
	duckMemCacheFor = time.Second
	// duckMemTimeout bounds that query.
	duckMemTimeout = 5 * time.Second
)

// duckMemory caches DuckDB's memory use.
type duckMemory struct {
	mu        sync.Mutex
	at        time.Time
	used, tmp int64
	err       error
}

// Collectors returns the collectors of the Flight SQL metrics, to
// register with flightserver.Metrics.Register.
func (s *Server) Collectors() []prometheus.Collector {
	ns := flightserver.MetricsNamespace
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "sql_queries_running",
			Help: "Flight SQL queries whose results are being streamed (DoGet) now."},
			func() float64 { return float64(s.queriesRunning.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "sql_queries_started_ahead",
			Help: "Flight SQL queries GetFlightInfo started ahead that wait for their DoGet (each counts as a call against --max-calls)."},
			func() float64 { return float64(s.ready.count()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "sql_statements_prepared_total",
			Help: "DuckDB prepares of planned query texts; a statement executed again on an unchanged table version reuses its prepared statement (pool.go)."},
			func() float64 { return float64(s.pool.prepares.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "sql_connections_idle",
			Help: "Idle DuckDB connections kept for the next queries, with their prepared statements."},
			func() float64 { return float64(s.pool.idleCount()) }),
		&duckCollector{s: s,
			used: prometheus.NewDesc(ns+"_sql_duckdb_memory_bytes", "Memory DuckDB's buffer manager holds now (sum of memory_usage_bytes of duckdb_memory(); bounded by --sql-memory-limit), read at most once a second.", nil, nil),
			tmp:  prometheus.NewDesc(ns+"_sql_duckdb_temp_storage_bytes", "Bytes DuckDB has spilled to its temporary directory now (sum of temporary_storage_bytes of duckdb_memory()).", nil, nil),
		},
	}
}

// count is the number of queries started ahead that wait for their DoGet.
func (c *readyCache) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// duckCollector reports DuckDB's memory. A failed reading leaves the two
// gauges out of the scrape and is logged (once per distinct error).
type duckCollector struct {
	s         *Server
	used, tmp *prometheus.Desc
}

func (c *duckCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.tmp
}

func (c *duckCollector) Collect(ch chan<- prometheus.Metric) {
	used, tmp, err := c.s.duckMemory()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(c.tmp, prometheus.GaugeValue, float64(tmp))
}

// duckMemory returns DuckDB's memory and spill use, read within the last
// second.
func (s *Server) duckMemory() (used, tmp int64, err error) {
	m := &s.duckMem
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.at.IsZero() && time.Since(m.at) < duckMemCacheFor {
		return m.used, m.tmp, m.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), duckMemTimeout)
	defer cancel()
	used, tmp, err = s.readDuckMemory(ctx)
	if err != nil && (m.err == nil || m.err.Error() != err.Error()) {
		s.log.Warn("metrics: reading DuckDB's memory failed", "error", err)
	}
	m.at, m.used, m.tmp, m.err = time.Now(), used, tmp, err
	return used, tmp, err
}

// readDuckMemory asks DuckDB, on a connection of its own.
func (s *Server) readDuckMemory(ctx context.Context) (used, tmp int64, err error) {
	sess, err := s.engine.open(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer sess.close()
	v, err := sess.scalarString(ctx, "SELECT CAST(coalesce(sum(memory_usage_bytes), 0) AS VARCHAR) || ' ' || CAST(coalesce(sum(temporary_storage_bytes), 0) AS VARCHAR) FROM duckdb_memory()")
	if err != nil {
		return 0, 0, err
	}
	a, b, ok := strings.Cut(v, " ")
	if ok {
		used, err = strconv.ParseInt(a, 10, 64)
	}
	if ok && err == nil {
		tmp, err = strconv.ParseInt(b, 10, 64)
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("duckdb_memory() answered %q, not two byte counts", v)
	}
	return used, tmp, nil
}
