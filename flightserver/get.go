package flightserver

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DoGet streams the rows of one endpoint of a planned scan in batches of
// Options.BatchRows to 2 × BatchRows rows (only the last may be shorter).
// The scan stops as soon as the client goes away (the stream's context is
// cancelled).
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
		return invalid("ticket: the plan at version %d has %d part(s), the ticket says %d", st.Version, len(groups), t.Parts)
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
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if s.zeroCopy.Load() {
		w = &zeroCopyWriter{stream: stream, mem: s.alloc, schema: rdr.Schema()}
	} else {
		w = flight.NewRecordWriter(stream, ipc.WithSchema(rdr.Schema()), ipc.WithAllocator(s.alloc))
	}
	defer w.Close()
	b := &batcher{mem: s.scanAlloc(), min: int64(s.opts.BatchRows)}
	defer b.release()
	send := func(rec arrow.RecordBatch) error {
		defer rec.Release()
		return w.Write(rec)
	}
	for rdr.Next() {
		rec, err := b.add(rdr.RecordBatch())
		if err == nil && rec != nil {
			err = send(rec)
		}
		if err != nil {
			return Status(err)
		}
	}
	if err := rdr.Err(); err != nil {
		return Status(err)
	}
	rec, err := b.flush()
	if err == nil && rec != nil {
		err = send(rec)
	}
	return Status(err)
}

// batcher merges the short batches a scan may return (a segment's or row
// group's tail, a worker's last rows) so that every batch sent holds at
// least min rows. Scan batches hold at most min rows, so a merged batch
// holds fewer than 2 × min. Batches that are long enough pass through
// without copying.
type batcher struct {
	mem  memory.Allocator
	min  int64
	held []arrow.RecordBatch
	rows int64
}

// add takes rec (which the caller keeps ownership of) and returns a batch
// to send, or nil while it holds fewer than min rows. The caller releases
// the returned batch.
func (b *batcher) add(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := rec.NumRows()
	if n == 0 {
		return nil, nil
	}
	rec.Retain()
	if len(b.held) == 0 && n >= b.min {
		return rec, nil
	}
	b.held = append(b.held, rec)
	b.rows += n
	if b.rows < b.min {
		return nil, nil
	}
	return b.flush()
}

// flush returns the held rows as one batch (nil when none are held).
func (b *batcher) flush() (arrow.RecordBatch, error) {
	defer b.release()
	switch len(b.held) {
	case 0:
		return nil, nil
	case 1:
		rec := b.held[0]
		rec.Retain()
		return rec, nil
	}
	schema := b.held[0].Schema()
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(b.held))
	for i := range cols {
		for j, rec := range b.held {
			parts[j] = rec.Column(i)
		}
		col, err := array.Concatenate(parts, b.mem)
		if err != nil {
			return nil, err
		}
		cols[i] = col
	}
	return array.NewRecordBatch(schema, cols, b.rows), nil
}

// release drops the held batches.
func (b *batcher) release() {
	for _, rec := range b.held {
		rec.Release()
	}
	b.held, b.rows = nil, 0
}
