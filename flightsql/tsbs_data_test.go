//go:build duckdb_arrow

package flightsql

// The TSBS cpu-only table (data and queries from bench/tsbs) and a
// tsflight server in a child process, for BenchmarkTSBSQueries and
// TestTSBSQueriesAgree (see tsbs_bench_test.go); results are compared as
// internal/testkit.Rows.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tsflight/tsflight/bench/tsbs"
	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/internal/testkit"
)

// tsbsSet is a TSBS cpu-only data set from bench/tsbs, hosts × hours at
// 10 s from TSBS's start, written as one segment per segHours hours.
type tsbsSet struct {
	tsbs.Params
	segHours int
}

// newTSBSSet returns the set, complete: nothing dropped or delivered
// late, so the table holds hosts × hours rows in whole hours, as the
// benchmark's report and docs/design.md describe it (one segment per
// segHours hours, and the segments a query's window reads).
func newTSBSSet(tb testing.TB, hosts, hours, segHours int, seed uint64) tsbsSet {
	tb.Helper()
	p := tsbsSet{Params: tsbs.Params{Hosts: hosts, Start: tsbs.TSBSStart, Duration: time.Duration(hours) * time.Hour,
		Seed: seed, DropFraction: 0, LateFraction: 0}, segHours: segHours}
	if err := p.Validate(); err != nil {
		tb.Fatal(err)
	}
	return p
}

// key names a cached root; bump the v when the data or the way it is
// written changes.
func (p tsbsSet) key() string {
	return fmt.Sprintf("tsflight-tsbs-v2-h%d-%dh-seg%dh-seed%d", p.Hosts, p.Hours(), p.segHours, p.Seed)
}

func tsbsEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// --- the tsflight server, in a child process ---

// TestTSBSServerProcess is not a test: it is the tsflight server of the
// TSBS benchmark, run when the test binary re-executes itself with
// TSFLIGHT_TSBS_SERVE_ROOT set. It prints "ADDR host:port" and serves
// until SIGTERM. TSFLIGHT_BENCH_CPUPROF=FILE writes a CPU profile of its
// whole life.
func TestTSBSServerProcess(t *testing.T) {
	root := os.Getenv("TSFLIGHT_TSBS_SERVE_ROOT")
	if root == "" {
		t.Skip("the TSBS benchmark's server process; runs only when re-executed by it")
	}
	if err := serveTSBS(root, tsbsEnvInt("TSFLIGHT_TSBS_SERVE_THREADS", 0), os.Getenv("TSFLIGHT_BENCH_CPUPROF"), os.Getenv("TSFLIGHT_TSBS_SERVE_LOG")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// serveTSBS runs a tsflight listener (plain Flight + Flight SQL) over root
// as tsflight serve sets it up, until SIGTERM. With logFile set, the
// server logs to it at debug level as JSON (one "sql plan" line per
// query execution).
func serveTSBS(root string, threads int, cpuprof, logFile string) error {
	debug.SetGCPercent(flightserver.RecommendedGCPercent) // as tsflight serve
	log := hclog.NewNullLogger()
	if logFile != "" {
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		log = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: f, JSONFormat: true})
	}
	fo := flightserver.DefaultOptions(root)
	fo.Logger = log
	svc, err := flightserver.New(fo)
	if err != nil {
		return err
	}
	so := DefaultOptions()
	so.Logger = log
	so.Threads = threads
	sql, err := New(context.Background(), svc, so)
	if err != nil {
		return err
	}
	defer sql.Close()
	gopts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20), grpc.MaxSendMsgSize(64 << 20)}, svc.GRPCOptions()...)
	srv := flight.NewServerWithMiddleware(nil, gopts...)
	srv.RegisterFlightService(sql.Service())
	if err := srv.Init("127.0.0.1:0"); err != nil {
		return err
	}
	if cpuprof != "" {
		f, err := os.Create(cpuprof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// Stop on SIGTERM, or when the parent goes away (stdin closes).
	stop := make(chan struct{}, 2)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; stop <- struct{}{} }()
	go func() { io.Copy(io.Discard, os.Stdin); stop <- struct{}{} }()
	go func() { <-stop; srv.Shutdown() }()
	fmt.Printf("ADDR %s\n", srv.Addr())
	return srv.Serve()
}

// tsbsServer is a running server child process.
type tsbsServer struct {
	cmd  *exec.Cmd
	addr string
	log  string // its debug log (JSON lines)
}

// startTSBSServer re-executes the test binary as a server over root.
// profile, when set, is where the child writes its CPU profile.
func startTSBSServer(tb testing.TB, root string, threads int, profile string) *tsbsServer {
	tb.Helper()
	s := &tsbsServer{log: filepath.Join(tb.TempDir(), "server.log")}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTSBSServerProcess$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TSFLIGHT_BENCH_CPUPROF=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TSFLIGHT_TSBS_SERVE_ROOT="+root, "TSFLIGHT_TSBS_SERVE_THREADS="+strconv.Itoa(threads), "TSFLIGHT_TSBS_SERVE_LOG="+s.log)
	if profile != "" {
		cmd.Env = append(cmd.Env, "TSFLIGHT_BENCH_CPUPROF="+profile)
	}
	// The child stops when this pipe closes, so it never outlives us.
	if _, err := cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	s.cmd = cmd
	s.addr = testkit.StartChild(tb, cmd, "ADDR ")
	tb.Cleanup(s.stop)
	return s
}

func (s *tsbsServer) stop() {
	testkit.StopProcess(s.cmd, 30*time.Second)
}

// lastPlan returns the segments planned and live of table cpu in the
// newest "sql plan" line of the server's log.
func (s *tsbsServer) lastPlan() (planned, segments int, ok bool) {
	data, err := os.ReadFile(s.log)
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(string(data), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var m map[string]any
		if json.Unmarshal([]byte(lines[i]), &m) != nil || m["@message"] != "sql plan" || m["table"] != "cpu" {
			continue
		}
		p, _ := m["planned"].(float64)
		n, _ := m["segments"].(float64)
		return int(p), int(n), true
	}
	return 0, 0, false
}

// sqlClient returns an arrow-go Flight SQL client of the server.
func (s *tsbsServer) sqlClient(tb testing.TB) *flightsql.Client {
	c, err := flightsql.NewClient(s.addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// --- the table ---

var tsbsIngestOpts = map[string]string{
	"tsflight.index_column":   "time",
	"tsflight.granularity":    "10s",
	"tsflight.entity_columns": "hostname",
}

// writeTSBS creates table cpu under root through Flight SQL bulk ingest:
// p's deliveries (one an hour) in order, those of segHours hours together
// in one ingest (one segment).
func writeTSBS(tb testing.TB, root string, p tsbsSet) {
	tb.Helper()
	srv := startTSBSServer(tb, root, 0, "")
	defer srv.stop()
	client := srv.sqlClient(tb)
	ctx := context.Background()
	ds := p.Deliveries()
	var total int64
	for i := 0; i < len(ds); {
		seg := ds[i].Hour / p.segHours
		var batches []arrow.RecordBatch
		var want int64
		for ; i < len(ds) && ds[i].Hour/p.segHours == seg; i++ {
			d := ds[i]
			want += int64(d.NumHosts()) * int64(d.EndStep-d.FirstStep)
			err := p.Batches(memory.DefaultAllocator, d, func(b arrow.RecordBatch) error {
				b.Retain()
				batches = append(batches, b)
				return nil
			})
			if err != nil {
				tb.Fatalf("delivery %s: %v", d.Name(), err)
			}
		}
		rdr, err := array.NewRecordReader(tsbs.Schema(), batches)
		if err != nil {
			tb.Fatal(err)
		}
		o := &flightsql.ExecuteIngestOpts{Table: "cpu", Options: tsbsIngestOpts, TableDefinitionOptions: &flightsql.TableDefinitionOptions{
			IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionCreate,
			IfExists:   flightsql.TableDefinitionOptionsTableExistsOptionAppend,
		}}
		n, err := client.ExecuteIngest(ctx, rdr, o)
		rdr.Release()
		for _, b := range batches {
			b.Release()
		}
		if err != nil {
			tb.Fatalf("ingest of segment %d (hours %d..%d): %v", seg, seg*p.segHours, (seg+1)*p.segHours, err)
		}
		if n != want {
			tb.Fatalf("ingest of segment %d (hours %d..%d): %d rows, want %d", seg, seg*p.segHours, (seg+1)*p.segHours, n, want)
		}
		total += want
	}
	if complete := int64(p.Hosts) * int64(p.Steps()); total != complete {
		tb.Fatalf("the deliveries held %d rows, want %d (every host at every step)", total, complete)
	}
}

// tsbsRoot returns a root holding table cpu with p's data: cached under
// os.TempDir by p's key (TSFLIGHT_TSBS_NOCACHE=1 rebuilds it), built
// beside it and renamed into place once complete.
func tsbsRoot(tb testing.TB, p tsbsSet) string {
	tb.Helper()
	root := filepath.Join(os.TempDir(), p.key())
	done := root + ".complete"
	if os.Getenv("TSFLIGHT_TSBS_NOCACHE") == "" {
		if _, err := os.Stat(done); err == nil {
			return root
		}
	}
	os.Remove(done)
	os.RemoveAll(root)
	tmp := fmt.Sprintf("%s.tmp-%d", root, os.Getpid())
	os.RemoveAll(tmp)
	start := time.Now()
	writeTSBS(tb, tmp, p)
	if err := os.Rename(tmp, root); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(done); serr == nil {
			return root // another run built it meanwhile
		}
		tb.Fatal(err)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("TSBS data: %d hosts × %d h = %d rows in %d-hour segments written to %s in %v",
		p.Hosts, p.Hours(), p.Rows(), p.segHours, root, time.Since(start).Round(time.Millisecond))
	return root
}

// tsbsSegmentFiles lists the Parquet files of table cpu's newest version,
// as the server's views name them.
func tsbsSegmentFiles(tb testing.TB, root string) []string {
	tb.Helper()
	svc, err := flightserver.New(flightserver.DefaultOptions(root))
	if err != nil {
		tb.Fatal(err)
	}
	tbl, err := svc.Table(context.Background(), "cpu")
	if err != nil {
		tb.Fatal(err)
	}
	var files []string
	for _, sg := range tbl.State().Segments {
		files = append(files, filepath.Join(svc.Root(), "cpu", filepath.FromSlash(sg.Path)))
	}
	return files
}

// TestTSBSQueriesAgree runs the TSBS queries at a small scale through
// tsflight (ADBC) and DuckDB over the same Parquet files, and checks the
// answers agree.
func TestTSBSQueriesAgree(t *testing.T) {
	p := newTSBSSet(t, 10, 2, 1, 1)
	root := t.TempDir()
	writeTSBS(t, root, p)
	threads := runtime.NumCPU()
	srv := startTSBSServer(t, root, threads, "")
	ts := newTSBSADBC(t, srv.addr)
	duck := newTSBSDuckDB(t, root, tsbsSegmentFiles(t, root), threads)
	ctx := context.Background()
	for _, q := range p.Queries("cpu") {
		want := mustTSBSRows(t, ctx, duck, "duckdb", q)
		if d := mustTSBSRows(t, ctx, ts, "tsflight", q).Diff(want); d != "" {
			t.Errorf("%s: tsflight and duckdb differ (tsflight first): %s\n%s", q.Name, d, q.SQL)
		}
		if len(want) == 0 && q.Name != "high-cpu-1" {
			t.Errorf("%s: no rows\n%s", q.Name, q.SQL)
		}
	}
}
