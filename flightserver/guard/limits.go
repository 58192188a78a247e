package guard

// Limits: the bounds a server puts on what its clients can make it hold or
// do. They are gRPC server options and a middleware, so they apply the same
// way to plain Flight and to Flight SQL calls on one listener.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/tsflight/tsflight/flightserver/reqerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/tap"
)

// Defaults of [Limits]. Each is chosen so that a well-behaved client never
// meets it, while a broken or hostile one cannot make the server hold
// unbounded memory, goroutines or time.
const (
	// DefaultMaxMsgSize bounds one record batch a client sends or the
	// server sends (64 MiB). The gRPC limit adds MsgHeaderAllowance.
	DefaultMaxMsgSize = 64 << 20
	// MsgHeaderAllowance is added to the message size limits: they bound a
	// record batch's body, and the gRPC message also carries its IPC
	// header and the FlightData framing.
	MsgHeaderAllowance = 1 << 20
	// DefaultMaxStreamsPerConn is how many calls one connection may have
	// open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). Clients queue
	// calls beyond it until one ends.
	DefaultMaxStreamsPerConn = 100
	// DefaultMaxCalls is how many calls the whole server runs at once;
	// more are refused with ResourceExhausted.
	DefaultMaxCalls = 1000
	// DefaultRequestTimeout is the longest a call may run when the client
	// set no earlier deadline.
	DefaultRequestTimeout = time.Hour
	// DefaultKeepaliveTime is how long a connection may be silent before
	// the server pings it; a peer that does not answer within
	// DefaultKeepaliveTimeout is dropped with its calls.
	DefaultKeepaliveTime    = time.Minute
	DefaultKeepaliveTimeout = 20 * time.Second
	// MaxHeaderListSize bounds the headers (metadata) of one call, 64 KiB:
	// far above what any Flight client sends (a token, a few properties),
	// far below gRPC's 16 MiB default, which let calls without any
	// credential make the server hold megabytes each before it could
	// refuse them.
	MaxHeaderListSize = 64 << 10
)

// Limits bound the messages, calls and time a server gives its clients.
// The zero value of a field means its default (the Default* constants);
// DefaultLimits returns them filled in.
type Limits struct {
	// MaxRecvMsgSize bounds the body of one message a client sends, in
	// bytes (0 = DefaultMaxMsgSize). A larger one fails its call with
	// ResourceExhausted and nothing of it is written.
	MaxRecvMsgSize int
	// MaxSendMsgSize bounds the body of one message the server sends
	// (0 = DefaultMaxMsgSize).
	MaxSendMsgSize int
	// MaxStreamsPerConn is the calls one connection may have open at once
	// (0 = DefaultMaxStreamsPerConn).
	MaxStreamsPerConn uint32
	// MaxCalls is the calls the server runs at once, over all connections
	// (0 = DefaultMaxCalls; negative = no limit). A call beyond it is
	// refused at once with ResourceExhausted: clients retry later.
	MaxCalls int
	// RequestTimeout is the deadline of a call whose client set none or a
	// later one (0 = DefaultRequestTimeout; negative = none). A call past
	// it ends with DeadlineExceeded; an append cut short commits nothing.
	// It also ages connections out (see Gate.ServerOptions).
	RequestTimeout time.Duration
	// KeepaliveTime and KeepaliveTimeout: a silent connection is pinged
	// after KeepaliveTime and closed, cancelling its calls, when the ping
	// is not answered within KeepaliveTimeout (0 = the defaults).
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
}

// DefaultLimits returns fresh limits with every default filled in.
func DefaultLimits() *Limits {
	return &Limits{
		MaxRecvMsgSize:    DefaultMaxMsgSize,
		MaxSendMsgSize:    DefaultMaxMsgSize,
		MaxStreamsPerConn: DefaultMaxStreamsPerConn,
		MaxCalls:          DefaultMaxCalls,
		RequestTimeout:    DefaultRequestTimeout,
		KeepaliveTime:     DefaultKeepaliveTime,
		KeepaliveTimeout:  DefaultKeepaliveTimeout,
	}
}

// filled returns l with zero fields replaced by their defaults.
func (l *Limits) filled() Limits {
	out := *l
	d := DefaultLimits()
	orDefault(&out.MaxRecvMsgSize, d.MaxRecvMsgSize)
	orDefault(&out.MaxSendMsgSize, d.MaxSendMsgSize)
	orDefault(&out.MaxStreamsPerConn, d.MaxStreamsPerConn)
	orDefault(&out.MaxCalls, d.MaxCalls)
	orDefault(&out.RequestTimeout, d.RequestTimeout)
	orDefault(&out.KeepaliveTime, d.KeepaliveTime)
	orDefault(&out.KeepaliveTimeout, d.KeepaliveTimeout)
	return out
}

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate reports the first limit that is out of range, naming it, as
// an InvalidArgument status.
func (l *Limits) Validate() error { return reqerr.Status(l.check()) }

// check is Validate with the refusal's category (reqerr.ErrInvalidArgument),
// not its status.
func (l *Limits) check() error {
	const maxMsg = 1<<31 - 1 - MsgHeaderAllowance // int32 message sizes
	switch {
	case l.MaxRecvMsgSize < 0 || l.MaxRecvMsgSize > maxMsg:
		return invalidf("MaxRecvMsgSize must be between 1 and %d bytes, got %d", maxMsg, l.MaxRecvMsgSize)
	case l.MaxSendMsgSize < 0 || l.MaxSendMsgSize > maxMsg:
		return invalidf("MaxSendMsgSize must be between 1 and %d bytes, got %d", maxMsg, l.MaxSendMsgSize)
	case l.KeepaliveTime < 0:
		return invalidf("KeepaliveTime must not be negative, got %s", l.KeepaliveTime)
	case l.KeepaliveTimeout < 0:
		return invalidf("KeepaliveTimeout must not be negative, got %s", l.KeepaliveTimeout)
	}
	return nil
}

// Gate enforces Limits on a gRPC server: ServerOptions go to
// grpc.NewServer (or flight.NewServerWithMiddleware), Middleware to the
// Flight server's middleware list. One Gate serves one server.
type Gate struct {
	l        Limits
	inFlight atomic.Int64
	refused  atomic.Int64
	conns    connRegistry
}

// NewGate checks l and returns the gate that enforces it.
func NewGate(l *Limits) (*Gate, error) {
	if l == nil {
		l = DefaultLimits()
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Gate{l: l.filled()}, nil
}

// Limits returns the limits in force, defaults filled in.
func (g *Gate) Limits() Limits { return g.l }

// InFlight is the number of calls running now; Refused counts the calls
// refused by MaxCalls since the gate was made.
func (g *Gate) InFlight() int64 { return g.inFlight.Load() }
func (g *Gate) Refused() int64  { return g.refused.Load() }

// ServerOptions returns the gRPC options that carry the limits: message
// and header sizes, streams per connection, keepalive and connection age, and the
// per-call deadline
// (applied before the call's handler and its reads start, so that a read
// blocked on a silent client ends at the deadline too).
//
// taps run first, in order, before the request message is read (gRPC
// takes one InTapHandle per server: pass Auth.Tap here); a tap's error
// refuses the call with that status.
func (g *Gate) ServerOptions(taps ...tap.ServerInHandle) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(g.l.MaxRecvMsgSize + MsgHeaderAllowance),
		grpc.MaxSendMsgSize(g.l.MaxSendMsgSize + MsgHeaderAllowance),
		grpc.MaxConcurrentStreams(g.l.MaxStreamsPerConn),
		grpc.MaxHeaderListSize(MaxHeaderListSize),
		grpc.KeepaliveParams(g.keepalive()),
		// Clients may ping as often as every 10 s (gRPC's default refuses
		// pings more often than every 5 minutes with GOAWAY).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// Gives every call the context of its connection (ConnContext).
		grpc.StatsHandler(connStats{g: g}),
	}
	if g.l.RequestTimeout > 0 {
		taps = append(taps, g.deadline)
	}
	if len(taps) > 0 {
		opts = append(opts, grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
			for _, t := range taps {
				var err error
				if ctx, err = t(ctx, info); err != nil {
					return ctx, err
				}
			}
			return ctx, nil
		}))
	}
	return opts
}

// keepalive returns the server's keepalive parameters. With a request
// timeout, connections also age out: after twice the timeout a connection
// is told to go away (clients reconnect for new calls) and after another
// timeout it is closed. That bounds in time what a call ended by the
// deadline still holds in the transport: gRPC writes its status behind
// the data a stalled client has not read, so without the close such a
// stream (about two batches) would stay until the client read or left.
func (g *Gate) keepalive() keepalive.ServerParameters {
	kp := keepalive.ServerParameters{Time: g.l.KeepaliveTime, Timeout: g.l.KeepaliveTimeout}
	if g.l.RequestTimeout > 0 {
		kp.MaxConnectionAge = 2 * g.l.RequestTimeout
		kp.MaxConnectionAgeGrace = g.l.RequestTimeout
	}
	return kp
}

// deadline gives a new call the server's deadline unless the client's is
// earlier. The transport uses the returned context for the call's reads
// and writes, which is what lets a deadline interrupt a blocked Recv or
// Send; the context is cancelled with the call, which also stops its
// timer. The call ends with gRPC's own DeadlineExceeded status ("context
// deadline exceeded"), which the transport writes itself when it was
// waiting on the client.
func (g *Gate) deadline(ctx context.Context, _ *tap.Info) (context.Context, error) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= g.l.RequestTimeout {
		return ctx, nil
	}
	call, cancel := context.WithTimeout(ctx, g.l.RequestTimeout)
	context.AfterFunc(ctx, cancel) // the transport cancels ctx when the call ends
	return call, nil
}

// Middleware counts calls in and out and refuses those beyond MaxCalls.
func (g *Gate) Middleware() flight.ServerMiddleware {
	return flight.ServerMiddleware{
		Unary: func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := g.enter(); err != nil {
				return nil, err
			}
			defer g.inFlight.Add(-1)
			return h(ctx, req)
		},
		Stream: func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := g.enter(); err != nil {
				return err
			}
			defer g.inFlight.Add(-1)
			return h(srv, ss)
		},
	}
}

// Hold counts work that runs outside any call (a query GetFlightInfo
// started for a DoGet that has not come yet) against MaxCalls, as a call.
// It refuses with the ResourceExhausted error a call beyond MaxCalls gets;
// otherwise release (safe to call more than once) ends the hold.
func (g *Gate) Hold() (release func(), err error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { g.inFlight.Add(-1) }) }, nil
}

func (g *Gate) enter() error {
	n := g.inFlight.Add(1)
	if g.l.MaxCalls > 0 && n > int64(g.l.MaxCalls) {
		g.inFlight.Add(-1)
		g.refused.Add(1)
		// A status already: the middleware and Hold (the edges) return it.
		return reqerr.Status(reqerr.Errorf(reqerr.ErrResourceExhausted, "the server is running its limit of %d calls at once (--max-calls); retry later", g.l.MaxCalls))
	}
	return nil
}

// invalidf is an error of category reqerr.ErrInvalidArgument naming
// what is wrong.
func invalidf(format string, args ...any) error {
	return reqerr.Errorf(reqerr.ErrInvalidArgument, format, args...)
}
