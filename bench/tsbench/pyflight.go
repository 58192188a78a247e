package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tsflight/tsflight/bench/tsbs"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// The workloads seen from Python (issue 21): a pyarrow client against
// tsflight beside the package in the same process and pyarrow's C++
// Flight server (bench/peers/flight_peer.py), the per-query latency over
// the Python ADBC driver, and a table of one big segment (bigseg.go). They
// share one data set, one tsflight server and its table cpu, a single
// DoPut's worth of rows: the mode's data in quick mode, 400 hosts × 6 h
// (864,000 rows before drops) in full mode.

// cppName names pyarrow's C++ in-memory Flight server in the report.
const cppName = "C++ Flight (pyarrow)"

// pyParams are the Python workloads' data.
func pyParams(mode string, p tsbs.Params) tsbs.Params {
	if mode == "full" {
		p.Hosts, p.Duration = 400, 6*time.Hour
	}
	return p
}

// pyState is the Python workloads' data and server.
type pyState struct {
	files  []string
	rows   int64
	root   string
	srv    *child
	client flight.Client
	table  bool // the table cpu exists on srv
}

// pyData generates the Python workloads' data, once.
func (b *bench) pyData() error {
	if b.py.files != nil {
		return nil
	}
	dir := b.scratchDir("pydata")
	files, err := b.cfg.pyParams.WriteParquet(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		b.py.files = append(b.py.files, f.Path)
		b.py.rows += f.Rows
	}
	logf("   Python workloads' data: %d rows in %d files", b.py.rows, len(files))
	return nil
}

// pyServer starts the Python workloads' tsflight server on a fresh root,
// once; with needTable it makes sure the table cpu holds the data, written by
// one DoPut from this process when pyingest has not written it.
func (b *bench) pyServer(ctx context.Context, needTable bool) error {
	if err := b.pyData(); err != nil {
		return err
	}
	if b.py.srv == nil {
		root := b.scratchDir("py-root")
		if err := os.MkdirAll(root, 0o755); err != nil {
			return err
		}
		srv, c, err := serveAndDial(b.cfg.tsflight, root, noMaintenance...)
		if err != nil {
			return err
		}
		b.py.root, b.py.srv, b.py.client = root, srv, c
	}
	if !needTable || b.py.table {
		return nil
	}
	if err := action(ctx, b.py.client, "create-table", tableSpec(table), nil); err != nil {
		return err
	}
	var schema *arrow.Schema
	var all []arrow.RecordBatch
	defer func() { release(all) }()
	for _, path := range b.py.files {
		s, bs, err := readBatches(path)
		if err != nil {
			return err
		}
		schema = s
		all = append(all, bs...)
	}
	if err := put(ctx, b.py.client, table, schema, all); err != nil {
		return err
	}
	b.py.table = true
	return nil
}

// stopPyServer stops the Python workloads' server, recording its peak RSS
// in the measurements it served.
func (b *bench) stopPyServer() {
	if b.py.srv == nil {
		return
	}
	b.py.client.Close()
	rss, err := b.py.srv.stop()
	if err != nil {
		b.r.Notes = append(b.r.Notes, "the Python workloads' server: "+err.Error())
	}
	for _, m := range b.r.Measurements {
		if m.System == "tsflight" && slices.Contains(pyGroups, m.Group) {
			m.RSS = rss
		}
	}
	b.py.srv = nil
}

var pyGroups = []string{"pyingest", "pyscan", "latency", "bigseg"}

// runFlightPeer runs bench/peers/flight_peer.py in mode with args and
// decodes its JSON; its peak RSS is returned.
func (b *bench) runFlightPeer(ctx context.Context, mode string, args any, out any) (int64, error) {
	return b.runPython(ctx, b.cfg.flightPeer, "flight-peer-"+mode+".json", mode, args, out)
}

// pyTimes is one system's runs in flight_peer.py's answer.
type pyTimes struct {
	TimesS     []float64 `json:"times_s"`
	ServerCPUS []float64 `json:"server_cpu_s"`
	CPUS       []float64 `json:"cpu_s"`
	Rows       int64     `json:"rows"`
	Bytes      int64     `json:"bytes"`
	PeakRSS    int64     `json:"peak_rss_bytes"`
}

// scratchDir is the path of name in the work directory, with whatever
// an earlier run left there removed.
func (b *bench) scratchDir(name string) string {
	dir := filepath.Join(b.cfg.work, name)
	os.RemoveAll(dir)
	return dir
}

// pyingest: one DoPut of every row from a pyarrow client against the
// package's append of the same Table, alternating.
func (b *bench) pyingest(ctx context.Context) error {
	if b.py.table {
		return fmt.Errorf("the table %s already exists", table)
	}
	if err := b.pyServer(ctx, false); err != nil {
		return err
	}
	ttfRoot := b.scratchDir("py-ttf")
	defer os.RemoveAll(ttfRoot)
	var res struct {
		Rows       int64   `json:"rows"`
		Batches    int     `json:"batches"`
		ArrowBytes int64   `json:"arrow_bytes"`
		Order      string  `json:"order"`
		Version    string  `json:"package_version"`
		TS         pyTimes `json:"tsflight"`
		Pkg        pyTimes `json:"package"`
	}
	args := map[string]any{"uri": "grpc://" + b.py.srv.addr, "files": b.py.files, "rows": 0, "ttf_root": ttfRoot,
		"runs": b.cfg.runs, "keep": table, "server_pid": b.py.srv.cmd.Process.Pid}
	rss, err := b.runFlightPeer(ctx, "ingest", args, &res)
	if err != nil {
		return err
	}
	b.py.table = true
	if res.Rows != b.py.rows {
		return fmt.Errorf("the Python client sent %d rows, the files hold %d", res.Rows, b.py.rows)
	}
	b.r.add(&measurement{Group: "pyingest", Workload: pyIngestWorkload, System: "tsflight", Times: res.TS.TimesS, CPU: res.TS.ServerCPUS,
		Rows: res.Rows, Bytes: res.ArrowBytes,
		Note: fmt.Sprintf("pyarrow client: one DoPut of %d batches (%.0f MiB of Arrow); CPU is the server's; runs in the order %s (A tsflight, B the package)",
			res.Batches, float64(res.ArrowBytes)/(1<<20), res.Order)})
	b.r.add(&measurement{Group: "pyingest", Workload: pyIngestWorkload, System: pkgName, Times: res.Pkg.TimesS, CPU: res.Pkg.CPUS,
		Rows: res.Rows, Bytes: res.ArrowBytes, RSS: rss,
		Note: "one TimeSeriesTable.append of the same Table into a fresh table, in the client's process (its RSS and CPU include the client's)"})
	if res.Version != "" {
		b.r.Versions[pkgName] = res.Version
	}
	logf("   pyarrow DoPut %s, the package's append %s", humanDur(statsOf(res.TS.TimesS).Median), humanDur(statsOf(res.Pkg.TimesS).Median))
	return nil
}

const pyIngestWorkload = "all rows, one call"

// pyscan: a whole-table DoGet from a pyarrow client reading every
// endpoint at once, against pyarrow's C++ Flight server holding the
// batches tsflight sent, and the package's sql_reader.
func (b *bench) pyscan(ctx context.Context) error {
	if err := b.pyServer(ctx, true); err != nil {
		return err
	}
	work := b.scratchDir("py-scan")
	defer os.RemoveAll(work)
	var res struct {
		Rows      int64   `json:"rows"`
		Bytes     int64   `json:"bytes"`
		Endpoints int     `json:"endpoints"`
		BatchRows [][]int `json:"batch_rows"`
		Version   string  `json:"package_version"`
		TS        pyTimes `json:"tsflight"`
		Cold      pyTimes `json:"tsflight_cold"`
		CPP       pyTimes `json:"cpp"`
		Pkg       pyTimes `json:"package"`
	}
	// A second server over the same root that keeps no decoded batches:
	// the first read's cost, beside the repeated read's of the first.
	cold, err := startServer(b.cfg.tsflight, b.py.root, append(noMaintenance, "--scan-cache-bytes", "0")...)
	if err != nil {
		return err
	}
	defer cold.stop()
	args := map[string]any{"uri": "grpc://" + b.py.srv.addr, "table": table, "table_root": filepath.Join(b.py.root, table),
		"work": work, "runs": b.cfg.runs, "server_pid": b.py.srv.cmd.Process.Pid,
		"cold_uri": "grpc://" + cold.addr, "cold_pid": cold.cmd.Process.Pid}
	rss, err := b.runFlightPeer(ctx, "scan", args, &res)
	if err != nil {
		return err
	}
	if res.Rows != b.py.rows {
		return fmt.Errorf("the whole-table DoGet read %d rows, the table holds %d", res.Rows, b.py.rows)
	}
	batches := 0
	for _, ep := range res.BatchRows {
		batches += len(ep)
	}
	b.r.add(&measurement{Group: "pyscan", Workload: "whole table", System: "tsflight", Times: res.TS.TimesS, CPU: res.TS.ServerCPUS,
		Rows: res.TS.Rows, Bytes: res.TS.Bytes,
		Note: fmt.Sprintf("pyarrow client, GetFlightInfo then its %d endpoints at once (a thread each); CPU is the server's; the same table fetched again, so after the warm-up its scan cache (--scan-cache-bytes, 256 MiB by default) holds the decoded columns", res.Endpoints)})
	b.r.add(&measurement{Group: "pyscan", Workload: "whole table", System: pyColdName, Times: res.Cold.TimesS, CPU: res.Cold.ServerCPUS,
		Rows: res.Cold.Rows, Bytes: res.Cold.Bytes, RSS: vmHWM(cold.cmd.Process.Pid),
		Note: "a second tsflight server over the same root with --scan-cache-bytes 0: every fetch decodes the Parquet segments; the same client, alternated with the others"})
	b.r.add(&measurement{Group: "pyscan", Workload: "whole table", System: cppName, Times: res.CPP.TimesS, CPU: res.CPP.ServerCPUS,
		Rows: res.CPP.Rows, Bytes: res.CPP.Bytes, RSS: res.CPP.PeakRSS,
		Note: fmt.Sprintf("pyarrow.flight.FlightServerBase streaming from memory the %d batches tsflight sent, over the same %d endpoints; the same client code", batches, res.Endpoints)})
	b.r.add(&measurement{Group: "pyscan", Workload: "whole table", System: pkgName, Times: res.Pkg.TimesS,
		Rows: res.Pkg.Rows, Bytes: res.Pkg.Bytes, RSS: rss,
		Note: "Session.sql_reader of SELECT * over the table's directory, in the client's process, every batch consumed"})
	logf("   whole table from pyarrow: tsflight %s (cache off %s), C++ %s, sql_reader %s", humanDur(statsOf(res.TS.TimesS).Median),
		humanDur(statsOf(res.Cold.TimesS).Median), humanDur(statsOf(res.CPP.TimesS).Median), humanDur(statsOf(res.Pkg.TimesS).Median))
	return nil
}

// The latency workloads.
const (
	latSelect1  = "SELECT 1, new cursor"
	latPrepared = "SELECT 1, prepared once, executed again"
	latFloor    = "list_actions (the floor)"
)

// latency: SELECT 1 over the Python ADBC driver, a new cursor each time
// and a statement prepared once and executed again, beside a Flight
// round trip (list_actions) to the same server.
func (b *bench) latency(ctx context.Context) error {
	if err := b.pyServer(ctx, false); err != nil {
		return err
	}
	var res struct {
		Version  string  `json:"adbc_driver_flightsql_version"`
		Select1  pyTimes `json:"select1"`
		Prepared pyTimes `json:"prepared"`
		Floor    pyTimes `json:"floor"`
	}
	args := map[string]any{"uri": "grpc://" + b.py.srv.addr, "runs": b.cfg.latRuns, "warmup": 20, "server_pid": b.py.srv.cmd.Process.Pid}
	if _, err := b.runFlightPeer(ctx, "latency", args, &res); err != nil {
		return err
	}
	for _, w := range []struct {
		name, note string
		t          pyTimes
	}{
		{latSelect1, "Python ADBC driver (adbc_driver_flightsql.dbapi): cursor, execute, fetchall, close; CPU is the server's", res.Select1},
		{latPrepared, "one cursor, adbc_prepare once, then execute and fetchall of the same text each run", res.Prepared},
		{latFloor, "pyarrow.flight list_actions: one Flight round trip to the same server", res.Floor},
	} {
		b.r.add(&measurement{Group: "latency", Workload: w.name, System: "tsflight", Times: w.t.TimesS, CPU: w.t.ServerCPUS, Note: w.note})
		logf("   %s: p50 %s", w.name, humanDur(statsOf(w.t.TimesS).Median))
	}
	if res.Version != "" {
		b.r.Versions["adbc-driver-flightsql (Python)"] = res.Version
	}
	return nil
}

// pySegments lists the live Parquet segments of the Python workloads'
// table.
func (b *bench) pySegments(ctx context.Context) ([]string, error) {
	dir := filepath.Join(b.py.root, table)
	tb, err := tableformat.Open(ctx, storage.Local(dir), nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sg := range tb.State().Segments {
		out = append(out, filepath.Join(dir, filepath.FromSlash(sg.Path)))
	}
	return out, nil
}

// pyColdName is the pyscan server without a scan cache, and pyColdStep
// the entry in a report's workloads that says it ran (reports from before
// it do not list it).
const (
	pyColdName = "tsflight, cache off"
	pyColdStep = "pyscan-cache-off"
)

// pyTargets adds the targets of the Python workloads.
func (r *report) pyTargets() {
	r.compare("pyingest", pyIngestWorkload, pkgName, 0.5, "<= 0.5 (>= 2x the package)")
	r.compare("pyscan", "whole table", cppName, 1/0.9, "<= 1.11 (>= 0.9x the C++ rate)")
	r.compare("pyscan", "whole table", pkgName, 1, "<= 1.0")
	if cold, cpp := r.find("pyscan", "whole table", pyColdName), r.find("pyscan", "whole table", cppName); cold != nil && cpp != nil && cpp.stat.Median > 0 {
		r.Comparisons = append(r.Comparisons, &comparison{Group: "pyscan", Workload: "whole table, cache off (every fetch decodes)", Peer: cppName,
			Ratio: cold.stat.Median / cpp.stat.Median, Target: "none: decode-bound (docs/flight.md)"})
	}
	for _, sys := range []string{"tsflight", pyColdName, cppName} {
		if m := r.find("pyscan", "whole table", sys); m != nil && m.stat.Median > 0 && m.Bytes > 0 {
			r.Comparisons = append(r.Comparisons, &comparison{Group: "pyscan", Workload: "whole table, " + sys + " (MB/s)",
				Ratio: float64(m.Bytes) / m.stat.Median / 1e6, Unit: "MB/s", Target: "none"})
		}
	}
	for _, w := range []struct {
		name  string
		limit float64 // 0: none
	}{{latSelect1, 2e-3}, {latPrepared, 1.5e-3}, {latFloor, 0}} {
		m := r.find("latency", w.name, "tsflight")
		if m == nil || m.stat.N == 0 {
			continue
		}
		if w.limit > 0 {
			r.absolute("latency", w.name+" (p50)", "ms", m.stat.Median*1e3, fmt.Sprintf("<= %g ms", w.limit*1e3), m.stat.Median <= w.limit)
		} else {
			r.Comparisons = append(r.Comparisons, &comparison{Group: "latency", Workload: w.name + " (p50)", Ratio: m.stat.Median * 1e3, Unit: "ms", Target: "none"})
		}
		r.Comparisons = append(r.Comparisons, &comparison{Group: "latency", Workload: w.name + " (p90)", Ratio: p90(m.Times) * 1e3, Unit: "ms", Target: "none"})
	}
	for _, w := range bigsegWorkloads {
		r.compare("bigseg", w, "DuckDB", 1.2, "<= 1.2")
		ts, dk, fl := r.find("bigseg", w, "tsflight"), r.find("bigseg", w, "DuckDB"), r.find("bigseg", w, bigsegFloor)
		if ts != nil && dk != nil && fl != nil && dk.stat.Median > 0 {
			r.Comparisons = append(r.Comparisons, &comparison{Group: "bigseg", Workload: bigsegLessFloor(w), Peer: "DuckDB",
				Ratio: (ts.stat.Median - fl.stat.Median) / dk.stat.Median, Target: "none: (tsflight − floor) / DuckDB"})
		}
	}
}

func p90(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return quantile(s, 0.9)
}
