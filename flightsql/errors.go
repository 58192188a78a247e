//go:build duckdb_arrow

package flightsql

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	bindings "github.com/duckdb/duckdb-go-bindings"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// sqlStatus is sqlStatusIn for the server's root.
func (s *Server) sqlStatus(err error) error { return sqlStatusIn(s.svc.Root(), err) }

// sqlStatusIn maps an error of a Flight SQL call to the gRPC status a
// client sees (the router calls it where a call leaves the server). It is
// the one place DuckDB's own errors get codes:
//
//	parser, binder, conversion, invalid input, type errors  InvalidArgument
//	catalog "does not exist"                                 NotFound
//	interrupted query, cancelled context                     Canceled
//	out of memory                                            ResourceExhausted
//	not implemented                                          Unimplemented
//	permission (a file outside the root, say)                PermissionDenied
//	a planned segment's file cannot be read                  DataLoss
//	anything else                                            Internal
//
// root is the root of the Server the error comes from: no message names
// it, paths under it are made relative to it, and only files under it are
// its segments. (Each Server passes its own: servers over different roots
// in one process neither scrub nor claim each other's paths.)
//
// An error that already carries a gRPC status keeps it; errors with a
// category (a reqerr.Error, the table's) go through flightserver.Status.
func sqlStatusIn(root string, err error) error {
	if err == nil {
		return nil
	}
	// A refusal with a category (reqerr.Errorf) keeps its own message:
	// flightserver.Status maps it, then the root is scrubbed as from any
	// status.
	var re *reqerr.Error
	if errors.As(err, &re) {
		err = flightserver.Status(err)
	}
	if st, ok := status.FromError(err); ok {
		if msg := scrubRoot(st.Message(), root); msg != st.Message() {
			return status.Error(st.Code(), msg)
		}
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
	// DuckDB failing to read a planned segment (missing, truncated, a
	// corrupt footer or page) is data loss, as on the plain Flight side,
	// not a fault of the statement; and no message shows the root.
	// Only errors of reading (IO, or the Parquet reader's invalid input)
	// that speak of a file count: a conversion error quoting a string that
	// happens to name a segment is the statement's fault.
	readErr := de.typ == bindings.ErrorTypeErrorIO || de.typ == bindings.ErrorTypeInvalidInput
	if table, seg, ok := segmentOf(msg, root); ok && readErr && strings.Contains(strings.ToLower(msg), "file") {
		return status.Errorf(codes.DataLoss, "table %s: segment %s cannot be read: %s", table, seg, scrubRoot(msg, root))
	}
	return status.Error(code, scrubRoot(msg, root))
}

// scrubRoot removes root from msg: a path under it becomes relative to it
// (table/segment), the root itself "<root>".
func scrubRoot(msg, root string) string {
	if root == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, root+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, root, "<root>")
}

// segmentOf finds, in a DuckDB message, a file under root and returns its
// table and the segment's table-relative path.
func segmentOf(msg, root string) (table, seg string, ok bool) {
	if root == "" {
		return "", "", false
	}
	i := strings.Index(msg, root+string(filepath.Separator))
	if i < 0 {
		return "", "", false
	}
	rel := msg[i+len(root)+1:]
	if j := strings.IndexAny(rel, "'\"` \t\n),;"); j >= 0 {
		rel = rel[:j]
	}
	table, seg, ok = strings.Cut(filepath.ToSlash(rel), "/")
	if ok && table != "" && strings.HasSuffix(seg, ".parquet") {
		return table, seg, true
	}
	return "", "", false
}

// invalidf is a refusal of category tableformat.ErrInvalidInput
// (InvalidArgument) naming what is wrong.
func invalidf(format string, args ...any) error {
	return reqerr.Errorf(tableformat.ErrInvalidInput, format, args...)
}

// internalf is an error of category reqerr.ErrInternal, a bug: the edge
// gives it INTERNAL and its message. It formats a cause with %v, never
// wrapping it, so that a context or DuckDB error inside does not choose
// another code.
func internalf(format string, args ...any) error {
	return reqerr.Errorf(reqerr.ErrInternal, format, args...)
}
