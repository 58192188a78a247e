//go:build duckdb_arrow

package flightsql

// TSBS cpu-only data, the TSBS queries in DuckDB SQL, a tsflight server
// in a child process, and result comparison, for BenchmarkTSBSQueries and
// TestTSBSQueriesAgree (see tsbs_bench_test.go).

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
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

	"github.com/tsflight/tsflight/flightserver"
)

// tsbsParams choose a TSBS cpu-only data set: hosts × hours at a 10 s
// interval, starting at tsbsStart, written as one segment per segHours.
type tsbsParams struct {
	hosts, hours, segHours int
	seed                   uint64
}

// tsbsStart is TSBS's default --timestamp-start.
var tsbsStart = time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)

const tsbsInterval = 10 * time.Second

func (p tsbsParams) rows() int { return p.hosts * p.steps() }

func (p tsbsParams) steps() int { return p.hours * int(time.Hour/tsbsInterval) }

func (p tsbsParams) end() time.Time { return tsbsStart.Add(time.Duration(p.hours) * time.Hour) }

// key names a cached root; bump the v when the generator changes.
func (p tsbsParams) key() string {
	return fmt.Sprintf("tsflight-tsbs-v1-h%d-%dh-seg%dh-seed%d", p.hosts, p.hours, p.segHours, p.seed)
}

func tsbsEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// tsbsTags are the tag columns after hostname, as TSBS's devops host.
var tsbsTags = []string{"region", "datacenter", "rack", "os", "arch", "team", "service", "service_version", "service_environment"}

// tsbsFields are the cpu measurement's fields, in TSBS order.
var tsbsFields = []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}

// tsbsSchema: time is timestamp[us, UTC]; hostname and tags utf8; the
// fields int64, as TSBS's current generator writes them (ToPointAllInt64).
var tsbsSchema = func() *arrow.Schema {
	fields := []arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "hostname", Type: arrow.BinaryTypes.String},
	}
	for _, t := range tsbsTags {
		fields = append(fields, arrow.Field{Name: t, Type: arrow.BinaryTypes.String})
	}
	for _, f := range tsbsFields {
		fields = append(fields, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Int64})
	}
	return arrow.NewSchema(fields, nil)
}()

// tsbsRegions maps TSBS's regions to their datacenters (host.go).
var tsbsRegions = []struct {
	name string
	dcs  []string
}{
	{"us-east-1", []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"}},
	{"us-west-1", []string{"us-west-1a", "us-west-1b"}},
	{"us-west-2", []string{"us-west-2a", "us-west-2b", "us-west-2c"}},
	{"eu-west-1", []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
	{"eu-central-1", []string{"eu-central-1a", "eu-central-1b"}},
	{"ap-southeast-1", []string{"ap-southeast-1a", "ap-southeast-1b"}},
	{"ap-southeast-2", []string{"ap-southeast-2a", "ap-southeast-2b"}},
	{"ap-northeast-1", []string{"ap-northeast-1a", "ap-northeast-1c"}},
	{"sa-east-1", []string{"sa-east-1a", "sa-east-1b", "sa-east-1c"}},
}

// tsbsGen generates the data step by step: per host fixed tags, per host
// and field a random walk (start U[0,100], step N(0,1), clamped to
// [0,100]) written truncated to int64.
type tsbsGen struct {
	p    tsbsParams
	rng  *rand.Rand
	tags [][]string  // host → tag values, hostname first
	walk [][]float64 // host → field values
	step int
}

func newTSBSGen(p tsbsParams) *tsbsGen {
	g := &tsbsGen{p: p, rng: rand.New(rand.NewPCG(p.seed, 0x75b5))}
	pick := func(vs ...string) string { return vs[g.rng.IntN(len(vs))] }
	for h := 0; h < p.hosts; h++ {
		r := tsbsRegions[g.rng.IntN(len(tsbsRegions))]
		g.tags = append(g.tags, []string{
			"host_" + strconv.Itoa(h), r.name, pick(r.dcs...), strconv.Itoa(g.rng.IntN(100)),
			pick("Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"), pick("x64", "x86"),
			pick("SF", "NYC", "LON", "CHI"), strconv.Itoa(g.rng.IntN(20)), strconv.Itoa(g.rng.IntN(2)),
			pick("production", "staging", "test"),
		})
		w := make([]float64, len(tsbsFields))
		for i := range w {
			w[i] = g.rng.Float64() * 100
		}
		g.walk = append(g.walk, w)
	}
	return g
}

// next returns the batches of the next steps steps (one row per host per
// step), at most batchRows rows each.
func (g *tsbsGen) next(mem memory.Allocator, steps, batchRows int) []arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, tsbsSchema)
	defer b.Release()
	var out []arrow.RecordBatch
	n := 0
	for s := 0; s < steps; s, g.step = s+1, g.step+1 {
		ts := arrow.Timestamp(tsbsStart.Add(time.Duration(g.step) * tsbsInterval).UnixMicro())
		for h := range g.p.hosts {
			b.Field(0).(*array.TimestampBuilder).Append(ts)
			for i, v := range g.tags[h] {
				b.Field(1 + i).(*array.StringBuilder).Append(v)
			}
			for i := range g.walk[h] {
				v := g.walk[h][i] + g.rng.NormFloat64()
				v = math.Max(0, math.Min(100, v))
				g.walk[h][i] = v
				b.Field(11 + i).(*array.Int64Builder).Append(int64(v))
			}
			if n++; n == batchRows {
				out = append(out, b.NewRecordBatch())
				n = 0
			}
		}
	}
	if n > 0 {
		out = append(out, b.NewRecordBatch())
	}
	return out
}

// tsbsQuery is one TSBS query instance.
type tsbsQuery struct {
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

// tsbsQueries returns the seven TSBS queries over table cpu, with hosts
// and windows drawn from a generator seeded by p.seed: the same instances
// for every system. Windows start uniformly in [start, end+1s-window)
// (TSBS's end is the data's end plus 1 s), rounded down to the second;
// hosts are drawn without replacement. Time bounds are RFC 3339 string
// literals, as TSBS writes them; DuckDB casts them to the column's type.
// The texts follow TSBS's SQL targets on one denormalised table (tags are
// columns): hosts filter as hostname IN (...), as its ClickHouse queries
// do, and lastpoint is its TimescaleDB DISTINCT ON form.
func tsbsQueries(p tsbsParams) []tsbsQuery {
	rng := rand.New(rand.NewPCG(p.seed, 0x9e3779b9))
	window := func(d time.Duration) (time.Time, time.Time) {
		span := p.end().Add(time.Second).Sub(tsbsStart) - d
		start := tsbsStart
		if span > 0 {
			start = start.Add(time.Duration(rng.Int64N(int64(span))).Truncate(time.Second))
		}
		return start, start.Add(d)
	}
	hosts := func(n int) string {
		n = min(n, p.hosts)
		list := make([]string, n)
		for i, h := range rng.Perm(p.hosts)[:n] {
			list[i] = "'host_" + strconv.Itoa(h) + "'"
		}
		return strings.Join(list, ", ")
	}
	lit := func(t time.Time) string { return "'" + t.Format(time.RFC3339) + "'" }
	maxOf := func(n int) string {
		parts := make([]string, n)
		for i, f := range tsbsFields[:n] {
			parts[i] = fmt.Sprintf("max(%s) AS max_%s", f, f)
		}
		return strings.Join(parts, ", ")
	}
	// single-groupby-M-H-T: max of M fields per minute, H hosts, T hours.
	singleGroupBy := func(m, h int, t time.Duration) string {
		from, to := window(t)
		return fmt.Sprintf("SELECT date_trunc('minute', time) AS minute, %s FROM cpu WHERE hostname IN (%s) AND time >= %s AND time < %s GROUP BY minute ORDER BY minute",
			maxOf(m), hosts(h), lit(from), lit(to))
	}
	var qs []tsbsQuery
	add := func(name, sql string) { qs = append(qs, tsbsQuery{name, sql}) }
	add("single-groupby-1-1-1", singleGroupBy(1, 1, time.Hour))
	add("single-groupby-5-8-1", singleGroupBy(5, 8, time.Hour))
	{ // cpu-max-all-8: max of every field per hour, 8 hosts, 8 hours.
		from, to := window(8 * time.Hour)
		add("cpu-max-all-8", fmt.Sprintf("SELECT date_trunc('hour', time) AS hour, %s FROM cpu WHERE hostname IN (%s) AND time >= %s AND time < %s GROUP BY hour ORDER BY hour",
			maxOf(len(tsbsFields)), hosts(8), lit(from), lit(to)))
	}
	{ // double-groupby-1: mean of one field per host and hour, all hosts, 12 hours.
		from, to := window(12 * time.Hour)
		add("double-groupby-1", fmt.Sprintf("SELECT date_trunc('hour', time) AS hour, hostname, avg(usage_user) AS mean_usage_user FROM cpu WHERE time >= %s AND time < %s GROUP BY hour, hostname ORDER BY hour, hostname",
			lit(from), lit(to)))
	}
	{ // high-cpu-1: the rows of one host with usage_user > 90 in 12 hours.
		from, to := window(12 * time.Hour)
		add("high-cpu-1", fmt.Sprintf("SELECT * FROM cpu WHERE usage_user > 90.0 AND time >= %s AND time < %s AND hostname IN (%s)",
			lit(from), lit(to), hosts(1)))
	}
	// lastpoint: each host's newest row.
	add("lastpoint", "SELECT DISTINCT ON (hostname) * FROM cpu ORDER BY hostname, time DESC")
	{ // groupby-orderby-limit: the last 5 minutes' max before a random end.
		_, to := window(time.Hour)
		add("groupby-orderby-limit", fmt.Sprintf("SELECT date_trunc('minute', time) AS minute, max(usage_user) AS max_usage_user FROM cpu WHERE time < %s GROUP BY minute ORDER BY minute DESC LIMIT 5",
			lit(to)))
	}
	return qs
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
	cmd.Stderr = os.Stderr
	// The child stops when this pipe closes, so it never outlives us.
	if _, err := cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s.cmd = cmd
	rd := bufio.NewReader(out)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			tb.Fatalf("TSBS server did not start: %v", err)
		}
		if a, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR "); ok {
			s.addr = a
			break
		}
	}
	go func() { // drain the rest (PASS etc.)
		for {
			if _, err := rd.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	tb.Cleanup(s.stop)
	return s
}

func (s *tsbsServer) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
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

// writeTSBS creates table cpu under root through Flight SQL bulk ingest,
// one ingest (one segment) per p.segHours hours.
func writeTSBS(tb testing.TB, root string, p tsbsParams) {
	tb.Helper()
	srv := startTSBSServer(tb, root, 0, "")
	defer srv.stop()
	client := srv.sqlClient(tb)
	ctx := context.Background()
	g := newTSBSGen(p)
	perSeg := p.segHours * int(time.Hour/tsbsInterval)
	for first := 0; first < p.steps(); first += perSeg {
		steps := min(perSeg, p.steps()-first)
		batches := g.next(memory.DefaultAllocator, steps, 1<<16)
		rdr, err := array.NewRecordReader(tsbsSchema, batches)
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
			tb.Fatalf("ingest steps %d..%d: %v", first, first+steps, err)
		}
		if want := int64(steps * p.hosts); n != want {
			tb.Fatalf("ingest steps %d..%d: %d rows, want %d", first, first+steps, n, want)
		}
	}
}

// tsbsRoot returns a root holding table cpu with p's data: cached under
// os.TempDir by p's key (TSFLIGHT_TSBS_NOCACHE=1 rebuilds it), built
// beside it and renamed into place once complete.
func tsbsRoot(tb testing.TB, p tsbsParams) string {
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
		p.hosts, p.hours, p.rows(), p.segHours, root, time.Since(start).Round(time.Millisecond))
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

// --- results ---

// tsbsRows is a result made comparable across systems: one []any per
// row; timestamps are microseconds since the epoch and every number is a
// float64 (both as float64), strings are strings, NULL is nil.
type tsbsRows [][]any

// tsbsCanonical converts batches into rows.
func tsbsCanonical(recs []arrow.RecordBatch) (tsbsRows, error) {
	var out tsbsRows
	for _, rec := range recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make([]any, rec.NumCols())
			for c := range row {
				v, err := tsbsCell(rec.Column(c), i)
				if err != nil {
					return nil, fmt.Errorf("column %s: %w", rec.ColumnName(c), err)
				}
				row[c] = v
			}
			out = append(out, row)
		}
	}
	return out, nil
}

func tsbsCell(a arrow.Array, i int) (any, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return float64(a.Value(i).ToTime(unit).UnixMicro()), nil
	case *array.Int64:
		return float64(a.Value(i)), nil
	case *array.Int32:
		return float64(a.Value(i)), nil
	case *array.Uint64:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	// Value aliases the array's buffer, which DuckDB may reuse: copy.
	case *array.String:
		return strings.Clone(a.Value(i)), nil
	case *array.LargeString:
		return strings.Clone(a.Value(i)), nil
	case *array.StringView:
		return strings.Clone(a.Value(i)), nil
	case *array.Dictionary:
		return tsbsCell(a.Dictionary(), a.GetValueIndex(i))
	}
	return nil, fmt.Errorf("type %s is not handled", a.DataType())
}

func tsbsCompareCell(a, b any) int {
	switch x := a.(type) {
	case nil:
		if b == nil {
			return 0
		}
		return -1
	case float64:
		y, ok := b.(float64)
		if !ok {
			return -1
		}
		return cmp.Compare(x, y)
	case string:
		y, ok := b.(string)
		if !ok {
			return 1
		}
		return strings.Compare(x, y)
	}
	return 0
}

// sorted returns the rows in a total order (every column, left first).
func (r tsbsRows) sorted() tsbsRows {
	s := slices.Clone(r)
	slices.SortStableFunc(s, func(a, b []any) int {
		for i := range min(len(a), len(b)) {
			if c := tsbsCompareCell(a[i], b[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(a), len(b))
	})
	return s
}

// diff reports how got differs from want after sorting both, with a float
// tolerance of 1e-9 relative; "" means equal.
func (r tsbsRows) diff(want tsbsRows) string {
	if len(r) != len(want) {
		return fmt.Sprintf("%d rows, want %d", len(r), len(want))
	}
	g, w := r.sorted(), want.sorted()
	for i := range g {
		if len(g[i]) != len(w[i]) {
			return fmt.Sprintf("row %d: %d columns, want %d", i, len(g[i]), len(w[i]))
		}
		for c := range g[i] {
			if !tsbsCellsEqual(g[i][c], w[i][c]) {
				return fmt.Sprintf("sorted row %d column %d: %v, want %v\n got row  %v\n want row %v", i, c, g[i][c], w[i][c], g[i], w[i])
			}
		}
	}
	return ""
}

func tsbsCellsEqual(a, b any) bool {
	x, okx := a.(float64)
	y, oky := b.(float64)
	if okx && oky {
		return x == y || math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y))
	}
	return a == b
}

// TestTSBSQueriesAgree runs the TSBS queries at a small scale through
// tsflight (ADBC) and DuckDB over the same Parquet files, and checks the
// answers agree.
func TestTSBSQueriesAgree(t *testing.T) {
	p := tsbsParams{hosts: 10, hours: 2, segHours: 1, seed: 1}
	root := t.TempDir()
	writeTSBS(t, root, p)
	threads := runtime.NumCPU()
	srv := startTSBSServer(t, root, threads, "")
	ts := newTSBSADBC(t, srv.addr)
	duck := newTSBSDuckDB(t, root, tsbsSegmentFiles(t, root), threads)
	ctx := context.Background()
	for _, q := range tsbsQueries(p) {
		want, err := duck.rows(ctx, q.SQL)
		if err != nil {
			t.Fatalf("%s: duckdb: %v\n%s", q.Name, err, q.SQL)
		}
		got, err := ts.rows(ctx, q.SQL)
		if err != nil {
			t.Fatalf("%s: tsflight: %v\n%s", q.Name, err, q.SQL)
		}
		if d := got.diff(want); d != "" {
			t.Errorf("%s: tsflight and duckdb differ: %s\n%s", q.Name, d, q.SQL)
		}
		if len(want) == 0 && q.Name != "high-cpu-1" {
			t.Errorf("%s: no rows\n%s", q.Name, q.SQL)
		}
	}
}
