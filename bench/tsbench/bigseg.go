package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"

	"github.com/tsflight/tsflight/bench/tsbs"
	"github.com/tsflight/tsflight/internal/testkit"
)

// The big-segment workload (issue 21): the Python workloads' table cpu,
// written by one DoPut into one large segment (the shape compaction
// produces), queried narrowly through tsflight's Flight SQL and by DuckDB
// reading the same Parquet file directly, alternated query by query;
// with --floorserver, also the same client and loop against a Flight SQL
// server that answers every query with one constant row from memory
// (flightsql/internal/floorserver): the floor of Flight SQL's round trips
// (GetFlightInfo, then DoGet), which DuckDB called directly never pays.

// bigsegWorkloads are its queries' names, in order.
var bigsegWorkloads = []string{"one host, one hour (single-groupby-1-1-1)", "count(*), 10 minutes"}

// bigsegFloor is the floor's system name, and bigsegFloorStep the entry
// in a report's workloads that says the floor was measured (reports from
// before it lack both).
const (
	bigsegFloor     = "Flight SQL floor"
	bigsegFloorStep = "bigseg-floor"
)

// bigsegLessFloor is the workload of the comparison (tsflight − floor) /
// DuckDB of query w.
func bigsegLessFloor(w string) string { return w + ", less the floor" }

// bigsegQueries are a narrow query of each kind over the data of p: the
// TSBS query of one host over one hour, and the count of the rows of the
// ten minutes from the middle of the span.
func bigsegQueries(p tsbs.Params) []tsbs.Query {
	var one tsbs.Query
	for _, q := range p.Queries(table) {
		if q.Name == "single-groupby-1-1-1" {
			one = q
		}
	}
	from := p.Start.Add(p.Duration / 2).Truncate(time.Minute).UTC()
	lit := func(t time.Time) string { return "'" + t.Format(time.RFC3339Nano) + "'" }
	count := fmt.Sprintf("SELECT count(*) AS n FROM %s WHERE time >= %s AND time < %s", table, lit(from), lit(from.Add(10*time.Minute)))
	return []tsbs.Query{{Name: bigsegWorkloads[0], SQL: one.SQL}, {Name: bigsegWorkloads[1], SQL: count}}
}

func (b *bench) bigseg(ctx context.Context) error {
	if err := b.pyServer(ctx, true); err != nil {
		return err
	}
	files, err := b.pySegments(ctx)
	if err != nil {
		return err
	}
	qs := bigsegQueries(b.cfg.pyParams)
	if qs[0].SQL == "" {
		return fmt.Errorf("no single-groupby-1-1-1 query")
	}
	cnxn, closeSQL, err := openSQL(ctx, b.py.srv.addr)
	if err != nil {
		return err
	}
	defer closeSQL()
	duck, err := startDuckServe(b.cfg.self, map[string]any{"root": b.py.root, "files": files})
	if err != nil {
		return err
	}
	defer duck.stop()
	srvPid := b.py.srv.cmd.Process.Pid
	var floorCnxn adbc.Connection
	floorPid := 0
	systems := []string{"tsflight", "DuckDB"}
	if b.cfg.floor != "" {
		floor, err := startChild("floorserver", listenRE("floorserver"), b.cfg.floor, "-listen", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer floor.stop() // it dies of the signal: no clean exit to report
		var closeFloor func()
		if floorCnxn, closeFloor, err = openSQL(ctx, floor.addr); err != nil {
			return err
		}
		defer closeFloor()
		floorPid = floor.cmd.Process.Pid
		systems = append(systems, bigsegFloor)
	}
	for _, q := range qs {
		want, _, err := adbcQuery(ctx, cnxn, q.SQL, true)
		if err != nil {
			return fmt.Errorf("%s: %w", q.Name, err)
		}
		got, err := duck.query(q.SQL, true)
		if err != nil {
			return fmt.Errorf("%s: DuckDB: %w", q.Name, err)
		}
		if diff := want.Diff(testkit.FromJSON(got.Result)); diff != "" {
			return fmt.Errorf("%s: tsflight and DuckDB differ: %s", q.Name, diff)
		}
		ts := &measurement{Group: "bigseg", Workload: q.Name, System: "tsflight",
			Note: fmt.Sprintf("ADBC Go driver; the table is %d segment(s) of %d rows; CPU is the server's", len(files), b.py.rows)}
		dk := &measurement{Group: "bigseg", Workload: q.Name, System: "DuckDB",
			Note: "the server's DuckDB engine and settings on a view over the same segment file(s), in a child process answering one query at a time, alternated with tsflight"}
		fl := &measurement{Group: "bigseg", Workload: q.Name, System: bigsegFloor,
			Note: "the same ADBC Go client and loop against flightsql/internal/floorserver, which answers every query with one constant row from memory (no engine, no disk): Flight SQL's GetFlightInfo + DoGet alone; alternated with the other two; CPU is that server's"}
		if floorCnxn != nil {
			if _, _, err := adbcQuery(ctx, floorCnxn, q.SQL, false); err != nil { // warm-up, as the others had
				return fmt.Errorf("%s: the floor: %w", q.Name, err)
			}
		}
		for i := range b.cfg.bigRuns {
			for _, sys := range abba(i, systems...) {
				if sys == "tsflight" || sys == bigsegFloor {
					m, c, pid := ts, cnxn, srvPid
					if sys == bigsegFloor {
						m, c, pid = fl, floorCnxn, floorPid
					}
					c0, start := cpuSeconds(pid), time.Now()
					_, n, err := adbcQuery(ctx, c, q.SQL, false)
					if err != nil {
						return fmt.Errorf("%s on %s: %w", q.Name, sys, err)
					}
					m.Times = append(m.Times, time.Since(start).Seconds())
					m.CPU = append(m.CPU, cpuSeconds(pid)-c0)
					m.Rows = n
					continue
				}
				c0 := cpuSeconds(duck.cmd.Process.Pid)
				a, err := duck.query(q.SQL, false)
				if err != nil {
					return fmt.Errorf("%s: DuckDB: %w", q.Name, err)
				}
				dk.Times = append(dk.Times, a.Secs)
				dk.CPU = append(dk.CPU, cpuSeconds(duck.cmd.Process.Pid)-c0)
				dk.Rows, dk.RSS = a.Rows, a.PeakRSS
			}
		}
		b.r.add(ts)
		b.r.add(dk)
		if floorCnxn != nil {
			fl.RSS = vmHWM(floorPid)
			b.r.add(fl)
			logf("   %s: tsflight %s, DuckDB %s, floor %s", q.Name, humanDur(ts.stat.Median), humanDur(dk.stat.Median), humanDur(fl.stat.Median))
			continue
		}
		logf("   %s: tsflight %s, DuckDB %s", q.Name, humanDur(ts.stat.Median), humanDur(dk.stat.Median))
	}
	if v := duck.version; v != "" {
		b.r.Versions["DuckDB"] = v
	}
	return nil
}

// abba is the order of the systems in run i: as given in even runs,
// reversed in odd ones, so that neither always goes first.
func abba(i int, systems ...string) []string {
	out := append([]string(nil), systems...)
	if i%2 == 1 {
		for l, r := 0, len(out)-1; l < r; l, r = l+1, r-1 {
			out[l], out[r] = out[r], out[l]
		}
	}
	return out
}

// cpuSeconds is the user + system CPU time of process pid so far, from
// /proc (in the kernel's 10 ms ticks; 0 if unknown).
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(raw), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return float64(utime+stime) / 100 // USER_HZ is 100 on Linux
}

// duckAnswer is one answer of "tsbench duck serve".
type duckAnswer struct {
	Secs    float64 `json:"secs"`
	Rows    int64   `json:"rows"`
	Result  [][]any `json:"result,omitempty"`
	PeakRSS int64   `json:"peak_rss_bytes"`
	Error   string  `json:"error,omitempty"`
}

// duckProc is a "tsbench duck serve" child: DuckDB answering one query
// at a time, each line of its standard input a query, each line of its
// standard output an answer.
type duckProc struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	version string
}

func startDuckServe(self string, args any) (*duckProc, error) {
	cmd := exec.Command(self, "duck", "serve", mustJSON(args))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &duckProc{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	var hello struct {
		Version string `json:"version"`
	}
	if err := p.read(&hello); err != nil {
		p.stop()
		return nil, fmt.Errorf("duck serve: %w", err)
	}
	p.version = hello.Version
	return p, nil
}

func (p *duckProc) read(v any) error {
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	return json.Unmarshal(line, v)
}

// query runs sql in the child; with keep the answer holds the rows.
func (p *duckProc) query(sql string, keep bool) (duckAnswer, error) {
	var a duckAnswer
	if _, err := fmt.Fprintln(p.in, mustJSON(duckRequest{SQL: sql, Keep: keep})); err != nil {
		return a, err
	}
	if err := p.read(&a); err != nil {
		return a, err
	}
	if a.Error != "" {
		return a, fmt.Errorf("%s", a.Error)
	}
	return a, nil
}

// stop closes the child's input, on which it exits.
func (p *duckProc) stop() error {
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		return fmt.Errorf("duck serve did not exit within 30 s of its input's end")
	}
}

// duckRequest is one line of "tsbench duck serve"'s input.
type duckRequest struct {
	SQL  string `json:"sql"`
	Keep bool   `json:"keep,omitempty"`
}
