package flightserver

// The rows F160-F169 of the bad-input catalogue (see catalogue_test.go):
// names and shapes the server does not know, answered with what was sent,
// what is accepted and the nearest name (unknown.go); the two spellings
// of the entity filter at once; a health check of a service that does not
// exist. They are numbered from F160 on (the row field): F159 is left
// free, and F170 on belong to another branch.

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// stringAny is a protobuf Any of a type that is neither a tsflight
// request nor Flight SQL.
func (e *catEnv) stringAny() []byte {
	a, err := anypb.New(wrapperspb.String("SELECT 1"))
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := proto.Marshal(a)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// healthCheck asks the server's health service for service over a
// connection of its own, without a credential.
func (e *catEnv) healthCheck(service string) error {
	conn, err := grpc.NewClient(e.srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(e.bare, &healthpb.HealthCheckRequest{Service: service})
	return err
}

func namesCatalogue() []badCase {
	const names = "unknown names and shapes"
	const entity = "scan request"
	const health = "health check"
	const stringType = `"type.googleapis.com/google.protobuf.StringValue"`
	return []badCase{
		{row: 160, name: "unknown action one edit from a real one", category: names, op: "DoAction rollbak", code: codes.InvalidArgument,
			frags: []string{`unknown action "rollbak"; did you mean "rollback"?`, "The actions are: create-table, describe-table, coverage"},
			run:   func(e *catEnv) error { return e.act("rollbak", `{"table":"cpu","version":1}`) }},
		{name: "Flight SQL action on a server without Flight SQL", category: names, op: "DoAction CreatePreparedStatement", code: codes.Unimplemented,
			frags: []string{"Flight SQL is not served", "-tags duckdb_arrow", "got action CreatePreparedStatement"},
			run:   func(e *catEnv) error { return e.act("CreatePreparedStatement", "") }},
		{name: "read token sends an unknown action", category: names, op: "DoAction compcat, Bearer READER", code: codes.InvalidArgument, auth: true,
			frags: []string{`unknown action "compcat"; did you mean "compact"?`},
			run:   func(e *catEnv) error { return e.reader().act("compcat", `{"table":"cpu"}`) }},
		{name: "scan descriptor of type UNKNOWN", category: names, op: `GetFlightInfo UNKNOWN ["cpu"]`, code: codes.InvalidArgument,
			frags: []string{"GetFlightInfo: unknown descriptor type UNKNOWN (0)", `send PATH ["TABLE"] or CMD holding a JSON scan request`},
			run: func(e *catEnv) error {
				return e.infoErr(&flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN, Path: []string{"cpu"}})
			}},
		{name: "put with a descriptor type protobuf does not define", category: names, op: "DoPut type 7", code: codes.InvalidArgument,
			frags: []string{"DoPut: unknown descriptor type 7", `CMD holding {"table":"TABLE"}`},
			run: func(e *catEnv) error {
				return e.putTSBS(&flight.FlightDescriptor{Type: 7, Path: []string{"cpu"}}, newRows)
			}},
		{name: "command holding a protobuf Any of another type", category: names, op: "GetSchema CMD Any(google.protobuf.StringValue)", code: codes.InvalidArgument,
			frags: []string{"GetSchema: the command is a protobuf Any of type " + stringType, "which this server does not take"},
			run: func(e *catEnv) error {
				_, err := e.client.GetSchema(e.ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: e.stringAny()})
				return err
			}},
		{name: "ticket holding a protobuf Any of another type", category: names, op: "DoGet Any(google.protobuf.StringValue)", code: codes.InvalidArgument,
			frags: []string{"ticket: not a tsflight ticket: got a protobuf Any of type " + stringType, `a tsflight ticket starts with "tsf1:"`},
			run:   func(e *catEnv) error { return e.get(string(e.stringAny())) }},
		{name: "Flight SQL ticket on a server without Flight SQL", category: names, op: "DoGet Any(arrow.flight.protocol.sql.TicketStatementQuery)", code: codes.Unimplemented,
			frags: []string{"Flight SQL is not served", "arrow.flight.protocol.sql.TicketStatementQuery"},
			run: func(e *catEnv) error {
				b, err := proto.Marshal(&anypb.Any{TypeUrl: "type.googleapis.com/arrow.flight.protocol.sql.TicketStatementQuery"})
				if err != nil {
					e.t.Fatal(err)
				}
				return e.get(string(b))
			}},
		{name: "scan filter given as both entity and entities", category: entity, op: `GetFlightInfo CMD {"entity":{…},"entities":{…}}`, code: codes.InvalidArgument,
			frags: []string{`command: both "entity" and "entities" are given`, `send "entity" only`},
			run: func(e *catEnv) error {
				return e.infoErr(cmdDesc(e.t, `{"table":"cpu","entity":{"hostname":"host_0"},"entities":{"hostname":"host_0"}}`))
			}},
		{name: "health check of a service that does not exist, without a token", category: health, op: `grpc.health.v1 Check "flight" on the Flight port, no header`, code: codes.NotFound, auth: true,
			frags: []string{`unknown service "flight"`, `"arrow.flight.protocol.FlightService"`},
			run:   func(e *catEnv) error { return e.healthCheck("flight") }},
	}
}
