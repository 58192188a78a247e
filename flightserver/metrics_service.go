package flightserver

// What a Service counts for its metrics (rows in and out, commits and
// their races) and the collector that reads those counts, with what the
// service holds now (scan slots, the stream budget, the gate's calls),
// when a scrape asks. The counts are plain atomics: a service without
// Metrics pays one atomic add per append and per batch sent.

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
)

// Via names the way rows came into or left the server: the via label of
// tsflight_rows_received_total and tsflight_rows_sent_total.
type Via int

const (
	// ViaDoPut: rows a Flight DoPut appended.
	ViaDoPut Via = iota
	// ViaSQLIngest: rows a Flight SQL bulk ingest appended.
	ViaSQLIngest
	// ViaDoGet: rows a Flight DoGet of a scan ticket sent.
	ViaDoGet
	// ViaSQL: rows of Flight SQL query results sent.
	ViaSQL
	viaCount
)

var viaNames = [viaCount]string{"doput", "sql_ingest", "doget", "sql"}

// String is the via label's value.
func (v Via) String() string {
	if v < 0 || v >= viaCount {
		return "unknown"
	}
	return viaNames[v]
}

// traffic is what a Service counted since it started.
type traffic struct {
	rows      [viaCount]atomic.Int64
	commits   atomic.Int64 // appends committed
	retries   atomic.Int64 // commits rebased after losing a race
	conflicts atomic.Int64 // appends that failed on a commit conflict
}

// CountRows adds n rows that came in or went out the way via says. The
// service counts its own DoPut and DoGet; Flight SQL counts its ingest
// and its results through this.
func (s *Service) CountRows(via Via, n int64) {
	if via >= 0 && via < viaCount && n > 0 {
		s.traffic.rows[via].Add(n)
	}
}

// countAppend counts the outcome of an append to a table on disk.
func (s *Service) countAppend(res *tableformat.AppendResult, err error) {
	switch {
	case err == nil && res != nil:
		s.traffic.commits.Add(1)
		s.traffic.retries.Add(int64(res.Retries))
	case errors.Is(err, tableformat.ErrConflict):
		s.traffic.conflicts.Add(1)
	}
}

// serviceCollector exports a Service's counts and what it holds now.
type serviceCollector struct {
	svc  *Service
	gate *guard.Gate

	rowsIn, rowsOut                *prometheus.Desc
	commits, retries, conflicts    *prometheus.Desc
	slotsUsed, slots               *prometheus.Desc
	cacheBytes, cacheLimit         *prometheus.Desc
	cacheHits, cacheMisses         *prometheus.Desc
	cacheEvictions                 *prometheus.Desc
	budgetHeld, budgetLimit        *prometheus.Desc
	budgetWaiting, budgetEvictions *prometheus.Desc
	callsRunning, callsRefused     *prometheus.Desc
	maintEnabled, maintPaused      *prometheus.Desc
}

func newServiceCollector(svc *Service, gate *guard.Gate) *serviceCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(MetricsNamespace+"_"+name, help, labels, nil)
	}
	return &serviceCollector{
		svc: svc, gate: gate,
		rowsIn:          d("rows_received_total", "Rows appended, by how they came: doput (Flight DoPut) or sql_ingest (Flight SQL bulk ingest).", "via"),
		rowsOut:         d("rows_sent_total", "Rows sent, by how they left: doget (Flight DoGet of a scan) or sql (Flight SQL query results).", "via"),
		commits:         d("append_commits_total", "Appends committed (DoPut and Flight SQL ingest; appends grouped into one commit count one each)."),
		retries:         d("append_commit_retries_total", "Times an append lost the commit race to another writer and rebased onto the new version."),
		conflicts:       d("append_commit_conflicts_total", "Appends that failed on a commit conflict (ABORTED: still losing the commit race after its retries, or the schema changed under it); nothing of them was committed."),
		slotsUsed:       d("scan_slots_in_use", "Segments being decoded now, over all scans (each holds one of the shared scan slots)."),
		slots:           d("scan_slots", "Scan slots: how many segments all scans together may decode at once."),
		cacheBytes:      d("scan_cache_bytes", "Bytes of decoded segment columns the scan cache holds (--scan-cache-bytes)."),
		cacheLimit:      d("scan_cache_limit_bytes", "The scan cache's bound (--scan-cache-bytes); 0 when there is no cache."),
		cacheHits:       d("scan_cache_hits_total", "Segment reads by DoGet served from the scan cache, without decoding."),
		cacheMisses:     d("scan_cache_misses_total", "Segment reads by DoGet that could use the scan cache but decoded (and filled it)."),
		cacheEvictions:  d("scan_cache_evictions_total", "Scan cache entries (one column of one segment) dropped to make room."),
		budgetHeld:      d("stream_budget_held_bytes", "Bytes the DoGet streams hold now: decoded batches and what gRPC holds for clients that have not read it."),
		budgetLimit:     d("stream_budget_bytes", "The stream budget (--stream-budget); 0 when unbounded."),
		budgetWaiting:   d("stream_budget_waiting_streams", "DoGet streams waiting for the stream budget before they decode more."),
		budgetEvictions: d("stream_budget_evictions_total", "Connections closed because their DoGet client read nothing while other streams waited for the budget (--stream-stall-timeout)."),
		callsRunning:    d("calls_in_flight", "Calls the server runs now, counted against --max-calls (queries started ahead for their DoGet too)."),
		callsRefused:    d("calls_refused_total", "Calls refused with RESOURCE_EXHAUSTED because --max-calls were running."),
		maintEnabled:    d("maintenance_enabled", "1 while background maintenance runs (--maintenance-interval above 0), else 0."),
		maintPaused:     d("maintenance_paused", "1 while maintenance is paused for every table (--maintenance-paused or the maintenance action), else 0."),
	}
}

func (c *serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rowsIn, c.rowsOut, c.commits, c.retries, c.conflicts, c.slotsUsed, c.slots,
		c.cacheBytes, c.cacheLimit, c.cacheHits, c.cacheMisses, c.cacheEvictions, c.budgetHeld, c.budgetLimit, c.budgetWaiting, c.budgetEvictions, c.maintEnabled, c.maintPaused} {
		ch <- d
	}
	if c.gate != nil {
		ch <- c.callsRunning
		ch <- c.callsRefused
	}
}

func (c *serviceCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.svc
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	for _, v := range []Via{ViaDoPut, ViaSQLIngest} {
		counter(c.rowsIn, s.traffic.rows[v].Load(), v.String())
	}
	for _, v := range []Via{ViaDoGet, ViaSQL} {
		counter(c.rowsOut, s.traffic.rows[v].Load(), v.String())
	}
	counter(c.commits, s.traffic.commits.Load())
	counter(c.retries, s.traffic.retries.Load())
	counter(c.conflicts, s.traffic.conflicts.Load())
	gauge(c.slotsUsed, int64(len(s.slots)))
	gauge(c.slots, int64(cap(s.slots)))
	cs := s.ScanCacheStats()
	gauge(c.cacheBytes, cs.Bytes)
	gauge(c.cacheLimit, cs.Limit)
	counter(c.cacheHits, cs.Hits)
	counter(c.cacheMisses, cs.Misses)
	counter(c.cacheEvictions, cs.Evictions)
	b := s.budget
	gauge(c.budgetHeld, b.held.Load())
	gauge(c.budgetLimit, max(b.limit, 0))
	gauge(c.budgetWaiting, int64(b.waiters.Load()))
	counter(c.budgetEvictions, b.evicted.Load())
	m := s.maint
	m.mu.Lock()
	on, paused := m.on, m.pausedAll
	m.mu.Unlock()
	gauge(c.maintEnabled, boolGauge(on))
	gauge(c.maintPaused, boolGauge(on && paused))
	if c.gate != nil {
		gauge(c.callsRunning, c.gate.InFlight())
		counter(c.callsRefused, c.gate.Refused())
	}
}

func boolGauge(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
