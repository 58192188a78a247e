package flightserver

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"

	"github.com/tsflight/tsflight/tableformat"
)

// DoGet streams the rows of one endpoint of a planned scan in batches of
// Options.BatchRows to 2 × BatchRows rows (only the last may be shorter).
// The scan stops as soon as the client goes away (the stream's context is
// cancelled).
func (s *Service) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	return Status(s.doGet(tkt, stream))
}

// doGet is DoGet with its errors as they come (categories, or the stream's
// statuses); DoGet maps them to codes once.
func (s *Service) doGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
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
	// Everything the stream holds is on its account, and its scan decodes
	// only while the stream budget allows (streammem.go).
	mem := s.budget.open(ctx, s.scanAlloc())
	defer mem.end()
	opts.Alloc, opts.Pacer = mem, mem
	// Segments read whole come from, or go to, the scan cache; the
	// cached arrays a stream sends are on its account while it holds them
	// (streamMem.Hold).
	opts.Cache = s.cache
	// The one plan of this stream: the snapshot's, cut as GetFlightInfo
	// cut it; the ticket's part is read as planned.
	plan, err := st.Plan(opts)
	if err != nil {
		return err
	}
	parts := plan.Split(t.Parts)
	if len(parts) != t.Parts {
		return invalidf("ticket: the plan at version %d has %d part(s), the ticket says %d", st.Version, len(parts), t.Parts)
	}
	rdr, err := tb.ReadPlan(ctx, parts[t.Part])
	if err != nil {
		return err
	}
	defer rdr.Release()
	var w groupWriter
	bs := &budgetStream{ServerStream: stream, mem: mem}
	if s.zeroCopy.Load() {
		w = &zeroCopyWriter{stream: bs, mem: mem, groupMem: mem, schema: rdr.Schema()}
	} else {
		w = &copyingWriter{Writer: flight.NewRecordWriter(&budgetDataStream{budgetStream: bs, stream: stream}, ipc.WithSchema(rdr.Schema()), ipc.WithAllocator(s.alloc)), mem: mem}
	}
	defer w.Close()
	if zw, ok := w.(*zeroCopyWriter); ok {
		// The schema at once: a stream whose scan waits for the stream
		// budget has answered its client.
		if err := zw.start(); err != nil {
			return err
		}
	}
	b := NewBatcher(int64(s.opts.BatchRows), 0)
	defer b.Release()
	send := func(group []arrow.RecordBatch) error {
		defer releaseAll(group)
		var rows int64
		for _, rec := range group {
			rows += rec.NumRows()
		}
		if err := w.WriteGroup(group); err != nil {
			return err
		}
		s.CountRows(ViaDoGet, rows)
		return nil
	}
	for {
		mem.want(true)
		more := rdr.Next()
		mem.want(false)
		if !more {
			break
		}
		if err := b.Add(rdr.RecordBatch(), send); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return b.Flush(send)
}

// groupWriter writes a DoGet stream: the schema first, then each group of
// batches as one record batch.
type groupWriter interface {
	WriteGroup([]arrow.RecordBatch) error
	Close() error
}

// copyingWriter sends groups through arrow-go's Flight writer, which
// needs them concatenated.
type copyingWriter struct {
	*flight.Writer
	mem memory.Allocator
}

func (w *copyingWriter) WriteGroup(group []arrow.RecordBatch) error {
	return writeGroup(w, group, w.mem, nil)
}

// writeGroup sends group through w as one batch: laid end to end by merge
// when it is not nil, else concatenated (allocated from mem); batch by
// batch when one batch could not hold the group's strings.
func writeGroup(w interface{ Write(arrow.RecordBatch) error }, group []arrow.RecordBatch, mem memory.Allocator, merge func([]arrow.RecordBatch) error) error {
	switch {
	case len(group) == 1 || !fitsOneBatch(group):
		return writeEach(w, group)
	case merge != nil:
		return merge(group)
	}
	rec, err := ConcatBatches(group, mem)
	if err != nil {
		return err
	}
	defer rec.Release()
	return w.Write(rec)
}

// writeEach writes the batches of group one by one.
func writeEach(w interface{ Write(arrow.RecordBatch) error }, group []arrow.RecordBatch) error {
	for _, b := range group {
		if err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func releaseAll(batches []arrow.RecordBatch) {
	for _, b := range batches {
		b.Release()
	}
}

// BatchBytes sums the buffer sizes of a batch's columns, children
// included: the memory the batch holds (package flightsql bounds its
// merged result batches with it).
func BatchBytes(rec arrow.RecordBatch) int {
	n := 0
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += b.Len()
			}
		}
		for _, c := range d.Children() {
			walk(c)
		}
	}
	for _, c := range rec.Columns() {
		walk(c.Data())
	}
	return n
}

// ConcatBatches copies batches of one schema into one batch allocated from
// mem (package flightsql merges DuckDB's chunks with it); it is
// tableformat.ConcatBatches.
func ConcatBatches(batches []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	return tableformat.ConcatBatches(batches, mem)
}

// Batcher groups the batches of a stream into the groups it sends, each
// as one batch: DoGet's scan batches, and package flightsql's result
// chunks. A group is complete once it holds at least minRows rows or,
// with a byte bound, at least maxBytes bytes ([BatchBytes]); a batch that
// would take the held ones past maxBytes is held after they are sent, so a
// group stays under the bound unless one batch alone is larger. A stream's
// last group (Flush) may be smaller. Batches without rows are dropped.
type Batcher struct {
	min      int64 // rows that complete a group
	maxBytes int   // bytes that complete a group; 0: no byte bound
	held     []arrow.RecordBatch
	rows     int64
	bytes    int
}

// NewBatcher returns a Batcher of groups of minRows rows, bounded to
// maxBytes bytes when maxBytes > 0. Scan batches hold at most BatchRows
// rows, so without a byte bound a DoGet group holds fewer than 2 × minRows.
func NewBatcher(minRows int64, maxBytes int) *Batcher {
	return &Batcher{min: minRows, maxBytes: maxBytes}
}

// Add takes rec (the caller keeps its reference) and calls send with each
// group it completes, in order: with a byte bound, the held batches first
// when rec would take them past it, then rec's own group when rec alone is
// complete. send owns the batches of a group (it releases them); its error
// is returned.
func (b *Batcher) Add(rec arrow.RecordBatch, send func([]arrow.RecordBatch) error) error {
	n := rec.NumRows()
	if n == 0 {
		return nil
	}
	size := 0
	if b.maxBytes > 0 {
		size = BatchBytes(rec)
		if len(b.held) > 0 && b.bytes+size > b.maxBytes {
			if err := send(b.take()); err != nil {
				return err
			}
		}
	}
	rec.Retain()
	b.held = append(b.held, rec)
	b.rows += n
	b.bytes += size
	if b.rows >= b.min || (b.maxBytes > 0 && b.bytes >= b.maxBytes) {
		return send(b.take())
	}
	return nil
}

// Flush calls send with the held batches, if any: the stream's last group.
func (b *Batcher) Flush(send func([]arrow.RecordBatch) error) error {
	if len(b.held) == 0 {
		return nil
	}
	return send(b.take())
}

// Release drops the held batches (after a stream that ended early).
func (b *Batcher) Release() { releaseAll(b.take()) }

// take hands over the held batches.
func (b *Batcher) take() []arrow.RecordBatch {
	group := b.held
	b.held, b.rows, b.bytes = nil, 0, 0
	return group
}

// budgetStream records every zero-copy message a stream hands to gRPC on
// the stream's account until gRPC has written (or dropped) its body: the
// stream has a message in flight meanwhile, and the bytes the message made
// itself (merged offsets and bitmaps) are charged; its batches are charged
// already, as the account allocated them.
type budgetStream struct {
	grpc.ServerStream
	mem *streamMem
}

func (s *budgetStream) SendMsg(m any) error {
	zm, ok := m.(*zeroCopyMessage)
	if !ok || zm.bodyLen == 0 {
		return s.ServerStream.SendMsg(m)
	}
	owned := int64(zm.owned)
	s.mem.charge(owned)
	s.mem.sent()
	orig := zm.release
	var once sync.Once
	zm.release = func() {
		once.Do(func() {
			orig()
			s.mem.written()
			s.mem.charge(-owned)
		})
	}
	return s.ServerStream.SendMsg(m)
}

// budgetDataStream is the same for arrow-go's Flight writer (the standard
// codec): gRPC has encoded its own copy of a message once Send returns, so
// the message is in flight only while Send runs.
type budgetDataStream struct {
	*budgetStream
	stream flight.FlightService_DoGetServer
}

func (s *budgetDataStream) Send(d *flight.FlightData) error {
	if len(d.DataBody) == 0 {
		return s.stream.Send(d)
	}
	s.mem.sent()
	defer s.mem.written()
	return s.stream.Send(d)
}
