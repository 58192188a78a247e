package flightserver

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/flightserver/reqerr"
)

// CallLog is the outermost middleware of a server: it counts the calls in
// flight, logs each one when it ends (at debug level, or as an error when
// the server failed: codes Internal, Unknown, DataLoss, Unavailable), with
// the caller when authentication named one, turns a panicking handler into
// an Internal error instead of a crash, and a handler's bare context error
// into CANCELLED or DEADLINE_EXCEEDED.
type CallLog struct {
	log      hclog.Logger
	inFlight atomic.Int64
}

// NewCallLog returns a call log writing to log.
func NewCallLog(log hclog.Logger) *CallLog { return &CallLog{log: log} }

// InFlight is the number of calls running.
func (c *CallLog) InFlight() int64 { return c.inFlight.Load() }

// Middleware is the call log as Flight server middleware; it gives each
// call the caller slot authentication fills (WithCallerSlot).
func (c *CallLog) Middleware() flight.ServerMiddleware {
	return flight.ServerMiddleware{
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			ctx, caller := guard.WithCallerSlot(ctx)
			defer c.track(ctx, info.FullMethod, caller)(&err)
			return h(ctx, req)
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			ctx, caller := guard.WithCallerSlot(ss.Context())
			defer c.track(ctx, info.FullMethod, caller)(&err)
			return h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
		},
	}
}

// ctxStream is a server stream with another context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// track counts a call in; the function it returns, deferred, counts it out,
// recovers a panic into *err and logs the outcome, with the caller when
// authentication named one.
func (c *CallLog) track(ctx context.Context, method string, caller *guard.CallerSlot) func(*error) {
	c.inFlight.Add(1)
	start := time.Now()
	c.log.Trace(method[strings.LastIndexByte(method, '/')+1:] + " started")
	return func(err *error) {
		defer c.inFlight.Add(-1)
		if p := recover(); p != nil {
			c.log.Error("call panicked", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			*err = Status(reqerr.Errorf(reqerr.ErrInternal, "internal error in %s (see the server log)", method))
		}
		// A handler that stops because its client went away may return the
		// context's own error, which gRPC would send (and the log would
		// count) as UNKNOWN, a server failure: Status gives it its code.
		if isContextError(*err) {
			*err = Status(*err)
		}
		code := status.Code(*err)
		name := method[strings.LastIndexByte(method, '/')+1:]
		args := []any{"code", code.String(), "duration", time.Since(start).Round(time.Microsecond)}
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			args = append(args, "peer", p.Addr.String())
		}
		if p, ok := caller.Principal(); ok && p.Via != "none" {
			args = append(args, "principal", p.Name)
		}
		switch code {
		case codes.OK:
			c.log.Debug(name, args...)
		case codes.Internal, codes.Unknown, codes.DataLoss, codes.Unavailable:
			c.log.Error(name+" failed", append(args, "error", status.Convert(*err).Message())...)
		default:
			c.log.Debug(name+" refused", append(args, "error", status.Convert(*err).Message())...)
		}
	}
}

// isContextError reports whether err is a context's error (and no gRPC
// status yet).
func isContextError(err error) bool {
	if _, isStatus := status.FromError(err); isStatus {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
