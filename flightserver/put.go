package flightserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// putCommand is the JSON body of a DoPut CMD descriptor.
type putCommand struct {
	Table  string     `json:"table"`
	Create *TableSpec `json:"create,omitempty"`
}

// PutResult is the app_metadata of the PutResult a DoPut answers with.
type PutResult struct {
	Version uint64 `json:"version"`
	Rows    uint64 `json:"rows"`
	Segment string `json:"segment"`
}

// DoPut appends the whole stream to the table of the descriptor as one
// segment and one commit. A PATH descriptor names an existing table; a CMD
// descriptor {"table", "create": {…}} creates it first when it does not
// exist, with the stream's schema, so that a schema that does not fit the
// index is refused before anything is written. Nothing is committed unless
// the whole stream arrives and passes every check; a stream that breaks off
// leaves no file behind. A CMD put checks its first batch against the
// table it would create before creating it, so a refused first batch
// creates nothing; a fault found later leaves the created table, empty.
func (s *Service) DoPut(stream flight.FlightService_DoPutServer) error {
	ctx := stream.Context()
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(s.alloc))
	if err != nil {
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return Status(ctx.Err())
		}
		return Status(invalidf("DoPut: the stream must start with a descriptor and a schema: %v", err))
	}
	defer rdr.Release()
	in := &putReader{RecordReader: rdr.Reader}
	if desc := rdr.LatestFlightDescriptor(); desc != nil && desc.Type == flight.DescriptorCMD {
		// A CMD put may create the table: an empty stream must not.
		if !in.peek() {
			if err := in.Err(); err != nil {
				if ctx.Err() != nil {
					return Status(ctx.Err())
				}
				return Status(invalidf("DoPut: reading the input stream: %v", err))
			}
			return Status(invalidf("DoPut: the input stream has no rows; nothing was written"))
		}
	}
	var first arrow.RecordBatch
	if in.held {
		first = in.RecordReader.RecordBatch()
	}
	tb, err := s.putTarget(ctx, rdr.LatestFlightDescriptor(), rdr.Schema(), first)
	if err != nil {
		return Status(err)
	}
	res, err := s.Append(ctx, tb, in)
	if err != nil {
		s.log.Debug("DoPut refused", "descriptor", rdr.LatestFlightDescriptor().String(), "error", err)
		return err
	}
	s.CountRows(ViaDoPut, int64(res.Rows))
	meta, err := json.Marshal(PutResult{Version: res.Version, Rows: res.Rows, Segment: res.Segment.Path})
	if err != nil {
		return Status(err)
	}
	return stream.Send(&flight.PutResult{AppMetadata: meta})
}

// putTarget opens (or creates) the table a DoPut descriptor names; schema
// is the stream's and first its first batch with rows (nil for PATH
// descriptors, whose tables exist).
func (s *Service) putTarget(ctx context.Context, desc *flight.FlightDescriptor, schema *arrow.Schema, first arrow.RecordBatch) (*tableformat.Table, error) {
	if desc == nil {
		return nil, invalidf("DoPut: the first message must carry a flight descriptor naming the table")
	}
	if err := UnknownDescriptor("DoPut", desc, false); err != nil {
		return nil, err
	}
	switch desc.Type {
	case flight.DescriptorPATH:
		req, err := requestOf("DoPut", desc)
		if err != nil {
			return nil, err
		}
		return s.Table(ctx, req.Table)
	case flight.DescriptorCMD:
		var cmd putCommand
		if err := decodeCommand("DoPut command", desc.Cmd, &cmd); err != nil {
			return nil, err
		}
		if err := ValidateTableName(cmd.Table); err != nil {
			return nil, err
		}
		if cmd.Create == nil {
			return s.Table(ctx, cmd.Table)
		}
		if cmd.Create.Table != "" && cmd.Create.Table != cmd.Table {
			return nil, invalidf("DoPut command: create.table %s differs from table %s (leave create.table out)", catalog.QuoteName(cmd.Create.Table), catalog.QuoteName(cmd.Table))
		}
		tb, _, err := s.openOrCreate(ctx, cmd.Table, cmd.Create, schema, first, false)
		return tb, err
	}
	return nil, invalidf("DoPut: unknown descriptor type %s: send %s", descriptorTypeName(desc.Type), descriptorForms("DoPut", false))
}

// putReader is the record reader of a DoPut stream. It can look ahead to
// the first batch with rows, and its errors say what a stream that changes
// its schema did.
type putReader struct {
	array.RecordReader
	held bool // the reader stands on a batch that Next has not returned yet
}

// peek advances to the first batch with rows, which the next call to Next
// returns; it reports whether there is one.
func (r *putReader) peek() bool {
	for r.RecordReader.Next() {
		if r.RecordReader.RecordBatch().NumRows() > 0 {
			r.held = true
			return true
		}
	}
	return false
}

func (r *putReader) Next() bool {
	if r.held {
		r.held = false
		return true
	}
	return r.RecordReader.Next()
}

func (r *putReader) Err() error {
	err := r.RecordReader.Err()
	if err != nil && strings.Contains(err.Error(), "got=Schema") {
		return fmt.Errorf("the stream sent a second schema message after its first one; one DoPut stream carries one schema (send batches of another schema in a new DoPut): %w", err)
	}
	return err
}

// Append appends one stream to tb as one segment and one commit, the way
// DoPut does (same allocator and commit retries); errors are gRPC statuses.
// The commit (or its conflict) is counted for the metrics; the rows are
// the caller's to count (CountRows), as it knows how they came.
func (s *Service) Append(ctx context.Context, tb *tableformat.Table, rdr array.RecordReader) (*tableformat.AppendResult, error) {
	res, err := s.append(ctx, tb, rdr)
	s.countAppend(res, err)
	if err != nil {
		return nil, Status(err)
	}
	s.noteAppend(tb) // maintenance may have a tier to merge now
	return res, nil
}

// append is Append without the counting and the maintenance note: the
// rehearsal of a put on a table in memory uses it.
func (s *Service) append(ctx context.Context, tb *tableformat.Table, rdr array.RecordReader) (*tableformat.AppendResult, error) {
	return tb.Append(ctx, rdr, s.appendOptions())
}

// appendOptions are the options of the server's appends.
func (s *Service) appendOptions() *tableformat.AppendOptions {
	opts := tableformat.DefaultAppendOptions()
	if s.alloc != memory.DefaultAllocator {
		opts.Alloc = s.alloc // tests count every byte
	}
	opts.MaxRetries = s.opts.AppendRetries
	return opts
}

// OpenOrCreate opens table name or, when it does not exist, creates it as
// spec says with the logical schema of schema (the stream to be appended).
// spec is checked even when the table exists, so that a bad spec fails the
// same way every time. created reports whether this call created it.
func (s *Service) OpenOrCreate(ctx context.Context, name string, spec *TableSpec, schema *arrow.Schema) (tb *tableformat.Table, created bool, err error) {
	tb, created, err = s.openOrCreate(ctx, name, spec, schema, nil, false)
	return tb, created, Status(err)
}

// Create creates table name as spec says with the logical schema of
// schema, exclusively: when the table exists, or another caller creates it
// first, the answer is ALREADY_EXISTS and the caller must not write to it
// (Flight SQL ingest in mode create). Of any number of concurrent calls on
// one new name exactly one succeeds.
func (s *Service) Create(ctx context.Context, name string, spec *TableSpec, schema *arrow.Schema) (*tableformat.Table, error) {
	tb, _, err := s.openOrCreate(ctx, name, spec, schema, nil, true)
	return tb, Status(err)
}

// openOrCreate is OpenOrCreate that, when it is about to create the table
// and first is not nil, first rehearses appending first to the table it
// would create, in memory: rows the new table would refuse (nulls in a
// key, a duplicate interval, a type it cannot store) are refused before
// anything exists on disk. Faults in later batches of the stream still
// leave the created table, empty. With exclusive, a table that exists or is
// created concurrently is ALREADY_EXISTS instead of opened.
func (s *Service) openOrCreate(ctx context.Context, name string, spec *TableSpec, schema *arrow.Schema, first arrow.RecordBatch, exclusive bool) (tb *tableformat.Table, created bool, err error) {
	if err := ValidateTableName(name); err != nil {
		return nil, false, err
	}
	sp := *spec
	sp.Table = name
	co, err := sp.options()
	if err != nil {
		return nil, false, err
	}
	tb, err = s.Table(ctx, name)
	if err == nil && exclusive {
		return nil, false, &catalog.TableError{Name: name, Err: fmt.Errorf("%w: the table exists", tableformat.ErrAlreadyExists)}
	}
	if err == nil || !isNotFound(err) {
		return tb, false, err
	}
	if co.Schema, err = tableformat.LogicalFromArrow(schema); err != nil {
		return nil, false, err
	}
	if first != nil {
		if err := s.rehearse(ctx, co, first); err != nil {
			return nil, false, err
		}
	}
	tb, err = s.cat.Create(ctx, name, co)
	if isAlreadyExists(err) && !exclusive { // created concurrently: use it
		tb, err = s.Table(ctx, name)
		return tb, false, err
	}
	return tb, err == nil, err
}

// rehearse creates a table as co in memory and checks appending rec to
// it (CheckOnly: every check of an append, no Parquet encoded), returning
// the append's error (DoPut maps it).
func (s *Service) rehearse(ctx context.Context, co tableformat.CreateOptions, rec arrow.RecordBatch) error {
	tb, err := tableformat.Create(ctx, storage.NewMem(), co, s.cat.Options())
	if err != nil {
		return err
	}
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		return invalidf("DoPut: %v", err)
	}
	defer rdr.Release()
	opts := s.appendOptions()
	opts.CheckOnly = true
	if _, err := tb.Append(ctx, rdr, opts); err != nil {
		return err
	}
	return nil
}
