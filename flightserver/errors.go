package flightserver

import (
	"bytes"

	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// Status converts an error into the gRPC status a client sees. It is the one
// place where error categories meet gRPC codes, at the edge of each handler:
// request validation, the table and the guard return errors with a category
// (the table's, or reqerr's for what the table has no word for), and Status
// chooses the code:
//
//	context.Canceled / DeadlineExceeded              Canceled / DeadlineExceeded
//	tableformat.ErrInvalidInput                      InvalidArgument
//	tableformat.ErrNotFound                          NotFound
//	tableformat.ErrAlreadyExists                     AlreadyExists
//	ErrUnsupported, ErrNeedsUpgrade, ErrOverlap      FailedPrecondition
//	tableformat.ErrConflict (after retries)          Aborted
//	tableformat.ErrAmbiguousOutcome                  Unknown
//	tableformat.ErrCorrupt                           DataLoss
//	tableformat.ErrStorage                           Unavailable
//	reqerr.ErrInvalidArgument                        InvalidArgument
//	reqerr.ErrUnauthenticated                        Unauthenticated
//	reqerr.ErrPermissionDenied                       PermissionDenied
//	reqerr.ErrResourceExhausted                      ResourceExhausted
//	reqerr.ErrUnimplemented                          Unimplemented
//	reqerr.ErrFailedPrecondition                     FailedPrecondition
//	reqerr.ErrUnavailable                            Unavailable
//	reqerr.ErrInternal, anything else (a bug)        Internal
//
// A context error wins over any other category it is wrapped with. The
// message is the error's own text (a reqerr.Error's message carries no
// category prefix). An error that already carries a gRPC status keeps it.
// (flightsql maps DuckDB's own errors first and hands the rest here.)
func Status(err error) error { return reqerr.StatusBy(err, Code) }

// Code is the gRPC code Status gives err (which carries no status).
func Code(err error) codes.Code {
	// Context errors first (a table error caused by a cancel is the
	// cancel), then the server's categories: reqerr.Code.
	if c := reqerr.Code(err); c != codes.Internal {
		return c
	}
	if c, ok := reqerr.Lookup(err, tableCodes); ok {
		return c
	}
	return codes.Internal // reqerr.ErrInternal, or no category: a bug
}

// tableCodes are the codes of the table's categories, in the order Code
// tests them.
var tableCodes = []reqerr.Mapping{
	{Cats: []error{tableformat.ErrInvalidInput}, Code: codes.InvalidArgument},
	{Cats: []error{tableformat.ErrNotFound}, Code: codes.NotFound},
	{Cats: []error{tableformat.ErrAlreadyExists}, Code: codes.AlreadyExists},
	{Cats: []error{tableformat.ErrUnsupported, tableformat.ErrNeedsUpgrade, tableformat.ErrOverlap}, Code: codes.FailedPrecondition},
	{Cats: []error{tableformat.ErrAmbiguousOutcome}, Code: codes.Unknown},
	{Cats: []error{tableformat.ErrConflict}, Code: codes.Aborted},
	{Cats: []error{tableformat.ErrCorrupt}, Code: codes.DataLoss},
	{Cats: []error{tableformat.ErrStorage}, Code: codes.Unavailable},
}

// invalidf is a request error of category tableformat.ErrInvalidInput
// (InvalidArgument) naming what is wrong.
func invalidf(format string, args ...any) error {
	return reqerr.Errorf(tableformat.ErrInvalidInput, format, args...)
}

// flightSQLTypePrefix starts the type URL of every Flight SQL command (a
// protobuf Any).
var flightSQLTypePrefix = []byte("type.googleapis.com/arrow.flight.protocol.sql.")

// refuseFlightSQL answers a Flight SQL command sent to the plain Flight
// service (a server built without Flight SQL) with UNIMPLEMENTED and the
// reason, instead of a confusing JSON error. The refusal is a status
// already: ticket.go and info.go return it as is.
func refuseFlightSQL(cmd []byte) error {
	// An Any starts with field 1 (type_url, wire type 2): 0x0a, a one-byte
	// length, then the URL.
	if len(cmd) > 2 && cmd[0] == 0x0a && bytes.HasPrefix(cmd[2:], flightSQLTypePrefix) {
		name := cmd[2 : 2+min(int(cmd[1]), len(cmd)-2)]
		return Status(reqerr.Errorf(reqerr.ErrUnimplemented, "Flight SQL is not served: this tsflight server was built without -tags duckdb_arrow (got %s)",
			bytes.TrimPrefix(name, []byte("type.googleapis.com/"))))
	}
	return nil
}

// decodeCommand decodes the JSON of a CMD descriptor into v, first
// refusing a Flight SQL command (refuseFlightSQL).
func decodeCommand(what string, cmd []byte, v any) error {
	if err := refuseFlightSQL(cmd); err != nil {
		return err
	}
	return decodeJSON(what, cmd, v)
}
