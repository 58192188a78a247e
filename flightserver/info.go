package flightserver

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// requestOf turns a descriptor into a scan request: a PATH descriptor with
// one element names the whole table; a CMD descriptor holds a JSON
// ScanRequest. call names the RPC in the refusal of an unknown shape.
func requestOf(call string, desc *flight.FlightDescriptor) (*ScanRequest, error) {
	if desc == nil {
		return nil, invalidf("missing flight descriptor")
	}
	if err := UnknownDescriptor(call, desc, false); err != nil {
		return nil, err
	}
	switch desc.Type {
	case flight.DescriptorPATH:
		if len(desc.Path) != 1 {
			return nil, invalidf("a PATH descriptor must have exactly one element, the table name (got %d)", len(desc.Path))
		}
		if err := ValidateTableName(desc.Path[0]); err != nil {
			return nil, err
		}
		return &ScanRequest{Table: desc.Path[0]}, nil
	case flight.DescriptorCMD:
		var req ScanRequest
		if err := decodeCommand("command", desc.Cmd, &req); err != nil {
			return nil, err
		}
		if err := req.normalize("command"); err != nil {
			return nil, err
		}
		if err := ValidateTableName(req.Table); err != nil {
			return nil, err
		}
		return &req, nil
	}
	return nil, invalidf("%s: unknown descriptor type %s: send %s", call, descriptorTypeName(desc.Type), descriptorForms(call, false))
}

// resolve opens the request's table and its pinned (or newest) snapshot.
func (s *Service) resolve(ctx context.Context, req *ScanRequest) (*tableformat.Table, *tableformat.State, error) {
	tb, err := s.cat.Open(ctx, req.Table)
	if err != nil {
		return nil, nil, err
	}
	st := tb.State()
	if req.Version != nil {
		if st, err = tb.StateAt(ctx, *req.Version); err != nil {
			return nil, nil, &catalog.TableError{Name: req.Table, Err: err}
		}
	}
	return tb, st, nil
}

// plan resolves req and plans its scan, once: the snapshot, the segments
// to read and the schema of the result. Every option is validated here.
func (s *Service) plan(ctx context.Context, req *ScanRequest) (*tableformat.ScanPlan, error) {
	_, st, err := s.resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	opts, err := s.scanOptions(req, st)
	if err != nil {
		return nil, err
	}
	return st.Plan(opts)
}

// flightInfo plans req and describes its endpoints: the plan's parts
// (ScanPlan.Split), which DoGet cuts again from the same snapshot.
func (s *Service) flightInfo(ctx context.Context, desc *flight.FlightDescriptor, req *ScanRequest) (*flight.FlightInfo, error) {
	plan, err := s.plan(ctx, req)
	if err != nil {
		return nil, err
	}
	version := plan.State().Version
	parts := plan.Split(s.opts.MaxEndpoints)
	info := &flight.FlightInfo{
		Schema:           flight.SerializeSchema(plan.Schema(), s.alloc),
		FlightDescriptor: desc,
		TotalRecords:     -1,
		TotalBytes:       0,
	}
	for i := range parts {
		t := &ticket{ScanRequest: *req, Part: i, Parts: len(parts)}
		t.Version = &version
		info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: encodeTicket(t)}})
	}
	var rows uint64
	for _, seg := range plan.Segments() {
		rows += seg.RowCount
		if seg.FileSize != nil {
			info.TotalBytes += int64(*seg.FileSize)
		}
	}
	if len(req.Start) == 0 && len(req.End) == 0 && len(req.Entity) == 0 {
		info.TotalRecords = int64(rows)
	}
	return info, nil
}

// GetFlightInfo plans a scan: the whole table for a PATH descriptor, the
// pruned range of a CMD descriptor.
func (s *Service) GetFlightInfo(ctx context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	req, err := requestOf("GetFlightInfo", desc)
	if err != nil {
		return nil, Status(err)
	}
	info, err := s.flightInfo(ctx, desc, req)
	return info, Status(err)
}

// GetSchema returns the schema a scan of the descriptor would return. The
// request is checked as GetFlightInfo checks it.
func (s *Service) GetSchema(ctx context.Context, desc *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	req, err := requestOf("GetSchema", desc)
	if err != nil {
		return nil, Status(err)
	}
	plan, err := s.plan(ctx, req)
	if err != nil {
		return nil, Status(err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(plan.Schema(), s.alloc)}, nil
}

// ListFlights returns one FlightInfo per table: its PATH descriptor,
// schema, total rows and bytes, one endpoint per planned part. A table that
// cannot be read (its log does not replay, it needs a newer protocol, its
// files cannot be read) is listed too, with an empty schema, no endpoint,
// unknown totals and a TableProblem as app_metadata (unreadableInfo), and
// logged: one table never fails the listing. Phantom directories (a log
// directory without commits) are no tables and are not listed.
func (s *Service) ListFlights(_ *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	ctx := stream.Context()
	names, err := s.TableNames()
	if err != nil {
		return err
	}
	for _, name := range names {
		desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
		info, err := s.flightInfo(ctx, desc, &ScanRequest{Table: name})
		if err != nil {
			if ctx.Err() != nil {
				return Status(ctx.Err())
			}
			if status.Code(Status(err)) == codes.NotFound {
				continue // removed since it was listed
			}
			p := ProblemOf(err)
			s.log.Warn("ListFlights: listing a table that cannot be read", "table", name, "state", p.State, "code", p.Code, "error", p.Error)
			info = unreadableInfo(desc, p, s.alloc)
		}
		if err := stream.Send(info); err != nil {
			return err
		}
	}
	return nil
}
