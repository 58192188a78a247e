//go:build duckdb_arrow

package flightsql

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/internal/testkit"
)

// The test kit's helpers under the names this package's tests use.
var (
	ctxT     = testkit.Context
	wantCode = testkit.WantCode
)

// sqlServer is a real tsflight listener (plain Flight + Flight SQL) on a
// loopback port over a temporary root, with a Flight SQL client. Server
// and client allocate from checked allocators; the cleanup asserts that
// every byte was freed. Query plans are logged to logs.
type sqlServer struct {
	t      testing.TB
	root   string
	svc    *flightserver.Service
	sql    *Server
	srv    flight.Server
	client *flightsql.Client
	srvMem *memory.CheckedAllocator
	cliMem *memory.CheckedAllocator
	logs   *testkit.Buffer
}

func startSQL(t *testing.T) *sqlServer {
	t.Helper()
	return startSQLWith(t, nil)
}

// startCPU is startSQL with table cpu of makeCPU(ctx, segments), and the
// context to call it with.
func startCPU(t *testing.T, segments int) (*sqlServer, context.Context) {
	t.Helper()
	s := startSQL(t)
	ctx := ctxT(t)
	s.makeCPU(ctx, segments)
	return s, ctx
}

// startSQLWith is startSQL with tweak applied to the Flight SQL options.
func startSQLWith(t *testing.T, tweak func(*Options)) *sqlServer {
	t.Helper()
	return startSQLServer(t, sqlStart{tweak: tweak})
}

// sqlStart says how startSQLServer starts a server; the zero value is
// startSQL's plaintext server without middleware.
type sqlStart struct {
	tweak      func(*Options)            // applied to the Flight SQL options
	mw         []flight.ServerMiddleware // server middleware
	serverOpts []grpc.ServerOption       // more gRPC server options (TLS)
	// clientCreds are the test client's transport credentials (nil:
	// plaintext).
	clientCreds credentials.TransportCredentials
	trace       bool // log at trace level (default debug)
}

// startSQLServer starts a Flight SQL server on a fresh root, on a loopback
// port, with a client; both checked for leaked Arrow memory at the end.
func startSQLServer(t testing.TB, c sqlStart) *sqlServer {
	t.Helper()
	s := &sqlServer{
		t:      t,
		root:   t.TempDir(),
		srvMem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		cliMem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		logs:   &testkit.Buffer{},
	}
	level := hclog.Debug
	if c.trace {
		level = hclog.Trace
	}
	log := hclog.New(&hclog.LoggerOptions{Level: level, Output: s.logs, JSONFormat: true})
	fo := flightserver.DefaultOptions(s.root)
	fo.Alloc = s.srvMem
	fo.ScanAlloc = s.srvMem
	fo.Logger = log
	svc, err := flightserver.New(fo)
	if err != nil {
		t.Fatal(err)
	}
	s.svc = svc
	so := DefaultOptions()
	so.Alloc = s.srvMem
	so.Logger = log
	so.Threads = 2
	if c.tweak != nil {
		c.tweak(so)
	}
	s.sql, err = New(context.Background(), svc, so)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = flight.NewServerWithMiddleware(c.mw, append(svc.GRPCOptions(), c.serverOpts...)...)
	s.srv.RegisterFlightService(s.sql.Service())
	if err := s.srv.Init("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve() }()
	creds := c.clientCreds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	s.client, err = flightsql.NewClient(s.srv.Addr().String(), nil, nil,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	s.client.Alloc = s.cliMem
	t.Cleanup(func() {
		s.client.Close()
		s.srv.Shutdown()
		<-served
		if err := s.sql.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		s.cliMem.AssertSize(t, 0)
		s.srvMem.AssertSize(t, 0)
	})
	return s
}

// cpuSchema is the test table's schema: a UTC timestamp index, an entity
// column and a value.
var cpuSchema = arrow.NewSchema([]arrow.Field{
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "host", Type: arrow.BinaryTypes.String},
	{Name: "usage", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// cpuBatch holds n rows per host starting at start, one per second;
// usage is the row's second offset from t0 plus the host number.
func cpuBatch(mem memory.Allocator, start time.Time, n int, hosts ...string) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, cpuSchema)
	defer b.Release()
	for i := 0; i < n; i++ {
		ts := start.Add(time.Duration(i) * time.Second)
		for h, host := range hosts {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
			b.Field(1).(*array.StringBuilder).Append(host)
			b.Field(2).(*array.Float64Builder).Append(ts.Sub(t0).Seconds() + float64(h))
		}
	}
	return b.NewRecordBatch()
}

// ingest appends batches to table through Flight SQL bulk ingest.
func (s *sqlServer) ingest(ctx context.Context, table string, mode string, opts map[string]string, batches ...arrow.RecordBatch) (int64, error) {
	rdr, err := array.NewRecordReader(batches[0].Schema(), batches)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	o := &flightsql.ExecuteIngestOpts{Table: table, Options: opts}
	td := &flightsql.TableDefinitionOptions{}
	switch mode {
	case "create":
		td.IfNotExist, td.IfExists = flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionFail
	case "append":
		td.IfNotExist, td.IfExists = flightsql.TableDefinitionOptionsTableNotExistOptionFail, flightsql.TableDefinitionOptionsTableExistsOptionAppend
	case "create_append":
		td.IfNotExist, td.IfExists = flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionAppend
	case "replace":
		td.IfNotExist, td.IfExists = flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionReplace
	}
	o.TableDefinitionOptions = td
	return s.client.ExecuteIngest(ctx, rdr, o)
}

var cpuOpts = map[string]string{"tsflight.granularity": "1s", "tsflight.entity_columns": "host"}

// makeCPU creates table "cpu" with `segments` segments of one hour each
// (3600 rows per host, hosts a and b), hour i starting at t0 + i hours.
func (s *sqlServer) makeCPU(ctx context.Context, segments int) {
	s.t.Helper()
	var recs []arrow.RecordBatch
	for i := 0; i < segments; i++ {
		recs = append(recs, cpuBatch(s.cliMem, t0.Add(time.Duration(i)*time.Hour), 3600, "a", "b"))
	}
	for i, n := range s.ingestCPU(s.t, ctx, recs...) {
		if n != 7200 {
			s.t.Fatalf("ingest segment %d: %d rows, want 7200", i, n)
		}
	}
}

// ingestCPU creates table cpu (cpuOpts) from recs through bulk ingest,
// the first by create and each next by append, one ingest (one segment)
// each, and releases them; it returns the rows each ingest reported.
func (s *sqlServer) ingestCPU(t testing.TB, ctx context.Context, recs ...arrow.RecordBatch) []int64 {
	t.Helper()
	defer testkit.Release(recs)
	var out []int64
	for i, rec := range recs {
		mode := "append"
		if i == 0 {
			mode = "create"
		}
		n, err := s.ingest(ctx, "cpu", mode, cpuOpts, rec)
		if err != nil {
			t.Fatalf("ingest segment %d: %v", i, err)
		}
		out = append(out, n)
	}
	return out
}

// result is a fetched query result.
type result struct {
	schema *arrow.Schema
	recs   []arrow.RecordBatch
	rows   int64
}

func (r *result) release() {
	for _, rec := range r.recs {
		rec.Release()
	}
}

// wantSingle checks that the fetch or query what gave r, without error,
// one row holding want, and releases r.
func wantSingle(t testing.TB, what string, r *result, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer r.release()
	if got := r.rowsOf(); len(got) != 1 || got[0] != want {
		t.Fatalf("%s = %v, want %s", what, got, want)
	}
}

// fetch reads every endpoint of info in order.
func (s *sqlServer) fetch(ctx context.Context, info *flight.FlightInfo) (*result, error) {
	res := &result{}
	for _, ep := range info.Endpoint {
		rdr, err := s.client.DoGet(ctx, ep.Ticket)
		if err != nil {
			res.release()
			return nil, err
		}
		res.schema = rdr.Schema()
		recs, err := testkit.ReadBatches(rdr)
		rdr.Release()
		if err != nil {
			res.release()
			return nil, err
		}
		for _, rec := range recs {
			res.rows += rec.NumRows()
		}
		res.recs = append(res.recs, recs...)
	}
	return res, nil
}

// query runs q through CommandStatementQuery and returns its result.
func (s *sqlServer) query(ctx context.Context, q string) (*result, error) {
	info, err := s.client.Execute(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.fetch(ctx, info)
}

func (s *sqlServer) mustQuery(ctx context.Context, q string) *result {
	s.t.Helper()
	r, err := s.query(ctx, q)
	if err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
	s.t.Cleanup(r.release)
	return r
}

// rowsOf renders a result as strings, one per row, columns joined by |.
func (r *result) rowsOf() []string {
	var out []string
	for _, rec := range r.recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			parts := make([]string, rec.NumCols())
			for c := range parts {
				parts[c] = rec.Column(c).ValueStr(i)
			}
			out = append(out, strings.Join(parts, "|"))
		}
	}
	return out
}

// scalar returns the single value of a one-row, one-column result.
func (s *sqlServer) scalar(ctx context.Context, q string) string {
	s.t.Helper()
	rows := s.mustQuery(ctx, q).rowsOf()
	if len(rows) != 1 {
		s.t.Fatalf("%s: %d rows, want 1", q, len(rows))
	}
	return rows[0]
}

// wantScalars runs each query of want and checks its single value against
// the one given ("" takes any value: the query only has to run).
func (s *sqlServer) wantScalars(ctx context.Context, want map[string]string) {
	s.t.Helper()
	for q, w := range want {
		if got := s.scalar(ctx, q); w != "" && got != w {
			s.t.Errorf("%s = %s, want %s", q, got, w)
		}
	}
}

// plans returns the "sql plan" log lines of table logged so far: planned
// and total segments, oldest first.
func (s *sqlServer) plans(table string) [][2]int {
	var out [][2]int
	for _, line := range strings.Split(s.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["@message"] != "sql plan" || m["table"] != table {
			continue
		}
		out = append(out, [2]int{int(m["planned"].(float64)), int(m["segments"].(float64))})
	}
	return out
}

// usedLastValues reports whether the newest plan of table read its
// last-value index instead of segments.
func (s *sqlServer) usedLastValues(table string) bool {
	s.t.Helper()
	return s.lastPlanFlag(table, "last_values")
}

// lastPlanFlag returns a boolean field of the newest plan of table.
func (s *sqlServer) lastPlanFlag(table, field string) bool {
	s.t.Helper()
	var used bool
	for _, line := range strings.Split(s.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["@message"] != "sql plan" || m["table"] != table {
			continue
		}
		used = m[field] == true
	}
	return used
}

// lastPlan returns planned and total segments of the newest plan of table.
func (s *sqlServer) lastPlan(table string) (planned, total int) {
	s.t.Helper()
	p := s.plans(table)
	if len(p) == 0 {
		s.t.Fatalf("no plan logged for %s; log:\n%s", table, s.logs.String())
	}
	return p[len(p)-1][0], p[len(p)-1][1]
}

func fmtTime(t time.Time) string {
	return fmt.Sprintf("TIMESTAMPTZ '%s'", t.Format("2006-01-02 15:04:05"))
}
