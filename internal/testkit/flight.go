package testkit

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Put streams batches (the caller releases them) under desc as one DoPut
// of client, the IPC writer allocating from mem, and returns the
// app_metadata of every PutResult the server sent. When the server ends
// the call early the remaining batches are not sent and the error is the
// one the results stream ends with, returned with the results before it;
// when the results end cleanly but a batch could not be written (the
// client's own fault, such as a batch of another schema), that write's
// error is returned, so a put that sent fewer rows never looks whole.
func Put(ctx context.Context, client flight.Client, mem memory.Allocator, desc *flight.FlightDescriptor, schema *arrow.Schema, batches ...arrow.RecordBatch) ([][]byte, error) {
	stream, err := client.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(desc)
	var writeErr error
	for _, b := range batches {
		if writeErr = w.Write(b); writeErr != nil {
			break // if the server ended the call, Recv says why
		}
	}
	if err := w.Close(); writeErr == nil {
		writeErr = err
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return out, writeErr
		}
		if err != nil {
			return out, err
		}
		out = append(out, r.AppMetadata)
	}
}

// Drain calls recv until it fails and returns its error, or nil when that
// is io.EOF: the end of a stream of results read only for how it ends
// (pass a stream's Recv).
func Drain[T any](recv func() (T, error)) error {
	for {
		if _, err := recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// Collect calls recv until it fails and returns what it received, with
// its error unless that is io.EOF (pass a stream's Recv).
func Collect[T any](recv func() (T, error)) ([]T, error) {
	var out []T
	for {
		v, err := recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
}

// ListActions returns the action types client lists, failing t on an
// error.
func ListActions(t testing.TB, ctx context.Context, client flight.Client) []*flight.ActionType {
	t.Helper()
	stream, err := client.ListActions(ctx, &flight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	types, err := Collect(stream.Recv)
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// ActionNames is ListActions' names, in the order listed.
func ActionNames(t testing.TB, ctx context.Context, client flight.Client) []string {
	t.Helper()
	var names []string
	for _, a := range ListActions(t, ctx, client) {
		names = append(names, a.Type)
	}
	return names
}

// DoGet starts client's DoGet of tkt and returns a reader of its batches
// allocating from mem; the caller releases it.
func DoGet(ctx context.Context, client flight.Client, mem memory.Allocator, tkt *flight.Ticket) (*flight.Reader, error) {
	stream, err := client.DoGet(ctx, tkt)
	if err != nil {
		return nil, err
	}
	return flight.NewRecordReader(stream, ipc.WithAllocator(mem))
}

// ReadBatches reads rdr to its end and returns its batches, retained (the
// caller releases them); on an error it releases them and returns none.
func ReadBatches(rdr interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for rdr.Next() {
		rec := rdr.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := rdr.Err(); err != nil {
		Release(out)
		return nil, err
	}
	return out, nil
}

// Schema decodes an IPC-serialized schema (a FlightInfo's or a
// GetSchema answer's), failing t when it does not decode.
func Schema(t testing.TB, b []byte, mem memory.Allocator) *arrow.Schema {
	t.Helper()
	s, err := flight.DeserializeSchema(b, mem)
	if err != nil {
		t.Fatalf("decoding a schema: %v", err)
	}
	return s
}
