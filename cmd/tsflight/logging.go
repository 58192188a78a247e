package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
)

var logLevels = []string{"trace", "debug", "info", "warn", "error"}

// newLogger returns the process logger: text lines ("2006-01-02T15:04:05Z
// [INFO]  message: key=value") or one JSON object per line, on w.
func newLogger(w io.Writer, level, format string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Level:           hclog.LevelFromString(level),
		Output:          w,
		JSONFormat:      format == "json",
		Color:           hclog.ColorOff,
		TimeFormat:      "2006-01-02T15:04:05.000Z07:00",
		IncludeLocation: false,
	})
}

// grpcLogger sends gRPC's own log lines to hclog, one level quieter than
// gRPC rates them (its warnings are mostly clients going away), so that
// --log-format json output stays JSON.
type grpcLogger struct{ l hclog.Logger }

var _ grpclog.LoggerV2 = grpcLogger{}

func (g grpcLogger) Info(args ...any)                 { g.l.Trace(strings.TrimSpace(fmt.Sprint(args...))) }
func (g grpcLogger) Infoln(args ...any)               { g.l.Trace(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Infof(format string, args ...any) { g.l.Trace(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Warning(args ...any)              { g.l.Debug(strings.TrimSpace(fmt.Sprint(args...))) }
func (g grpcLogger) Warningln(args ...any)            { g.l.Debug(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Warningf(format string, args ...any) {
	g.l.Debug(fmt.Sprintf(format, args...))
}
func (g grpcLogger) Error(args ...any)   { g.l.Error(strings.TrimSpace(fmt.Sprint(args...))) }
func (g grpcLogger) Errorln(args ...any) { g.l.Error(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Errorf(format string, args ...any) {
	g.l.Error(fmt.Sprintf(format, args...))
}
func (g grpcLogger) Fatal(args ...any)   { g.l.Error(fmt.Sprint(args...)); os.Exit(exitFail) }
func (g grpcLogger) Fatalln(args ...any) { g.l.Error(fmt.Sprintln(args...)); os.Exit(exitFail) }
func (g grpcLogger) Fatalf(format string, args ...any) {
	g.l.Error(fmt.Sprintf(format, args...))
	os.Exit(exitFail)
}
func (g grpcLogger) V(l int) bool { return l <= 0 && g.l.IsTrace() }

// calls counts the calls in flight, logs each one when it ends (at debug
// level, or as an error when the server failed: codes Internal, Unknown,
// DataLoss, Unavailable) and turns a panicking handler into an Internal
// error instead of a crash.
type calls struct {
	log      hclog.Logger
	inFlight atomic.Int64
}

func (c *calls) middleware() flight.ServerMiddleware {
	return flight.ServerMiddleware{
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			ctx, caller := flightserver.WithCallerSlot(ctx)
			defer c.track(ctx, info.FullMethod, caller)(&err)
			return h(ctx, req)
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			ctx, caller := flightserver.WithCallerSlot(ss.Context())
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
func (c *calls) track(ctx context.Context, method string, caller *flightserver.CallerSlot) func(*error) {
	c.inFlight.Add(1)
	start := time.Now()
	c.log.Trace(method[strings.LastIndexByte(method, '/')+1:] + " started")
	return func(err *error) {
		defer c.inFlight.Add(-1)
		if p := recover(); p != nil {
			c.log.Error("call panicked", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			*err = status.Errorf(codes.Internal, "internal error in %s (see the server log)", method)
		}
		// A handler that stops because its client went away may return the
		// context's own error, which gRPC would send (and the log would
		// count) as UNKNOWN, a server failure.
		if _, isStatus := status.FromError(*err); !isStatus {
			switch {
			case errors.Is(*err, context.Canceled):
				*err = status.Error(codes.Canceled, (*err).Error())
			case errors.Is(*err, context.DeadlineExceeded):
				*err = status.Error(codes.DeadlineExceeded, (*err).Error())
			}
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
