package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// adbcQuery runs q through an ADBC connection, reading every batch; with
// keep it returns the canonical rows.
func adbcQuery(ctx context.Context, cnxn adbc.Connection, q string, keep bool) (testkit.Rows, int64, error) {
	stmt, err := cnxn.NewStatement()
	if err != nil {
		return nil, 0, err
	}
	defer stmt.Close()
	if err := stmt.SetSqlQuery(q); err != nil {
		return nil, 0, err
	}
	rdr, _, err := stmt.ExecuteQuery(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer rdr.Release()
	return testkit.ReadRows(rdr, keep)
}

// segmentFiles lists the live Parquet segments of the benchmark table.
func (b *bench) segmentFiles(ctx context.Context) ([]string, error) {
	tb, err := tableformat.Open(ctx, storage.Local(filepath.Join(b.root, table)), nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sg := range tb.State().Segments {
		out = append(out, filepath.Join(b.root, table, filepath.FromSlash(sg.Path)))
	}
	return out, nil
}

// sql runs the TSBS queries through ADBC on tsflight, through DuckDB on
// the table's segment files (a child process), and through the package's
// Session.sql; the answers must agree.
func (b *bench) sql(ctx context.Context) error {
	if err := b.startScanServer(); err != nil {
		return err
	}
	qs := b.cfg.params.Queries(table)
	cnxn, closeSQL, err := openSQL(ctx, b.srv.addr)
	if err != nil {
		return err
	}
	defer closeSQL()
	files, err := b.segmentFiles(ctx)
	if err != nil {
		return err
	}
	duck, err := startDuckServe(b.cfg.self, map[string]any{"root": b.root, "files": files})
	if err != nil {
		return err
	}
	defer duck.stop()
	srvPid, duckPid := b.srv.cmd.Process.Pid, duck.cmd.Process.Pid
	answers := map[string]testkit.Rows{}
	var perr error
	for _, q := range qs {
		// The warm runs, which also give the answers to compare.
		res, _, err := adbcQuery(ctx, cnxn, q.SQL, true)
		if err != nil {
			return fmt.Errorf("%s: %w", q.Name, err)
		}
		answers[q.Name] = res
		got, err := duck.query(q.SQL, true)
		if err != nil {
			return fmt.Errorf("%s: DuckDB: %w", q.Name, err)
		}
		if diff := res.Diff(testkit.FromJSON(got.Result)); diff != "" {
			perr = errors.Join(perr, fmt.Errorf("%s: tsflight and DuckDB differ: %s", q.Name, diff))
		}
		ts := &measurement{Group: "sql", Workload: q.Name, System: "tsflight", Note: "ADBC Go driver; CPU is the server's"}
		dk := &measurement{Group: "sql", Workload: q.Name, System: "DuckDB",
			Note: "the server's DuckDB engine and settings, a view over every segment file, in a child process answering one query at a time, alternated with tsflight"}
		for i := range b.cfg.sqlRuns {
			for _, sys := range abba(i, "tsflight", "DuckDB") {
				if sys == "tsflight" {
					c0, start := cpuSeconds(srvPid), time.Now()
					_, n, err := adbcQuery(ctx, cnxn, q.SQL, false)
					if err != nil {
						return fmt.Errorf("%s: %w", q.Name, err)
					}
					ts.Times = append(ts.Times, time.Since(start).Seconds())
					ts.CPU = append(ts.CPU, cpuSeconds(srvPid)-c0)
					ts.Rows = n
					continue
				}
				c0 := cpuSeconds(duckPid)
				a, err := duck.query(q.SQL, false)
				if err != nil {
					return fmt.Errorf("%s: DuckDB: %w", q.Name, err)
				}
				dk.Times = append(dk.Times, a.Secs)
				dk.CPU = append(dk.CPU, cpuSeconds(duckPid)-c0)
				dk.Rows, dk.RSS = a.Rows, a.PeakRSS
			}
		}
		b.r.add(ts)
		b.r.add(dk)
	}
	if v := duck.version; v != "" {
		b.r.Versions["DuckDB"] = v
	}

	if err := b.lastAction(ctx, answers["lastpoint"]); err != nil {
		return err
	}

	var pres peerSQL
	args := map[string]any{"table_root": filepath.Join(b.root, table), "table": table, "queries": qs, "runs": b.cfg.sqlRuns, "warmup": 1}
	rss, err := b.runPeer(ctx, "sql", args, &pres)
	if err != nil {
		return err
	}
	for _, q := range qs {
		p, ok := pres.Queries[q.Name]
		if !ok {
			return fmt.Errorf("the package has no answer for %s", q.Name)
		}
		if diff := answers[q.Name].Diff(testkit.FromJSON(p.Result)); diff != "" {
			perr = errors.Join(perr, fmt.Errorf("%s: tsflight and the package differ: %s", q.Name, diff))
		}
		b.r.add(&measurement{Group: "sql", Workload: q.Name, System: pkgName, Times: p.TimesS, Rows: p.Rows, RSS: rss, Note: "Session.sql"})
	}
	return perr
}

// duckCopyResult is what "tsbench duck copy" prints.
type duckCopyResult struct {
	Version string    `json:"version"`
	PeakRSS int64     `json:"peak_rss_bytes"`
	Rows    int64     `json:"rows"`
	TimesS  []float64 `json:"times_s"`
}

// lastAction times the Flight action last (every host's newest row, from
// the table's last-value index) and checks its rows against lastpoint's
// answer (want; nil when lastpoint is not among the queries).
func (b *bench) lastAction(ctx context.Context, want testkit.Rows) error {
	req := map[string]any{"table": table}
	got, n, err := lastRows(ctx, b.client, req, true)
	if err != nil {
		return err
	}
	if want != nil {
		if diff := got.Diff(want); diff != "" {
			return fmt.Errorf("last: the action and lastpoint differ: %s", diff)
		}
	}
	times, err := timeRuns(b.cfg.sqlRuns, func() (err error) {
		_, n, err = lastRows(ctx, b.client, req, false)
		return err
	})
	if err != nil {
		return err
	}
	b.r.add(&measurement{Group: "sql", Workload: "last (Flight action)", System: "tsflight", Times: times, Rows: n,
		Note: "arrow-go Flight client, DoAction last: every host's newest row"})
	return nil
}

// lastRows runs the action last and reads the Arrow IPC stream of its
// result; with keep it returns the canonical rows.
func lastRows(ctx context.Context, c flight.Client, req any, keep bool) (testkit.Rows, int64, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, 0, err
	}
	stream, err := c.DoAction(ctx, &flight.Action{Type: "last", Body: body})
	if err != nil {
		return nil, 0, fmt.Errorf("last: %w", err)
	}
	res, err := stream.Recv()
	if err != nil {
		return nil, 0, fmt.Errorf("last: %w", err)
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			break
		} else if err != nil {
			return nil, 0, fmt.Errorf("last: %w", err)
		}
	}
	rdr, err := ipc.NewReader(bytes.NewReader(res.Body))
	if err != nil {
		return nil, 0, fmt.Errorf("last: the result is not an Arrow IPC stream: %w", err)
	}
	defer rdr.Release()
	return testkit.ReadRows(rdr, keep)
}
