package flightserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/internal/testkit"
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
		cl := NewCallLog(hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug}))
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

// panicky is a Flight service whose ListActions panics.
type panicky struct{ flight.BaseFlightServer }

func (*panicky) ListActions(*flight.Empty, flight.FlightService_ListActionsServer) error {
	panic("boom")
}

// A panicking handler behind the call log is an INTERNAL error for its
// client, logged with its stack, and the server goes on serving.
func TestCallLogRecoversPanic(t *testing.T) {
	var out testkit.Buffer
	cl := NewCallLog(hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug}))
	srv := flight.NewServerWithMiddleware([]flight.ServerMiddleware{cl.Middleware()})
	srv.RegisterFlightService(&panicky{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.InitListener(lis)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	defer func() {
		srv.Shutdown()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	client, err := flight.NewClientWithMiddleware(srv.Addr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for range 2 { // and again: the server survived the first
		stream, err := client.ListActions(ctxT(t), &flight.Empty{})
		if err == nil {
			_, err = stream.Recv()
		}
		wantCode(t, "ListActions", err, codes.Internal, "internal error in /arrow.flight.protocol.FlightService/ListActions")
	}
	if got := out.String(); !strings.Contains(got, "call panicked") || !strings.Contains(got, "panic=boom") || !strings.Contains(got, "ListActions failed") {
		t.Errorf("log: %s", got)
	}
	if n := cl.InFlight(); n != 0 {
		t.Errorf("%d calls in flight after both returned", n)
	}
}
