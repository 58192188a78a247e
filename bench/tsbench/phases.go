package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tsflight/tsflight/bench/tsbs"
)

// table is the benchmark table's name on every system.
const table = "cpu"

// bench is one run in progress.
type bench struct {
	cfg    config
	r      *report
	files  []tsbs.File
	rows   int64  // in the files
	root   string // the tsflight root served for scan, sql and coverage
	srv    *child // that server
	client flight.Client
	py     pyState // the Python workloads' data and server (pyflight.go)
}

func (b *bench) generate(ctx context.Context) error {
	dir := filepath.Join(b.cfg.work, "data")
	os.RemoveAll(dir)
	start := time.Now()
	files, err := b.cfg.params.WriteParquet(dir)
	if err != nil {
		return err
	}
	b.files = files
	var bytes int64
	for _, f := range files {
		b.rows += f.Rows
		bytes += f.Bytes
	}
	if b.rows != b.cfg.params.Rows() {
		return fmt.Errorf("the files hold %d rows, the parameters say %d", b.rows, b.cfg.params.Rows())
	}
	logf("   %d rows in %d files (%.1f MiB) in %.1f s", b.rows, len(files), float64(bytes)/(1<<20), time.Since(start).Seconds())
	return nil
}

func (b *bench) paths() []string {
	out := make([]string, len(b.files))
	for i, f := range b.files {
		out[i] = f.Path
	}
	return out
}

// tableSpec is the create-table body of the benchmark table.
func tableSpec(name string) map[string]any {
	return map[string]any{"table": name, "index_column": "time", "index_type": "timestamp",
		"granularity": "10s", "entity_columns": []string{"hostname"}}
}

// ingest loads every file, in delivery order, one append per file, on
// tsflight (DoPut from this process to a server process), on the package
// (its append, in its process) and, as the encoding floor, DuckDB's COPY
// TO parquet of the same rows. Each of cfg.runs runs starts from an empty
// table.
func (b *bench) ingest(ctx context.Context) error {
	root := b.scratchDir("ts-ingest")
	srv, c, err := serveAndDial(b.cfg.tsflight, root, noMaintenance...)
	if err != nil {
		return err
	}
	m := &measurement{Group: "ingest", Workload: "all files", System: "tsflight", Rows: b.rows}
	// Warm-up: the first file, untimed, into a scratch table.
	if err := action(ctx, c, "create-table", tableSpec("warmup"), nil); err != nil {
		c.Close()
		srv.stop()
		return err
	}
	if _, err := putFiles(ctx, c, "warmup", b.paths()[:1]); err != nil {
		c.Close()
		srv.stop()
		return err
	}
	for run := range b.cfg.runs {
		name := fmt.Sprintf("run%d", run)
		if err := action(ctx, c, "create-table", tableSpec(name), nil); err != nil {
			c.Close()
			srv.stop()
			return err
		}
		secs, err := putFiles(ctx, c, name, b.paths())
		if err != nil {
			c.Close()
			srv.stop()
			return err
		}
		m.Times = append(m.Times, secs)
		logf("   tsflight run %d: %.2f s (%.2f M rows/s)", run, secs, float64(b.rows)/secs/1e6)
	}
	c.Close()
	rss, err := srv.stop()
	if err != nil {
		return err
	}
	m.RSS = rss
	m.Note = "client: DoPut of batches read before timing; RSS is the server's"
	b.r.add(m)
	// The last run's table is the one scan, sql and coverage read.
	b.root = filepath.Join(b.cfg.work, "ts-root")
	os.RemoveAll(b.root)
	if err := os.MkdirAll(b.root, 0o755); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(root, fmt.Sprintf("run%d", b.cfg.runs-1)), filepath.Join(b.root, table)); err != nil {
		return err
	}
	os.RemoveAll(root)

	// The package.
	pm := &measurement{Group: "ingest", Workload: "all files", System: pkgName, Rows: b.rows}
	for run := range b.cfg.runs {
		troot := filepath.Join(b.cfg.work, fmt.Sprintf("ttf-ingest-%d", run))
		os.RemoveAll(troot)
		var res peerIngest
		args := map[string]any{"files": b.paths(), "table_root": troot, "index_column": "time",
			"granularity": "10s", "entity_columns": []string{"hostname"}, "warmup": true}
		rss, err := b.runPeer(ctx, "ingest", args, &res)
		if err != nil {
			return err
		}
		if res.Rows != b.rows {
			return fmt.Errorf("the package appended %d rows, want %d", res.Rows, b.rows)
		}
		pm.Times = append(pm.Times, res.TotalS)
		pm.RSS = max(pm.RSS, rss)
		b.r.Versions[pkgName] = res.Version
		os.RemoveAll(troot)
		logf("   package run %d: %.2f s", run, res.TotalS)
	}
	b.r.add(pm)

	// DuckDB COPY TO parquet, the encoding floor.
	var dres duckCopyResult
	droot := filepath.Join(b.cfg.work, "duck-copy")
	os.RemoveAll(droot)
	rss, err = runJSON(ctx, &dres, b.cfg.self, "duck", "copy", mustJSON(map[string]any{"root": b.cfg.work, "files": b.paths(), "out": droot, "runs": b.cfg.runs}))
	if err != nil {
		return err
	}
	os.RemoveAll(droot)
	b.r.add(&measurement{Group: "ingest", Workload: "all files", System: "DuckDB COPY", Rows: dres.Rows, Times: dres.TimesS, RSS: rss,
		Note: "COPY of tables loaded before timing TO zstd Parquet: encoding only, no table format"})
	b.r.Versions["DuckDB"] = dres.Version
	return nil
}

// startScanServer serves b.root for scan, sql and coverage.
func (b *bench) startScanServer() error {
	if b.srv != nil {
		return nil
	}
	srv, c, err := serveAndDial(b.cfg.tsflight, b.root, noMaintenance...)
	if err != nil {
		return err
	}
	b.srv, b.client = srv, c
	return nil
}

// stopServer stops the scan server, recording its peak RSS in the
// measurements it served.
func (b *bench) stopServer() {
	if b.srv == nil {
		return
	}
	b.client.Close()
	rss, err := b.srv.stop()
	if err != nil {
		b.r.Notes = append(b.r.Notes, "the scan server: "+err.Error())
	}
	for _, m := range b.r.Measurements {
		if m.System == "tsflight" && m.Group != "ingest" {
			m.RSS = rss
		}
	}
	b.srv = nil
}

// timeRuns runs fn once to warm up, then n timed times.
func timeRuns(n int, fn func() error) ([]float64, error) {
	if err := fn(); err != nil {
		return nil, err
	}
	out := make([]float64, 0, n)
	for range n {
		start := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start).Seconds())
	}
	return out, nil
}

// scanRange is the one-hour range the range scans read: the data's
// middle hour.
func (b *bench) scanRange() (time.Time, time.Time) {
	p := b.cfg.params
	mid := p.Start.Add(p.Duration / 2).Truncate(time.Hour)
	return mid, mid.Add(time.Hour)
}

func (b *bench) scan(ctx context.Context) error {
	if err := b.startScanServer(); err != nil {
		return err
	}
	from, to := b.scanRange()
	rangeName := fmt.Sprintf("1 h [%s, %s)", from.Format("15:04"), to.Format("15:04"))
	whole := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}}
	cmd, _ := json.Marshal(map[string]any{"table": table, "start": from.Format(time.RFC3339), "end": to.Format(time.RFC3339)})
	ranged := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}
	for _, w := range []struct {
		name string
		desc *flight.FlightDescriptor
	}{{"whole table", whole}, {rangeName, ranged}} {
		var rows, bytes int64
		times, err := timeRuns(b.cfg.runs, func() (err error) {
			rows, bytes, err = drain(ctx, b.client, w.desc)
			return err
		})
		if err != nil {
			return err
		}
		b.r.add(&measurement{Group: "scan", Workload: w.name, System: "tsflight", Times: times, Rows: rows, Bytes: bytes})
		logf("   tsflight %s: %d rows, median %.3f s", w.name, rows, statsOf(times).Median)
		if w.name == "whole table" && rows != b.rows {
			return fmt.Errorf("whole-table scan returned %d rows, want %d", rows, b.rows)
		}
	}

	// The package's sql_reader.
	var res peerScan
	args := map[string]any{"table_root": filepath.Join(b.root, table), "table": table, "runs": b.cfg.runs, "warmup": 1,
		"ranges": []map[string]any{{"name": "whole table", "start": nil, "end": nil},
			{"name": rangeName, "start": from.Format(time.RFC3339), "end": to.Format(time.RFC3339)}}}
	rss, err := b.runPeer(ctx, "scan", args, &res)
	if err != nil {
		return err
	}
	for _, name := range []string{"whole table", rangeName} {
		pr, ok := res.Ranges[name]
		if !ok {
			return fmt.Errorf("the package's scan has no %q", name)
		}
		ts := b.r.find("scan", name, "tsflight")
		if pr.Rows != ts.Rows {
			return fmt.Errorf("scan %s: the package read %d rows, tsflight %d", name, pr.Rows, ts.Rows)
		}
		b.r.add(&measurement{Group: "scan", Workload: name, System: pkgName, Times: pr.TimesS, Rows: pr.Rows, Bytes: pr.Bytes, RSS: rss,
			Note: "Session.sql_reader, every batch consumed"})
	}
	return nil
}

func (b *bench) coverage(ctx context.Context) error {
	if err := b.startScanServer(); err != nil {
		return err
	}
	p := b.cfg.params
	span := map[string]any{"table": table, "start": p.Start.Format(time.RFC3339), "end": p.Start.Add(p.Duration).Format(time.RFC3339)}
	one := map[string]any{"entity": map[string]string{"hostname": "host_0"}}
	for k, v := range span {
		one[k] = v
	}
	// The answers first: they must be what the generator dropped.
	var g struct {
		Gaps             []json.RawMessage `json:"gaps"`
		MissingIntervals int64             `json:"missing_intervals"`
		Truncated        bool              `json:"truncated"`
	}
	if err := action(ctx, b.client, "gaps", one, &g); err != nil {
		return err
	}
	var runs, missing int64
	for s := range p.Steps() {
		if p.Missing(0, s) {
			missing++
			if s == 0 || !p.Missing(0, s-1) {
				runs++
			}
		}
	}
	if g.MissingIntervals != missing || (!g.Truncated && int64(len(g.Gaps)) != runs) {
		return fmt.Errorf("gaps of host_0: %d missing intervals in %d gaps, the generator dropped %d in %d runs", g.MissingIntervals, len(g.Gaps), missing, runs)
	}
	var cv struct {
		Covered, Expected int64
	}
	if err := action(ctx, b.client, "coverage", span, &cv); err != nil {
		return err
	}
	if cv.Covered != b.rows || cv.Expected != int64(p.Hosts)*int64(p.Steps()) {
		return fmt.Errorf("coverage: %d of %d covered, want %d of %d", cv.Covered, cv.Expected, b.rows, int64(p.Hosts)*int64(p.Steps()))
	}
	for _, w := range []struct {
		name, action string
		req          map[string]any
	}{
		{"gaps, one entity, whole span", "gaps", one},
		{"coverage ratio, whole table, whole span", "coverage", span},
	} {
		times, err := timeRuns(b.cfg.covRuns, func() error { return action(ctx, b.client, w.action, w.req, nil) })
		if err != nil {
			return err
		}
		b.r.add(&measurement{Group: "coverage", Workload: w.name, System: "tsflight", Times: times})
	}
	return nil
}

// targets adds the targets to the report.
func (r *report) targets() {
	if m := r.find("ingest", "all files", "tsflight"); m != nil && m.stat.Median > 0 {
		rate := float64(m.Rows) / m.stat.Median
		r.absolute("ingest", "all files", "M rows/s", rate/1e6, ">= 1 M rows/s", rate >= 1e6)
	}
	r.compare("ingest", "all files", pkgName, 0.5, "<= 0.5 (>= 2x the package)")
	r.compare("ingest", "all files", "DuckDB COPY", 0, "none (a floor)")
	r.compare("scan", "whole table", pkgName, 0, "none")
	for _, m := range r.Measurements {
		if m.Group == "scan" && m.System == "tsflight" && m.Workload != "whole table" {
			r.compare("scan", m.Workload, pkgName, 0, "none")
		}
	}
	for _, m := range r.Measurements {
		if m.Group == "sql" && m.System == "tsflight" {
			r.compare("sql", m.Workload, "DuckDB", 1.0, "<= 1.0") // issue 21 (was 1.1)
			r.compare("sql", m.Workload, pkgName, 0.5, "<= 0.5")
		}
	}
	// The newest row per host, from the last-value index: 10 ms p50
	// (InfluxDB 3's last-value cache answers in under 10 ms).
	for _, w := range []string{"lastpoint", "last (Flight action)"} {
		if m := r.find("sql", w, "tsflight"); m != nil {
			r.absolute("sql", w+" (p50)", "ms", m.stat.Median*1e3, "<= 10 ms", m.stat.Median <= 10e-3)
		}
	}
	for _, w := range []struct {
		name  string
		limit float64
	}{{"gaps, one entity, whole span", 1e-3}, {"coverage ratio, whole table, whole span", 50e-3}} {
		if m := r.find("coverage", w.name, "tsflight"); m != nil {
			r.absolute("coverage", w.name+" (p50)", "ms", m.stat.Median*1e3, fmt.Sprintf("<= %g ms", w.limit*1e3), m.stat.Median <= w.limit)
			r.Comparisons = append(r.Comparisons, &comparison{Group: "coverage", Workload: w.name + " (p99)", Ratio: m.stat.P99 * 1e3, Unit: "ms", Target: "none"})
		}
	}
	r.pyTargets()
	r.streamTargets()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
