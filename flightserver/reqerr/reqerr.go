// Package reqerr holds what a tsflight server needs to refuse a call
// without building a gRPC status where it finds the fault: the error
// categories the table has no word for (ErrUnauthenticated,
// ErrResourceExhausted, ...), the error type that gives a message a
// category ([Errorf]), and the mapping of these categories to gRPC codes
// ([Code], [Status]).
//
// It sits below flightserver/guard, which knows no table, so that the
// guard, flightserver and flightsql all use the same categories. The
// table's own categories (tableformat.ErrInvalidInput, ErrNotFound, ...)
// are mapped by flightserver.Status, which asks [Code] first and maps the
// table's categories where Code knows none: it is the one function that
// maps every category, and its doc comment lists them all.
package reqerr

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The server's error categories. Each is tested with errors.Is; none is
// ever shown alone (a request error's message is its own, see [Errorf]).
var (
	// ErrInvalidArgument: a request or an option the guard checks is
	// malformed. (The table and the services use the table's
	// tableformat.ErrInvalidInput; the guard knows no table.)
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrUnauthenticated: the call carries no credential the server
	// accepts (none, an unknown or expired token, no client certificate).
	ErrUnauthenticated = errors.New("unauthenticated")

	// ErrPermissionDenied: the caller is known but its scope does not
	// allow the call.
	ErrPermissionDenied = errors.New("permission denied")

	// ErrResourceExhausted: the call would go over one of the server's
	// limits (calls at once, message size, result rows, a budget).
	ErrResourceExhausted = errors.New("resource exhausted")

	// ErrUnimplemented: the server does not offer what was asked (a
	// Flight SQL call on a build without SQL, an ingest mode it lacks).
	ErrUnimplemented = errors.New("not implemented")

	// ErrFailedPrecondition: the table is not in a state the call can
	// work with (it has no data yet, so a range cannot default to it).
	// (The table's ErrUnsupported, ErrNeedsUpgrade and ErrOverlap have the
	// same code.)
	ErrFailedPrecondition = errors.New("failed precondition")

	// ErrInternal: the server failed (a bug, or a fault it cannot name
	// better). An error with no category at all maps to the same code.
	ErrInternal = errors.New("internal error")

	// ErrUnavailable: the server cannot take the call now (it is shutting
	// down, or not ready); a later call may succeed.
	ErrUnavailable = errors.New("server unavailable")
)

// Error is a refusal: the message the client sees, and the category that
// chooses its code. Its message is exactly what was formatted, with no
// category prefix, so that moving a refusal from a gRPC status to an Error
// changes nothing a client reads.
type Error struct {
	msg string
	cat error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the category, for errors.Is.
func (e *Error) Unwrap() error { return e.cat }

// Errorf formats a message (as fmt.Sprintf: no %w) and gives it the
// category cat: one of this package's, or of the table's
// (tableformat.ErrInvalidInput, ErrNotFound, ...), or context.Canceled.
func Errorf(cat error, format string, args ...any) error {
	return &Error{msg: fmt.Sprintf(format, args...), cat: cat}
}

// Code is the gRPC code of the categories this package knows:
//
//	context.Canceled                Canceled
//	context.DeadlineExceeded        DeadlineExceeded
//	ErrInvalidArgument              InvalidArgument
//	ErrUnauthenticated              Unauthenticated
//	ErrPermissionDenied             PermissionDenied
//	ErrResourceExhausted            ResourceExhausted
//	ErrUnimplemented                Unimplemented
//	ErrFailedPrecondition           FailedPrecondition
//	ErrUnavailable                  Unavailable
//	ErrInternal, anything else      Internal
//
// flightserver.Status adds the table's categories to these.
func Code(err error) codes.Code {
	if c, ok := Lookup(err, codeOf); ok {
		return c
	}
	return codes.Internal
}

// Mapping gives the errors of categories Cats the gRPC code Code.
type Mapping struct {
	Cats []error
	Code codes.Code
}

// codeOf is the table of [Code], in the order it tests the categories.
var codeOf = []Mapping{
	{[]error{context.Canceled}, codes.Canceled},
	{[]error{context.DeadlineExceeded}, codes.DeadlineExceeded},
	{[]error{ErrInvalidArgument}, codes.InvalidArgument},
	{[]error{ErrUnauthenticated}, codes.Unauthenticated},
	{[]error{ErrPermissionDenied}, codes.PermissionDenied},
	{[]error{ErrResourceExhausted}, codes.ResourceExhausted},
	{[]error{ErrUnimplemented}, codes.Unimplemented},
	{[]error{ErrFailedPrecondition}, codes.FailedPrecondition},
	{[]error{ErrUnavailable}, codes.Unavailable},
}

// Lookup returns the code of the first mapping of table that has a
// category err is (errors.Is), and whether there is one.
func Lookup(err error, table []Mapping) (codes.Code, bool) {
	for _, m := range table {
		for _, cat := range m.Cats {
			if errors.Is(err, cat) {
				return m.Code, true
			}
		}
	}
	return codes.OK, false
}

// Status is the gRPC status of err by [Code], for the guard's own edges
// (its interceptors answer before any service runs). An error that
// already carries a gRPC status keeps it; nil stays nil. The services use
// flightserver.Status, which knows the table's categories too.
func Status(err error) error { return StatusBy(err, Code) }

// StatusBy is the gRPC status of err with the code code gives it and its
// own text as the message; an error that already carries a status keeps
// it, and nil stays nil. (flightserver.Status is StatusBy with a code that
// knows the table's categories.)
func StatusBy(err error, code func(error) codes.Code) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(code(err), err.Error())
}
