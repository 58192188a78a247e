package main

// The stream workload (issue 18): a table fed by many small appends must
// stay as fast to read, and as small on disk, as the same rows loaded in
// one append. Three tables, each on a tsflight serve process of its own
// root, so that a restart opens one table only:
//
//   - A, "stream": N sequential DoPuts from one client, each one
//     timestamp of streamHosts hosts (the TSBS cpu-only rows, no drops,
//     steps 10 s apart), every put's latency recorded;
//   - B, "bulk": the same rows in one DoPut;
//   - C, "writers": streamWriters clients putting streamHosts-row batches
//     at once, each writer its own hosts.
//
// After the puts both A and B are settled (settle: no maintenance work
// pending), then read the same ways — whole-table DoGet, two SQL
// queries over ADBC, gaps, coverage, and a restart to the first answer —
// and every figure of A is reported as a ratio to B's. A and B must give
// the same answers or the run fails.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/bench/tsbs"
)

const (
	streamGroup   = "stream"
	streamHosts   = 100 // rows per put: one timestamp of this many hosts
	streamWriters = 8

	// The tables, and the systems they are in the report.
	streamTable  = "stream"
	bulkTable    = "bulk"
	writersTable = "writers"
	sysStream    = "stream table"
	sysBulk      = "bulk table"
	sysWriters   = "writers table"

	// Workloads of the group.
	wPut          = "DoPut of one step (100 rows)"
	wAllRows      = "all rows loaded"
	wSettle       = "settling after the puts"
	wDoGet        = "whole-table DoGet"
	wGroupBy      = "SQL max(usage_user) by hostname, whole span"
	wLastHour     = "SQL count(*), last hour"
	wGaps         = "gaps, one entity, whole span"
	wCoverage     = "coverage ratio, whole table"
	wRestartDesc  = "restart to describe-table"
	wRestartGet   = "restart to first DoGet batch"
	wWriterPut    = "8 writers: DoPut of 100 rows"
	wWriterAll    = "8 writers: all puts"
	streamReadMax = 1.5 // target of every A/B read ratio
	streamDiskMax = 2.0 // target of the A/B disk-bytes ratio
	writersMinRPS = 100_000
)

// streamReads are the workloads run on A and B alike, each judged A/B
// against streamReadMax.
var streamReads = []string{wDoGet, wGroupBy, wLastHour, wGaps, wCoverage, wRestartDesc, wRestartGet}

// streamFigures are the stream workload's figures that are not times.
type streamFigures struct {
	Hosts      int    `json:"hosts"`       // rows per put
	Puts       int    `json:"puts"`        // N, the puts to table A
	Window     int    `json:"window"`      // puts in each of the first/last windows
	Writers    int    `json:"writers"`     // concurrent clients on table C
	WriterPuts int    `json:"writer_puts"` // puts of each
	Settle     string `json:"settle"`      // how A was settled (settle's answer)
	DiskBytesA int64  `json:"disk_bytes_stream"`
	DiskBytesB int64  `json:"disk_bytes_bulk"`
	FilesA     int    `json:"files_stream"`
	FilesB     int    `json:"files_bulk"`
}

// putWindow is how many puts the first/last comparison averages: 1,000,
// or a tenth of the puts when there are fewer than 10,000 (at least one).
func putWindow(puts int) int {
	return max(1, min(1000, puts/10))
}

// windowRatio is mean(last n) / mean(first n) of latencies, in the order
// the puts ran; 0 if there are fewer than n.
func windowRatio(lat []float64, n int) float64 {
	if n <= 0 || len(lat) < n {
		return 0
	}
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	first := mean(lat[:n])
	if first == 0 {
		return 0
	}
	return mean(lat[len(lat)-n:]) / first
}

// maintenancePending reads a describe-table answer's
// "maintenance": {"pending": …}. pending may be a boolean, a count, or a
// list or object of the pending tasks (empty: none). known is false when
// the answer has no such field (servers before background maintenance).
func maintenancePending(info map[string]json.RawMessage) (pending, known bool) {
	raw, ok := info["maintenance"]
	if !ok {
		return false, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false, false
	}
	p, ok := m["pending"]
	if !ok {
		return false, false
	}
	var v any
	if json.Unmarshal(p, &v) != nil {
		return false, false
	}
	switch v := v.(type) {
	case nil:
		return false, true
	case bool:
		return v, true
	case float64:
		return v > 0, true
	case []any:
		return len(v) > 0, true
	case map[string]any:
		return len(v) > 0, true
	case string:
		return v != "" && v != "0" && v != "false" && v != "none", true
	}
	return false, false
}

// settle waits until the server has no maintenance work pending on
// table, and says how it knew. Adjust it here when the server's answer
// changes:
//
//   - describe-table says "maintenance": {"pending": …}: poll it until
//     nothing is pending;
//   - it does not: call compact {"table"} if ListActions lists it, then
//     vacuum {"table", "retention": "0s", "apply": true} if listed, then
//     look once more for the field;
//   - neither is there: nothing to wait for.
func settle(ctx context.Context, c flight.Client, table string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	ranActions := false
	var how []string
	for polls := 1; ; polls++ {
		var info map[string]json.RawMessage
		if err := action(ctx, c, "describe-table", map[string]any{"table": table}, &info); err != nil {
			return "", err
		}
		pending, known := maintenancePending(info)
		switch {
		case known && !pending:
			how = append(how, fmt.Sprintf("describe-table: nothing pending after %d poll(s)", polls))
			// The files compaction replaced stay for the snapshot keep
			// window; measuring disk "after vacuum" drops them (with a
			// window of 0, as Delta's VACUUM RETAIN 0 HOURS), and the
			// orphans of nothing.
			v, err := vacuumAll(ctx, c, table)
			if err != nil {
				return "", err
			}
			return strings.Join(append(how, v), "; "), nil
		case known:
			if time.Now().After(deadline) {
				return "", fmt.Errorf("settle %s: maintenance still pending after %v (%s)", table, timeout, info["maintenance"])
			}
			time.Sleep(100 * time.Millisecond)
			continue
		case ranActions:
			if len(how) == 0 {
				return "no maintenance field and no compact or vacuum action: nothing to wait for", nil
			}
			return strings.Join(how, "; ") + " (no maintenance field)", nil
		}
		ranActions = true
		listed, err := listActions(ctx, c)
		if err != nil {
			return "", err
		}
		if listed["compact"] {
			if err := action(ctx, c, "compact", map[string]any{"table": table}, nil); err != nil {
				return "", err
			}
			how = append(how, "compact")
		}
		if listed["vacuum"] {
			if err := action(ctx, c, "vacuum", map[string]any{"table": table, "retention": "0s", "apply": true}, nil); err != nil {
				return "", err
			}
			how = append(how, "vacuum (retention 0s, applied)")
		}
	}
}

// vacuumAll runs the vacuum action with a zero keep window for replaced
// files when the server knows keep_snapshots, else for orphans only.
func vacuumAll(ctx context.Context, c flight.Client, table string) (string, error) {
	body := map[string]any{"table": table, "retention": "0s", "keep_snapshots": "0s", "apply": true}
	err := action(ctx, c, "vacuum", body, nil)
	if status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "keep_snapshots") {
		delete(body, "keep_snapshots")
		if err = action(ctx, c, "vacuum", body, nil); err == nil {
			return "vacuum (orphans, retention 0s; this server keeps replaced files)", nil
		}
	}
	if err != nil {
		return "", err
	}
	return "vacuum (retention 0s, keep_snapshots 0s, applied)", nil
}

// listActions is the set of action types the server lists.
func listActions(ctx context.Context, c flight.Client) (map[string]bool, error) {
	stream, err := c.ListActions(ctx, &flight.Empty{})
	if err != nil {
		return nil, fmt.Errorf("ListActions: %w", err)
	}
	out := map[string]bool{}
	for {
		a, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ListActions: %w", err)
		}
		out[a.Type] = true
	}
}

// streamParams is the data of the stream tables: hosts hosts at steps
// [0, steps), the TSBS cpu-only rows of the run's seed with nothing
// dropped or late, batches of batchRows.
func streamParams(base tsbs.Params, hosts, steps, batchRows int) tsbs.Params {
	p := tsbs.DefaultParams()
	p.Seed, p.Start = base.Seed, base.Start
	if base.Step > 0 {
		p.Step = base.Step
	}
	p.Hosts, p.Duration = hosts, time.Duration(steps)*p.Step
	p.DropFraction, p.LateFraction = 0, 0
	p.BatchRows = batchRows
	return p
}

// eachStep calls fn with the rows of hosts [lo, hi) at each step of
// [0, p.Steps()), one batch a step, generated an hour at a time as they
// are needed. The batch is released when fn returns.
func eachStep(p tsbs.Params, lo, hi int, fn func(step int, b arrow.RecordBatch) error) error {
	p.BatchRows = hi - lo
	perHour := int(time.Hour / p.Step)
	steps := p.Steps()
	for h := 0; h*perHour < steps; h++ {
		d := tsbs.Delivery{Hour: h, FirstStep: h * perHour, EndStep: min(steps, (h+1)*perHour), Hosts: []tsbs.HostRange{{Lo: lo, Hi: hi}}}
		s := d.FirstStep
		err := p.Batches(memory.DefaultAllocator, d, func(b arrow.RecordBatch) error {
			if b.NumRows() != int64(hi-lo) {
				return fmt.Errorf("step %d: %d rows, want %d", s, b.NumRows(), hi-lo)
			}
			err := fn(s, b)
			s++
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// streamSide is table A or B on its own server.
type streamSide struct {
	table, system, root string
	srv                 *child
	c                   flight.Client
	cnxn                adbc.Connection
	closeSQL            func()         // closes cnxn and its database
	ms                  []*measurement // given the server's peak RSS when it stops
}

func (sd *streamSide) start(bin string) error {
	srv, c, err := serveAndDial(bin, sd.root, streamMaintenance...)
	if err != nil {
		return err
	}
	sd.srv, sd.c = srv, c
	return nil
}

func (sd *streamSide) openSQL(ctx context.Context) error {
	cnxn, closeSQL, err := openSQL(ctx, sd.srv.addr)
	if err != nil {
		return err
	}
	sd.cnxn, sd.closeSQL = cnxn, closeSQL
	return nil
}

// stop closes the clients and stops the server; the first stop gives
// the measurements so far the server's peak RSS.
func (sd *streamSide) stop() error {
	if sd.cnxn != nil {
		sd.closeSQL()
		sd.cnxn, sd.closeSQL = nil, nil
	}
	if sd.srv == nil {
		return nil
	}
	sd.c.Close()
	rss, err := sd.srv.stop()
	sd.srv, sd.c = nil, nil
	for _, m := range sd.ms {
		m.RSS = rss
	}
	sd.ms = nil
	return err
}

// diskUsage is the bytes and the number of the regular files under dir.
func diskUsage(dir string) (int64, int, error) {
	var bytes int64
	var files int
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		bytes += info.Size()
		files++
		return nil
	})
	return bytes, files, err
}

// stream runs the workload; see the top of this file.
func (b *bench) stream(ctx context.Context) error {
	b.stopServer() // the scan server: its cores and memory are ours now
	cfg := b.cfg
	n, hosts := cfg.streamPuts, streamHosts
	fig := &streamFigures{Hosts: hosts, Puts: n, Window: putWindow(n), Writers: streamWriters, WriterPuts: cfg.writerPuts}
	b.r.Stream = fig
	b.r.Scale["stream puts"], b.r.Scale["stream writer puts"] = n, cfg.writerPuts
	p := streamParams(cfg.params, hosts, n, tsbs.DefaultBatchRows)
	if err := p.Validate(); err != nil {
		return err
	}
	want := int64(n) * int64(hosts)
	a := &streamSide{table: streamTable, system: sysStream, root: filepath.Join(cfg.work, "stream-a")}
	bk := &streamSide{table: bulkTable, system: sysBulk, root: filepath.Join(cfg.work, "stream-b")}
	defer a.stop()
	defer bk.stop()
	add := func(sd *streamSide, m *measurement) {
		m.Group, m.System = streamGroup, sd.system
		b.r.add(m)
		sd.ms = append(sd.ms, m)
	}
	for _, sd := range []*streamSide{a, bk} {
		os.RemoveAll(sd.root)
		if err := sd.start(cfg.tsflight); err != nil {
			return err
		}
		if err := action(ctx, sd.c, "create-table", tableSpec(sd.table), nil); err != nil {
			return err
		}
	}

	// A: one put a step.
	schema := tsbs.Schema()
	lat := make([]float64, 0, n)
	started := time.Now()
	err := eachStep(p, 0, hosts, func(step int, rec arrow.RecordBatch) error {
		t := time.Now()
		if err := put(ctx, a.c, a.table, schema, []arrow.RecordBatch{rec}); err != nil {
			return fmt.Errorf("put %d of %d: %w", step+1, n, err)
		}
		lat = append(lat, time.Since(t).Seconds())
		if k := len(lat); k%max(1, n/10) == 0 || k == n {
			recent := lat[max(0, k-max(1, n/10)):]
			logf("   %s: %d of %d puts, %.1f s, recent p50 %.1f ms", a.table, k, n, time.Since(started).Seconds(), statsOf(recent).Median*1e3)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var total float64
	for _, x := range lat {
		total += x
	}
	add(a, &measurement{Workload: wPut, Times: lat, Rows: int64(hosts),
		Note: fmt.Sprintf("%d sequential DoPuts from one client, one timestamp of %d hosts each, in order", n, hosts)})
	add(a, &measurement{Workload: wAllRows, Times: []float64{total}, Rows: want, Note: fmt.Sprintf("the sum of the %d puts' latencies", n)})

	// B: the same rows in one put, generated before the clock starts.
	var batches []arrow.RecordBatch
	for _, d := range p.Deliveries() {
		if err := p.Batches(memory.DefaultAllocator, d, func(rec arrow.RecordBatch) error {
			rec.Retain()
			batches = append(batches, rec)
			return nil
		}); err != nil {
			release(batches)
			return err
		}
	}
	t := time.Now()
	err = put(ctx, bk.c, bk.table, schema, batches)
	bulkSecs := time.Since(t).Seconds()
	release(batches)
	if err != nil {
		return fmt.Errorf("bulk put: %w", err)
	}
	add(bk, &measurement{Workload: wAllRows, Times: []float64{bulkSecs}, Rows: want, Note: "one DoPut of every row, in batches of up to 64 Ki rows"})
	logf("   %s: %d rows in %d puts, p50 %.1f ms p99 %.1f ms; %s: one put, %.2f s", a.table, want, n,
		statsOf(lat).Median*1e3, statsOf(lat).P99*1e3, bk.table, bulkSecs)

	// Settle both, then weigh them.
	timeout := 2 * time.Minute
	if cfg.mode == "full" {
		timeout = 20 * time.Minute
	}
	for _, sd := range []*streamSide{a, bk} {
		t := time.Now()
		how, err := settle(ctx, sd.c, sd.table, timeout)
		if err != nil {
			return err
		}
		secs := time.Since(t).Seconds()
		add(sd, &measurement{Workload: wSettle, Times: []float64{secs}, Note: how})
		if sd == a {
			fig.Settle = how
		}
		logf("   settled %s in %.2f s: %s", sd.table, secs, how)
	}
	var errA, errB error
	fig.DiskBytesA, fig.FilesA, errA = diskUsage(filepath.Join(a.root, a.table))
	fig.DiskBytesB, fig.FilesB, errB = diskUsage(filepath.Join(bk.root, bk.table))
	if err := errors.Join(errA, errB); err != nil {
		return err
	}
	logf("   on disk: %s %d bytes in %d files, %s %d bytes in %d files", a.table, fig.DiskBytesA, fig.FilesA, bk.table, fig.DiskBytesB, fig.FilesB)

	if err := b.streamReads(ctx, p, a, bk, add); err != nil {
		return err
	}
	if err := b.streamRestarts(ctx, a, bk, add); err != nil {
		return err
	}
	if err := errors.Join(a.stop(), bk.stop()); err != nil {
		return err
	}
	return b.streamWriters(ctx)
}

// streamRead is one read workload: run reads the table once and returns
// the rows it read and, with keep, its answer in a comparable form.
type streamRead struct {
	name string
	runs int
	run  func(sd *streamSide, keep bool) (int64, string, error)
	// check judges the answer alone (A and B must also agree).
	check func(rows int64, answer string) error
}

func (b *bench) streamReads(ctx context.Context, p tsbs.Params, a, bk *streamSide, add func(*streamSide, *measurement)) error {
	want := int64(p.Hosts) * int64(p.Steps())
	start, end := p.Start.UTC().Format(time.RFC3339), p.End().UTC().Format(time.RFC3339)
	last := p.StepTime(p.Steps() - 1)
	from := last.Add(-time.Hour)
	var inLastHour int64
	for s := range p.Steps() {
		if !p.StepTime(s).Before(from) {
			inLastHour += int64(p.Hosts)
		}
	}
	for _, sd := range []*streamSide{a, bk} {
		if err := sd.openSQL(ctx); err != nil {
			return err
		}
	}
	sqlAnswer := func(sd *streamSide, q string, keep bool) (int64, string, error) {
		res, n, err := adbcQuery(ctx, sd.cnxn, q, keep)
		if err != nil || !keep {
			return n, "", err
		}
		enc, err := json.Marshal(res.Sorted())
		return n, string(enc), err
	}
	actionAnswer := func(sd *streamSide, name string, req map[string]any, keep bool) (int64, string, error) {
		req["table"] = sd.table
		var ans map[string]any
		if err := action(ctx, sd.c, name, req, &ans); err != nil {
			return 0, "", err
		}
		delete(ans, "table") // the names and versions differ; the rest must not
		delete(ans, "version")
		enc, err := json.Marshal(ans)
		return 0, string(enc), err
	}
	covRuns := min(b.cfg.covRuns, 100)
	reads := []streamRead{
		{wDoGet, b.cfg.runs, func(sd *streamSide, _ bool) (int64, string, error) {
			rows, _, err := drain(ctx, sd.c, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{sd.table}})
			return rows, fmt.Sprint(rows), err
		}, func(rows int64, _ string) error {
			if rows != want {
				return fmt.Errorf("%d rows, want %d", rows, want)
			}
			return nil
		}},
		{wGroupBy, b.cfg.sqlRuns, func(sd *streamSide, keep bool) (int64, string, error) {
			return sqlAnswer(sd, fmt.Sprintf("SELECT hostname, max(usage_user) AS max_usage_user FROM %s WHERE time >= '%s' AND time < '%s' GROUP BY hostname ORDER BY hostname",
				sd.table, start, end), keep)
		}, func(rows int64, _ string) error {
			if rows != int64(p.Hosts) {
				return fmt.Errorf("%d groups, want %d", rows, p.Hosts)
			}
			return nil
		}},
		{wLastHour, b.cfg.sqlRuns, func(sd *streamSide, keep bool) (int64, string, error) {
			return sqlAnswer(sd, fmt.Sprintf("SELECT count(*) AS n FROM %s WHERE time >= '%s'", sd.table, from.Format(time.RFC3339)), keep)
		}, func(_ int64, ans string) error {
			if w := fmt.Sprintf("[[%d]]", inLastHour); ans != w {
				return fmt.Errorf("answer %s, want %s", ans, w)
			}
			return nil
		}},
		{wGaps, covRuns, func(sd *streamSide, keep bool) (int64, string, error) {
			return actionAnswer(sd, "gaps", map[string]any{"start": start, "end": end, "entity": map[string]string{"hostname": "host_0"}}, keep)
		}, func(_ int64, ans string) error {
			var g struct {
				Missing int64 `json:"missing_intervals"`
			}
			if err := json.Unmarshal([]byte(ans), &g); err != nil || g.Missing != 0 {
				return fmt.Errorf("answer %s, want no missing interval", ans)
			}
			return nil
		}},
		{wCoverage, covRuns, func(sd *streamSide, keep bool) (int64, string, error) {
			return actionAnswer(sd, "coverage", map[string]any{"start": start, "end": end}, keep)
		}, func(_ int64, ans string) error {
			var cv struct{ Covered, Expected int64 }
			if err := json.Unmarshal([]byte(ans), &cv); err != nil || cv.Covered != want || cv.Expected != want {
				return fmt.Errorf("answer %s, want %d of %d covered", ans, want, want)
			}
			return nil
		}},
	}
	for _, w := range reads {
		answers := map[*streamSide]string{}
		for _, sd := range []*streamSide{a, bk} {
			var rows int64
			first := true
			times, err := timeRuns(w.runs, func() error {
				n, ans, err := w.run(sd, first)
				if err != nil {
					return err
				}
				if first {
					answers[sd], rows, first = ans, n, false
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s on %s: %w", w.name, sd.table, err)
			}
			if err := w.check(rows, answers[sd]); err != nil {
				return fmt.Errorf("%s on %s: %w", w.name, sd.table, err)
			}
			add(sd, &measurement{Workload: w.name, Times: times, Rows: rows})
		}
		if answers[a] != answers[bk] {
			return fmt.Errorf("%s: the stream and bulk tables differ:\n  %s: %.300s\n  %s: %.300s", w.name, a.table, answers[a], bk.table, answers[bk])
		}
		logf("   %s: %s p50 %s, %s p50 %s", w.name, a.table, humanDur(b.r.find(streamGroup, w.name, sysStream).stat.Median),
			bk.table, humanDur(b.r.find(streamGroup, w.name, sysBulk).stat.Median))
	}
	return nil
}

// streamRestarts stops each side's server and starts it again on the same
// root, timing from the start to the first describe-table answer and to
// the first batch of a whole-table DoGet: a warm-up, then cfg.runs runs.
func (b *bench) streamRestarts(ctx context.Context, a, bk *streamSide, add func(*streamSide, *measurement)) error {
	for _, sd := range []*streamSide{a, bk} {
		var toDesc, toGet []float64
		for run := 0; run <= b.cfg.runs; run++ {
			if err := sd.stop(); err != nil {
				return err
			}
			t := time.Now()
			if err := sd.start(b.cfg.tsflight); err != nil {
				return err
			}
			for {
				err := action(ctx, sd.c, "describe-table", map[string]any{"table": sd.table}, nil)
				if err == nil {
					break
				}
				if time.Since(t) > time.Minute {
					return fmt.Errorf("restart of %s: no describe-table answer within a minute: %w", sd.table, err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			d := time.Since(t).Seconds()
			if err := firstBatch(ctx, sd.c, sd.table); err != nil {
				return fmt.Errorf("restart of %s: %w", sd.table, err)
			}
			if run > 0 {
				toDesc, toGet = append(toDesc, d), append(toGet, time.Since(t).Seconds())
			}
		}
		note := "from starting tsflight serve on the table's root (page cache warm)"
		add(sd, &measurement{Workload: wRestartDesc, Times: toDesc, Note: note})
		add(sd, &measurement{Workload: wRestartGet, Times: toGet, Note: note + ", describe-table answered first"})
		sd.ms = nil // the restarted servers' RSS is not these figures'
	}
	for _, w := range []string{wRestartDesc, wRestartGet} {
		logf("   %s: %s p50 %s, %s p50 %s", w, a.table, humanDur(b.r.find(streamGroup, w, sysStream).stat.Median),
			bk.table, humanDur(b.r.find(streamGroup, w, sysBulk).stat.Median))
	}
	return nil
}

// firstBatch plans a whole-table DoGet and reads until the first batch
// with rows arrives, then abandons the stream.
func firstBatch(ctx context.Context, c flight.Client, table string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	if err != nil {
		return err
	}
	for _, ep := range info.Endpoint {
		rdr, err := readTicket(ctx, c, ep.Ticket)
		if err != nil {
			return err
		}
		for rdr.Next() {
			if rdr.RecordBatch().NumRows() > 0 {
				rdr.Release()
				return nil
			}
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return err
		}
	}
	return errors.New("the whole-table DoGet sent no rows")
}

// streamWriters: streamWriters clients at once, each putting its own
// streamHosts hosts one step at a time, cfg.writerPuts puts each, to a
// fresh table on a server of its own. A warm-up put of each writer goes
// to a scratch table first.
func (b *bench) streamWriters(ctx context.Context) error {
	cfg := b.cfg
	root := b.scratchDir("stream-c")
	srv, err := startServer(cfg.tsflight, root, streamMaintenance...)
	if err != nil {
		return err
	}
	defer func() {
		if srv != nil {
			srv.stop()
		}
	}()
	clients := make([]flight.Client, streamWriters)
	for w := range clients {
		if clients[w], err = dialFlight(srv.addr); err != nil {
			return err
		}
		defer clients[w].Close()
	}
	for _, name := range []string{"warmup", writersTable} {
		if err := action(ctx, clients[0], "create-table", tableSpec(name), nil); err != nil {
			return err
		}
	}
	// Every writer's batches, generated before the clock starts.
	p := streamParams(cfg.params, streamWriters*streamHosts, cfg.writerPuts, streamHosts)
	data := make([][]arrow.RecordBatch, streamWriters)
	defer func() {
		for _, bs := range data {
			release(bs)
		}
	}()
	for w := range data {
		if err := eachStep(p, w*streamHosts, (w+1)*streamHosts, func(_ int, rec arrow.RecordBatch) error {
			rec.Retain()
			data[w] = append(data[w], rec)
			return nil
		}); err != nil {
			return err
		}
	}
	schema := tsbs.Schema()
	// all runs fn(w) on every writer at once and returns the first error.
	all := func(fn func(w int) error) error {
		var wg sync.WaitGroup
		errs := make([]error, streamWriters)
		for w := range streamWriters {
			wg.Add(1)
			go func() { defer wg.Done(); errs[w] = fn(w) }()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	if err := all(func(w int) error { return put(ctx, clients[w], "warmup", schema, data[w][:1]) }); err != nil {
		return fmt.Errorf("writers warm-up: %w", err)
	}
	lat := make([][]float64, streamWriters)
	start := time.Now()
	err = all(func(w int) error {
		for i, rec := range data[w] {
			t := time.Now()
			if err := put(ctx, clients[w], writersTable, schema, []arrow.RecordBatch{rec}); err != nil {
				return fmt.Errorf("writer %d, put %d: %w", w, i+1, err)
			}
			lat[w] = append(lat[w], time.Since(t).Seconds())
		}
		return nil
	})
	wall := time.Since(start).Seconds()
	if err != nil {
		return err
	}
	total := int64(streamWriters) * int64(cfg.writerPuts) * streamHosts
	var info struct {
		Rows int64 `json:"rows"`
	}
	if err := action(ctx, clients[0], "describe-table", map[string]any{"table": writersTable}, &info); err != nil {
		return err
	}
	if info.Rows != total {
		return fmt.Errorf("the writers table holds %d rows, want %d", info.Rows, total)
	}
	all8 := slices.Concat(lat...)
	for _, c := range clients {
		c.Close()
	}
	clients = nil
	rss, err := srv.stop()
	srv = nil
	if err != nil {
		return err
	}
	note := fmt.Sprintf("%d clients at once, each %d puts of its own %d hosts", streamWriters, cfg.writerPuts, streamHosts)
	b.r.add(&measurement{Group: streamGroup, Workload: wWriterPut, System: sysWriters, Times: all8, Rows: streamHosts, RSS: rss, Note: note})
	b.r.add(&measurement{Group: streamGroup, Workload: wWriterAll, System: sysWriters, Times: []float64{wall}, Rows: total, RSS: rss, Note: note + "; wall time"})
	logf("   %d writers: %d rows in %.2f s (%.1f k rows/s), put p50 %.1f ms", streamWriters, total, wall, float64(total)/wall/1e3, statsOf(all8).Median*1e3)
	return nil
}

// streamTargets adds the stream group's comparisons: every figure of the
// stream table against the bulk table's, and the writers' rate.
func (r *report) streamTargets() {
	fig := r.Stream
	if fig == nil {
		return
	}
	none := func(workload, peer, unit string, v float64) {
		r.Comparisons = append(r.Comparisons, &comparison{Group: streamGroup, Workload: workload, Peer: peer, Ratio: v, Unit: unit, Target: "none"})
	}
	ratio := func(workload string, limit float64) {
		a, b := r.find(streamGroup, workload, sysStream), r.find(streamGroup, workload, sysBulk)
		if a == nil || b == nil {
			return
		}
		c := &comparison{Group: streamGroup, Workload: workload, Peer: sysBulk, Ratio: a.stat.Median / b.stat.Median, Target: "none"}
		if limit > 0 {
			met := c.Ratio <= limit
			c.Met, c.Target = &met, fmt.Sprintf("<= %g", limit)
		}
		r.Comparisons = append(r.Comparisons, c)
	}
	if m := r.find(streamGroup, wPut, sysStream); m != nil {
		none("DoPut p50 (100 rows)", "", "ms", m.stat.Median*1e3)
		none("DoPut p99 (100 rows)", "", "ms", m.stat.P99*1e3)
		w := putWindow(len(m.Times))
		none(fmt.Sprintf("DoPut mean, last %d / first %d puts", w, w), "", "", windowRatio(m.Times, w))
	}
	ratio(wAllRows, 0)
	if m := r.find(streamGroup, wSettle, sysStream); m != nil {
		none("settling, stream table", "", "s", m.stat.Median)
	}
	for _, w := range streamReads {
		ratio(w, streamReadMax)
	}
	if fig.DiskBytesA > 0 && fig.DiskBytesB > 0 {
		c := &comparison{Group: streamGroup, Peer: sysBulk, Ratio: float64(fig.DiskBytesA) / float64(fig.DiskBytesB), Target: fmt.Sprintf("<= %g", streamDiskMax),
			Workload: fmt.Sprintf("disk bytes after settling (%.1f MiB / %.1f MiB)", float64(fig.DiskBytesA)/(1<<20), float64(fig.DiskBytesB)/(1<<20))}
		met := c.Ratio <= streamDiskMax
		c.Met = &met
		r.Comparisons = append(r.Comparisons, c)
	}
	if fig.FilesA > 0 && fig.FilesB > 0 {
		none(fmt.Sprintf("files after settling (%d / %d)", fig.FilesA, fig.FilesB), sysBulk, "", float64(fig.FilesA)/float64(fig.FilesB))
	}
	if m := r.find(streamGroup, wWriterAll, sysWriters); m != nil && m.stat.Median > 0 {
		rate := float64(m.Rows) / m.stat.Median
		r.absolute(streamGroup, "8 writers: aggregate", "k rows/s", rate/1e3, fmt.Sprintf(">= %d k rows/s", writersMinRPS/1000), rate >= writersMinRPS)
	}
	if m := r.find(streamGroup, wWriterPut, sysWriters); m != nil {
		none("8 writers: DoPut p50 (100 rows)", "", "ms", m.stat.Median*1e3)
	}
}

// The rows checkReport demands of a run with the stream workload.
var (
	streamMeasured = []struct {
		workload string
		systems  []string
	}{
		{wPut, []string{sysStream}},
		{wAllRows, []string{sysStream, sysBulk}},
		{wSettle, []string{sysStream, sysBulk}},
		{wDoGet, []string{sysStream, sysBulk}},
		{wGroupBy, []string{sysStream, sysBulk}},
		{wLastHour, []string{sysStream, sysBulk}},
		{wGaps, []string{sysStream, sysBulk}},
		{wCoverage, []string{sysStream, sysBulk}},
		{wRestartDesc, []string{sysStream, sysBulk}},
		{wRestartGet, []string{sysStream, sysBulk}},
		{wWriterPut, []string{sysWriters}},
		{wWriterAll, []string{sysWriters}},
	}
	streamCompared = func() []struct {
		workload, peer string
		target         bool
	} {
		out := []struct {
			workload, peer string
			target         bool
		}{
			{"DoPut p50", "", false},
			{"DoPut p99", "", false},
			{"DoPut mean, last", "", false},
			{wAllRows, sysBulk, false},
			{"settling, stream table", "", false},
			{"disk bytes after settling", sysBulk, true},
			{"files after settling", sysBulk, false},
			{"8 writers: aggregate", "", true},
			{"8 writers: DoPut p50", "", false},
		}
		for _, w := range streamReads {
			out = append(out, struct {
				workload, peer string
				target         bool
			}{w, sysBulk, true})
		}
		return out
	}()
)

// streamExpected says whether a report must hold the stream rows: a run
// that lists its workloads must list "stream" and then hold its rows; a
// report from before the workloads were listed need not.
func streamExpected(r *report) (bool, error) {
	if r.Workloads == nil {
		return false, nil
	}
	if !slices.Contains(r.Workloads, streamGroup) {
		return false, fmt.Errorf("the run's workloads %v lack %q", r.Workloads, streamGroup)
	}
	if r.Stream == nil {
		return true, errors.New("no stream figures (disk bytes, files)")
	}
	return true, nil
}
