package flightserver

import (
	"bytes"
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/tableformat"
)

// Status converts an error into the gRPC status a client sees. It is the one
// place where the table's error categories meet gRPC codes:
//
//	ErrInvalidInput                                  InvalidArgument
//	ErrNotFound                                      NotFound
//	ErrAlreadyExists                                 AlreadyExists
//	ErrUnsupported, ErrNeedsUpgrade, ErrOverlap      FailedPrecondition
//	ErrConflict (after retries)                      Aborted
//	ErrAmbiguousOutcome                              Unknown
//	ErrCorrupt                                       DataLoss
//	ErrStorage                                       Unavailable
//	context.Canceled / DeadlineExceeded              Canceled / DeadlineExceeded
//	anything else (a bug)                            Internal
//
// An error that already carries a gRPC status keeps it.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, tableformat.ErrInvalidInput):
		code = codes.InvalidArgument
	case errors.Is(err, tableformat.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, tableformat.ErrAlreadyExists):
		code = codes.AlreadyExists
	case errors.Is(err, tableformat.ErrUnsupported), errors.Is(err, tableformat.ErrNeedsUpgrade), errors.Is(err, tableformat.ErrOverlap):
		code = codes.FailedPrecondition
	case errors.Is(err, tableformat.ErrAmbiguousOutcome):
		code = codes.Unknown
	case errors.Is(err, tableformat.ErrConflict):
		code = codes.Aborted
	case errors.Is(err, tableformat.ErrCorrupt):
		code = codes.DataLoss
	case errors.Is(err, tableformat.ErrStorage):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}

// invalid is an InvalidArgument status naming what is wrong.
func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// flightSQLTypePrefix starts the type URL of every Flight SQL command (a
// protobuf Any).
var flightSQLTypePrefix = []byte("type.googleapis.com/arrow.flight.protocol.sql.")

// refuseFlightSQL answers a Flight SQL command sent to the plain Flight
// service (a server built without Flight SQL) with UNIMPLEMENTED and the
// reason, instead of a confusing JSON error.
func refuseFlightSQL(cmd []byte) error {
	// An Any starts with field 1 (type_url, wire type 2): 0x0a, a one-byte
	// length, then the URL.
	if len(cmd) > 2 && cmd[0] == 0x0a && bytes.HasPrefix(cmd[2:], flightSQLTypePrefix) {
		name := cmd[2 : 2+min(int(cmd[1]), len(cmd)-2)]
		return status.Errorf(codes.Unimplemented, "Flight SQL is not served: this tsflight server was built without -tags duckdb_arrow (got %s)",
			bytes.TrimPrefix(name, []byte("type.googleapis.com/")))
	}
	return nil
}
