package flightserver

// The per-table gauges: rows, segments, bytes and version of every table,
// and its maintenance backlog. A root may hold thousands of tables, and
// each series costs the monitoring system memory, so only the first
// MaxTables tables (in name order, which keeps a table's series stable as
// tables come and go) get series of their own; the others are summed
// under table="_other" (rows, segments, bytes, small and pending
// segments; no version and no last run, which do not add up).

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsflight/tsflight/tableformat"
)

// OtherTables is the table label of the sums over the tables beyond
// MetricsOptions.MaxTables.
const OtherTables = "_other"

// tableReadTimeout bounds one reading of the tables for a scrape.
const tableReadTimeout = 10 * time.Second

// tableStats is one table (or the sum of the _other tables) as a scrape
// reports it.
type tableStats struct {
	name                   string
	rows, segments, bytes  uint64
	version                uint64 // 0: not reported (_other)
	small, pending         int
	lastRun                time.Time // zero: no run since the server started
	hasVersion, hasLastRun bool
}

// tableReading is the tables read at one time.
type tableReading struct {
	at         time.Time
	listed     int // tables under the root
	unreadable int // of them, those that did not open (damaged)
	listFailed bool
	tables     []tableStats
}

type tableCollector struct {
	svc      *Service
	max      int
	cacheFor time.Duration

	mu   sync.Mutex
	last *tableReading

	tables, unreadable, listErrors                     *prometheus.Desc
	rows, segments, bytes, version                     *prometheus.Desc
	smallSegments, pendingSegments, lastMaintenanceRun *prometheus.Desc
}

func newTableCollector(svc *Service, max int, cacheFor time.Duration) *tableCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(MetricsNamespace+"_"+name, help, labels, nil)
	}
	beyond := fmt.Sprintf(` (the tables beyond the first %d by name are summed under table="_other")`, max)
	return &tableCollector{
		svc: svc, max: max, cacheFor: cacheFor,
		tables:             d("tables", "Tables under the root."),
		unreadable:         d("tables_unreadable", "Tables under the root that could not be opened (damaged: tsflight check says why); they have no per-table series."),
		listErrors:         d("tables_list_failed", "1 when the last scrape could not list the root directory (then no per-table series are reported), else 0."),
		rows:               d("table_rows", "Rows in the table's newest version"+beyond+".", "table"),
		segments:           d("table_segments", "Live segments (Parquet files) of the table"+beyond+".", "table"),
		bytes:              d("table_bytes", "Bytes of the table's live segments"+beyond+".", "table"),
		version:            d("table_version", "The table's newest committed version (not reported for _other).", "table"),
		smallSegments:      d("maintenance_small_segments", "Segments below the compaction's size bound, which maintenance merges"+beyond+"; 0 while maintenance is off.", "table"),
		pendingSegments:    d("maintenance_pending_segments", "Small segments maintenance will merge when it next looks (a full size tier, or every small segment once the table is quiet; 0 while paused or off)"+beyond+".", "table"),
		lastMaintenanceRun: d("maintenance_last_run_timestamp_seconds", "When maintenance last compacted (or tried to compact) the table, in Unix seconds; absent before its first run since the server started (not reported for _other).", "table"),
	}
}

func (c *tableCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.tables, c.unreadable, c.listErrors, c.rows, c.segments, c.bytes, c.version,
		c.smallSegments, c.pendingSegments, c.lastMaintenanceRun} {
		ch <- d
	}
}

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.reading()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.tables, float64(r.listed))
	gauge(c.unreadable, float64(r.unreadable))
	gauge(c.listErrors, float64(boolGauge(r.listFailed)))
	for i := range r.tables {
		t := &r.tables[i]
		gauge(c.rows, float64(t.rows), t.name)
		gauge(c.segments, float64(t.segments), t.name)
		gauge(c.bytes, float64(t.bytes), t.name)
		gauge(c.smallSegments, float64(t.small), t.name)
		gauge(c.pendingSegments, float64(t.pending), t.name)
		if t.hasVersion {
			gauge(c.version, float64(t.version), t.name)
		}
		if t.hasLastRun {
			gauge(c.lastMaintenanceRun, float64(t.lastRun.UnixNano())/1e9, t.name)
		}
	}
}

// reading returns the tables as read within the cache time, reading them
// again when that reading is older. Scrapes that come at once wait for
// one reading.
func (c *tableCollector) reading() *tableReading {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && time.Since(c.last.at) < c.cacheFor {
		return c.last
	}
	ctx, cancel := context.WithTimeout(context.Background(), tableReadTimeout)
	defer cancel()
	c.last = c.read(ctx)
	return c.last
}

// read lists the tables and reads each one's newest version.
func (c *tableCollector) read(ctx context.Context) *tableReading {
	r := &tableReading{at: time.Now()}
	names, err := c.svc.TableNames()
	if err != nil {
		r.listFailed = true
		return r
	}
	r.listed = len(names)
	other := tableStats{name: OtherTables}
	hasOther := false
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		tb, err := c.svc.Table(ctx, name)
		if err != nil {
			r.unreadable++
			continue
		}
		st := tb.State()
		if st == nil {
			r.unreadable++
			continue
		}
		t := c.stats(name, st)
		if len(r.tables) < c.max {
			r.tables = append(r.tables, t)
			continue
		}
		hasOther = true
		other.rows += t.rows
		other.segments += t.segments
		other.bytes += t.bytes
		other.small += t.small
		other.pending += t.pending
	}
	if hasOther {
		r.tables = append(r.tables, other)
	}
	return r
}

// stats is what the gauges report of table name at st.
func (c *tableCollector) stats(name string, st *tableformat.State) tableStats {
	t := tableStats{name: name, version: st.Version, hasVersion: true, segments: uint64(len(st.Segments))}
	for i := range st.Segments {
		seg := &st.Segments[i]
		t.rows += seg.RowCount
		if seg.FileSize != nil {
			t.bytes += *seg.FileSize
		}
	}
	info := c.svc.maintenanceInfo(name, st)
	t.small, t.pending = info.SmallSegments, info.Pending
	c.svc.maint.mu.Lock()
	if e := c.svc.maint.tables[name]; e != nil && !e.lastRun.IsZero() {
		t.lastRun, t.hasLastRun = e.lastRun, true
	}
	c.svc.maint.mu.Unlock()
	return t
}
