package flightserver

// Tests of the gRPC health service on a real server on a loopback port,
// built as tsflight serve builds it (the gate with the Auth tap and
// middleware, tokens in force), checked through the connection an arrow-go
// Flight client uses: NOT_SERVING before Serving, SERVING after, no token
// needed while every Flight call needs one, NOT_FOUND naming the services
// for an unknown one, and NOT_SERVING seen by a Watch as soon as a
// graceful stop begins that an open DoPut holds, the Watch then ending so
// that it does not hold the stop itself.

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/internal/testkit"
)

// healthEnv is a server with tokens (read, write) and the health service,
// and one client connection shared by a Flight client and a health client.
type healthEnv struct {
	t            *testing.T
	svc          *Service
	gate         *guard.Gate
	srv          flight.Server
	health       *Health
	served       chan error
	conn         *grpc.ClientConn
	fl           flight.Client
	hc           healthpb.HealthClient
	read, write  string
	shutdownOnce atomic.Bool
}

func startHealthServer(t *testing.T) *healthEnv {
	t.Helper()
	e := &healthEnv{t: t, served: make(chan error, 1)}
	var err error
	if e.read, err = guard.NewToken(); err != nil {
		t.Fatal(err)
	}
	if e.write, err = guard.NewToken(); err != nil {
		t.Fatal(err)
	}
	set, err := guard.ParseTokens(strings.NewReader(e.read+" read name=reader\n"+guard.HashToken(e.write)+" write name=writer\n"), "health test tokens")
	if err != nil {
		t.Fatal(err)
	}
	var tokens atomic.Pointer[guard.TokenSet]
	tokens.Store(set)
	auth := guard.NewAuth(guard.AuthOptions{Classify: Scopes(), Tokens: tokens.Load})
	if e.svc, err = New(DefaultOptions(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	gate, err := guard.NewGate(nil)
	if err != nil {
		t.Fatal(err)
	}
	e.gate = gate
	e.srv = flight.NewServerWithMiddleware([]flight.ServerMiddleware{gate.Middleware(), auth.Middleware()}, gate.ServerOptions(auth.Tap)...)
	e.srv.RegisterFlightService(e.svc)
	e.health = NewHealth()
	e.health.Register(e.srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.srv.InitListener(gate.Listener(lis))
	go func() { e.served <- e.srv.Serve() }()
	if e.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	e.fl = flight.NewClientFromConn(e.conn, nil)
	e.hc = healthpb.NewHealthClient(e.conn)
	t.Cleanup(func() {
		e.conn.Close()
		e.stop()
		if err := <-e.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// stop begins a shutdown as tsflight serve does (health first, then the
// graceful stop) and returns a channel closed when the graceful stop
// returned; later calls return a closed channel.
func (e *healthEnv) stop() <-chan struct{} {
	done := make(chan struct{})
	if !e.shutdownOnce.CompareAndSwap(false, true) {
		close(done)
		return done
	}
	e.health.Shutdown()
	go func() {
		e.srv.Shutdown()
		close(done)
	}()
	return done
}

// check asks the status of service without a credential.
func (e *healthEnv) check(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := e.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return resp.GetStatus(), err
}

func (e *healthEnv) wantStatus(ctx context.Context, service string, want healthpb.HealthCheckResponse_ServingStatus) {
	e.t.Helper()
	got, err := e.check(ctx, service)
	if err != nil || got != want {
		e.t.Fatalf("Check(%q) = %v, %v; want %v", service, got, err, want)
	}
}

func TestHealthWithoutToken(t *testing.T) {
	e := startHealthServer(t)
	ctx := ctxT(t)
	for _, s := range []string{"", FlightServiceName} {
		e.wantStatus(ctx, s, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	e.health.Serving()
	for _, s := range []string{"", FlightServiceName} {
		e.wantStatus(ctx, s, healthpb.HealthCheckResponse_SERVING)
	}
	// Authentication is on: a Flight call without a token is refused on
	// the same connection.
	stream, err := e.fl.ListActions(ctx, &flight.Empty{})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, "ListActions without a token", err, codes.Unauthenticated, "authentication required")
	// A credential sent with a health check is not looked at: a read
	// token, a write token, an unknown one.
	for _, tok := range []string{e.read, e.write, "tsf_not_a_known_token_at_all_0000"} {
		resp, err := e.hc.Check(bearer(ctx, tok), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check with a token: %v, %v", resp.GetStatus(), err)
		}
	}
	// List answers without a token too.
	list, err := e.hc.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || len(list.GetStatuses()) != 2 || list.GetStatuses()[FlightServiceName].GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("List: %v, %v", list, err)
	}
	// An unknown service: NOT_FOUND naming the ones there are.
	_, err = e.check(ctx, "arrow.flight.protocol.sql.FlightSqlService")
	wantCode(t, "Check of an unknown service", err, codes.NotFound,
		`unknown service "arrow.flight.protocol.sql.FlightSqlService"`, `""`, `"arrow.flight.protocol.FlightService"`)
}

func TestHealthNotServingOnShutdown(t *testing.T) {
	e := startHealthServer(t)
	ctx := ctxT(t)
	e.health.Serving()
	watch, err := e.hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: first %v, %v; want SERVING", resp.GetStatus(), err)
	}
	// A watch of a service that does not exist (yet) stays open too.
	unknown, err := e.hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := unknown.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Fatalf("Watch(nope): first %v, %v; want SERVICE_UNKNOWN", resp.GetStatus(), err)
	}

	// An append in flight holds the graceful stop open.
	wctx := bearer(ctx, e.write)
	created, err := e.fl.DoAction(wctx, &flight.Action{Type: ActionCreateTable, Body: []byte(`{"table":"cpu","index_column":"ts","index_type":"timestamp","granularity":"10s","entity_columns":["hostname"]}`)})
	if err == nil {
		err = testkit.Drain(created.Recv)
	}
	if err != nil {
		t.Fatalf("create-table: %v", err)
	}
	put, err := e.fl.DoPut(wctx)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	w := flight.NewRecordWriter(put, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(pathDesc("cpu"))
	batches := buildBatches(mem, genRows(t0, 10, 2), 10)
	defer releaseAll(batches)
	if err := w.Write(batches[0]); err != nil {
		t.Fatal(err)
	}
	// The DoPut is in its handler once the gate counts it beside the two
	// watches.
	if !waitFor(10*time.Second, func() bool { return e.gate.InFlight() == 3 }) {
		t.Fatalf("the DoPut did not start: %d calls in flight, want 3", e.gate.InFlight())
	}

	stopped := e.stop()
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after the shutdown began: %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}
	_, err = watch.Recv()
	wantCode(t, "Watch after NOT_SERVING", err, codes.Unavailable, "shutting down")
	_, err = unknown.Recv()
	wantCode(t, "Watch(nope) after the shutdown began", err, codes.Unavailable, "shutting down")
	// A check racing the stop: NOT_SERVING, or refused because the
	// connection is going away; never SERVING.
	if got, err := e.check(ctx, ""); err == nil && got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check during the shutdown: %v", got)
	} else if err != nil && status.Code(err) != codes.Unavailable {
		t.Fatalf("Check during the shutdown: %v", err)
	}
	select {
	case <-stopped:
		t.Fatal("the graceful stop returned while a DoPut was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	// The append finishes and commits; then the stop completes: the
	// watches did not hold it.
	for _, b := range batches[1:] {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if err := put.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := put.Recv(); err != nil {
		t.Fatalf("DoPut during the shutdown: %v", err)
	}
	if _, err := put.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("DoPut: %v after its result, want EOF", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the graceful stop did not return after the last call ended")
	}
	// Serving after a shutdown changes nothing.
	e.health.Serving()
	if resp, err := e.health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("after Serving following Shutdown: %v, %v", resp.GetStatus(), err)
	}
}

// A Watch ends with its client: no goroutine of it stays.
func TestHealthWatchEndsWithClient(t *testing.T) {
	e := startHealthServer(t)
	e.health.Serving()
	ctx, cancel := context.WithCancel(ctxT(t))
	watch, err := e.hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: FlightServiceName})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v, %v", resp.GetStatus(), err)
	}
	cancel()
	if _, err := watch.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Watch after cancel: %v", err)
	}
	// The stop does not wait for it.
	select {
	case <-e.stop():
	case <-time.After(10 * time.Second):
		t.Fatal("the graceful stop waited for a cancelled Watch")
	}
}
