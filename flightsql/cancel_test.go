//go:build duckdb_arrow

package flightsql

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/internal/testkit"
)

// warmUp runs a query so that the connection's and DuckDB's lazily
// started goroutines exist before a baseline is taken.
func (s *sqlServer) warmUp(ctx context.Context) {
	s.t.Helper()
	if got := s.scalar(ctx, "SELECT count(*) FROM range(0, 100000)"); got != "100000" {
		s.t.Fatalf("warm-up: %s", got)
	}
}

// startWarm is startSQL warmed up, with its context and the number of
// goroutines that run once they have settled: the baseline a cancel must
// return to.
func startWarm(t *testing.T) (*sqlServer, context.Context, int) {
	t.Helper()
	s := startSQL(t)
	ctx := ctxT(t)
	s.warmUp(ctx)
	return s, ctx, testkit.SettledGoroutines()
}

// mustExecute runs q through CommandStatementQuery and returns its
// FlightInfo, unread.
func (s *sqlServer) mustExecute(t testing.TB, ctx context.Context, q string) *flight.FlightInfo {
	t.Helper()
	info, err := s.client.Execute(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return info
}

// wantCancel sends CancelFlightInfo for info and checks the status it
// answers; what names the call in a failure.
func (s *sqlServer) wantCancel(t *testing.T, ctx context.Context, what string, info *flight.FlightInfo, want flight.CancelStatus) {
	t.Helper()
	res, err := s.client.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: info})
	if err != nil {
		t.Fatalf("%s: CancelFlightInfo: %v", what, err)
	}
	if res.Status != want {
		t.Fatalf("%s: status %v, want %v", what, res.Status, want)
	}
}

// readCancelled reads info's first endpoint under a context cancelled
// after the given delay, and checks that the read ends Canceled within
// 5 s of its start; what prefixes a failure.
func (s *sqlServer) readCancelled(ctx context.Context, what string, info *flight.FlightInfo, after time.Duration) {
	s.t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	time.AfterFunc(after, cancel)
	start := time.Now()
	rdr, err := s.client.DoGet(cctx, info.Endpoint[0].Ticket)
	if err == nil {
		for rdr.Next() {
		}
		err = rdr.Err()
		rdr.Release()
	}
	if code := status.Code(err); code != codes.Canceled {
		s.t.Fatalf("%sDoGet: %v (code %v), want Canceled", what, err, code)
	}
	if d := time.Since(start); d > 5*time.Second {
		s.t.Fatalf("%sDoGet returned %v after the cancel", what, d)
	}
}

// answersNext checks that the server answers the query after a cancel
// within 10 s: q's single value must be want.
func (s *sqlServer) answersNext(ctx context.Context, q, want string) {
	s.t.Helper()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	r, err := s.query(qctx, q)
	wantSingle(s.t, "next query", r, err, want)
	s.t.Logf("next query took %v", time.Since(start))
}

// threadsFree checks that DuckDB's threads are free after a cancel: a
// query needing them finishes within 10 s (with 2 threads, a still-running
// aggregate would hold them).
func (s *sqlServer) threadsFree(ctx context.Context) {
	s.t.Helper()
	s.answersNext(ctx, "SELECT count(*) FROM range(0, 50000000) t(i) WHERE i % 3 = 0", "16666667")
}

func TestCancelStreamMidResult(t *testing.T) {
	s, ctx, base := startWarm(t)

	// 10^8 rows: about 1,500 batches.
	info := s.mustExecute(t, ctx, "SELECT * FROM range(0, 100000000) t(i)")
	cctx, cancel := context.WithCancel(ctx)
	rdr, err := s.client.DoGet(cctx, info.Endpoint[0].Ticket)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if !rdr.Next() {
		cancel()
		rdr.Release()
		t.Fatalf("no first batch: %v", rdr.Err())
	}
	if n := rdr.RecordBatch().NumRows(); n < 1<<16 {
		t.Errorf("first batch %d rows, want at least 65536", n)
	}
	start := time.Now()
	cancel()
	// The client sees the cancellation, not a clean end of stream.
	for rdr.Next() {
	}
	if code := status.Code(rdr.Err()); code != codes.Canceled {
		t.Errorf("after cancel: %v (code %v), want Canceled", rdr.Err(), code)
	}
	rdr.Release()
	testkit.WaitGoroutines(t, base, 5*time.Second)
	t.Logf("goroutines back to baseline %v after the cancel", time.Since(start))

	// The server answers the next query promptly.
	s.answersNext(ctx, "SELECT count(*) FROM range(0, 1000) t(i)", "1000")
}

// TestCancelInterruptsDuckDB cancels a DoGet while DuckDB is still
// computing its first batch (an aggregate that would run for hours): the
// query must be interrupted, not left to run on DuckDB's threads.
func TestCancelInterruptsDuckDB(t *testing.T) {
	s, ctx, base := startWarm(t)

	q := "SELECT sum(i * i % 7) FROM range(0, 100000000000000) t(i)"
	info := s.mustExecute(t, ctx, q)
	s.readCancelled(ctx, "", info, 500*time.Millisecond)
	testkit.WaitGoroutines(t, base, 5*time.Second)
	s.threadsFree(ctx)
}

func TestCancelFlightInfoBeforeDoGet(t *testing.T) {
	s, ctx := startCPU(t, 1)

	info := s.mustExecute(t, ctx, "SELECT count(*) FROM cpu")
	other := s.mustExecute(t, ctx, "SELECT count(*) FROM cpu")
	s.wantCancel(t, ctx, "CancelFlightInfo", info, flight.CancelStatusCancelled)
	_, err := s.fetch(ctx, info)
	wantCode(t, "DoGet of a cancelled FlightInfo", err, codes.Canceled)
	// Again: still cancelled.
	_, err = s.fetch(ctx, info)
	wantCode(t, "second DoGet of a cancelled FlightInfo", err, codes.Canceled)
	// Another FlightInfo of the same statement is unaffected.
	r, err := s.fetch(ctx, other)
	wantSingle(t, "DoGet of another FlightInfo", r, err, "7200")

	// A prepared statement's FlightInfo cancels the same way.
	p := s.prepare(ctx, "SELECT count(*) FROM cpu")
	pinfo, err := p.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.wantCancel(t, ctx, "CancelFlightInfo(prepared)", pinfo, flight.CancelStatusCancelled)
	_, err = s.fetch(ctx, pinfo)
	wantCode(t, "DoGet of a cancelled prepared FlightInfo", err, codes.Canceled)
}

func TestCancelFlightInfoNotCancellable(t *testing.T) {
	s, ctx := startCPU(t, 1)
	for name, tkt := range map[string][]byte{
		"raw bytes":    []byte("bogus"),
		"empty ticket": {},
	} {
		s.wantCancel(t, ctx, name, &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}}}, flight.CancelStatusNotCancellable)
	}
	// A plain Flight scan ticket (tsflight's own) is not a SQL statement.
	pinfo, err := s.client.Client.GetFlightInfo(ctx, pathDescriptor("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	s.wantCancel(t, ctx, "plain scan", pinfo, flight.CancelStatusNotCancellable)
	// And the scan still runs.
	_, recs, err := s.readFlight(ctx, pinfo.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, r := range recs {
		n += r.NumRows()
		r.Release()
	}
	if n != 7200 {
		t.Fatalf("scan after a refused cancel: %d rows", n)
	}
}

// TestCancelFlightInfoWhileStreaming: CancelFlightInfo on a FlightInfo
// whose DoGet is streaming interrupts it, and the reader is told so (a
// cut-short result must not look complete).
func TestCancelFlightInfoWhileStreaming(t *testing.T) {
	s, ctx, base := startWarm(t)
	info := s.mustExecute(t, ctx, "SELECT * FROM range(0, 100000000) t(i)")
	rdr, err := s.client.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	if !rdr.Next() {
		rdr.Release()
		t.Fatalf("no first batch: %v", rdr.Err())
	}
	res, err := s.client.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: info})
	if err != nil || res.Status != flight.CancelStatusCancelled {
		rdr.Release()
		t.Fatalf("CancelFlightInfo: %v, %v", res, err)
	}
	done := make(chan struct{})
	var rows int64
	go func() {
		defer close(done)
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the stream goes on after CancelFlightInfo (%d more rows)", rows)
	}
	err = rdr.Err()
	rdr.Release()
	if code := status.Code(err); code != codes.Canceled {
		t.Fatalf("stream after CancelFlightInfo ended with %v (code %v) after %d more rows, want Canceled", err, code, rows)
	}
	testkit.WaitGoroutines(t, base, 5*time.Second)
}

// TestFirstBatchStreams: results stream (docs/flightsql.md, "Results"):
// the first batch of a query arrives while DuckDB is still producing the
// rest. The query below yields a 64 Ki-row batch after about 6.6e7 rows
// of range() but would need hours (and 80 GB) to finish, so a server that
// runs the whole query before sending anything never answers; the client
// gives it 15 s, then cancels, which must interrupt DuckDB.
func TestFirstBatchStreams(t *testing.T) {
	s, ctx, base := startWarm(t)
	info := s.mustExecute(t, ctx, "SELECT i FROM range(0, 10000000000000) t(i) WHERE i % 1000 = 0")
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	start := time.Now()
	var first int64 = -1
	var firstErr error
	rdr, err := s.client.DoGet(cctx, info.Endpoint[0].Ticket)
	if err == nil {
		if rdr.Next() {
			first = rdr.RecordBatch().NumRows()
		}
		firstErr = rdr.Err()
	} else {
		firstErr = err
	}
	took := time.Since(start)
	cancel()
	if rdr != nil {
		for rdr.Next() {
		}
		rdr.Release()
	}
	if first < 0 {
		t.Errorf("no first batch within %v (%v): the result is not streamed", took.Round(time.Millisecond), firstErr)
	} else {
		t.Logf("first batch of %d rows after %v", first, took)
	}
	testkit.WaitGoroutines(t, base, 5*time.Second)
	s.threadsFree(ctx)
}

// CancelFlightInfo remembers only ids of the server's own form, and a
// bounded number of them: any read token may call it (the third security
// review left 45 MB behind with forged 40 KB ids).
func TestCancelFlightInfoBoundsWhatItKeeps(t *testing.T) {
	s := startSQL(t)
	ctx := context.Background()
	ticket := func(id string) *flight.FlightEndpoint {
		b, err := json.Marshal(stmtHandle{ID: id, Query: "SELECT 1"})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := flightsql.CreateStatementQueryTicket(b)
		if err != nil {
			t.Fatal(err)
		}
		return &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: tk}}
	}
	res, err := s.sql.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{ticket(strings.Repeat("a", 40<<10))}}})
	if err != nil || res.Status != flight.CancelStatusNotCancellable {
		t.Fatalf("a forged 40 KB id: %v, %v; want NOT_CANCELLABLE", res.Status, err)
	}
	eps := make([]*flight.FlightEndpoint, 0, maxCancelled+10)
	for range maxCancelled + 10 {
		eps = append(eps, ticket(newID()))
	}
	res, err = s.sql.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: &flight.FlightInfo{Endpoint: eps}})
	if err != nil || res.Status != flight.CancelStatusCancelled {
		t.Fatalf("cancelling %d endpoints: %v, %v", len(eps), res.Status, err)
	}
	s.sql.cancelMu.Lock()
	n := len(s.sql.cancelled)
	s.sql.cancelMu.Unlock()
	if n > maxCancelled || n == 0 {
		t.Fatalf("%d cancelled ids remembered, want between 1 and %d", n, maxCancelled)
	}
}
