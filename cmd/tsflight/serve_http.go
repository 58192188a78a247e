// serve's HTTP endpoints for operators (--http): /healthz, /readyz and
// /metrics (flightserver.OpsHandler), on a listener of their own, under
// the same loopback rule as the Flight port.

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tsflight/tsflight/flightserver"
)

const (
	// opsCloseWait bounds how long the HTTP endpoints wait for requests in
	// flight when the server stops.
	opsCloseWait = 5 * time.Second
	// opsReadHeaderTimeout, opsWriteTimeout and opsIdleTimeout bound what
	// one HTTP client can make the endpoints hold.
	opsReadHeaderTimeout = 10 * time.Second
	opsWriteTimeout      = time.Minute
	opsIdleTimeout       = 2 * time.Minute
	opsMaxHeaderBytes    = 64 << 10
)

// opsFlags are serve's flags of the HTTP endpoints.
type opsFlags struct {
	addr string // "": no HTTP endpoints
}

func (o *opsFlags) register(fs *flagSet) {
	fs.StringVar(&o.addr, "http", "", "`address` (HOST:PORT) to serve the HTTP endpoints /healthz, /readyz and /metrics on (default: none; port 0 picks a free port); beyond loopback addresses only with authentication or --insecure, like --listen")
	fs.fromEnv("http", "TSFLIGHT_HTTP")
}

// check validates --http: an address, and the loopback rule of --listen.
func (o *opsFlags) check(sec *securityFlags, inline string) error {
	if o.addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return usagef("--http %s: want HOST:PORT, such as 127.0.0.1:9090 (%v)", o.addr, err)
	}
	if !sec.authenticated(inline) && !sec.insecure && !loopbackOnly(o.addr) {
		return usagef("--http %s is reachable from other machines and no authentication is configured: "+
			"give a loopback address such as 127.0.0.1:9090, or --auth-tokens FILE (then /metrics asks for a token) with --tls-cert and --tls-key, "+
			"or --insecure to serve the endpoints to anyone who can connect", o.addr)
	}
	return nil
}

// authenticated reports whether the flags turn authentication on (the
// rule check applies to --listen).
func (s *securityFlags) authenticated(inline string) bool {
	return s.authTokens != "" || inline != "" || s.tlsClientCA != ""
}

// opsServer is the running HTTP endpoints.
type opsServer struct {
	handler *flightserver.OpsHandler
	srv     *http.Server
	done    chan struct{} // closed when Serve has returned
	url     string        // scheme and bound address
}

// startOps binds --http and serves the endpoints until close.
func startOps(cfg *serveConfig, sec *security, svc *flightserver.Service, metrics *flightserver.Metrics, log hclog.Logger) (*opsServer, error) {
	lis, err := net.Listen("tcp", cfg.ops.addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", cfg.ops.addr, err)
	}
	if err := checkHTTPBound(cfg.ops.addr, lis.Addr(), sec.auth.Enabled(), cfg.sec.insecure); err != nil {
		lis.Close()
		return nil, err
	}
	scheme := "http"
	if sec.tls != nil {
		// The certificate (and client-certificate rule) of the Flight
		// port: tokens and metrics do not travel in clear.
		lis = tls.NewListener(lis, sec.tls.HTTPConfig())
		scheme = "https"
	}
	h := flightserver.NewOpsHandler(svc, &flightserver.OpsOptions{Metrics: metrics, Auth: sec.auth, Logger: log})
	o := &opsServer{handler: h, done: make(chan struct{}), url: scheme + "://" + lis.Addr().String()}
	o.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: opsReadHeaderTimeout,
		ReadTimeout:       opsReadHeaderTimeout,
		WriteTimeout:      opsWriteTimeout,
		IdleTimeout:       opsIdleTimeout,
		MaxHeaderBytes:    opsMaxHeaderBytes,
		// Broken clients (TLS handshakes that fail, say) at debug level.
		ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	go func() {
		defer close(o.done)
		if err := o.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the HTTP endpoints stopped serving", "error", err)
		}
	}()
	// Scripts and tests parse this line; keep "tsflight http listening on URL".
	log.Info("tsflight http listening on " + o.url)
	return o, nil
}

// beginShutdown makes the probes answer 503 from now on (nil: no --http).
func (o *opsServer) beginShutdown() {
	if o != nil {
		o.handler.BeginShutdown()
	}
}

// close stops the endpoints, waiting a little for requests in flight.
func (o *opsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), opsCloseWait)
	defer cancel()
	if err := o.srv.Shutdown(ctx); err != nil {
		o.srv.Close()
	}
	<-o.done
}

// checkHTTPBound is checkBound for --http: the name the flag check
// resolved may resolve differently when the socket is bound.
func checkHTTPBound(addr string, bound net.Addr, authenticated, insecure bool) error {
	tcp, ok := bound.(*net.TCPAddr)
	if !ok || tcp.IP.IsLoopback() || authenticated || insecure {
		return nil
	}
	return fmt.Errorf("--http %s bound %s, which is not a loopback address, and no authentication is configured: give --auth-tokens, or --insecure", addr, tcp.IP)
}
