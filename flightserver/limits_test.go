package flightserver

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/internal/testkit"
)

func newGate(t *testing.T, l *guard.Limits) *guard.Gate {
	t.Helper()
	g, err := guard.NewGate(l)
	if err != nil {
		t.Fatalf("NewGate: %v", err)
	}
	return g
}

// gatedCPU starts a server behind a gate with limits l and creates the
// TSBS table cpu on it.
func gatedCPU(t *testing.T, l *guard.Limits) (*guard.Gate, *testServer, context.Context) {
	t.Helper()
	gate := newGate(t, l)
	ts := startGatedServer(t, nil, gate)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	return gate, ts, ctx
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*guard.Limits)
		want  string
	}{
		{"negative receive size", func(l *guard.Limits) { l.MaxRecvMsgSize = -1 }, "MaxRecvMsgSize"},
		{"receive size past int32", func(l *guard.Limits) { l.MaxRecvMsgSize = 1 << 31 }, "MaxRecvMsgSize"},
		{"negative send size", func(l *guard.Limits) { l.MaxSendMsgSize = -5 }, "MaxSendMsgSize"},
		{"negative keepalive", func(l *guard.Limits) { l.KeepaliveTime = -time.Second }, "KeepaliveTime"},
		{"negative keepalive timeout", func(l *guard.Limits) { l.KeepaliveTimeout = -time.Second }, "KeepaliveTimeout"},
	} {
		l := guard.DefaultLimits()
		tc.tweak(l)
		_, err := guard.NewGate(l)
		wantCode(t, tc.name, err, codes.InvalidArgument, tc.want)
	}
	// Zero fields mean the defaults.
	g := newGate(t, &guard.Limits{})
	if got := g.Limits(); got != *guard.DefaultLimits() {
		t.Fatalf("zero limits filled as %+v, want the defaults %+v", got, *guard.DefaultLimits())
	}
}

// stalledPut opens a DoPut on client and sends one batch of rows to
// table, then sends nothing more: the call stays open until ctx ends or the
// server ends it. It returns the stream to read the outcome from.
func stalledPut(t *testing.T, ctx context.Context, ts *testServer, client flight.Client, table string, first int) flight.FlightService_DoPutClient {
	t.Helper()
	stream, err := client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(ts.cliMem))
	w.SetFlightDescriptor(pathDesc(table))
	rec := bigBatch(ts.cliMem, first, 10, 3)
	err = w.Write(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// tableFiles lists every file under a table's directory but its log:
// what a failed or cut append might leave behind.
func tableFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && filepath.Base(filepath.Dir(p)) != "_timeseries_log" {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRequestTimeoutEndsStalledPut: a DoPut whose client goes silent ends
// at the server's request timeout with DeadlineExceeded,
// commits nothing and leaves no file; the gate counts it out.
func TestRequestTimeoutEndsStalledPut(t *testing.T) {
	gate, ts, ctx := gatedCPU(t, &guard.Limits{RequestTimeout: 2 * time.Second})

	start := time.Now()
	stream := stalledPut(t, ctx, ts, ts.client, "cpu", 0)
	_, err := stream.Recv()
	took := time.Since(start)
	wantCode(t, "a silent DoPut", err, codes.DeadlineExceeded, "deadline exceeded")
	if took > 10*time.Second {
		t.Fatalf("the stalled DoPut ended after %s, want about 2s", took)
	}
	desc := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if desc["version"] != float64(1) {
		t.Fatalf("table at version %v after a timed-out put, want 1", desc["version"])
	}
	if !waitFor(2*time.Second, func() bool { return len(tableFiles(t, filepath.Join(ts.root, "cpu"))) == 0 }) {
		t.Fatalf("files left by the timed-out put: %v", tableFiles(t, filepath.Join(ts.root, "cpu")))
	}
	if !waitFor(2*time.Second, func() bool { return gate.InFlight() == 0 }) {
		t.Fatalf("%d calls still counted in flight", gate.InFlight())
	}

	// A client's own, earlier deadline still wins, with gRPC's message.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	stream = stalledPut(t, short, ts, ts.client, "cpu", 0)
	_, err = stream.Recv()
	wantCode(t, "a DoPut past its client's deadline", err, codes.DeadlineExceeded)

	// Calls that finish in time are untouched by the limit.
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 30, 2), 60, 2)
}

// TestMaxCallsRefusesBeyondTheLimit: with two calls running, a third is
// refused at once with ResourceExhausted naming the flag; when they end,
// calls are admitted again, and the refused call wrote nothing.
func TestMaxCallsRefusesBeyondTheLimit(t *testing.T) {
	gate, ts, ctx := gatedCPU(t, &guard.Limits{MaxCalls: 2})

	hold, release := context.WithCancel(ctx)
	a := stalledPut(t, hold, ts, ts.client, "cpu", 0)
	b := stalledPut(t, hold, ts, ts.client, "cpu", 100)
	if !waitFor(5*time.Second, func() bool { return gate.InFlight() == 2 }) {
		t.Fatalf("%d calls in flight, want the 2 stalled puts", gate.InFlight())
	}
	_, err := ts.action(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	wantCode(t, "a third call", err, codes.ResourceExhausted, "limit of 2 calls", "--max-calls", "retry")
	_, err = ts.put(ctx, pathDesc("cpu"), tsbsSchema)
	wantCode(t, "a third DoPut", err, codes.ResourceExhausted, "--max-calls")
	if n := gate.Refused(); n != 2 {
		t.Fatalf("gate counted %d refused calls, want 2", n)
	}

	release()
	for _, s := range []flight.FlightService_DoPutClient{a, b} {
		_, err := s.Recv()
		wantCode(t, "a cancelled put", err, codes.Canceled)
	}
	if !waitFor(5*time.Second, func() bool { return gate.InFlight() == 0 }) {
		t.Fatalf("%d calls in flight after the puts were cancelled", gate.InFlight())
	}
	desc := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if desc["version"] != float64(1) {
		t.Fatalf("table at version %v, want 1: nothing was committed", desc["version"])
	}
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 30, 2), 60, 2)
}

// TestHeaderListSizeBounded: a call whose headers exceed MaxHeaderListSize
// is refused before it reaches the server, which goes on answering.
func TestHeaderListSizeBounded(t *testing.T) {
	_, ts, ctx := gatedCPU(t, guard.DefaultLimits())
	big := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.Repeat("x", guard.MaxHeaderListSize))
	_, err := ts.action(big, ActionDescribeTable, map[string]any{"table": "cpu"})
	if err == nil || !strings.Contains(err.Error(), "header list size") {
		t.Fatalf("a call with %d bytes of headers: %v, want refused for its header list size", guard.MaxHeaderListSize, err)
	}
	ok := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.Repeat("x", 4<<10))
	if _, err := ts.action(ok, ActionDescribeTable, map[string]any{"table": "cpu"}); err != nil {
		t.Fatalf("a call with 4 KiB of headers: %v", err)
	}
}

// TestStreamsPerConnQueues: with one stream per connection, a second call
// on a busy connection waits (here until its deadline) without reaching
// the server, while another connection is served.
func TestStreamsPerConnQueues(t *testing.T) {
	gate, ts, ctx := gatedCPU(t, &guard.Limits{MaxStreamsPerConn: 1})

	hold, release := context.WithCancel(ctx)
	defer release()
	stalledPut(t, hold, ts, ts.client, "cpu", 0)
	if !waitFor(5*time.Second, func() bool { return gate.InFlight() == 1 }) {
		t.Fatalf("%d calls in flight, want the stalled put", gate.InFlight())
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := ts.action(short, ActionDescribeTable, map[string]any{"table": "cpu"})
	wantCode(t, "a second call on the busy connection", err, codes.DeadlineExceeded)
	if n := gate.InFlight(); n != 1 {
		t.Fatalf("%d calls reached the server, want only the stalled put", n)
	}

	other, err := flight.NewClientWithMiddleware(ts.srv.Addr().String(), nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	stream, err := other.DoAction(ctx, &flight.Action{Type: ActionDescribeTable, Body: []byte(`{"table":"cpu"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("a call on another connection: %v", err)
	}
	release()
	if !waitFor(5*time.Second, func() bool { return gate.InFlight() == 0 }) {
		t.Fatalf("%d calls in flight after the put was cancelled", gate.InFlight())
	}
	ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
}

// TestSlowReaderHoldsBoundedMemory: a client that reads one batch of a
// large scan and stops makes the server hold a few batches, not the scan:
// the server's buffers stop growing while the client is silent and stay
// far below the table's size; the request timeout ends the call, and every
// buffer is freed.
func TestSlowReaderHoldsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a million rows")
	}
	// The table is written and read whole through a server without limits
	// (under -race on a loaded machine that takes a while), then served by
	// a gated one on the same root.
	plain := startServer(t, func(o *Options) { o.MaxEndpoints = 1 })
	ctx := ctxT(t)
	// 8 segments of 150,000 rows (1,500 steps × 100 hosts).
	total := loadBig(t, plain, "big", 8, 1500, 100, 500)
	var tableBytes, rows int64
	full, err := plain.client.DoGet(ctx, plain.info(ctx, pathDesc("big")).Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	frdr, err := flight.NewRecordReader(full, ipc.WithAllocator(plain.cliMem))
	if err != nil {
		t.Fatal(err)
	}
	for frdr.Next() {
		tableBytes += int64(BatchBytes(frdr.RecordBatch()))
		rows += frdr.RecordBatch().NumRows()
	}
	if err := frdr.Err(); err != nil {
		t.Fatal(err)
	}
	frdr.Release()
	if rows != int64(total) {
		t.Fatalf("read %d rows, want %d", rows, total)
	}

	const timeout = 2 * time.Second
	gate := newGate(t, &guard.Limits{RequestTimeout: timeout})
	ts := startGatedServer(t, func(o *Options) { o.Root = plain.root; o.MaxEndpoints = 1 }, gate)
	info := ts.info(ctx, pathDesc("big"))
	base := testkit.SettledGoroutines()
	rdr := ts.mustStream(t, ctx, info.Endpoint[0].Ticket)
	defer rdr.Release()
	if !rdr.Next() {
		t.Fatalf("no first batch: %v", rdr.Err())
	}
	batchBytes := int64(BatchBytes(rdr.RecordBatch()))
	// The client now reads nothing. Wait until the server has sent what
	// flow control allows (its buffers stop changing), then watch them.
	held := func() int64 { return int64(ts.srvMem.CurrentAlloc()) }
	settled, still := held(), 0
	for range 300 {
		time.Sleep(10 * time.Millisecond)
		if now := held(); now == settled {
			if still++; still == 20 {
				break
			}
		} else {
			settled, still = now, 0
		}
	}
	var peak int64
	for range 50 {
		peak = max(peak, held())
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("table %d MiB as Arrow; one batch %.1f MiB; a stalled stream holds %.1f MiB (peak %.1f MiB)",
		tableBytes>>20, float64(batchBytes)/(1<<20), float64(settled)/(1<<20), float64(peak)/(1<<20))
	if peak > settled+batchBytes {
		t.Fatalf("the server's buffers grew from %d to %d bytes while the client read nothing", settled, peak)
	}
	if peak > tableBytes/4 {
		t.Fatalf("a stalled stream holds %d bytes, more than a quarter of the table's %d", peak, tableBytes)
	}

	// The deadline ends the call: the handler returns and its goroutines
	// end at once; what gRPC still queues for the client (its status sits
	// behind the unread batches) is freed when the client reads, here, or
	// when the connection ages out (2× the timeout plus one timeout of
	// grace; those buffers are then left to the garbage collector, which
	// a checked allocator cannot see).
	start := time.Now()
	if !waitFor(timeout+5*time.Second, func() bool { return gate.InFlight() == 0 }) {
		t.Fatalf("%d calls in flight %s after the DoGet began, with a request timeout of %s", gate.InFlight(), time.Since(start), timeout)
	}
	for rdr.Next() {
	}
	wantCode(t, "a stalled DoGet past the request timeout", rdr.Err(), codes.DeadlineExceeded)
	if !waitFor(5*time.Second, func() bool { return held() == 0 }) {
		t.Fatalf("server still holds %d bytes after the request timeout", held())
	}
	if !waitFor(5*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		t.Fatalf("%d goroutines (%d before) after the request timeout", runtime.NumGoroutine(), base)
	}
}
