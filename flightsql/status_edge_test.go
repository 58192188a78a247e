//go:build duckdb_arrow

package flightsql

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// TestSQLStatusMapsCategories: at the Flight SQL edge a refusal with a
// category keeps its message (no category prefix, no "the query was
// cancelled" for a cancel that says more), gets its category's code, and
// loses the root's path as any status does; an internal fault is INTERNAL.
func TestSQLStatusMapsCategories(t *testing.T) {
	const root = "/srv/tsflight-root"
	for _, c := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{invalidf("the SQL text holds %d statements; send one at a time", 2), codes.InvalidArgument, "the SQL text holds 2 statements; send one at a time"},
		{reqerr.Errorf(tableformat.ErrNotFound, "table %q does not exist", "nope"), codes.NotFound, `table "nope" does not exist`},
		{reqerr.Errorf(tableformat.ErrAlreadyExists, "ingest: table cpu already exists"), codes.AlreadyExists, "ingest: table cpu already exists"},
		{reqerr.Errorf(reqerr.ErrResourceExhausted, "too many rows"), codes.ResourceExhausted, "too many rows"},
		{reqerr.Errorf(reqerr.ErrUnimplemented, "ingest: mode replace is not supported"), codes.Unimplemented, "ingest: mode replace is not supported"},
		{reqerr.Errorf(tableformat.ErrCorrupt, "table cpu: segment %s/cpu/data/a.parquet is missing", root), codes.DataLoss, "table cpu: segment cpu/data/a.parquet is missing"},
		{reqerr.Errorf(context.Canceled, "the query was cancelled (CancelFlightInfo)"), codes.Canceled, "the query was cancelled (CancelFlightInfo)"},
		{internalf("merging result batches: %v", context.Canceled), codes.Internal, "merging result batches: context canceled"},
		{context.Canceled, codes.Canceled, "the query was cancelled"},
		{status.Error(codes.NotFound, "unknown handle"), codes.NotFound, "unknown handle"},
		{errors.New("a bug"), codes.Internal, "a bug"},
	} {
		st := status.Convert(sqlStatusIn(root, c.err))
		if st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("sqlStatusIn(%q) = %v %q, want %v %q", c.err, st.Code(), st.Message(), c.code, c.msg)
		}
	}
}
