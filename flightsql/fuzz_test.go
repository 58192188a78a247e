//go:build duckdb_arrow

package flightsql

// Fuzz target for Flight SQL commands: FuzzCommand sends a protobuf Any
// (a Flight SQL type URL picked by a fuzzed byte, fuzzed value bytes) or
// fully arbitrary bytes to one real tsflight listener per fuzzing process,
// as a GetFlightInfo descriptor, a DoGet ticket, a DoAction body or a
// DoPut command, through the arrow-go Flight client.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// sqlFuzzTypes are the Flight SQL message types a fuzzed Any can carry.
var sqlFuzzTypes = []string{
	"CommandStatementQuery", "CommandStatementUpdate", "CommandStatementIngest", "CommandStatementSubstraitPlan",
	"CommandPreparedStatementQuery", "CommandPreparedStatementUpdate", "TicketStatementQuery",
	"CommandGetSqlInfo", "CommandGetXdbcTypeInfo", "CommandGetCatalogs", "CommandGetDbSchemas", "CommandGetTables",
	"CommandGetTableTypes", "CommandGetPrimaryKeys", "CommandGetExportedKeys", "CommandGetImportedKeys",
	"CommandGetCrossReference", "ActionCreatePreparedStatementRequest", "ActionClosePreparedStatementRequest",
	"ActionCreatePreparedSubstraitPlanRequest", "ActionBeginTransactionRequest", "ActionEndTransactionRequest",
	"ActionBeginSavepointRequest", "ActionEndSavepointRequest", "ActionCancelQueryRequest", "NoSuchMessage",
}

// sqlFuzzEnv is one fuzz listener over a root holding table "cpu" (two
// one-minute segments of hosts a and b).
type sqlFuzzEnv struct {
	s       *sqlServer
	raw     flight.Client
	dir     string
	served  chan error
	actions []string
	puts    int
}

func startSQLFuzz(tb testing.TB) *sqlFuzzEnv {
	tb.Helper()
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm" // tmpfs: fsync is free
	}
	dir, err := os.MkdirTemp(base, "tsflight-sqlfuzz-")
	if err != nil {
		tb.Fatal(err)
	}
	e := &sqlFuzzEnv{dir: dir, served: make(chan error, 1)}
	s := &sqlServer{
		root:   filepath.Join(dir, "root"),
		srvMem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		cliMem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		logs:   &testkit.Buffer{},
	}
	e.s = s
	log := hclog.NewNullLogger()
	fo := flightserver.DefaultOptions(s.root)
	fo.Alloc, fo.ScanAlloc, fo.Logger = s.srvMem, s.srvMem, log
	if s.svc, err = flightserver.New(fo); err != nil {
		tb.Fatal(err)
	}
	so := DefaultOptions()
	so.Alloc, so.Logger, so.Threads = s.srvMem, log, 1
	if s.sql, err = New(context.Background(), s.svc, so); err != nil {
		tb.Fatal(err)
	}
	s.srv = flight.NewServerWithMiddleware(nil, s.svc.GRPCOptions()...)
	s.srv.RegisterFlightService(s.sql.Service())
	if err := s.srv.Init("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	go func() { e.served <- s.srv.Serve() }()
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20))}
	if s.client, err = flightsql.NewClient(s.srv.Addr().String(), nil, nil, dial...); err != nil {
		tb.Fatal(err)
	}
	s.client.Alloc = s.cliMem
	if e.raw, err = flight.NewClientWithMiddleware(s.srv.Addr().String(), nil, nil, dial...); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, mode := range []string{"create", "append"} {
		rec := cpuBatch(s.cliMem, t0.Add(time.Duration(i)*time.Hour), 60, "a", "b")
		_, err := s.ingest(ctx, "cpu", mode, cpuOpts, rec)
		rec.Release()
		if err != nil {
			tb.Fatalf("ingest: %v", err)
		}
	}
	e.actions = testkit.ActionNames(tb, ctx, e.raw)
	return e
}

func (e *sqlFuzzEnv) close(tb testing.TB) {
	e.s.client.Close()
	e.raw.Close()
	e.s.srv.Shutdown()
	<-e.served
	if err := e.s.sql.Close(); err != nil {
		tb.Errorf("Close: %v", err)
	}
	e.s.cliMem.AssertSize(tb, 0)
	e.s.srvMem.AssertSize(tb, 0)
	if err := os.RemoveAll(e.dir); err != nil {
		tb.Error(err)
	}
}

func (e *sqlFuzzEnv) versions(t *testing.T) map[string]uint64 {
	names, err := e.s.svc.TableNames()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, n := range names {
		opts := tableformat.DefaultOptions()
		opts.ReadOnly = true
		tb, err := tableformat.Open(context.Background(), storage.Local(filepath.Join(e.s.root, n)), opts)
		if err != nil {
			t.Fatalf("table %s does not open: %v", n, err)
		}
		out[n] = tb.State().Version
	}
	return out
}

// doGet reads a whole stream and returns its error, if any.
func (e *sqlFuzzEnv) doGet(ctx context.Context, tk []byte) error {
	rdr, err := testkit.DoGet(ctx, e.raw, e.s.cliMem, &flight.Ticket{Ticket: tk})
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
	}
	return rdr.Err()
}

// doAction runs an action and reads every result.
func (e *sqlFuzzEnv) doAction(ctx context.Context, typ string, body []byte) error {
	stream, err := e.raw.DoAction(ctx, &flight.Action{Type: typ, Body: body})
	if err != nil {
		return err
	}
	return testkit.Drain(stream.Recv)
}

// doPut sends a small valid cpu batch under a CMD descriptor.
func (e *sqlFuzzEnv) doPut(ctx context.Context, cmd []byte) error {
	rec := cpuBatch(e.s.cliMem, t0.Add(time.Duration(48+e.puts)*time.Hour), 2, "a")
	defer rec.Release()
	e.puts++
	_, err := testkit.Put(ctx, e.raw, e.s.cliMem, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}, cpuSchema, rec)
	return err
}

func valueOf(tb testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// typeIndex is the position of name in sqlFuzzTypes.
func typeIndex(name string) uint8 { return uint8(slices.Index(sqlFuzzTypes, name)) }

// FuzzCommand: mode picks the call (0 GetFlightInfo, 1 DoGet, 2 DoAction
// with an action type picked from ListActions by kind, 3 DoPut with a
// small valid batch); raw sends value as it is, else value is wrapped in
// an Any of the Flight SQL type picked by kind. No input gets Internal,
// Unknown or DataLoss; a FlightInfo's tickets are served without those
// either; a refused call changes no file (but for an ingest's freshly
// created, empty table); an accepted DoPut adds at most one commit to one
// table; every table still opens.
func FuzzCommand(f *testing.F) {
	e := startSQLFuzz(f)
	f.Cleanup(func() { e.close(f) })
	tbl := "cpu"
	queries := []string{
		"SELECT count(*), sum(usage) FROM cpu WHERE ts >= TIMESTAMPTZ '2024-01-01 00:00:30+00' AND host = 'a'",
		"SELECT * FROM cpu ORDER BY ts LIMIT 3",
		"SELECT * FROM ts_gaps('cpu', TIMESTAMPTZ '2024-01-01 00:00:00+00', TIMESTAMPTZ '2024-01-01 02:00:00+00')",
		"SELECT host, max(usage) FROM tsflight.main.cpu GROUP BY host",
		"SELECT * FROM cpu WHERE ts > ?",
		"DELETE FROM cpu",
		"SELECT * FROM read_parquet('/etc/passwd')",
		"SELECT",
	}
	for _, q := range queries {
		v := valueOf(f, &pb.CommandStatementQuery{Query: q})
		f.Add(uint8(0), typeIndex("CommandStatementQuery"), v, false)
		f.Add(uint8(2), uint8(slices.Index(e.actions, flightsql.CreatePreparedStatementActionType)), testkit.PackAny(f, &pb.ActionCreatePreparedStatementRequest{Query: q}), true)
	}
	f.Add(uint8(0), typeIndex("CommandGetTables"), valueOf(f, &pb.CommandGetTables{IncludeSchema: true, TableNameFilterPattern: &tbl}), false)
	f.Add(uint8(0), typeIndex("CommandGetSqlInfo"), valueOf(f, &pb.CommandGetSqlInfo{Info: []uint32{0, 1, 8, 500}}), false)
	f.Add(uint8(0), typeIndex("CommandGetDbSchemas"), valueOf(f, &pb.CommandGetDbSchemas{}), false)
	f.Add(uint8(0), typeIndex("CommandGetXdbcTypeInfo"), valueOf(f, &pb.CommandGetXdbcTypeInfo{}), false)
	f.Add(uint8(0), typeIndex("CommandGetPrimaryKeys"), valueOf(f, &pb.CommandGetPrimaryKeys{Table: "cpu"}), false)
	f.Add(uint8(0), typeIndex("CommandPreparedStatementQuery"), valueOf(f, &pb.CommandPreparedStatementQuery{PreparedStatementHandle: []byte("nope")}), false)
	f.Add(uint8(1), typeIndex("TicketStatementQuery"), valueOf(f, &pb.TicketStatementQuery{StatementHandle: []byte("garbage")}), false)
	f.Add(uint8(1), typeIndex("CommandGetCatalogs"), valueOf(f, &pb.CommandGetCatalogs{}), false)
	f.Add(uint8(1), typeIndex("CommandGetTableTypes"), valueOf(f, &pb.CommandGetTableTypes{}), false)
	f.Add(uint8(3), typeIndex("CommandStatementIngest"), valueOf(f, &pb.CommandStatementIngest{Table: "cpu", Options: cpuOpts,
		TableDefinitionOptions: &pb.CommandStatementIngest_TableDefinitionOptions{
			IfNotExist: pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_FAIL,
			IfExists:   pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_APPEND}}), false)
	f.Add(uint8(3), typeIndex("CommandStatementIngest"), valueOf(f, &pb.CommandStatementIngest{Table: "fresh", Options: cpuOpts,
		TableDefinitionOptions: &pb.CommandStatementIngest_TableDefinitionOptions{
			IfNotExist: pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_CREATE,
			IfExists:   pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_REPLACE}}), false)
	f.Add(uint8(3), typeIndex("CommandStatementUpdate"), valueOf(f, &pb.CommandStatementUpdate{Query: "INSERT INTO cpu VALUES (1)"}), false)
	f.Add(uint8(3), typeIndex("CommandStatementIngest"), valueOf(f, &pb.CommandStatementIngest{Table: "cpu", TransactionId: []byte("tx")}), false)
	f.Add(uint8(2), uint8(slices.Index(e.actions, flightsql.ClosePreparedStatementActionType)), testkit.PackAny(f, &pb.ActionClosePreparedStatementRequest{PreparedStatementHandle: []byte("x")}), true)
	f.Add(uint8(2), uint8(slices.Index(e.actions, flightsql.BeginTransactionActionType)), testkit.PackAny(f, &pb.ActionBeginTransactionRequest{}), true)
	f.Add(uint8(2), uint8(slices.Index(e.actions, flightsql.CancelQueryActionType)), testkit.PackAny(f, &pb.ActionCancelQueryRequest{Info: []byte("x")}), true)
	f.Add(uint8(2), uint8(slices.Index(e.actions, "describe-table")), []byte(`{"table":"cpu"}`), true)
	f.Add(uint8(0), uint8(0), []byte(`{"table":"cpu"}`), true)
	f.Add(uint8(1), uint8(0), []byte("\x0a\x2dtype.googleapis.com/arrow.flight.protocol.sql.Command"), true)
	f.Add(uint8(0), uint8(0), []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, true)
	f.Fuzz(func(t *testing.T, mode, kind uint8, value []byte, raw bool) {
		if names, _ := e.s.svc.TableNames(); len(names) > 8 || e.puts > 64 {
			e.close(t)
			e = startSQLFuzz(t)
		}
		cmd := value
		if !raw {
			a := &anypb.Any{TypeUrl: sqlTypePrefix + sqlFuzzTypes[int(kind)%len(sqlFuzzTypes)], Value: value}
			var err error
			if cmd, err = proto.Marshal(a); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		before := testkit.Snapshot(t, e.s.root)
		versions := e.versions(t)
		var what string
		var err error
		switch mode % 4 {
		case 0:
			what = "GetFlightInfo"
			var info *flight.FlightInfo
			info, err = e.raw.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
			if err == nil {
				for _, ep := range info.Endpoint {
					if gerr := e.doGet(ctx, ep.Ticket.GetTicket()); gerr != nil {
						testkit.CheckCode(t, "DoGet of a FlightInfo's ticket", gerr)
					}
				}
			}
		case 1:
			what = "DoGet"
			err = e.doGet(ctx, cmd)
		case 2:
			typ := e.actions[int(kind)%len(e.actions)]
			what = "DoAction " + typ
			err = e.doAction(ctx, typ, cmd)
		default:
			what = "DoPut"
			err = e.doPut(ctx, cmd)
		}
		diff := testkit.ChangedFiles(before, testkit.Snapshot(t, e.s.root))
		var tables []string
		for _, p := range diff {
			n, _, _ := strings.Cut(p, "/")
			if !slices.Contains(tables, n) {
				tables = append(tables, n)
			}
		}
		after := e.versions(t)
		if err != nil {
			testkit.CheckCode(t, what, err)
			for _, n := range tables {
				if _, existed := versions[n]; existed || after[n] > 1 {
					t.Fatalf("refused %s (%v) changed %v", what, err, diff)
				}
			}
			return
		}
		if len(tables) > 1 {
			t.Fatalf("%s changed several tables: %v", what, diff)
		}
		for _, n := range tables {
			if what != "DoPut" && !strings.HasPrefix(what, "DoAction ") {
				t.Fatalf("%s changed %v", what, diff)
			}
			if v, existed := versions[n]; existed && what == "DoPut" && after[n] != v+1 {
				t.Fatalf("DoPut moved table %s from version %d to %d", n, v, after[n])
			}
		}
	})
}
