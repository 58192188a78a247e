package flightserver

// Fuzz targets for what clients send the plain Flight service: tickets
// (FuzzTicket), CMD descriptors (FuzzCommandDescriptor, to GetFlightInfo
// and DoPut) and action bodies (FuzzAction). Each target runs one real
// server on 127.0.0.1 per fuzzing process and calls it with the arrow-go
// Flight client; the server is replaced only when the fuzzer has grown its
// root (new tables, many commits).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// fuzzTable is the table every fuzz server holds: two segments of TSBS
// rows (6 steps × 3 hosts each, an hour apart).
const fuzzTable = "t"

// fuzzEnv is one fuzz server and what is known of its root.
type fuzzEnv struct {
	ts     *testServer
	dir    string // removed on close
	served chan error
	rows   map[string]row // the rows of fuzzTable by rowKey
	puts   int            // appends so far (each gets its own hour)
}

func rowKey(ts int64, host string) string { return fmt.Sprintf("%d|%s", ts, host) }

// fuzzRoot is where fuzz servers keep their tables: tmpfs when there is
// one (fsync is free there), else the temporary directory.
func fuzzRoot() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// startFuzzEnv starts a server over a fresh root and fills fuzzTable.
func startFuzzEnv(tb testing.TB) *fuzzEnv {
	tb.Helper()
	dir, err := os.MkdirTemp(fuzzRoot(), "tsflight-fuzz-")
	if err != nil {
		tb.Fatal(err)
	}
	e := &fuzzEnv{dir: dir, rows: map[string]row{}, served: make(chan error, 1)}
	ts := &testServer{
		root:   filepath.Join(dir, "root"),
		srvMem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		cliMem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
	}
	e.ts = ts
	opts := DefaultOptions(ts.root)
	opts.Alloc, opts.ScanAlloc = ts.srvMem, ts.srvMem
	if ts.svc, err = New(opts); err != nil {
		tb.Fatal(err)
	}
	ts.srv = flight.NewServerWithMiddleware(nil, ts.svc.GRPCOptions()...)
	ts.srv.RegisterFlightService(ts.svc)
	if err := ts.srv.Init("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	go func() { e.served <- ts.srv.Serve() }()
	ts.client, err = flight.NewClientWithMiddleware(ts.srv.Addr().String(), nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := ts.action(ctx, ActionCreateTable, []byte(`{"table":"t","index_column":"ts","index_type":"timestamp","granularity":"10s","entity_columns":["hostname"]}`)); err != nil {
		tb.Fatalf("create-table: %v", err)
	}
	for i := range 2 {
		rows := genRows(t0.Add(time.Duration(i)*time.Hour), 6, 3)
		batches := buildBatches(ts.cliMem, rows, 100)
		_, err := ts.put(ctx, pathDesc(fuzzTable), tsbsSchema, batches...)
		releaseAll(batches)
		if err != nil {
			tb.Fatalf("DoPut: %v", err)
		}
		for _, r := range rows {
			e.rows[rowKey(r.ts, r.host)] = r
		}
	}
	return e
}

// close stops the server, checks that every Arrow byte was freed and
// removes the root.
func (e *fuzzEnv) close(tb testing.TB) {
	e.ts.client.Close()
	e.ts.srv.Shutdown()
	if err := <-e.served; err != nil {
		tb.Errorf("Serve: %v", err)
	}
	e.ts.cliMem.AssertSize(tb, 0)
	e.ts.srvMem.AssertSize(tb, 0)
	if err := os.RemoveAll(e.dir); err != nil {
		tb.Error(err)
	}
}

// fuzzServer starts the target's server and replaces it, between inputs,
// once the fuzzer has made its root big (every input could create a table
// or append a segment).
type fuzzServer struct{ env *fuzzEnv }

func newFuzzServer(f *testing.F) *fuzzServer {
	s := &fuzzServer{env: startFuzzEnv(f)}
	f.Cleanup(func() { s.env.close(f) })
	return s
}

func (s *fuzzServer) get(t *testing.T) *fuzzEnv {
	if tables, _ := s.env.ts.svc.TableNames(); len(tables) > 16 || s.env.puts > 64 {
		s.env.close(t)
		s.env = startFuzzEnv(t)
	}
	return s.env
}

// tablesOf lists the table directories the paths are in.
func tablesOf(paths []string) []string {
	var out []string
	for _, p := range paths {
		name, _, _ := strings.Cut(p, "/")
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// version opens table name from disk, read-only, as a fresh reader would.
func (e *fuzzEnv) version(t *testing.T, name string) uint64 {
	opts := tableformat.DefaultOptions()
	opts.ReadOnly = true
	tb, err := tableformat.Open(context.Background(), storage.Local(filepath.Join(e.ts.root, name)), opts)
	if err != nil {
		t.Fatalf("table %s does not open: %v", name, err)
	}
	return tb.State().Version
}

// checkRows checks that a DoGet result holds only rows of fuzzTable, each
// at most once, with their values.
func (e *fuzzEnv) checkRows(t *testing.T, got *fetched) {
	t.Helper()
	if got.schema.HasField("ts") != got.schema.HasField("hostname") {
		return // a projection without the key: nothing to match rows by
	}
	if !got.schema.HasField("ts") {
		return
	}
	seen := map[string]bool{}
	for _, r := range got.rows {
		k := rowKey(r.ts, r.host)
		want, ok := e.rows[k]
		if !ok || seen[k] {
			t.Fatalf("DoGet returned row %+v: in the table %v, seen before %v", r, ok, seen[k])
		}
		seen[k] = true
		if got.schema.HasField("usage_user") && r.user != want.user || got.schema.HasField("usage_idle") && r.idle != want.idle {
			t.Fatalf("DoGet returned row %+v, the table holds %+v", r, want)
		}
	}
}

func fuzzCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// seedTickets plans some real scans on the server and returns their
// tickets.
func seedTickets(tb testing.TB, e *fuzzEnv) [][]byte {
	ctx := context.Background()
	var out [][]byte
	for _, cmd := range fuzzScanCommands {
		info, err := e.ts.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(cmd)})
		if err != nil {
			tb.Fatalf("GetFlightInfo %s: %v", cmd, err)
		}
		for _, ep := range info.Endpoint {
			out = append(out, ep.Ticket.Ticket)
		}
	}
	return out
}

// fuzzScanCommands are valid scan commands on fuzzTable.
var fuzzScanCommands = []string{
	`{"table":"t"}`,
	`{"table":"t","start":"2024-06-01T00:00:30Z","end":"2024-06-01T01:00:20Z"}`,
	`{"table":"t","columns":["hostname","usage_idle"],"entity":{"hostname":"host_1"}}`,
	`{"table":"t","entities":{"hostname":"host_0"}}`, // the deprecated spelling
	`{"table":"t","columns":["ts","hostname"],"version":2}`,
	`{"table":"t","start":"2024-06-01T01:00:00Z","version":3}`,
}

// FuzzTicket: decodeTicket refuses what it does not accept with
// InvalidArgument (Unimplemented for a Flight SQL ticket: this server has
// no Flight SQL); DoGet on the server answers any ticket with rows of the
// table (never a row twice, never one it does not hold) or a clean error,
// never Internal, Unknown or DataLoss; a refused ticket is refused by both;
// and nothing under the root changes.
func FuzzTicket(f *testing.F) {
	srv := newFuzzServer(f)
	for _, tk := range seedTickets(f, srv.env) {
		f.Add(tk)
	}
	f.Add([]byte("tsf1:"))
	f.Add([]byte(`tsf1:{"table":"t","version":3,"part":0,"parts":1,"start":1}`))
	f.Add([]byte(`tsf1:{"table":"../t","version":1,"part":0,"parts":1}`))
	f.Add([]byte(`tsf1:{"table":"t","version":9,"part":0,"parts":1}`))
	f.Add([]byte(`tsf1:{"table":"t","version":3,"part":1,"parts":1000000000}`))
	f.Add([]byte(`tsf1:{"table":"t","version":3,"part":0,"parts":1,"entities":{"hostname":7,"nope":"x"}}`))
	f.Add([]byte("\x0a\x2dtype.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"))
	f.Fuzz(func(t *testing.T, tk []byte) {
		e := srv.get(t)
		_, derr := decodeTicket(tk)
		derr = Status(derr) // decodeTicket answers in categories; DoGet maps them
		if c := status.Code(derr); derr != nil && c != codes.InvalidArgument && c != codes.Unimplemented {
			t.Fatalf("decodeTicket: %v, want InvalidArgument (or Unimplemented for Flight SQL)", derr)
		}
		before := snapshot(t, e.ts.root)
		got, err := e.ts.doGet(fuzzCtx(t), &flight.Ticket{Ticket: tk})
		if err != nil {
			code := testkit.CheckCode(t, "DoGet", err)
			if derr != nil && code != status.Code(derr) {
				t.Fatalf("DoGet of a ticket decodeTicket refuses (%v): %v", derr, err)
			}
		} else {
			if derr != nil {
				t.Fatalf("DoGet served a ticket decodeTicket refuses: %v", derr)
			}
			e.checkRows(t, got)
		}
		if d := testkit.ChangedFiles(before, snapshot(t, e.ts.root)); len(d) > 0 {
			t.Fatalf("DoGet changed %v", d)
		}
	})
}

// fuzzPutCommands are valid DoPut commands.
var fuzzPutCommands = []string{
	`{"table":"t"}`,
	`{"table":"t","create":{"index_column":"ts","index_type":"timestamp","granularity":"10s","entity_columns":["hostname"]}}`,
	`{"table":"fresh","create":{"index_column":"ts","index_type":"timestamp","granularity":"1h","entity_columns":["hostname"],"timezone":"Europe/Paris"}}`,
	`{"table":"fresh","create":{"index_column":"usage_idle","index_type":"int64","granularity":10}}`,
	`{"table":"fresh","create":{"index_column":"ts","index_type":"timestamp","granularity":"1d","entity_columns":["nope"]}}`,
}

// FuzzCommandDescriptor sends arbitrary CMD descriptor bytes to
// GetFlightInfo and to DoPut (with a valid batch of new rows). Neither
// answers Internal, Unknown or DataLoss. GetFlightInfo changes nothing,
// and every ticket it hands out is served. A refused DoPut leaves the
// root as it was, but for a table its command created (holding only its
// first commit); an accepted one adds exactly one commit to one table and
// answers with that version.
func FuzzCommandDescriptor(f *testing.F) {
	srv := newFuzzServer(f)
	for _, c := range append(slices.Clone(fuzzScanCommands), fuzzPutCommands...) {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"table":"t","start":"2024-06-01T00:00:30Z","end":"2024-06-01T00:00:30Z"}`))
	f.Add([]byte(`{"table":"t","start":-1,"end":"x"}`))
	f.Add([]byte(`{"table":"t","columns":["ts","ts"]}`))
	f.Add([]byte(`{"table":"t","version":0}`))
	f.Add([]byte(`{"table":"t"} {}`))
	f.Add([]byte(`{"table":"t","create":{"table":"u"}}`))
	f.Add([]byte("\x0a\x2dtype.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"))
	f.Fuzz(func(t *testing.T, cmd []byte) {
		e := srv.get(t)
		ctx := fuzzCtx(t)
		before := snapshot(t, e.ts.root)
		desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}
		info, err := e.ts.client.GetFlightInfo(ctx, desc)
		if err != nil {
			testkit.CheckCode(t, "GetFlightInfo", err)
		} else {
			total := 0
			for i, ep := range info.Endpoint {
				got, err := e.ts.doGet(ctx, ep.Ticket)
				if err != nil {
					t.Fatalf("DoGet of endpoint %d of %s: %v", i, cmd, err)
				}
				e.checkRows(t, got)
				total += len(got.rows)
			}
			if info.TotalRecords >= 0 && int64(total) != info.TotalRecords {
				t.Fatalf("FlightInfo says %d records, the endpoints held %d", info.TotalRecords, total)
			}
		}
		if d := testkit.ChangedFiles(before, snapshot(t, e.ts.root)); len(d) > 0 {
			t.Fatalf("GetFlightInfo changed %v", d)
		}

		versions := map[string]uint64{}
		names, _ := e.ts.svc.TableNames()
		for _, n := range names {
			versions[n] = e.version(t, n)
		}
		rows := genRows(t0.Add(time.Duration(48+e.puts)*time.Hour), 1, 2)
		e.puts++
		batches := buildBatches(e.ts.cliMem, rows, 100)
		res, err := e.ts.put(ctx, desc, tsbsSchema, batches...)
		releaseAll(batches)
		changed := testkit.ChangedFiles(before, snapshot(t, e.ts.root))
		tables := tablesOf(changed)
		if err != nil {
			testkit.CheckCode(t, "DoPut", err)
			// A put refuses its batch before it creates a table (the
			// rehearsal), so a refusal changes nothing at all.
			if len(changed) > 0 {
				t.Fatalf("a refused DoPut (%v) changed files: %v", err, changed)
			}
			return
		}
		if len(res) != 1 || len(tables) != 1 {
			t.Fatalf("DoPut %s: %d results, changed tables %v", cmd, len(res), tables)
		}
		n := tables[0]
		want := versions[n] + 1
		if _, existed := versions[n]; !existed {
			want = 2 // created, then appended
		}
		if v := e.version(t, n); v != want || res[0].Version != want || res[0].Rows != uint64(len(rows)) {
			t.Fatalf("DoPut %s: result %+v, table %s at version %d; want version %d with %d rows", cmd, res[0], n, v, want, len(rows))
		}
		if n == fuzzTable {
			for _, r := range rows {
				e.rows[rowKey(r.ts, r.host)] = r
			}
		}
	})
}

// fuzzActionBodies are valid bodies, by action.
var fuzzActionBodies = map[string][]string{
	ActionCreateTable: {
		`{"table":"u","index_column":"ts","index_type":"timestamp","granularity":"1m","entity_columns":["host"],"timezone":"UTC"}`,
		`{"table":"v","index_column":"k","index_type":"uint64","granularity":1000}`,
	},
	ActionDescribeTable: {`{"table":"t"}`},
	ActionCoverage: {
		`{"table":"t","start":"2024-06-01T00:00:00Z","end":"2024-06-01T02:00:00Z"}`,
		`{"table":"t","start":"2024-06-01T00:00:00Z","end":"2024-06-01T02:00:00Z","entity":{"hostname":"host_2"},"version":2}`,
	},
	ActionGaps: {
		`{"table":"t","start":"2024-06-01T00:00:00Z","end":"2024-06-01T02:00:00Z","limit":3,"min_window":2}`,
		`{"table":"t","start":"0001-01-01T00:00:00Z","end":"9999-12-31T23:59:59Z","entity":{"hostname":"host_0"}}`,
	},
	ActionCoverageGrid: {
		`{"table":"t"}`,
		`{"table":"t","start":"2024-06-01T00:00:00Z","end":"2024-06-02T00:00:00Z","columns":4096,"rows":1,"version":3}`,
	},
	ActionAddColumns: {`{"table":"t","columns":[{"name":"load","type":"float64","nullable":true},{"name":"price","type":"decimal128(10, 2)","nullable":true}]}`},
	"vacuum":         {`{"table":"t"}`, `{"table":"t","apply":true,"older_than":"0s"}`, `{"table":"t","older_than":"-5h"}`},
	ActionLast:       {`{"table":"t"}`, `{"table":"t","entity":{"hostname":"host_1"},"columns":["usage_idle","ts"]}`},
}

// readOnlyActions change no file.
var readOnlyActions = []string{ActionDescribeTable, ActionCoverage, ActionGaps, ActionCoverageGrid, ActionLast}

// listActions asks the server for its actions, plus one name it does not
// have.
func listActions(tb testing.TB, e *fuzzEnv) []string {
	return append(testkit.ActionNames(tb, context.Background(), e.ts.client), "no-such-action")
}

// FuzzAction runs an action picked from ListActions by a fuzzed byte with
// a fuzzed body. No body gets Internal, Unknown or DataLoss; a refused
// action changes no file; a read-only action changes no file either;
// create-table adds exactly one table at version 1 and add-columns one
// commit; afterwards every table still opens.
func FuzzAction(f *testing.F) {
	srv := newFuzzServer(f)
	names := listActions(f, srv.env)
	for i, n := range names {
		for _, b := range fuzzActionBodies[n] {
			f.Add(uint8(i), []byte(b))
		}
		f.Add(uint8(i), []byte(`{}`))
		f.Add(uint8(i), []byte(`{"table":"nope"}`))
		f.Add(uint8(i), []byte(`{"table":"t","start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:00:00Z","version":1}`))
	}
	f.Fuzz(func(t *testing.T, pick uint8, body []byte) {
		e := srv.get(t)
		name := names[int(pick)%len(names)]
		before := snapshot(t, e.ts.root)
		versions := map[string]uint64{}
		tables, _ := e.ts.svc.TableNames()
		for _, n := range tables {
			versions[n] = e.version(t, n)
		}
		res, err := e.ts.action(fuzzCtx(t), name, body)
		changed := testkit.ChangedFiles(before, snapshot(t, e.ts.root))
		if err != nil {
			code := testkit.CheckCode(t, name, err)
			if name == "no-such-action" && code != codes.InvalidArgument {
				t.Fatalf("unknown action: %v, want InvalidArgument", err)
			}
			if len(changed) > 0 {
				t.Fatalf("refused %s (%v) changed %v", name, err, changed)
			}
		} else {
			if name == ActionLast {
				if _, err := decodeLast(e.ts, res); err != nil {
					t.Fatalf("last result: %v", err)
				}
			} else if !json.Valid(res) {
				t.Fatalf("%s result is not JSON: %q", name, res)
			}
			if len(changed) > 0 {
				e.puts++ // counts towards replacing the server
			}
			switch {
			case slices.Contains(readOnlyActions, name):
				if len(changed) > 0 {
					t.Fatalf("%s changed %v", name, changed)
				}
			case name == ActionCreateTable:
				nt := tablesOf(changed)
				if len(nt) != 1 || versions[nt[0]] != 0 || e.version(t, nt[0]) != 1 {
					t.Fatalf("create-table %s changed %v", body, changed)
				}
			case name == ActionAddColumns:
				nt := tablesOf(changed)
				if len(nt) != 1 || e.version(t, nt[0]) != versions[nt[0]]+1 {
					t.Fatalf("add-columns %s changed %v", body, changed)
				}
			}
		}
		after, _ := e.ts.svc.TableNames()
		for _, n := range after {
			if v := e.version(t, n); v < versions[n] {
				t.Fatalf("table %s went back from version %d to %d", n, versions[n], v)
			}
		}
	})
}
