package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A handler that returns its context's own error (its client went away)
// ends with CANCELLED or DEADLINE_EXCEEDED, logged at debug level, not as
// an UNKNOWN server failure logged as an error.
func TestCallLogMapsContextErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		code codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("sending a batch: %w", context.Canceled), codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{status.Error(codes.NotFound, "x"), codes.NotFound},
	} {
		var out bytes.Buffer
		cl := &calls{log: newLogger(&out, "debug", "text")}
		err := c.err
		cl.track(context.Background(), "/arrow.flight.protocol.FlightService/DoGet", nil)(&err)
		if status.Code(err) != c.code {
			t.Errorf("%v: code %v, want %v", c.err, status.Code(err), c.code)
		}
		if strings.Contains(out.String(), "[ERROR]") || !strings.Contains(out.String(), "DoGet refused: code="+c.code.String()) {
			t.Errorf("%v: logged %q", c.err, out.String())
		}
	}
}
