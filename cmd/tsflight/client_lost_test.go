package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeServer is a minimal Flight server in the test process, for the
// client's failure paths that a real server does not produce on demand: it
// serves one table "cpu" (ts, host, value), answers DoPut and DoGet as its
// hooks say, and can vanish in the middle of a call (kill: every
// connection is closed and no new one is accepted, as when the server
// process dies).
type fakeServer struct {
	flight.BaseFlightServer
	addr  string
	conns *connTracker
	// put handles the n-th DoPut (from 1); nil commits every file.
	put  func(f *fakeServer, n int, stream flight.FlightService_DoPutServer) error
	puts atomic.Int32
	// get handles DoGet; nil sends one batch of two rows.
	get func(f *fakeServer, stream flight.FlightService_DoGetServer) error
}

var fakeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

func startFakeServer(t *testing.T, f *fakeServer) *fakeServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	f.conns = &connTracker{Listener: lis, open: map[net.Conn]struct{}{}}
	srv := flight.NewServerWithMiddleware(nil)
	srv.RegisterFlightService(f)
	srv.InitListener(f.conns)
	go srv.Serve()
	t.Cleanup(func() {
		f.kill()
		srv.Shutdown()
	})
	return f
}

// kill makes the server vanish: the clients' calls in flight fail with
// Unavailable and new connections are refused.
func (f *fakeServer) kill() {
	f.conns.Listener.Close()
	f.conns.closeAll()
}

func (f *fakeServer) GetSchema(context.Context, *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	return &flight.SchemaResult{Schema: flight.SerializeSchema(fakeSchema, memory.DefaultAllocator)}, nil
}

func (f *fakeServer) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if a.Type != "describe-table" {
		return status.Errorf(codes.Unimplemented, "action %s", a.Type)
	}
	body := `{"table":"cpu","version":1,"index":{"column":"ts","type":"timestamp","entity_columns":["host"]},"reader_features":[]}`
	return stream.Send(&flight.Result{Body: []byte(body)})
}

func (f *fakeServer) DoPut(stream flight.FlightService_DoPutServer) error {
	n := int(f.puts.Add(1))
	if f.put != nil {
		return f.put(f, n, stream)
	}
	return fakeCommit(n, stream)
}

// fakeReadAll reads a DoPut stream to its end and returns its rows.
func fakeReadAll(stream flight.FlightService_DoPutServer) (int64, error) {
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var rows int64
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
	}
	return rows, rdr.Err()
}

// fakeCommit reads the file and answers as a commit of version n+1.
func fakeCommit(n int, stream flight.FlightService_DoPutServer) error {
	rows, err := fakeReadAll(stream)
	if err != nil {
		return err
	}
	ans, _ := json.Marshal(loadPutAnswer{Version: uint64(n + 1), Rows: rows, Segment: fmt.Sprintf("data/%d.parquet", n)})
	return stream.Send(&flight.PutResult{AppMetadata: ans})
}

func (f *fakeServer) GetFlightInfo(_ context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(fakeSchema, memory.DefaultAllocator),
		FlightDescriptor: d,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: []byte("all")}}},
		TotalRecords:     -1,
		TotalBytes:       -1,
	}, nil
}

func (f *fakeServer) DoGet(_ *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if f.get != nil {
		return f.get(f, stream)
	}
	return fakeSendRows(stream)
}

// fakeSendRows sends two rows.
func fakeSendRows(stream flight.FlightService_DoGetServer) error {
	b := array.NewRecordBuilder(memory.DefaultAllocator, fakeSchema)
	defer b.Release()
	for i := range 2 {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*10_000))
		b.Field(1).(*array.StringBuilder).Append("h0")
		b.Field(2).(*array.Float64Builder).Append(float64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(fakeSchema))
	if err := w.Write(rec); err != nil {
		return err
	}
	return w.Close()
}

// fakeCSV writes a CSV file of the fake table with n rows from row first.
func fakeCSV(t *testing.T, dir, name string, first, n int) string {
	t.Helper()
	lines := []string{"ts,host,value"}
	for i := first; i < first+n; i++ {
		lines = append(lines, fmt.Sprintf("%s,h0,%d", cliTime(i), i))
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadServerLost: exit 3 promises that nothing was done. Once the
// server has answered anything, losing it is an ordinary failure (exit 1)
// whose message says what was loaded and what may have been committed.
func TestLoadServerLost(t *testing.T) {
	dir := t.TempDir()
	a, b := fakeCSV(t, dir, "a.csv", 0, 2), fakeCSV(t, dir, "b.csv", 2, 2)
	lost := func(addr string) string { return "lost the connection to the tsflight server at " + addr }

	t.Run("between files", func(t *testing.T) {
		// a.csv is committed; the server dies as b.csv arrives.
		f := startFakeServer(t, &fakeServer{put: func(f *fakeServer, n int, stream flight.FlightService_DoPutServer) error {
			if n == 1 {
				return fakeCommit(n, stream)
			}
			f.kill()
			return status.Error(codes.Unavailable, "gone")
		}})
		_, stderr, code := runCLI(t, nil, "load", "--server", "grpc://"+f.addr, "cpu", a, b)
		for _, want := range []string{
			"loaded " + a + ": 2 rows",
			"loaded 1 of 2 files: " + a + "; ",
			"tsflight load: error: " + b + ": " + lost(f.addr),
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("want %q in stderr", want)
			}
		}
		// Depending on how far b.csv got, it was not committed or may
		// have been: either way the message says which.
		if !strings.Contains(stderr, "not loaded: "+b+"\n") && !strings.Contains(stderr, b+" may have been committed") {
			t.Errorf("stderr does not say what became of %s", b)
		}
		if code != exitFail {
			t.Errorf("exit %d, want %d", code, exitFail)
		}
		t.Logf("stderr:\n%s", stderr)
	})

	t.Run("whole file sent", func(t *testing.T) {
		// The server reads all of a.csv, then dies before answering: it
		// may have committed it.
		f := startFakeServer(t, &fakeServer{put: func(f *fakeServer, n int, stream flight.FlightService_DoPutServer) error {
			if _, err := fakeReadAll(stream); err != nil {
				return err
			}
			f.kill()
			return status.Error(codes.Unavailable, "gone")
		}})
		_, stderr, code := runCLI(t, nil, "load", "--server", "grpc://"+f.addr, "cpu", a, b)
		for _, want := range []string{
			"loaded 0 of 2 files: none; " + a + " may have been committed (check with tsflight describe cpu); not loaded: " + b + "\n",
			"tsflight load: error: " + a + ": " + lost(f.addr),
			"; the server had the whole file and may have committed it: check with tsflight describe cpu\n",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("want %q in stderr", want)
			}
		}
		if code != exitFail {
			t.Errorf("exit %d, want %d", code, exitFail)
		}
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr)
		}
	})

	t.Run("before any file", func(t *testing.T) {
		// The server answered the table's description, then died: nothing
		// was committed, and the message says so, but exit 3 is only for
		// a server that never answered.
		f := startFakeServer(t, &fakeServer{put: func(f *fakeServer, n int, stream flight.FlightService_DoPutServer) error {
			f.kill()
			return status.Error(codes.Unavailable, "gone")
		}})
		_, stderr, code := runCLI(t, nil, "load", "--server", "grpc://"+f.addr, "cpu", a, b)
		if code != exitFail || !strings.Contains(stderr, "loaded 0 of 2 files: none; ") || !strings.Contains(stderr, lost(f.addr)) {
			t.Errorf("exit %d, stderr:\n%s\nwant exit %d, %q", code, stderr, exitFail, lost(f.addr))
		}
	})

	t.Run("down from the start", func(t *testing.T) {
		f := startFakeServer(t, &fakeServer{})
		f.kill()
		_, stderr, code := runCLI(t, nil, "load", "--server", "grpc://"+f.addr, "cpu", a, b)
		if code != exitUnavailable || !strings.Contains(stderr, "cannot reach a tsflight server at "+f.addr+" (is it running?") {
			t.Errorf("exit %d, stderr:\n%s\nwant exit %d, cannot reach", code, stderr, exitUnavailable)
		}
	})
}

// TestScanServerLost: a scan whose server dies after describing the result
// fails with exit 1, not 3.
func TestScanServerLost(t *testing.T) {
	f := startFakeServer(t, &fakeServer{get: func(f *fakeServer, stream flight.FlightService_DoGetServer) error {
		f.kill()
		return status.Error(codes.Unavailable, "gone")
	}})
	_, stderr, code := runCLI(t, nil, "scan", "--server", "grpc://"+f.addr, "--format", "csv", "cpu")
	if want := "tsflight scan: error: lost the connection to the tsflight server at " + f.addr; code != exitFail || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit %d, %q", code, stderr, exitFail, want)
	}
}

// TestOutputKeepsFileOnFailure: --output FILE over an existing file replaces
// it only when the command succeeds; a command that fails half way leaves
// the old file as it was, and no temporary file behind.
func TestOutputKeepsFileOnFailure(t *testing.T) {
	f := startFakeServer(t, &fakeServer{})
	var fail atomic.Bool
	f.get = func(f *fakeServer, stream flight.FlightService_DoGetServer) error {
		if err := fakeSendRows(stream); err != nil || !fail.Load() {
			return err
		}
		return status.Error(codes.Internal, "the disk caught fire")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	const old = "my precious data\n"
	if err := os.WriteFile(path, []byte(old), 0o640); err != nil {
		t.Fatal(err)
	}
	onlyOut := func() {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 1 || entries[0].Name() != "out.csv" {
			names := []string{}
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("directory holds %q (%v), want out.csv only", names, err)
		}
	}

	fail.Store(true)
	_, stderr, code := runCLI(t, nil, "scan", "--server", "grpc://"+f.addr, "--format", "csv", "--output", path, "cpu")
	if code != exitFail || !strings.Contains(stderr, "the disk caught fire") {
		t.Errorf("failing scan: exit %d, stderr %q", code, stderr)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != old {
		t.Errorf("after a failed scan --output: %q, %v; want the old content %q", b, err, old)
	}
	onlyOut()

	fail.Store(false)
	if _, stderr, code := runCLI(t, nil, "scan", "--server", "grpc://"+f.addr, "--format", "csv", "--output", path, "cpu"); code != 0 {
		t.Fatalf("scan: exit %d, %s", code, stderr)
	}
	want := cliText("ts,host,value", cliTime(0)+",h0,0", cliTime(1)+",h0,1")
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("after scan --output: %q, %v; want %q", b, err, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the replaced file's mode: %v, %v; want the old file's -rw-r-----", fi.Mode(), err)
	}
	onlyOut()
}
