package flightserver

import (
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// DoGet streams the rows of one endpoint of a planned scan, in batches of
// about Options.BatchRows rows. The scan stops as soon as the client goes
// away (the stream's context is cancelled).
func (s *Service) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	t, err := decodeTicket(tkt.GetTicket())
	if err != nil {
		return err
	}
	tb, st, err := s.resolve(ctx, &t.ScanRequest)
	if err != nil {
		return err
	}
	opts, err := s.scanOptions(&t.ScanRequest, st)
	if err != nil {
		return err
	}
	plan, err := st.PlanScan(opts)
	if err != nil {
		return Status(err)
	}
	groups := splitParts(plan, t.Parts)
	if len(groups) != t.Parts {
		return invalid("ticket: the plan at version %d has %d parts, the ticket says %d", st.Version, len(groups), t.Parts)
	}
	opts.Segments = make([]string, 0, len(groups[t.Part]))
	for _, seg := range groups[t.Part] {
		opts.Segments = append(opts.Segments, seg.Path)
	}
	rdr, err := tb.Scan(ctx, st, opts)
	if err != nil {
		return Status(err)
	}
	defer rdr.Release()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rdr.Schema()), ipc.WithAllocator(s.alloc))
	defer w.Close()
	for rdr.Next() {
		if err := w.Write(rdr.RecordBatch()); err != nil {
			return Status(err)
		}
	}
	if err := rdr.Err(); err != nil {
		return Status(err)
	}
	return nil
}
