//go:build duckdb_arrow

package flightsql

// Flight SQL rows of the bad-input catalogue for names and shapes neither
// side of the router takes (router.go): unknown actions (the nearest of
// the tsflight and Flight SQL actions suggested), Flight SQL message types
// that do not exist or that the call does not take, and tickets and
// descriptors of no known shape. Sent through the arrow-go Flight client
// of the Flight SQL client's connection, as raw Flight calls.

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tsflight/tsflight/internal/testkit"
)

// packedAny is the bytes of a protobuf Any with type URL url and value
// value (an unknown type cannot be packed by anypb.New).
func (e *sqlCatEnv) packedAny(url string, value []byte) []byte {
	b, err := proto.Marshal(&anypb.Any{TypeUrl: url, Value: value})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// packed is m packed as a protobuf Any.
func (e *sqlCatEnv) packed(m proto.Message) []byte {
	a, err := anypb.New(m)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.packedAny(a.TypeUrl, a.Value)
}

// rawAction runs a Flight action and returns its error.
func (e *sqlCatEnv) rawAction(typ string) error {
	_, err := e.doAction(e.ctx, typ, nil)
	return err
}

// rawGet fetches a ticket and returns the error of its stream.
func (e *sqlCatEnv) rawGet(ticket []byte) error {
	stream, err := e.client.Client.DoGet(e.ctx, &flight.Ticket{Ticket: ticket})
	if err != nil {
		return err
	}
	return testkit.Drain(stream.Recv)
}

// rawPut sends one message carrying desc and returns the answer's error.
func (e *sqlCatEnv) rawPut(desc *flight.FlightDescriptor) error {
	stream, err := e.client.Client.DoPut(e.ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&flight.FlightData{FlightDescriptor: desc}); err != nil && err != io.EOF {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	return testkit.Drain(stream.Recv)
}

func namesSQLCatalogue() []sqlBadCase {
	const names = "unknown names and shapes"
	goFlight := "arrow-go Flight (the Flight SQL listener)"
	const sqlURL = "type.googleapis.com/arrow.flight.protocol.sql."
	cmd := func(b []byte) *flight.FlightDescriptor {
		return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b}
	}
	return []sqlBadCase{
		{name: "unknown action one edit from a Flight SQL action", category: names, client: goFlight, op: "DoAction CreatePreparedStatment", code: codes.InvalidArgument,
			frags: []string{`unknown action "CreatePreparedStatment"; did you mean "CreatePreparedStatement"?`, "The actions are: create-table", "; Flight SQL: CancelFlightInfo, "},
			run:   func(e *sqlCatEnv) error { return e.rawAction("CreatePreparedStatment") }},
		{name: "unknown action one edit from a tsflight action", category: names, client: goFlight, op: "DoAction rollbak", code: codes.InvalidArgument,
			frags: []string{`unknown action "rollbak"; did you mean "rollback"?`, "Flight SQL: "},
			run:   func(e *sqlCatEnv) error { return e.rawAction("rollbak") }},
		{name: "unknown Flight SQL command type in a descriptor", category: names, client: goFlight, op: "GetFlightInfo CMD Any(…sql.CommandStatementQuerry)", code: codes.InvalidArgument,
			frags: []string{`GetFlightInfo: unknown Flight SQL message type "` + sqlURL + `CommandStatementQuerry"; did you mean "CommandStatementQuery"?`, "A Flight SQL descriptor holds one of: CommandStatementQuery, "},
			run: func(e *sqlCatEnv) error {
				_, err := e.client.Client.GetFlightInfo(e.ctx, cmd(e.packedAny(sqlURL+"CommandStatementQuerry", nil)))
				return err
			}},
		{name: "Flight SQL ticket message sent as a descriptor", category: names, client: goFlight, op: "GetSchema CMD Any(TicketStatementQuery)", code: codes.InvalidArgument,
			frags: []string{`GetSchema: the Flight SQL message "` + sqlURL + `TicketStatementQuery" is not one a descriptor takes`},
			run: func(e *sqlCatEnv) error {
				_, err := e.client.Client.GetSchema(e.ctx, cmd(e.packed(&pb.TicketStatementQuery{StatementHandle: []byte("x")})))
				return err
			}},
		{name: "Flight SQL command sent as a ticket", category: names, client: goFlight, op: "DoGet Any(CommandStatementQuery)", code: codes.InvalidArgument,
			frags: []string{`DoGet: the Flight SQL message "` + sqlURL + `CommandStatementQuery" is not one a ticket takes`, "a Flight SQL ticket holds one of: TicketStatementQuery, "},
			run: func(e *sqlCatEnv) error {
				return e.rawGet(e.packed(&pb.CommandStatementQuery{Query: "SELECT 1"}))
			}},
		{name: "unknown Flight SQL command type in a put", category: names, client: goFlight, op: "DoPut CMD Any(…sql.CommandStatementUpdat)", code: codes.InvalidArgument,
			frags: []string{`DoPut: unknown Flight SQL message type "` + sqlURL + `CommandStatementUpdat"; did you mean "CommandStatementUpdate"?`},
			run: func(e *sqlCatEnv) error {
				return e.rawPut(cmd(e.packedAny(sqlURL+"CommandStatementUpdat", nil)))
			}},
		{name: "ticket that is neither a tsflight nor a Flight SQL ticket", category: names, client: goFlight, op: "DoGet \\x00\\x01garbage", code: codes.InvalidArgument,
			frags: []string{`ticket: not a tsflight ticket nor a Flight SQL one: got 9 bytes, "\x00\x01garbage"`, "a Flight SQL ticket is a protobuf Any"},
			run:   func(e *sqlCatEnv) error { return e.rawGet([]byte("\x00\x01garbage")) }},
		{name: "descriptor of type UNKNOWN", category: names, client: goFlight, op: `GetFlightInfo UNKNOWN ["cpu"]`, code: codes.InvalidArgument,
			frags: []string{"GetFlightInfo: unknown descriptor type UNKNOWN (0)", "or CMD holding a Flight SQL command"},
			run: func(e *sqlCatEnv) error {
				_, err := e.client.Client.GetFlightInfo(e.ctx, &flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN, Path: []string{"cpu"}})
				return err
			}},
	}
}
