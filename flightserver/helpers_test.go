package flightserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/internal/testkit"
)

// The test kit's helpers under the names this package's tests use.
var (
	ctxT         = testkit.Context
	wantCode     = testkit.WantCode
	snapshot     = testkit.Snapshot
	sameSnapshot = testkit.SameSnapshot
)

// testServer is a real Flight server on a loopback port over a temporary
// root, and a client connected to it. Both sides allocate from checked
// allocators; the cleanup shuts everything down and asserts that every
// byte was freed.
type testServer struct {
	t      *testing.T
	root   string
	svc    *Service
	srv    flight.Server
	health *Health // registered on srv, SERVING
	client flight.Client
	srvMem *memory.CheckedAllocator
	cliMem *memory.CheckedAllocator
}

func startServer(t *testing.T, tweak func(*Options)) *testServer {
	t.Helper()
	return startGatedServer(t, tweak, nil)
}

// startWithCPU is startServer with an empty TSBS table cpu (createTSBS),
// and the context to call it with.
func startWithCPU(t *testing.T) (*testServer, context.Context) {
	t.Helper()
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	return ts, ctx
}

// startGatedServer is startServer with the limits of gate in force (nil:
// none, as startServer) and extra gRPC server options.
func startGatedServer(t *testing.T, tweak func(*Options), gate *guard.Gate, extra ...grpc.ServerOption) *testServer {
	t.Helper()
	ts := &testServer{
		t:      t,
		root:   t.TempDir(),
		srvMem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		cliMem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
	}
	opts := DefaultOptions(ts.root)
	opts.Alloc = ts.srvMem
	opts.ScanAlloc = ts.srvMem
	if tweak != nil {
		tweak(opts)
	}
	svc, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts.svc = svc
	// Servers send DoGet batches through the zero-copy codec, as
	// cmd/tsflight does; tests named *StandardCodec use arrow-go's writer.
	var gopts []grpc.ServerOption
	if !strings.Contains(t.Name(), "StandardCodec") {
		gopts = svc.GRPCOptions()
	}
	var mw []flight.ServerMiddleware
	if gate != nil {
		gopts = append(gopts, gate.ServerOptions()...)
		mw = append(mw, gate.Middleware())
	}
	gopts = append(gopts, extra...)
	ts.srv = flight.NewServerWithMiddleware(mw, gopts...)
	ts.srv.RegisterFlightService(svc)
	ts.health = NewHealth()
	ts.health.Register(ts.srv)
	ts.health.Serving()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	if gate != nil {
		lis = gate.Listener(lis) // the server can close connections
	}
	ts.srv.InitListener(lis)
	served := make(chan error, 1)
	go func() { served <- ts.srv.Serve() }()
	ts.client, err = flight.NewClientWithMiddleware(ts.srv.Addr().String(), nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() {
		ts.client.Close()
		ts.health.Shutdown()
		ts.srv.Shutdown()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		ts.svc.Close()
		ts.cliMem.AssertSize(t, 0)
		ts.srvMem.AssertSize(t, 0)
	})
	return ts
}

// ---- actions ----

func (ts *testServer) action(ctx context.Context, name string, body any) ([]byte, error) {
	var raw []byte
	switch b := body.(type) {
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(body); err != nil {
			ts.t.Fatal(err)
		}
	}
	stream, err := ts.client.DoAction(ctx, &flight.Action{Type: name, Body: raw})
	if err != nil {
		return nil, err
	}
	res, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); err != io.EOF {
		return nil, fmt.Errorf("expected one result, then EOF; got %v", err)
	}
	return res.Body, nil
}

// mustAction runs an action and decodes its result into a generic value.
func (ts *testServer) mustAction(ctx context.Context, name string, body any) map[string]any {
	ts.t.Helper()
	res, err := ts.action(ctx, name, body)
	if err != nil {
		ts.t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	if err := json.Unmarshal(res, &out); err != nil {
		ts.t.Fatalf("%s result %s: %v", name, res, err)
	}
	return out
}

// strictJSON decodes raw into a T, refusing any field T does not have.
func strictJSON[T any](raw []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	return v, err
}

// runAction runs action name with body and decodes its answer strictly
// into a T, failing t if either fails.
func runAction[T any](t *testing.T, ts *testServer, ctx context.Context, name string, body any) T {
	t.Helper()
	raw, err := ts.action(ctx, name, body)
	if err != nil {
		t.Fatalf("%s %v: %v", name, body, err)
	}
	res, err := strictJSON[T](raw)
	if err != nil {
		t.Fatalf("%s answer %s: %v", name, raw, err)
	}
	return res
}

// refusal is an action body the action must refuse with code, its
// message naming every fragment.
type refusal struct {
	name  string
	body  string
	code  codes.Code
	frags []string
}

// wantRefusals runs action with each case's body, a subtest each, and
// checks the refusal and that nothing under the root changed.
func wantRefusals(t *testing.T, ts *testServer, ctx context.Context, action string, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, ts.root)
			_, err := ts.action(ctx, action, c.body)
			wantCode(t, c.name, err, c.code, c.frags...)
			sameSnapshot(t, c.name, before, snapshot(t, ts.root))
		})
	}
}

func (ts *testServer) createTSBS(ctx context.Context, name string) {
	ts.t.Helper()
	got := ts.mustAction(ctx, ActionCreateTable, map[string]any{
		"table": name, "index_column": "ts", "index_type": "timestamp",
		"granularity": "10s", "entity_columns": []string{"hostname"},
	})
	if got["table"] != name || got["version"] != float64(1) {
		ts.t.Fatalf("create-table result %v, want table %s version 1", got, name)
	}
}

// ---- descriptors ----

func pathDesc(name string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
}

func cmdDesc(t *testing.T, body any) *flight.FlightDescriptor {
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: raw}
}

// ---- DoPut ----

// put streams batches (released by the caller) under desc and returns the
// decoded PutResults.
func (ts *testServer) put(ctx context.Context, desc *flight.FlightDescriptor, schema *arrow.Schema, batches ...arrow.RecordBatch) ([]PutResult, error) {
	metas, err := testkit.Put(ctx, ts.client, ts.cliMem, desc, schema, batches...)
	var out []PutResult
	for _, m := range metas {
		pr, err := strictJSON[PutResult](m)
		if err != nil {
			return out, fmt.Errorf("PutResult app_metadata %q: %v", m, err)
		}
		out = append(out, pr)
	}
	return out, err
}

// mustPut puts the model's batches and checks the single PutResult.
func (ts *testServer) mustPut(ctx context.Context, desc *flight.FlightDescriptor, rows []row, batchRows int, wantVersion uint64) PutResult {
	ts.t.Helper()
	batches := buildBatches(ts.cliMem, rows, batchRows)
	defer releaseAll(batches)
	res, err := ts.put(ctx, desc, tsbsSchema, batches...)
	if err != nil {
		ts.t.Fatalf("DoPut: %v", err)
	}
	if len(res) != 1 {
		ts.t.Fatalf("DoPut: %d PutResults, want 1", len(res))
	}
	pr := res[0]
	if pr.Version != wantVersion || pr.Rows != uint64(len(rows)) {
		ts.t.Fatalf("PutResult %+v, want version %d and %d rows", pr, wantVersion, len(rows))
	}
	if !strings.HasPrefix(pr.Segment, "data/_managed/append/") || !strings.HasSuffix(pr.Segment, ".parquet") {
		ts.t.Fatalf("PutResult segment %q is not a managed parquet segment", pr.Segment)
	}
	var tableDir string
	if desc.Type == flight.DescriptorPATH {
		tableDir = filepath.Join(ts.root, desc.Path[0])
	} else {
		var c struct {
			Table string `json:"table"`
		}
		_ = json.Unmarshal(desc.Cmd, &c)
		tableDir = filepath.Join(ts.root, c.Table)
	}
	if _, err := os.Stat(filepath.Join(tableDir, filepath.FromSlash(pr.Segment))); err != nil {
		ts.t.Fatalf("PutResult segment: %v", err)
	}
	return pr
}

// ---- DoGet ----

// stream starts the DoGet of tkt and returns its reader, which the caller
// releases.
func (ts *testServer) stream(ctx context.Context, tkt *flight.Ticket) (*flight.Reader, error) {
	return testkit.DoGet(ctx, ts.client, ts.cliMem, tkt)
}

// mustStream is stream failing t on an error.
func (ts *testServer) mustStream(t *testing.T, ctx context.Context, tkt *flight.Ticket) *flight.Reader {
	t.Helper()
	rdr, err := ts.stream(ctx, tkt)
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// fetched is what DoGet returned for one ticket.
type fetched struct {
	schema  *arrow.Schema
	rows    []row
	nulls   map[string]int // null count per column
	batches []int64        // rows per batch
	extra   map[string][]any
}

// doGet reads a whole stream. Columns it knows (ts, hostname, usage_*) fill
// the row model; any other column is collected into extra.
func (ts *testServer) doGet(ctx context.Context, tkt *flight.Ticket) (*fetched, error) {
	rdr, err := ts.stream(ctx, tkt)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	f := &fetched{schema: rdr.Schema(), nulls: map[string]int{}, extra: map[string][]any{}}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		n := int(rec.NumRows())
		f.batches = append(f.batches, int64(n))
		base := len(f.rows)
		f.rows = append(f.rows, make([]row, n)...)
		for c, fld := range rec.Schema().Fields() {
			col := rec.Column(c)
			f.nulls[fld.Name] += col.NullN()
			for i := range n {
				r := &f.rows[base+i]
				switch fld.Name {
				case "ts":
					r.ts = int64(col.(*array.Timestamp).Value(i))
				case "hostname":
					r.host = col.(*array.String).Value(i)
				case "usage_user":
					r.user = col.(*array.Int64).Value(i)
				case "usage_system":
					r.system = col.(*array.Int64).Value(i)
				case "usage_idle":
					r.idle = col.(*array.Int64).Value(i)
				default:
					if col.IsNull(i) {
						f.extra[fld.Name] = append(f.extra[fld.Name], nil)
					} else {
						f.extra[fld.Name] = append(f.extra[fld.Name], col.GetOneForMarshal(i))
					}
				}
			}
		}
	}
	if err := rdr.Err(); err != nil {
		return f, err
	}
	return f, nil
}

// fetchAll reads every endpoint of info in parallel and concatenates the
// results in endpoint order.
func (ts *testServer) fetchAll(ctx context.Context, info *flight.FlightInfo) (*fetched, error) {
	parts := make([]*fetched, len(info.Endpoint))
	errs := make([]error, len(info.Endpoint))
	var wg sync.WaitGroup
	for i, ep := range info.Endpoint {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i], errs[i] = ts.doGet(ctx, ep.Ticket)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	all := &fetched{nulls: map[string]int{}, extra: map[string][]any{}}
	for _, p := range parts {
		if all.schema == nil {
			all.schema = p.schema
		} else if !all.schema.Equal(p.schema) {
			return nil, fmt.Errorf("endpoints disagree on the schema: %s vs %s", all.schema, p.schema)
		}
		all.rows = append(all.rows, p.rows...)
		all.batches = append(all.batches, p.batches...)
		for k, v := range p.nulls {
			all.nulls[k] += v
		}
		for k, v := range p.extra {
			all.extra[k] = append(all.extra[k], v...)
		}
	}
	return all, nil
}

// readAll reads the whole table name (GetFlightInfo, then every
// endpoint), failing t on an error.
func (ts *testServer) readAll(t *testing.T, ctx context.Context, name string) *fetched {
	t.Helper()
	f, err := ts.fetchAll(ctx, ts.info(ctx, pathDesc(name)))
	if err != nil {
		t.Fatalf("reading table %s: %v", name, err)
	}
	return f
}

func (ts *testServer) info(ctx context.Context, desc *flight.FlightDescriptor) *flight.FlightInfo {
	ts.t.Helper()
	info, err := ts.client.GetFlightInfo(ctx, desc)
	if err != nil {
		ts.t.Fatalf("GetFlightInfo: %v", err)
	}
	return info
}

func (ts *testServer) schemaOf(b []byte) *arrow.Schema {
	ts.t.Helper()
	return testkit.Schema(ts.t, b, ts.cliMem)
}
