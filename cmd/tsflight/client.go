package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
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

// serverFlags are the flags every client command has: where the server
// is and how to prove who we are to it.
type serverFlags struct {
	uri        string
	token      string
	tlsCA      string
	clientCert string
	clientKey  string
	serverName string
	insecure   bool
}

// serverFlag adds --server and the credential flags to fs, each with its
// environment fallback.
func serverFlag(fs *flagSet) *serverFlags {
	s := new(serverFlags)
	fs.StringVar(&s.uri, "server", defaultServer, "tsflight server `URI`: grpc://HOST:PORT, or grpc+tls://HOST:PORT for TLS")
	fs.StringVar(&s.token, "token", "", "`token` to authenticate with (sent as authorization: Bearer); prefer the environment variable, which ps does not show")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM `file` of the CA that signed the server's certificate (default: the system's roots); grpc+tls:// only")
	fs.StringVar(&s.clientCert, "client-cert", "", "PEM `file` of a client certificate, for servers that require one (--tls-client-ca)")
	fs.StringVar(&s.clientKey, "client-key", "", "PEM `file` of the client certificate's key")
	fs.StringVar(&s.serverName, "tls-server-name", "", "`name` to verify the server's certificate against (default: the host of --server)")
	fs.BoolVar(&s.insecure, "insecure", false, "allow sending --token over plaintext grpc:// to a server that is not on this machine")
	fs.fromEnv("server", "TSFLIGHT_SERVER")
	fs.fromEnv("token", "TSFLIGHT_TOKEN")
	fs.fromEnv("tls-ca", "TSFLIGHT_TLS_CA")
	fs.fromEnv("client-cert", "TSFLIGHT_CLIENT_CERT")
	fs.fromEnv("client-key", "TSFLIGHT_CLIENT_KEY")
	return s
}

// serverAddr turns a server URI into host:port. grpc:// and grpc+tcp://
// are accepted, as is a bare HOST:PORT.
func serverAddr(uri string) (string, error) {
	addr, _, err := parseServerURI(uri)
	return addr, err
}

// parseServerURI turns a server URI into host:port and whether it asks
// for TLS (grpc+tls://).
func parseServerURI(uri string) (addr string, useTLS bool, err error) {
	addr = uri
	if scheme, rest, ok := strings.Cut(uri, "://"); ok {
		switch scheme {
		case "grpc", "grpc+tcp":
			addr = rest
		case "grpc+tls":
			addr, useTLS = rest, true
		default:
			return "", false, usagef("--server %q: unknown scheme %q (use grpc://HOST:PORT or grpc+tls://HOST:PORT)", uri, scheme)
		}
	}
	addr = strings.TrimSuffix(addr, "/")
	host, port, err := net.SplitHostPort(addr)
	if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil {
		return "", false, usagef("--server %q is not grpc://HOST:PORT", uri)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), useTLS, nil
}

// transport returns the gRPC transport credentials the flags ask for.
func (s *serverFlags) transport(useTLS bool, host string) (credentials.TransportCredentials, error) {
	if !useTLS {
		if s.tlsCA != "" || s.clientCert != "" || s.clientKey != "" || s.serverName != "" {
			return nil, usagef("--tls-ca, --client-cert, --client-key and --tls-server-name need a grpc+tls:// --server (got %q)", s.uri)
		}
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if s.serverName != "" {
		cfg.ServerName = s.serverName
	}
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", s.tlsCA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case (s.clientCert == "") != (s.clientKey == ""):
		return nil, usagef("--client-cert and --client-key go together")
	case s.clientCert != "":
		cert, err := tls.LoadX509KeyPair(s.clientCert, s.clientKey)
		if err != nil {
			return nil, fmt.Errorf("--client-cert %s with --client-key %s: %w", s.clientCert, s.clientKey, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// bearer sends the token with every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false so that a token also works over
// grpc:// to a loopback server; the server refuses to listen elsewhere
// without TLS unless told --insecure.
func (bearer) RequireTransportSecurity() bool { return false }

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

// dialServer connects to the server the flags name. gRPC connects lazily:
// an unreachable server shows up as the first call's error, which wrap
// turns into a clear message.
func dialServer(s *serverFlags) (*client, error) {
	addr, useTLS, err := parseServerURI(s.uri)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	creds, err := s.transport(useTLS, host)
	if err != nil {
		return nil, err
	}
	if s.token != "" && !useTLS && !s.insecure && !loopbackOnly(addr) {
		return nil, usagef("a token over grpc:// to %s would cross the network in clear text: use grpc+tls://%s, or --insecure on a network you trust", addr, addr)
	}
	c := &client{addr: addr}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(clientMsgSize), grpc.MaxCallSendMsgSize(clientMsgSize)),
		grpc.WithChainUnaryInterceptor(c.noteUnary),
		grpc.WithChainStreamInterceptor(c.noteStream),
	}
	if s.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(s.token)))
	}
	fl, err := flight.NewClientWithMiddleware(addr, nil, nil, opts...)
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

// actionCommand sends one action for a command and prints its answer as
// the output flags ask: json is the server's answer as it came, csv the
// rows of grid, the table format what print writes.
func actionCommand[R any](ctx context.Context, e *env, server *serverFlags, out *outputFlags, action string, req map[string]any,
	grid func(R) *grid, print func(io.Writer, R) error) error {
	return withClient(ctx, server, func(ctx context.Context, c *client) error {
		var res R
		raw, err := c.action(ctx, action, req, &res)
		if err != nil {
			return err
		}
		return out.emit(e, func(w io.Writer) error {
			switch out.format.value {
			case formatJSON:
				return writeRawJSON(w, raw)
			case formatCSV:
				return grid(res).writeCSV(w)
			}
			return print(w, res)
		})
	})
}

// runDryRunAction runs a command on one table whose only flag of its own
// is --dry-run (compact, upgrade): it parses the flags, sends action with
// "dry_run" when the flag is set, and prints the answer with actionCommand
// (print gets the --max-rows limit).
func runDryRunAction[R any](ctx context.Context, e *env, args []string, cmd *command, action, dryRunHelp string,
	grid func(R) *grid, print func(w io.Writer, res R, maxRows int) error) error {
	fs := newFlagSet(cmd)
	server := serverFlag(fs)
	var dryRun bool
	fs.BoolVar(&dryRun, "dry-run", false, dryRunHelp)
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON)
	table, err := parseTable(fs, e, args, out)
	if err != nil {
		return err
	}
	req := map[string]any{"table": table}
	if dryRun {
		req["dry_run"] = true
	}
	return actionCommand(ctx, e, server, out, action, req, grid,
		func(w io.Writer, res R) error { return print(w, res, out.maxRows) })
}

// parseTableItems parses the flags of a command that names one table and
// then one or more items (add-columns, set-properties): --server and
// --format table|json. missing says what the items are when there are
// none.
func parseTableItems(cmd *command, e *env, args []string, missing string) (server *serverFlags, format *choice, table string, items []string, err error) {
	fs := newFlagSet(cmd)
	server = serverFlag(fs)
	format = newChoice("table", "table", "json")
	fs.Var(format, "format", "output `format`: table or json")
	rest, err := fs.parse(e, args)
	if err != nil {
		return nil, nil, "", nil, err
	}
	if len(rest) == 0 {
		return nil, nil, "", nil, usagef("missing the table name")
	}
	if len(rest) == 1 {
		return nil, nil, "", nil, usagef("missing %s", missing)
	}
	return server, format, rest[0], rest[1:], nil
}

// tableOrJSONAction sends action and writes its answer to standard
// output: as the server sent it with --format json, else as print writes
// it.
func tableOrJSONAction[R any](ctx context.Context, e *env, server *serverFlags, format *choice, action string, req map[string]any,
	print func(io.Writer, R) error) error {
	return withClient(ctx, server, func(ctx context.Context, c *client) error {
		var res R
		raw, err := c.action(ctx, action, req, &res)
		if err != nil {
			return err
		}
		if format.value == "json" {
			return writeRawJSON(e.stdout, raw)
		}
		return print(e.stdout, res)
	})
}
