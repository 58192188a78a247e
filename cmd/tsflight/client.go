package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// defaultServer is where client commands look for a server.
const defaultServer = "grpc://127.0.0.1:8815"

// exitUnavailable is the exit code of a client command that could not reach
// the server and had no answer from it (nothing was done; retrying later
// may work). A server lost after it answered is a failure (exit 1).
const exitUnavailable = 3

// clientMsgSize bounds the messages a client command sends and receives:
// the server's default --max-recv-msg-size and --max-send-msg-size (64 MiB)
// plus header room.
const clientMsgSize = defaultMsgSize + headerAllowance

// serverFlag adds --server (env TSFLIGHT_SERVER) to fs.
func serverFlag(fs *flagSet) *string {
	s := new(string)
	fs.StringVar(s, "server", defaultServer, "tsflight server `URI` (grpc://HOST:PORT)")
	fs.fromEnv("server", "TSFLIGHT_SERVER")
	return s
}

// serverAddr turns a server URI into host:port. grpc:// and grpc+tcp://
// are accepted, as is a bare HOST:PORT.
func serverAddr(uri string) (string, error) {
	addr := uri
	if scheme, rest, ok := strings.Cut(uri, "://"); ok {
		switch scheme {
		case "grpc", "grpc+tcp":
			addr = rest
		case "grpc+tls":
			return "", usagef("--server %q: TLS is not supported yet; use grpc://", uri)
		default:
			return "", usagef("--server %q: unknown scheme %q (use grpc://HOST:PORT)", uri, scheme)
		}
	}
	addr = strings.TrimSuffix(addr, "/")
	host, port, err := net.SplitHostPort(addr)
	if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil {
		return "", usagef("--server %q is not grpc://HOST:PORT", uri)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// client is one connection to a tsflight server, for plain Flight and
// Flight SQL calls.
type client struct {
	addr string
	fl   flight.Client
	sql  *flightsql.Client
	// answered is set once the server has answered a call (a unary call
	// succeeded or a stream delivered a message or ended cleanly): from
	// then on, losing the server is no longer "nothing was done".
	answered atomic.Bool
}

// dialServer connects to the server named by uri. gRPC connects lazily: an
// unreachable server shows up as the first call's error, which
// wrap turns into a clear message.
func dialServer(uri string) (*client, error) {
	addr, err := serverAddr(uri)
	if err != nil {
		return nil, err
	}
	c := &client{addr: addr}
	fl, err := flight.NewClientWithMiddleware(addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(clientMsgSize), grpc.MaxCallSendMsgSize(clientMsgSize)),
		grpc.WithChainUnaryInterceptor(c.noteUnary),
		grpc.WithChainStreamInterceptor(c.noteStream))
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", addr, err)
	}
	c.fl = fl
	c.sql = &flightsql.Client{Client: fl, Alloc: memory.DefaultAllocator}
	return c, nil
}

// noteUnary records a unary call the server answered.
func (c *client) noteUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil {
		c.answered.Store(true)
	}
	return err
}

// noteStream watches a stream for the server's answers.
func (c *client) noteStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &notedStream{ClientStream: s, c: c}, nil
}

// notedStream sets its client's answered when a message arrives or the
// stream ends with an OK status.
type notedStream struct {
	grpc.ClientStream
	c *client
}

func (s *notedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil || errors.Is(err, io.EOF) {
		s.c.answered.Store(true)
	}
	return err
}

func (c *client) close() { c.fl.Close() }

// action runs a tsflight action with req as its JSON body and decodes the
// one result into resp (when not nil). It returns the raw result too.
func (c *client) action(ctx context.Context, name string, req any, resp any) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	stream, err := c.fl.DoAction(ctx, &flight.Action{Type: name, Body: body})
	if err != nil {
		return nil, c.wrap(err)
	}
	res, err := stream.Recv()
	if err != nil {
		return nil, c.wrap(err)
	}
	// Drain: the server sends exactly one result; reading to the end
	// surfaces a late error and frees the stream.
	for {
		if _, err := stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				return nil, c.wrap(err)
			}
			break
		}
	}
	if resp != nil {
		if err := json.Unmarshal(res.Body, resp); err != nil {
			return nil, fmt.Errorf("action %s: unexpected answer %q: %w", name, res.Body, err)
		}
	}
	return res.Body, nil
}

// unavailableError is a server that could not be reached, or was lost.
type unavailableError struct {
	addr string
	err  error
	// lost: the server had answered an earlier call of the command, so
	// something may have been done (run exits 1, not 3).
	lost bool
}

func (e *unavailableError) Error() string {
	if e.lost {
		return fmt.Sprintf("lost the connection to the tsflight server at %s: %s", e.addr, status.Convert(e.err).Message())
	}
	return fmt.Sprintf("cannot reach a tsflight server at %s (is it running? set --server or TSFLIGHT_SERVER): %s",
		e.addr, status.Convert(e.err).Message())
}

func (e *unavailableError) Unwrap() error { return e.err }

// nothingDone reports whether err is a server that could not be reached by
// a command none of whose calls it answered: nothing was done, and trying
// again later is safe (exit 3).
func nothingDone(err error) bool {
	var ue *unavailableError
	return errors.As(err, &ue) && !ue.lost
}

// wrap turns gRPC errors into readable ones: the server's message without
// the "rpc error: code = … desc =" prefix, and a pointer to --server when
// the server is not there.
func (c *client) wrap(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unavailable:
		return &unavailableError{addr: c.addr, err: err, lost: c.answered.Load()}
	case codes.Canceled:
		return context.Canceled
	}
	return &serverError{code: st.Code(), msg: st.Message()}
}

// serverError is an error the server answered with.
type serverError struct {
	code codes.Code
	msg  string
}

func (e *serverError) Error() string {
	return fmt.Sprintf("%s (%s)", e.msg, codeName(e.code))
}

// codeName is a gRPC code in lower-case words: "not found".
func codeName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}
