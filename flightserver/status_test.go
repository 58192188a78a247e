package flightserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/tableformat"
)

// TestStatusMapping pins the one mapping from the table's error categories
// to gRPC codes, including categories the integration tests cannot provoke
// over the wire (ambiguous outcomes, storage failures, exhausted retries).
func TestStatusMapping(t *testing.T) {
	wrap := func(e error) error { return fmt.Errorf("table cpu: %w", e) }
	cases := []struct {
		err  error
		want codes.Code
	}{
		{wrap(tableformat.ErrInvalidInput), codes.InvalidArgument},
		{wrap(tableformat.ErrNotFound), codes.NotFound},
		{wrap(tableformat.ErrAlreadyExists), codes.AlreadyExists},
		{wrap(tableformat.ErrUnsupported), codes.FailedPrecondition},
		{&tableformat.ProtocolError{Reason: "protocol 8"}, codes.FailedPrecondition},
		{wrap(tableformat.ErrNeedsUpgrade), codes.FailedPrecondition},
		{&tableformat.OverlapError{Count: 2, Example: "h1"}, codes.FailedPrecondition},
		{&tableformat.ConflictError{Expected: 1, Found: 2}, codes.Aborted},
		{fmt.Errorf("%w: link failed: %w", tableformat.ErrAmbiguousOutcome, tableformat.ErrConflict), codes.Unknown},
		{&tableformat.CorruptionError{Path: "_timeseries_log/CURRENT", Reason: "empty"}, codes.DataLoss},
		{wrap(tableformat.ErrStorage), codes.Unavailable},
		{wrap(context.Canceled), codes.Canceled},
		{wrap(context.DeadlineExceeded), codes.DeadlineExceeded},
		{errors.New("a bug"), codes.Internal},
		{status.Error(codes.ResourceExhausted, "kept"), codes.ResourceExhausted},
	}
	for _, c := range cases {
		got := Status(c.err)
		if status.Code(got) != c.want {
			t.Errorf("Status(%v) = %v, want %v", c.err, status.Code(got), c.want)
		}
		if msg := status.Convert(got).Message(); !strings.Contains(msg, strings.TrimPrefix(c.err.Error(), "rpc error: code = ResourceExhausted desc = ")) {
			t.Errorf("Status(%v) lost the message: %q", c.err, msg)
		}
	}
	if Status(nil) != nil {
		t.Error("Status(nil) is not nil")
	}
}
