//go:build duckdb_arrow

package flightsql

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
)

// TestPreparedNotPreparedAgain: a prepared statement executed again runs
// the DuckDB statement prepared for it (the prepare counter behind
// sql_statements_prepared_total stays where the first execution left it),
// and an append between executions plans a new text (the new segment)
// that is prepared once and answers with the new rows.
func TestPreparedNotPreparedAgain(t *testing.T) {
	s, ctx := startCPU(t, 2)
	before := s.sql.pool.prepares.Load()
	p := s.prepare(ctx, "SELECT count(*), max(usage) FROM cpu WHERE host = 'a'")
	run := func(want string) {
		t.Helper()
		_, r := s.mustExecPrepared(t, ctx, "execute", p, nil)
		if got := fmt.Sprint(r.rowsOf()); got != want {
			t.Fatalf("rows %s, want %s", got, want)
		}
	}
	for range 5 {
		run("[7200|7199]")
	}
	if n := s.sql.pool.prepares.Load() - before; n != 1 {
		t.Fatalf("%d DuckDB prepares for one prepared statement executed 5 times, want 1", n)
	}
	rec := cpuBatch(s.cliMem, t0.Add(2*time.Hour), 3600, "a", "b")
	if _, err := s.ingest(ctx, "cpu", "append", cpuOpts, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	for range 3 {
		run("[10800|10799]")
	}
	if n := s.sql.pool.prepares.Load() - before; n != 2 {
		t.Fatalf("%d DuckDB prepares after an append and 3 more executions, want 2 (the new version's text once)", n)
	}

	// With a parameter: the first execution prepares what it needs (the
	// typed description and the statement), later ones nothing.
	pp := s.prepare(ctx, "SELECT count(*) FROM cpu WHERE host = ? AND usage >= ?")
	var after int64
	for i := range 4 {
		params := paramBatch(t, s, []arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}, {Name: "u", Type: arrow.PrimitiveTypes.Int64}},
			[][]any{{"b", int64(10000 + i)}})
		_, r, err := s.execPrepared(ctx, pp, params)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(r.rowsOf()), fmt.Sprintf("[%d]", 10800-(10000+i-1)); got != want {
			t.Fatalf("execution %d: rows %s, want %s", i, got, want)
		}
		r.release()
		if i == 0 {
			after = s.sql.pool.prepares.Load()
		}
	}
	if n := s.sql.pool.prepares.Load() - after; n != 0 {
		t.Fatalf("%d DuckDB prepares in 3 executions of a parameterised statement after its first, want 0", n)
	}
}

// TestPooledCancelInterrupts: a statement running on a connection of the
// pool, prepared there before, is interrupted when its DoGet is
// cancelled, twice in a row, and the next query gets DuckDB's threads.
func TestPooledCancelInterrupts(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	for range 3 { // fill the pool
		s.warmUp(ctx)
	}
	p := s.prepare(ctx, "SELECT sum(i * i % 7) FROM range(0, 100000000000000) t(i)")
	for round := range 2 {
		info, err := p.Execute(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.readCancelled(ctx, fmt.Sprintf("round %d: ", round), info, 300*time.Millisecond)
	}
	s.threadsFree(ctx)
}

// TestPoolKeepsBoundedStatements: a connection keeps at most
// sessionStmtMax statements (the least recently used go) and none whose
// planned text is longer than sessionStmtMaxText; statements it does not
// keep are freed after use (the Arrow allocators' zero checks and the
// race detector watch the rest).
func TestPoolKeepsBoundedStatements(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	for i := range sessionStmtMax + 5 {
		if got := s.scalar(ctx, fmt.Sprintf("SELECT %d", i)); got != fmt.Sprint(i) {
			t.Fatalf("SELECT %d = %s", i, got)
		}
	}
	long := "SELECT 7 AS v -- " + fmt.Sprintf("%0*d", sessionStmtMaxText, 0)
	if got := s.scalar(ctx, long); got != "7" {
		t.Fatalf("a long text = %s, want 7", got)
	}
	s.sql.pool.mu.Lock()
	defer s.sql.pool.mu.Unlock()
	if len(s.sql.pool.idle) == 0 {
		t.Fatal("no idle connection after clean queries")
	}
	most := 0
	for _, sess := range s.sql.pool.idle {
		most = max(most, len(sess.stmts))
		if n := len(sess.stmts); n > sessionStmtMax || len(sess.order) != n {
			t.Fatalf("a connection keeps %d statements (order %d), at most %d", n, len(sess.order), sessionStmtMax)
		}
		for text := range sess.stmts {
			if len(text) > sessionStmtMaxText {
				t.Fatalf("a connection keeps a statement of %d bytes of text", len(text))
			}
		}
	}
	if most != sessionStmtMax {
		t.Fatalf("the fullest connection keeps %d statements after %d texts, want the bound %d", most, sessionStmtMax+5, sessionStmtMax)
	}
}

// TestStartedAheadWithParameters: GetFlightInfo of a prepared statement
// with one bound row starts it with the values bound (its FlightInfo has
// the started run's schema); a DoGet of a ticket carrying other values
// under the same statement id does not get that run: it runs its own.
func TestStartedAheadWithParameters(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	p := s.prepare(ctx, "SELECT ? * 10 AS x")
	params := paramBatch(t, s, []arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64}}, [][]any{{int64(4)}})
	p.SetParameters(params)
	params.Release()
	info, err := p.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.sql.ready.count(); n != 1 {
		t.Fatalf("%d queries started ahead, want 1 (the bound row)", n)
	}
	raw, err := flightsql.GetStatementQueryTicket(info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	var h stmtHandle
	if err := json.Unmarshal(raw.GetStatementHandle(), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Rows) != 1 {
		t.Fatalf("the ticket carries %d rows, want 1", len(h.Rows))
	}
	forged := h
	forged.Rows = [][]wireValue{{{"int", "7"}}}
	b, err := json.Marshal(&forged)
	if err != nil {
		t.Fatal(err)
	}
	tkt, err := flightsql.CreateStatementQueryTicket(b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.fetch(ctx, &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(r.rowsOf())
	r.release()
	if got != "[70]" {
		t.Fatalf("the ticket with 7: rows %s, want [70] (its own run, not the one started for 4)", got)
	}
	r, err = s.fetch(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	if got := fmt.Sprint(r.rowsOf()); got != "[40]" {
		t.Fatalf("rows %s, want [40]", got)
	}
	if !r.schema.Equal(s.schemaOf(info.Schema)) {
		t.Fatalf("stream schema %v, FlightInfo schema %v", r.schema, s.schemaOf(info.Schema))
	}
}
