//go:build duckdb_arrow

package flightsql

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
)

// endless is a query that would run for hours if left alone.
const endless = "SELECT count(*) FROM range(0, 10000000000000) t(i) WHERE i % 7 = 3"

// gatedServer is a test server behind a flightserver.Gate (its
// middleware and server options, as tsflight serve has), whose Flight SQL
// server counts started queries in the gate; stopped records why each
// waiting query was stopped.
func gatedServer(t *testing.T, ttl time.Duration) (*sqlServer, *guard.Gate, *stopLog) {
	t.Helper()
	gate, err := guard.NewGate(nil)
	if err != nil {
		t.Fatal(err)
	}
	log := &stopLog{}
	s := startSQLServer(t, sqlStart{
		mw:         []flight.ServerMiddleware{gate.Middleware()},
		serverOpts: gate.ServerOptions(),
		tweak: func(o *Options) {
			o.Gate = gate
			o.TicketTimeout = ttl
		},
	})
	s.sql.ready.testHook = log.add
	return s, gate, log
}

type stopLog struct {
	mu   sync.Mutex
	whys []string
}

func (l *stopLog) add(_, why string) {
	l.mu.Lock()
	l.whys = append(l.whys, why)
	l.mu.Unlock()
}

func (l *stopLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.whys...)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestUnfetchedQueryCountsAndExpires: a query GetFlightInfo started
// counts in the gate's InFlight while it waits for its DoGet, is
// interrupted when its ticket expires (the gate back to zero, its
// goroutines gone); the ticket itself stays valid: a DoGet after the
// head start was dropped runs the query itself.
func TestUnfetchedQueryCountsAndExpires(t *testing.T) {
	const ttl = 500 * time.Millisecond
	s, gate, stops := gatedServer(t, ttl)
	ctx := ctxT(t)
	s.scalar(ctx, "SELECT 1")
	base := runtime.NumGoroutine()
	s.mustExecute(t, ctx, endless)
	if n := gate.InFlight(); n != 1 {
		t.Fatalf("InFlight after GetFlightInfo = %d, want 1 (the started query)", n)
	}
	took := waitFor(t, "the unfetched query still counts", func() bool { return gate.InFlight() == 0 })
	t.Logf("stopped %s after GetFlightInfo returned (ticket timeout %s)", took, ttl)
	if got := stops.list(); len(got) != 1 || got[0] != "expired" {
		t.Fatalf("stops %v, want [expired]", got)
	}
	waitFor(t, "goroutines of the stopped query remain", func() bool { return runtime.NumGoroutine() <= base })
	// A finite query whose head start is dropped unfetched: its ticket
	// still answers, by running the query again.
	late := s.mustExecute(t, ctx, "SELECT 40 + 2 AS answer")
	waitFor(t, "the second unfetched query still counts", func() bool { return gate.InFlight() == 0 && len(stops.list()) == 2 })
	res, err := s.fetch(ctx, late)
	if err != nil {
		t.Fatalf("DoGet after the head start was dropped: %v", err)
	}
	got := res.rows
	res.release()
	if got != 1 {
		t.Fatalf("DoGet after the head start was dropped: %d rows, want 1", got)
	}
	if got := s.scalar(ctx, "SELECT 2"); got != "2" {
		t.Fatalf("SELECT 2 = %s", got)
	}
}

// TestUnfetchedQueryStopsWithConnection: the query started for a client
// whose connection closes is interrupted at once, long before its ticket
// expires; a fetched query hands its count over to its DoGet.
func TestUnfetchedQueryStopsWithConnection(t *testing.T) {
	s, gate, stops := gatedServer(t, time.Minute)
	ctx := ctxT(t)
	other, err := flightsql.NewClient(s.srv.Addr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	other.Alloc = s.cliMem
	if _, err := other.Execute(ctx, endless); err != nil {
		t.Fatal(err)
	}
	if n := gate.InFlight(); n != 1 {
		t.Fatalf("InFlight = %d, want 1", n)
	}
	other.Close()
	took := waitFor(t, "the query of a closed connection still counts", func() bool { return gate.InFlight() == 0 })
	t.Logf("stopped %s after the client closed its connection", took)
	if got := stops.list(); len(got) != 1 || got[0] != "connection closed" {
		t.Fatalf("stops %v, want [connection closed]", got)
	}

	// Fetched: the hold ends when the DoGet takes the query (the DoGet is
	// a call of its own), nothing is left after.
	info := s.mustExecute(t, ctx, "SELECT 42")
	r, err := s.fetch(ctx, info)
	wantSingle(t, "SELECT 42", r, err, "42")
	waitFor(t, "a fetched query still counts", func() bool { return gate.InFlight() == 0 })
	if got := stops.list(); len(got) != 1 {
		t.Fatalf("stops %v: the fetched query was stopped too", got)
	}
}

// TestUnfetchedQueriesRespectMaxCalls: with MaxCalls 3, queries started
// ahead fill the gate; beyond it GetFlightInfo still answers (the query
// is not started ahead) and the DoGet runs it.
func TestUnfetchedQueriesRespectMaxCalls(t *testing.T) {
	gate, err := guard.NewGate(&guard.Limits{MaxCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := startSQLServer(t, sqlStart{
		mw:         []flight.ServerMiddleware{gate.Middleware()},
		serverOpts: gate.ServerOptions(),
		tweak:      func(o *Options) { o.Gate = gate },
	})
	ctx := ctxT(t)
	var infos []*flight.FlightInfo
	for range 2 {
		info := s.mustExecute(t, ctx, endless)
		infos = append(infos, info)
	}
	if n := gate.InFlight(); n != 2 {
		t.Fatalf("InFlight = %d, want 2", n)
	}
	// The third GetFlightInfo is the third call: it may hold no more.
	info := s.mustExecute(t, ctx, "SELECT 7")
	if n := gate.InFlight(); n != 2 {
		t.Fatalf("InFlight = %d after a GetFlightInfo at the limit, want 2 (not started ahead)", n)
	}
	s.sql.ready.mu.Lock()
	waiting := len(s.sql.ready.m)
	s.sql.ready.mu.Unlock()
	if waiting != 2 {
		t.Fatalf("%d queries wait for their DoGet, want 2", waiting)
	}
	r, err := s.fetch(ctx, info)
	wantSingle(t, "SELECT 7", r, err, "7")
	for _, info := range infos {
		if _, err := s.client.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: info}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "cancelled queries still count", func() bool { return gate.InFlight() == 0 })
}

var _ = context.Background

// TestCancelledInfoKeepsNoQuery: a client that gives up during
// GetFlightInfo, after the server started its query, gets CANCELLED, and
// the started query is stopped then, not left for its ticket to expire.
func TestCancelledInfoKeepsNoQuery(t *testing.T) {
	s, gate, stops := gatedServer(t, time.Minute)
	ctx := ctxT(t)
	s.scalar(ctx, "SELECT 1")
	base := runtime.NumGoroutine()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var hooked bool
	s.sql.ready.beforePut = func(server context.Context) {
		hooked = true
		cancel() // the client gives up; wait until the server sees it
		select {
		case <-server.Done():
		case <-time.After(10 * time.Second):
			t.Error("the server's context did not end after the client cancelled")
		}
	}
	_, err := s.client.Execute(cctx, endless)
	s.sql.ready.beforePut = nil
	if !hooked {
		t.Fatal("the hook did not run: the query was not started ahead")
	}
	if status.Code(err) != codes.Canceled {
		t.Fatalf("Execute cancelled during GetFlightInfo: %v, want Canceled", err)
	}
	waitFor(t, "the started query still counts", func() bool { return gate.InFlight() == 0 })
	waitFor(t, "goroutines of the started query remain", func() bool { return runtime.NumGoroutine() <= base })
	s.sql.ready.mu.Lock()
	kept := len(s.sql.ready.m)
	s.sql.ready.mu.Unlock()
	if kept != 0 || len(stops.list()) != 0 {
		t.Fatalf("%d queries kept, stops %v; want none kept (closed at once, not expired)", kept, stops.list())
	}
	if got := s.scalar(ctx, "SELECT 2"); got != "2" {
		t.Fatalf("SELECT 2 = %s", got)
	}
}
