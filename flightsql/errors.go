//go:build duckdb_arrow

package flightsql

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

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
//	a planned segment's file cannot be read                  DataLoss
//	anything else                                            Internal
//
// No message names the root: paths under it are made relative to it.
//
// An error that already carries a gRPC status keeps it; table errors go
// through flightserver.Status.
func sqlStatus(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		if msg := scrubRoots(st.Message()); msg != st.Message() {
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
	if table, seg, ok := segmentOf(msg); ok && readErr && strings.Contains(strings.ToLower(msg), "file") {
		return status.Errorf(codes.DataLoss, "table %s: segment %s cannot be read: %s", table, seg, scrubRoots(msg))
	}
	return status.Error(code, scrubRoots(msg))
}

// servedRoots are the roots of the Servers of this process, newest last
// (a few: tests start many), so that sqlStatus can tell a planned
// segment's file in a DuckDB message and scrub the root from it.
var servedRoots struct {
	mu    sync.Mutex
	roots []string
}

const servedRootsMax = 64

// noteRoot records root (an absolute directory) as served.
func noteRoot(root string) {
	servedRoots.mu.Lock()
	defer servedRoots.mu.Unlock()
	r := servedRoots.roots
	if n := len(r); n > 0 && r[n-1] == root {
		return
	}
	if i := slices.Index(r, root); i >= 0 {
		r = slices.Delete(r, i, i+1)
	}
	if len(r) >= servedRootsMax {
		r = slices.Delete(r, 0, 1)
	}
	servedRoots.roots = append(r, root)
}

func rootsServed() []string {
	servedRoots.mu.Lock()
	defer servedRoots.mu.Unlock()
	return slices.Clone(servedRoots.roots)
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

// scrubRoots is scrubRoot for every served root, longest first (a root
// inside another).
func scrubRoots(msg string) string {
	roots := rootsServed()
	sort.Slice(roots, func(i, j int) bool { return len(roots[i]) > len(roots[j]) })
	for _, r := range roots {
		msg = scrubRoot(msg, r)
	}
	return msg
}

// segmentOf finds, in a DuckDB message, a file under a served root and
// returns its table and the segment's table-relative path.
func segmentOf(msg string) (table, seg string, ok bool) {
	roots := rootsServed()
	sort.Slice(roots, func(i, j int) bool { return len(roots[i]) > len(roots[j]) })
	for _, r := range roots {
		i := strings.Index(msg, r+string(filepath.Separator))
		if i < 0 {
			continue
		}
		rel := msg[i+len(r)+1:]
		if j := strings.IndexAny(rel, "'\"` \t\n),;"); j >= 0 {
			rel = rel[:j]
		}
		table, seg, ok = strings.Cut(filepath.ToSlash(rel), "/")
		if ok && table != "" && strings.HasSuffix(seg, ".parquet") {
			return table, seg, true
		}
	}
	return "", "", false
}
