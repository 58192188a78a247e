//go:build duckdb_arrow

package flightsql

import (
	"context"
	"errors"
	"strings"

	bindings "github.com/duckdb/duckdb-go-bindings"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
)

// sqlStatus maps an error from DuckDB (or from the table layer) to the
// gRPC status a client sees. It is the one place SQL errors get codes:
//
//	parser, binder, conversion, invalid input, type errors  InvalidArgument
//	catalog "does not exist"                                 NotFound
//	interrupted query, cancelled context                     Canceled
//	out of memory                                            ResourceExhausted
//	not implemented                                          Unimplemented
//	permission (a file outside the root, say)                PermissionDenied
//	anything else                                            Internal
//
// An error that already carries a gRPC status keeps it; table errors go
// through flightserver.Status.
func sqlStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, "the query was cancelled")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, "the query ran past its deadline")
	}
	var de *duckError
	if !errors.As(err, &de) {
		return flightserver.Status(err)
	}
	code := codes.Internal
	switch de.typ {
	case bindings.ErrorTypeParser, bindings.ErrorTypeSyntax, bindings.ErrorTypeBinder, bindings.ErrorTypeConversion,
		bindings.ErrorTypeInvalidInput, bindings.ErrorTypeMismatchType, bindings.ErrorTypeInvalidType,
		bindings.ErrorTypeOutOfRange, bindings.ErrorTypeDivideByZero, bindings.ErrorTypeParameterNotResolved,
		bindings.ErrorTypeParameterNotAllowed, bindings.ErrorTypeInvalid, bindings.ErrorTypeExpression, bindings.ErrorTypeDecimal:
		code = codes.InvalidArgument
	case bindings.ErrorTypeCatalog:
		code = codes.InvalidArgument
		if strings.Contains(de.msg, "does not exist") {
			code = codes.NotFound
		}
	case bindings.ErrorTypeInterrupt:
		code = codes.Canceled
	case bindings.ErrorTypeOutOfMemory:
		code = codes.ResourceExhausted
	case bindings.ErrorTypeNotImplemented:
		code = codes.Unimplemented
	case bindings.ErrorTypePermission:
		code = codes.PermissionDenied
	}
	// DuckDB ends binder and conversion errors with a "LINE n: …" excerpt
	// of the statement it ran, which is the rewritten one: it would show
	// the root's path and segment files, at positions that are not the
	// client's. (Errors in the client's own text come from the analysis,
	// excerpt included.)
	msg := de.msg
	if i := strings.Index(msg, "\nLINE "); i >= 0 {
		msg = strings.TrimRight(msg[:i], "\n ")
	}
	return status.Error(code, msg)
}
