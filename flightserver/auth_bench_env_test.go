package flightserver

// The server side of the authentication benchmarks (auth_bench_test.go):
// a child process serving one Service on four listeners (plain, auth, tls,
// tls+auth), the client's view of it, and a self-signed certificate.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/flightserver/tlstest"
	"github.com/tsflight/tsflight/internal/testkit"
)

// authBenchModes are the sub-benchmarks, in the order they run.
var authBenchModes = []string{"plain", "auth", "tls", "tls+auth"}

// Environment of the child server process.
const (
	authBenchRootEnv   = "TSFLIGHT_AUTHBENCH_ROOT"
	authBenchCertEnv   = "TSFLIGHT_AUTHBENCH_CERT"
	authBenchKeyEnv    = "TSFLIGHT_AUTHBENCH_KEY"
	authBenchTokensEnv = "TSFLIGHT_AUTHBENCH_TOKENS"
)

// init turns this test binary into the benchmarks' server when started
// with authBenchRootEnv set; it never returns then.
func init() {
	if root := os.Getenv(authBenchRootEnv); root != "" {
		if err := authBenchServe(root); err != nil {
			fmt.Fprintln(os.Stderr, "auth bench server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// authBenchServe serves root on one loopback listener per mode, prints
// "ADDRS mode=addr ..." and serves until SIGTERM.
func authBenchServe(root string) error {
	debug.SetGCPercent(RecommendedGCPercent) // as tsflight serve
	svc, err := New(DefaultOptions(root))
	if err != nil {
		return err
	}
	st, err := guard.NewServerTLS(guard.TLSFiles{CertFile: os.Getenv(authBenchCertEnv), KeyFile: os.Getenv(authBenchKeyEnv)})
	if err != nil {
		return err
	}
	tokens, err := guard.OpenTokenFile(os.Getenv(authBenchTokensEnv))
	if err != nil {
		return err
	}
	off := guard.NewAuth(guard.AuthOptions{Classify: Scopes()}).Middleware()
	on := guard.NewAuth(guard.AuthOptions{Classify: Scopes(), Tokens: tokens.Tokens}).Middleware()
	var servers []flight.Server
	var addrs []string
	for _, mode := range authBenchModes {
		mw := off
		if strings.HasSuffix(mode, "auth") {
			mw = on
		}
		gopts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20), grpc.MaxSendMsgSize(64 << 20)}, svc.GRPCOptions()...)
		if strings.HasPrefix(mode, "tls") {
			gopts = append(gopts, st.ServerOption())
		}
		srv := flight.NewServerWithMiddleware([]flight.ServerMiddleware{mw}, gopts...)
		srv.RegisterFlightService(svc)
		if err := srv.Init("127.0.0.1:0"); err != nil {
			return err
		}
		servers = append(servers, srv)
		addrs = append(addrs, mode+"="+srv.Addr().String())
	}
	fmt.Printf("ADDRS %s\n", strings.Join(addrs, " "))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	done := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { done <- srv.Serve() }()
	}
	<-sig
	for _, srv := range servers {
		srv.Shutdown()
	}
	var errs []error
	for range servers {
		errs = append(errs, <-done)
	}
	return errors.Join(errs...)
}

// authBenchEnv is a running child server and a client per mode.
type authBenchEnv struct {
	cmd     *exec.Cmd
	addrs   map[string]string
	clients map[string]flight.Client
	pool    *x509.CertPool
	token   string
	rows    int64          // rows of the first whole-table fetch
	steps   map[string]int // next time step of each mode's DoPut table
}

// startAuthBench makes a certificate and a token, starts the child
// server over root and connects one client per mode.
func startAuthBench(b *testing.B, root string) *authBenchEnv {
	b.Helper()
	dir := b.TempDir()
	e := &authBenchEnv{addrs: map[string]string{}, clients: map[string]flight.Client{}, steps: map[string]int{}}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	e.pool = loopbackCert(b, certFile, keyFile)
	var err error
	if e.token, err = guard.NewToken(); err != nil {
		b.Fatal(err)
	}
	tokensFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokensFile, []byte(guard.HashToken(e.token)+" write name=bench\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	e.cmd = exec.Command(os.Args[0])
	e.cmd.Env = append(os.Environ(), authBenchRootEnv+"="+root, authBenchCertEnv+"="+certFile,
		authBenchKeyEnv+"="+keyFile, authBenchTokensEnv+"="+tokensFile)
	addrs := testkit.StartChild(b, e.cmd, "ADDRS ")
	b.Cleanup(e.stop)
	for _, f := range strings.Fields(addrs) {
		mode, addr, _ := strings.Cut(f, "=")
		e.addrs[mode] = addr
	}
	for _, mode := range authBenchModes {
		if e.clients[mode], err = e.dial(mode); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// dial connects a new client to the listener of mode.
func (e *authBenchEnv) dial(mode string) (flight.Client, error) {
	creds := insecure.NewCredentials()
	if strings.HasPrefix(mode, "tls") {
		creds = credentials.NewTLS(&tls.Config{RootCAs: e.pool, MinVersion: tls.VersionTLS12})
	}
	return flight.NewClientWithMiddleware(e.addrs[mode], nil, nil, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
}

// ctx is the context calls of mode are made in: with the bearer token in
// the modes with authentication, bare in the others (a client of a server
// without tokens sends none).
func (e *authBenchEnv) ctx(mode string) context.Context {
	ctx := context.Background()
	if strings.HasSuffix(mode, "auth") {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer"+" "+e.token)
	}
	return ctx
}

// logTLS logs what a TLS connection to the server negotiates.
func (e *authBenchEnv) logTLS(b *testing.B) {
	b.Helper()
	conn, err := tls.Dial("tcp", e.addrs["tls"], &tls.Config{RootCAs: e.pool, NextProtos: []string{"h2"}})
	if err != nil {
		b.Fatalf("TLS dial: %v", err)
	}
	defer conn.Close()
	cs := conn.ConnectionState()
	b.Logf("TLS: %s, %s, key exchange %s", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), cs.CurveID)
}

func (e *authBenchEnv) stop() {
	for _, c := range e.clients {
		c.Close()
	}
	testkit.StopProcess(e.cmd, 10*time.Second)
}

// loopbackCert writes an ECDSA P-256 certificate for 127.0.0.1
// (signed by a throwaway CA) and its key, and returns a pool that trusts it.
func loopbackCert(b *testing.B, certFile, keyFile string) *x509.CertPool {
	b.Helper()
	ca := tlstest.NewCA(b, "tsflight bench CA")
	ca.IssueTo(b, "tsflight bench server", true, certFile, keyFile)
	return ca.Pool
}

// An authCall makes one call in mode, timing it itself; work before the
// call (generating rows) runs with b's timer stopped. It returns the rows
// and Arrow bytes the call carried and how long it took.
