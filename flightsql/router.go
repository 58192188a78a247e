//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tsflight/tsflight/flightserver"
)

// router is the one Flight service of a tsflight listener, and the edge of
// the Flight SQL calls: what arrow-go's Flight SQL server returns from this
// package's handlers passes sqlEdge once (sqlStatus: DuckDB's own errors,
// then flightserver.Status for every category), so that the statement
// analysis and the other checks return errors with a category, not gRPC
// statuses. (The plain service's handlers map their own errors.) arrow-go's
// Flight SQL server rejects whatever is not a Flight SQL command, so the
// router sends path descriptors, tsflight's JSON commands, tickets and
// actions, and ListFlights to the plain Flight service, and the rest to
// Flight SQL. What neither side takes (an unknown action, Flight SQL
// message type, descriptor or ticket shape) it refuses itself, naming what
// was sent and what is accepted (flightserver.UnknownAction and the like).
type router struct {
	flight.FlightServer // Flight SQL
	svc                 *flightserver.Service
}

// sqlTypePrefix starts the type URL of every Flight SQL command.
const sqlTypePrefix = "type.googleapis.com/arrow.flight.protocol.sql."

// isSQL reports whether b is a packed Flight SQL message.
func isSQL(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		return false
	}
	return strings.HasPrefix(a.GetTypeUrl(), sqlTypePrefix)
}

func sqlDescriptor(d *flight.FlightDescriptor) bool {
	return d != nil && d.Type == flight.DescriptorCMD && isSQL(d.Cmd)
}

// The Flight SQL messages each call takes: the cases of arrow-go's Flight
// SQL server (flightsql.flightSqlServer in arrow-go v18). The router
// refuses any other one itself, naming it (arrow-go answers "requested
// command is invalid", or "the defined request is invalid").
var (
	sqlDescriptorCommands = []string{
		"CommandStatementQuery", "CommandStatementSubstraitPlan", "CommandPreparedStatementQuery",
		"CommandGetCatalogs", "CommandGetDbSchemas", "CommandGetTables", "CommandGetTableTypes",
		"CommandGetXdbcTypeInfo", "CommandGetSqlInfo", "CommandGetPrimaryKeys",
		"CommandGetExportedKeys", "CommandGetImportedKeys", "CommandGetCrossReference",
	}
	sqlTicketTypes = []string{
		"TicketStatementQuery", "CommandPreparedStatementQuery",
		"CommandGetCatalogs", "CommandGetDbSchemas", "CommandGetTables", "CommandGetTableTypes",
		"CommandGetXdbcTypeInfo", "CommandGetSqlInfo", "CommandGetPrimaryKeys",
		"CommandGetExportedKeys", "CommandGetImportedKeys", "CommandGetCrossReference",
	}
	sqlPutCommands = []string{
		"CommandStatementUpdate", "CommandStatementSubstraitPlan", "CommandPreparedStatementQuery",
		"CommandPreparedStatementUpdate", "CommandStatementIngest",
	}
)

// checkSQL refuses the Flight SQL message b (a packed Any: isSQL) when
// call does not take its type: holder is what carried it ("descriptor",
// "ticket"), accepted the types call takes. The refusal names the type
// URL sent, the nearest accepted type and all of them.
func checkSQL(call, holder string, b []byte, accepted []string) error {
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		return nil // isSQL said it parses; arrow-go answers otherwise
	}
	url := a.GetTypeUrl()
	name := strings.TrimPrefix(url, sqlTypePrefix)
	if slices.Contains(accepted, name) {
		return nil
	}
	list := strings.Join(accepted, ", ")
	shown := url
	if len(shown) > 128 {
		shown = shown[:128] + "…"
	}
	if _, err := protoregistry.GlobalTypes.FindMessageByURL(url); err == nil {
		return invalidf("%s: the Flight SQL message %q is not one a %s takes; a Flight SQL %s holds one of: %s",
			call, shown, holder, holder, list)
	}
	hint := "."
	if c := flightserver.Closest(name, accepted); c != "" {
		hint = fmt.Sprintf("; did you mean %q?", c)
	}
	return invalidf("%s: unknown Flight SQL message type %q%s A Flight SQL %s holds one of: %s",
		call, shown, hint, holder, list)
}

func (r *router) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return routeDescriptor(ctx, r, "GetFlightInfo", d, r.FlightServer.GetFlightInfo, r.svc.GetFlightInfo)
}

func (r *router) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	return routeDescriptor(ctx, r, "GetSchema", d, r.FlightServer.GetSchema, r.svc.GetSchema)
}

// routeDescriptor sends call's descriptor d to sql when it holds a Flight
// SQL command (checked first) and otherwise to plain, the
// flightserver.Service, once it is a descriptor that one serves.
func routeDescriptor[T any](ctx context.Context, r *router, call string, d *flight.FlightDescriptor,
	sql, plain func(context.Context, *flight.FlightDescriptor) (T, error)) (T, error) {
	var none T
	if sqlDescriptor(d) {
		if err := checkSQL(call, "descriptor", d.Cmd, sqlDescriptorCommands); err != nil {
			return none, r.sqlEdge(err)
		}
		res, err := sql(ctx, d)
		return res, r.sqlEdge(err)
	}
	if err := flightserver.UnknownDescriptor(call, d, true); err != nil {
		return none, err
	}
	return plain(ctx, d)
}

func (r *router) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if flightserver.IsTicket(t.GetTicket()) {
		return r.svc.DoGet(t, stream)
	}
	if !isSQL(t.GetTicket()) {
		return flightserver.UnknownTicket(t.GetTicket(), true)
	}
	if err := checkSQL("DoGet", "ticket", t.GetTicket(), sqlTicketTypes); err != nil {
		return r.sqlEdge(err)
	}
	// arrow-go's Flight SQL DoGet returns on a failed write without
	// releasing the batch it was writing; with failures kept here, every
	// batch is released and the first failure is still what the call ends
	// with.
	w := &keepFailure{FlightService_DoGetServer: stream}
	err := r.FlightServer.DoGet(t, w)
	if w.err != nil {
		return w.err
	}
	return r.sqlEdge(err)
}

// sqlEdge maps an error of a Flight SQL handler to the status its client
// sees (sqlStatus; a status passes unchanged but for the root's path).
func (r *router) sqlEdge(err error) error { return sqlStatusIn(r.svc.Root(), err) }

// keepFailure remembers the first failed Send and drops later messages.
type keepFailure struct {
	flight.FlightService_DoGetServer
	err error
}

func (k *keepFailure) Send(d *flight.FlightData) error {
	if k.err == nil {
		k.err = k.FlightService_DoGetServer.Send(d)
	}
	return nil
}

func (r *router) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	switch {
	case flightserver.IsAction(a.GetType()):
		return r.svc.DoAction(a, stream)
	case flightserver.IsFlightSQLAction(a.GetType()):
		return r.sqlEdge(r.FlightServer.DoAction(a, stream))
	}
	return flightserver.UnknownAction(a.GetType(), true)
}

func (r *router) ListActions(e *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	if err := r.svc.ListActions(e, stream); err != nil {
		return err
	}
	return r.FlightServer.ListActions(e, stream)
}

func (r *router) ListFlights(c *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	return r.svc.ListFlights(c, stream)
}

// DoPut reads the first message to see its descriptor, then hands the
// whole stream, that message included, to Flight SQL or to the plain
// append.
func (r *router) DoPut(stream flight.FlightService_DoPutServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	rs := &replayStream{FlightService_DoPutServer: stream, first: first}
	if d := first.GetFlightDescriptor(); sqlDescriptor(d) {
		if err := checkSQL("DoPut", "descriptor", d.Cmd, sqlPutCommands); err != nil {
			return r.sqlEdge(err)
		}
		return r.sqlEdge(r.FlightServer.DoPut(rs))
	} else if err := flightserver.UnknownDescriptor("DoPut", d, true); err != nil {
		return err
	}
	return r.svc.DoPut(rs)
}

// replayStream returns first before the rest of the stream.
type replayStream struct {
	flight.FlightService_DoPutServer
	first *flight.FlightData
}

func (s *replayStream) Recv() (*flight.FlightData, error) {
	if f := s.first; f != nil {
		s.first = nil
		return f, nil
	}
	return s.FlightService_DoPutServer.Recv()
}
