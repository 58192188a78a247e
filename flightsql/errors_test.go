//go:build duckdb_arrow

package flightsql

import (
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
)

// doGetHandle fetches a statement ticket carrying handle.
func (s *sqlServer) doGetHandle(t testing.TB, handle []byte) error {
	t.Helper()
	tkt, err := flightsql.CreateStatementQueryTicket(handle)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.fetch(ctxT(t), &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}}})
	if err == nil {
		r.release()
	}
	return err
}

// TestMalformedTicketsAreRefused: statement tickets are client-visible; a
// forged or damaged one gets a clear error, never a panic.
func TestMalformedTicketsAreRefused(t *testing.T) {
	s := startSQL(t)
	s.makeCPU(ctxT(t), 1)
	handle := func(h stmtHandle) []byte {
		raw, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	cases := []struct {
		name   string
		handle []byte
		code   codes.Code
		frag   string
	}{
		{"not JSON", []byte("garbage"), codes.InvalidArgument, "not a tsflight statement ticket"},
		{"no statement", handle(stmtHandle{ID: "x"}), codes.InvalidArgument, "not a tsflight statement ticket"},
		{"bad parameter", handle(stmtHandle{ID: "x", Query: "SELECT ?", Rows: [][]wireValue{{{"int", "twelve"}}}}), codes.InvalidArgument, "parameter 1 is malformed"},
		{"unknown parameter type", handle(stmtHandle{ID: "x", Query: "SELECT ?", Rows: [][]wireValue{{{"complex", "1"}}}}), codes.InvalidArgument, "parameter 1 is malformed"},
		{"bad schema", handle(stmtHandle{ID: "x", Query: "SELECT 1", Schema: []byte("nope")}), codes.InvalidArgument, "schema is malformed"},
		{"snapshot gone", handle(stmtHandle{ID: "x", Query: "SELECT count(*) FROM cpu", Versions: map[string]uint64{"cpu": 999}}), codes.NotFound, "version 999"},
	}
	for _, c := range cases {
		wantCode(t, c.name, s.doGetHandle(t, c.handle), c.code, c.frag)
	}
	// The server still answers.
	if got := s.scalar(ctxT(t), "SELECT count(*) FROM cpu"); got != "7200" {
		t.Fatalf("count = %s", got)
	}
}

func TestStatementAndCallErrors(t *testing.T) {
	s, ctx := startCPU(t, 1)
	for _, c := range []struct {
		q    string
		code codes.Code
		frag string
	}{
		{"", codes.InvalidArgument, "no statement"},
		{";", codes.InvalidArgument, "no statement"},
		{"SELECT * FROM main.ts_coverage('cpu', '2024-01-01', '2024-01-02')", codes.InvalidArgument, "must not be qualified"},
		{"SELECT * FROM ts_coverage('cpu', '2024-01-01', '2024-01-02', {'host': upper('a')})", codes.InvalidArgument, "entity struct must hold constants"},
	} {
		_, err := s.query(ctx, c.q)
		wantCode(t, c.q, err, c.code, c.frag)
	}

	// CancelFlightInfo without endpoints.
	_, err := s.client.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: &flight.FlightInfo{}})
	wantCode(t, "CancelFlightInfo of nothing", err, codes.InvalidArgument, "no FlightInfo endpoints")

	// A parameter of a type that cannot be bound.
	stmt, err := s.client.Prepare(ctx, "SELECT count(*) FROM cpu WHERE host = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close(ctx)
	sc := arrow.NewSchema([]arrow.Field{{Name: "p", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	b := array.NewRecordBuilder(s.cliMem, sc)
	lb := b.Field(0).(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Int64Builder).Append(1)
	rec := b.NewRecordBatch()
	b.Release()
	stmt.SetParameters(rec)
	rec.Release()
	_, err = stmt.Execute(ctx)
	wantCode(t, "list parameter", err, codes.InvalidArgument, "cannot be bound as a parameter")
}
