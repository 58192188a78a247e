//go:build duckdb_arrow

package flightsql

// BenchmarkTSBSQueries runs the seven TSBS cpu-only queries through three
// systems over one tsflight table and reports per query the median time
// of each and the ratios:
//
//   - tsflight: the ADBC Go Flight SQL driver against a tsflight server
//     (plain Flight + Flight SQL, DuckDB inside) in a child process on
//     127.0.0.1, reading every result batch;
//   - duckdb: DuckDB used directly, in process (its own database through
//     the package's C-API engine, the server's settings and thread count),
//     where cpu is a view read_parquet([every segment file of the table]):
//     the same files with no pruning by us;
//   - session: timeseries-table-format 0.9.0's Session.sql (DataFusion) on
//     the same table directory, by testdata/tsbs_session_sql.py, run once
//     per benchmark run (its own warm run, then its own iterations).
//
// tsflight and duckdb alternate per iteration (and swap order every other
// one), so drift of a shared machine hits both. Before timing, every query
// runs once on every system (the warm run) and the answers must agree
// (row counts, and values after sorting, floats to 1e-9 relative), or the
// benchmark fails. Run:
//
//	go test -tags duckdb_arrow -run '^$' -bench TSBSQueries -benchtime 5x ./flightsql/
//
// -benchtime Nx is the number of timed runs of each query per system.
// Knobs: TSFLIGHT_TSBS_HOSTS (default 100), TSFLIGHT_TSBS_HOURS (24),
// TSFLIGHT_TSBS_SEGMENT_HOURS (1: one segment per hour),
// TSFLIGHT_TSBS_SEED (1), TSFLIGHT_TSBS_THREADS (DuckDB threads of the
// server and of the direct connection; default the number of CPUs),
// TSFLIGHT_TSBS_NOCACHE=1 (rebuild the table; it is cached under
// os.TempDir by its parameters), TSFLIGHT_PYTHON (python3),
// TSFLIGHT_TSBS_PY_ITERS (timed Session.sql runs per query, 10),
// TSFLIGHT_TSBS_SPLIT=1 (also time tsflight through arrow-go's Flight SQL
// client with GetFlightInfo and DoGet apart: metrics info-ms, doget-ms),
// TSFLIGHT_TSBS_QUERIES=name,name (run only those queries),
// TSFLIGHT_BENCH_CPUPROF=FILE (CPU profile of the server process's life).
// Without the Python package the session column is skipped with a logged
// reason, unless CI=true.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/bench/tsbs"
	"github.com/tsflight/tsflight/internal/testkit"
)

// tsbsSystem runs a query and hands every result batch to fn (which must
// not keep it without Retain).
type tsbsSystem interface {
	query(ctx context.Context, q string, fn func(arrow.RecordBatch)) error
}

// tsbsRowsOf runs q on sys and returns its canonical rows, converted batch
// by batch while each is held.
func tsbsRowsOf(ctx context.Context, sys tsbsSystem, q string) (testkit.Rows, error) {
	var out testkit.Rows
	var cerr error
	err := sys.query(ctx, q, func(rec arrow.RecordBatch) {
		if cerr != nil {
			return
		}
		out, cerr = testkit.AppendRows(out, rec)
	})
	return out, errors.Join(err, cerr)
}

// mustTSBSRows is tsbsRowsOf(q) on sys, failing tb with sys's name on an
// error.
func mustTSBSRows(tb testing.TB, ctx context.Context, sys tsbsSystem, name string, q tsbs.Query) testkit.Rows {
	tb.Helper()
	rows, err := tsbsRowsOf(ctx, sys, q.SQL)
	if err != nil {
		tb.Fatalf("%s: %s: %v\n%s", q.Name, name, err, q.SQL)
	}
	return rows
}

// tsbsADBC is a tsflight server seen through the ADBC Flight SQL driver.
type tsbsADBC struct {
	db   adbc.Database
	cnxn adbc.Connection
}

func newTSBSADBC(tb testing.TB, addr string) *tsbsADBC {
	tb.Helper()
	db, err := adbcflightsql.NewDriver(memory.DefaultAllocator).NewDatabase(map[string]string{
		adbc.OptionKeyURI: "grpc+tcp://" + addr,
	})
	if err != nil {
		tb.Fatal(err)
	}
	cnxn, err := db.Open(context.Background())
	if err != nil {
		db.Close()
		tb.Fatal(err)
	}
	s := &tsbsADBC{db: db, cnxn: cnxn}
	tb.Cleanup(func() { cnxn.Close(); db.Close() })
	return s
}

func (s *tsbsADBC) query(ctx context.Context, q string, fn func(arrow.RecordBatch)) error {
	return adbcQueryEach(ctx, s.cnxn, q, fn)
}

// tsbsDuckDB is DuckDB used directly (Direct: the server's engine and
// settings — UTC, file access confined to the root, Options.Threads, the
// Parquet metadata cache as DefaultOptions has it — on one connection),
// with a view cpu over every segment file. No tsflight planning, no
// pruning but DuckDB's own (row-group statistics), no transport; results
// stream chunk by chunk as the server's do.
type tsbsDuckDB struct {
	d *Direct
}

func newTSBSDuckDB(tb testing.TB, root string, files []string, threads int) *tsbsDuckDB {
	tb.Helper()
	ctx := context.Background()
	opts := DefaultOptions()
	opts.Threads = threads
	d, err := OpenDirect(ctx, root, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = sqlString(f)
	}
	view := "CREATE VIEW cpu AS SELECT * FROM read_parquet([" + strings.Join(quoted, ", ") + "])"
	if err := d.Exec(ctx, view); err != nil {
		tb.Fatalf("%s: %v", view, err)
	}
	return &tsbsDuckDB{d: d}
}

func (s *tsbsDuckDB) query(ctx context.Context, q string, fn func(arrow.RecordBatch)) error {
	rdr, err := s.d.Query(ctx, q)
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
		fn(rdr.RecordBatch())
	}
	return rdr.Err()
}

// tsbsSplit is tsflight through arrow-go's Flight SQL client, timing
// GetFlightInfo (planning + the schema probe) and DoGet apart.
type tsbsSplit struct {
	client     *flightsql.Client
	info, dget time.Duration // of the last query
}

func (s *tsbsSplit) query(ctx context.Context, q string, fn func(arrow.RecordBatch)) error {
	start := time.Now()
	info, err := s.client.Execute(ctx, q)
	if err != nil {
		return err
	}
	s.info = time.Since(start)
	start = time.Now()
	for _, ep := range info.Endpoint {
		rdr, err := s.client.DoGet(ctx, ep.Ticket)
		if err != nil {
			return err
		}
		for rdr.Next() {
			fn(rdr.RecordBatch())
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return err
		}
	}
	s.dget = time.Since(start)
	return nil
}

// tsbsSessionOut is what testdata/tsbs_session_sql.py prints.
type tsbsSessionOut struct {
	Package string `json:"package"`
	Version string `json:"version"`
	Queries map[string]struct {
		MedianS float64   `json:"median_s"`
		TimesS  []float64 `json:"times_s"`
		Rows    int       `json:"rows"`
		Result  [][]any   `json:"result"`
	} `json:"queries"`
}

// runTSBSSession times qs through Session.sql. A nil result comes with the
// reason it was skipped.
func runTSBSSession(tb testing.TB, root string, qs []tsbs.Query, iters int) (*tsbsSessionOut, string) {
	tb.Helper()
	python := os.Getenv("TSFLIGHT_PYTHON")
	if python == "" {
		python = "python3"
	}
	skip := func(reason string) (*tsbsSessionOut, string) {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("Session.sql: %s (CI=true: not skipping)", reason)
		}
		return nil, reason
	}
	if _, err := exec.LookPath(python); err != nil {
		return skip(fmt.Sprintf("no Python interpreter %q (set TSFLIGHT_PYTHON)", python))
	}
	raw, err := json.Marshal(qs)
	if err != nil {
		tb.Fatal(err)
	}
	qfile := filepath.Join(tb.TempDir(), "queries.json")
	if err := os.WriteFile(qfile, raw, 0o644); err != nil {
		tb.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(python, filepath.Join("testdata", "tsbs_session_sql.py"), root, "cpu", qfile, fmt.Sprint(iters))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		return skip("the Python package timeseries-table-format is not installed for " + python + " (pip install timeseries-table-format==0.9.0): " + strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		tb.Fatalf("Session.sql script: %v\n%s", err, stderr.String())
	}
	var out tsbsSessionOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		tb.Fatalf("Session.sql script output: %v\n%s", err, stdout.String())
	}
	if out.Version != "0.9.0" {
		tb.Logf("Session.sql: %s %s, not the 0.9.0 this benchmark was written against", out.Package, out.Version)
	}
	return &out, ""
}

func tsbsMS(d time.Duration) float64 { return float64(d) / 1e6 }

// num formats a figure for the table; NaN (no figure) is "-".
func tsbsNum(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// tsbsFigures are one query's medians, in ms.
type tsbsFigures struct {
	rows                      int
	planned, segments         int // of the server's plan
	tsflight, duckdb, session float64
	info, doget               float64
	runs                      int
}

func BenchmarkTSBSQueries(b *testing.B) {
	p := newTSBSSet(b, tsbsEnvInt("TSFLIGHT_TSBS_HOSTS", 100), tsbsEnvInt("TSFLIGHT_TSBS_HOURS", 24),
		tsbsEnvInt("TSFLIGHT_TSBS_SEGMENT_HOURS", 1), uint64(tsbsEnvInt("TSFLIGHT_TSBS_SEED", 1)))
	threads := tsbsEnvInt("TSFLIGHT_TSBS_THREADS", runtime.NumCPU())
	root := tsbsRoot(b, p)
	files := tsbsSegmentFiles(b, root)
	srv := startTSBSServer(b, root, threads, os.Getenv("TSFLIGHT_BENCH_CPUPROF"))
	ts := newTSBSADBC(b, srv.addr)
	duck := newTSBSDuckDB(b, root, files, threads)
	var split *tsbsSplit
	if os.Getenv("TSFLIGHT_TSBS_SPLIT") != "" {
		split = &tsbsSplit{client: srv.sqlClient(b)}
	}
	qs := p.Queries("cpu")
	if only := os.Getenv("TSFLIGHT_TSBS_QUERIES"); only != "" {
		names := strings.Split(only, ",")
		qs = slices.DeleteFunc(qs, func(q tsbs.Query) bool { return !slices.Contains(names, q.Name) })
		if len(qs) == 0 {
			b.Fatalf("TSFLIGHT_TSBS_QUERIES=%s names no query", only)
		}
	}
	ctx := context.Background()

	// Warm run and answer check.
	figs := map[string]*tsbsFigures{}
	want := map[string]testkit.Rows{}
	for _, q := range qs {
		w := mustTSBSRows(b, ctx, duck, "duckdb", q)
		if d := mustTSBSRows(b, ctx, ts, "tsflight", q).Diff(w); d != "" {
			b.Fatalf("%s: tsflight and duckdb answer differently (tsflight first): %s\n%s", q.Name, d, q.SQL)
		}
		if split != nil {
			if d := mustTSBSRows(b, ctx, split, "tsflight (arrow-go client)", q).Diff(w); d != "" {
				b.Fatalf("%s: tsflight (arrow-go client) and duckdb answer differently (tsflight first): %s", q.Name, d)
			}
		}
		want[q.Name] = w
		figs[q.Name] = &tsbsFigures{rows: len(w), session: math.NaN(), info: math.NaN(), doget: math.NaN()}
		figs[q.Name].planned, figs[q.Name].segments, _ = srv.lastPlan()
	}

	pyIters := tsbsEnvInt("TSFLIGHT_TSBS_PY_ITERS", 10)
	sess, skipped := runTSBSSession(b, root, qs, pyIters)
	if sess == nil {
		b.Logf("Session.sql skipped: %s", skipped)
	} else {
		for _, q := range qs {
			r, ok := sess.Queries[q.Name]
			if !ok {
				b.Fatalf("%s: no Session.sql figure", q.Name)
			}
			if d := testkit.FromJSON(r.Result).Diff(want[q.Name]); d != "" {
				b.Fatalf("%s: Session.sql and duckdb answer differently (Session.sql first): %s\n%s", q.Name, d, q.SQL)
			}
			figs[q.Name].session = r.MedianS * 1e3
		}
	}

	for _, q := range qs {
		b.Run(q.Name, func(b *testing.B) {
			var tsT, dkT, infoT, dgetT []float64
			timed := func(sys tsbsSystem) float64 {
				start := time.Now()
				if err := sys.query(ctx, q.SQL, func(arrow.RecordBatch) {}); err != nil {
					b.Fatalf("%s: %v", q.Name, err)
				}
				return tsbsMS(time.Since(start))
			}
			for i := range b.N {
				testkit.Alternate(i,
					func() { tsT = append(tsT, timed(ts)) },
					func() { dkT = append(dkT, timed(duck)) })
				if split != nil {
					timed(split)
					infoT, dgetT = append(infoT, tsbsMS(split.info)), append(dgetT, tsbsMS(split.dget))
				}
			}
			f := figs[q.Name]
			f.tsflight, f.duckdb, f.runs = testkit.Median(tsT), testkit.Median(dkT), b.N
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(f.tsflight, "tsflight-ms")
			b.ReportMetric(f.duckdb, "duckdb-ms")
			b.ReportMetric(f.tsflight/f.duckdb, "ts/duckdb")
			if !math.IsNaN(f.session) {
				b.ReportMetric(f.session, "session-ms")
				b.ReportMetric(f.tsflight/f.session, "ts/session")
			}
			if split != nil {
				f.info, f.doget = testkit.Median(infoT), testkit.Median(dgetT)
				b.ReportMetric(f.info, "info-ms")
				b.ReportMetric(f.doget, "doget-ms")
			}
		})
	}

	// The table.
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nTSBS cpu-only: %d hosts × %d h at 10 s = %d rows, %d segments; DuckDB threads %d; medians of %d runs (Session.sql: %d)\n",
		p.Hosts, p.Hours(), p.Rows(), len(files), threads, figs[qs[0].Name].runs, pyIters)
	fmt.Fprintf(&sb, "%-22s %6s %6s %12s %10s %11s %10s %11s", "query", "rows", "segs", "tsflight ms", "duckdb ms", "session ms", "ts/duckdb", "ts/session")
	if split != nil {
		fmt.Fprintf(&sb, " %8s %9s", "info ms", "doget ms")
	}
	sb.WriteString("\n")
	var gTD, gTS float64
	for _, q := range qs {
		f := figs[q.Name]
		fmt.Fprintf(&sb, "%-22s %6d %6s %12.2f %10.2f %11s %10.2f %11s", q.Name, f.rows, fmt.Sprintf("%d/%d", f.planned, f.segments),
			f.tsflight, f.duckdb, tsbsNum(f.session), f.tsflight/f.duckdb, tsbsNum(f.tsflight/f.session))
		if split != nil {
			fmt.Fprintf(&sb, " %8.2f %9.2f", f.info, f.doget)
		}
		sb.WriteString("\n")
		gTD += math.Log(f.tsflight / f.duckdb)
		gTS += math.Log(f.tsflight / f.session)
	}
	fmt.Fprintf(&sb, "%-22s %6s %6s %12s %10s %11s %10.2f %11s   (targets: ts/duckdb <= 1.1, ts/session <= 0.5)\n", "geometric mean", "", "", "", "", "",
		math.Exp(gTD/float64(len(qs))), tsbsNum(math.Exp(gTS/float64(len(qs)))))
	if sess == nil {
		fmt.Fprintf(&sb, "Session.sql skipped: %s\n", skipped)
	}
	fmt.Print(sb.String())
}
