package flightserver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// TestStatusMapsEveryCategory: Status gives each category its code, bare,
// wrapped with %w and as a reqerr.Error (whose message is kept as is), and
// a status passes unchanged.
func TestStatusMapsEveryCategory(t *testing.T) {
	for _, c := range []struct {
		cat  error
		code codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{tableformat.ErrInvalidInput, codes.InvalidArgument},
		{tableformat.ErrNotFound, codes.NotFound},
		{tableformat.ErrAlreadyExists, codes.AlreadyExists},
		{tableformat.ErrUnsupported, codes.FailedPrecondition},
		{tableformat.ErrNeedsUpgrade, codes.FailedPrecondition},
		{tableformat.ErrOverlap, codes.FailedPrecondition},
		{tableformat.ErrConflict, codes.Aborted},
		{tableformat.ErrAmbiguousOutcome, codes.Unknown},
		{tableformat.ErrCorrupt, codes.DataLoss},
		{tableformat.ErrStorage, codes.Unavailable},
		{reqerr.ErrInvalidArgument, codes.InvalidArgument},
		{reqerr.ErrUnauthenticated, codes.Unauthenticated},
		{reqerr.ErrPermissionDenied, codes.PermissionDenied},
		{reqerr.ErrResourceExhausted, codes.ResourceExhausted},
		{reqerr.ErrUnimplemented, codes.Unimplemented},
		{reqerr.ErrFailedPrecondition, codes.FailedPrecondition},
		{reqerr.ErrUnavailable, codes.Unavailable},
		{reqerr.ErrInternal, codes.Internal},
	} {
		for _, err := range []error{
			c.cat,
			fmt.Errorf("table cpu: %w", c.cat),
			reqerr.Errorf(c.cat, "refused: %d", 7),
			fmt.Errorf("outer: %w", reqerr.Errorf(c.cat, "inner")),
		} {
			st, ok := status.FromError(Status(err))
			if !ok || st.Code() != c.code || st.Message() != err.Error() {
				t.Errorf("Status(%q) = %v %q, want %v %q", err, st.Code(), st.Message(), c.code, err.Error())
			}
			if got := Code(err); got != c.code {
				t.Errorf("Code(%q) = %v, want %v", err, got, c.code)
			}
		}
	}
	// A reqerr.Error's message carries no category prefix.
	if got := status.Convert(Status(invalidf("columns: %q is unknown", "x"))).Message(); got != `columns: "x" is unknown` {
		t.Errorf("invalidf message = %q", got)
	}
	// Anything else is a bug: Internal, with its message.
	if st := status.Convert(Status(errors.New("boom"))); st.Code() != codes.Internal || st.Message() != "boom" {
		t.Errorf("Status(bare) = %v %q, want Internal boom", st.Code(), st.Message())
	}
	// A status keeps its code and message, even one that wraps a category.
	for _, err := range []error{
		status.Error(codes.NotFound, "table cpu does not exist"),
		status.Error(codes.ResourceExhausted, "too big"),
		fmt.Errorf("ctx: %w", status.Error(codes.PermissionDenied, "no")),
	} {
		if got := Status(err); got != err {
			t.Errorf("Status(%v) = %v, want it unchanged", err, got)
		}
	}
	if Status(nil) != nil {
		t.Error("Status(nil) is not nil")
	}
}

// TestReqerrStatusMapsTheGuardsCategories: the guard, which knows no
// table, maps its own categories with reqerr.Status, to the same codes as
// Status; anything else is Internal and a status passes unchanged.
func TestReqerrStatusMapsTheGuardsCategories(t *testing.T) {
	for cat, code := range map[error]codes.Code{
		context.Canceled:             codes.Canceled,
		context.DeadlineExceeded:     codes.DeadlineExceeded,
		reqerr.ErrInvalidArgument:    codes.InvalidArgument,
		reqerr.ErrUnauthenticated:    codes.Unauthenticated,
		reqerr.ErrPermissionDenied:   codes.PermissionDenied,
		reqerr.ErrResourceExhausted:  codes.ResourceExhausted,
		reqerr.ErrUnimplemented:      codes.Unimplemented,
		reqerr.ErrFailedPrecondition: codes.FailedPrecondition,
		reqerr.ErrUnavailable:        codes.Unavailable,
		reqerr.ErrInternal:           codes.Internal,
		errors.New("a bug"):          codes.Internal,
	} {
		err := reqerr.Errorf(cat, "token %s expired", "t1")
		st := status.Convert(reqerr.Status(err))
		if st.Code() != code || st.Message() != "token t1 expired" {
			t.Errorf("reqerr.Status(%v) = %v %q, want %v %q", cat, st.Code(), st.Message(), code, "token t1 expired")
		}
		if Code(err) != code {
			t.Errorf("Code and reqerr.Code disagree on %v: %v, %v", cat, Code(err), code)
		}
	}
	s := status.Error(codes.Unauthenticated, "unknown token")
	if reqerr.Status(s) != s || reqerr.Status(nil) != nil {
		t.Error("reqerr.Status changed a status or nil")
	}
}

// TestCallLogMapsContextErrorsWithStatus: the call log gives a handler's
// bare context error its code through Status, keeps a status and leaves
// another bare error to gRPC.
func TestCallLogMapsContextErrorsWithStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, true},
		{fmt.Errorf("scan: %w", context.DeadlineExceeded), true},
		{status.Error(codes.Canceled, "gone"), false},
		{errors.New("other"), false},
		{nil, false},
	} {
		if got := isContextError(c.err); got != c.want {
			t.Errorf("isContextError(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
