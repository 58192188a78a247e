//go:build duckdb_arrow

package flightsql

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tsflight/tsflight/flightserver"
)

// router is the one Flight service of a tsflight listener. arrow-go's
// Flight SQL server rejects whatever is not a Flight SQL command, so the
// router sends path descriptors, tsflight's JSON commands, tickets and
// actions, and ListFlights to the plain Flight service, and the rest to
// Flight SQL.
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

func (r *router) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if sqlDescriptor(d) {
		return r.FlightServer.GetFlightInfo(ctx, d)
	}
	return r.svc.GetFlightInfo(ctx, d)
}

func (r *router) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if sqlDescriptor(d) {
		return r.FlightServer.GetSchema(ctx, d)
	}
	return r.svc.GetSchema(ctx, d)
}

func (r *router) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if flightserver.IsTicket(t.GetTicket()) {
		return r.svc.DoGet(t, stream)
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
	return err
}

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
	if flightserver.IsAction(a.GetType()) {
		return r.svc.DoAction(a, stream)
	}
	return r.FlightServer.DoAction(a, stream)
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
	if sqlDescriptor(first.GetFlightDescriptor()) {
		return r.FlightServer.DoPut(rs)
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
