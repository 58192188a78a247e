package flightserver

// The operators' HTTP endpoints: liveness, readiness and metrics, on a
// listener of their own (tsflight serve --http). OpsHandler is a small
// mux: later HTTP features (a web console, say) add their routes to it
// with Handle and share the listener.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
)

// OpsOptions configure an OpsHandler.
type OpsOptions struct {
	// Metrics, when set, is served on /metrics; without it /metrics is
	// not found.
	Metrics *Metrics
	// Auth, when it is enabled, guards /metrics (which names the tables):
	// a scrape sends a token as Flight calls do ("Authorization: Bearer
	// TOKEN", or Basic credentials whose password is the token), of
	// either scope. With client certificates only, the listener's TLS
	// has checked the certificate. /healthz and /readyz tell only
	// whether the server is up and ready, and stay open, for probes.
	Auth *guard.Auth
	// Logger receives refused scrapes and failed readiness checks; nil
	// discards.
	Logger hclog.Logger
}

// OpsHandler serves /healthz, /readyz and /metrics.
type OpsHandler struct {
	svc      *Service
	opts     OpsOptions
	log      hclog.Logger
	mux      *http.ServeMux
	stopping atomic.Bool
}

// NewOpsHandler returns the operators' endpoints of svc.
func NewOpsHandler(svc *Service, opts *OpsOptions) *OpsHandler {
	h := &OpsHandler{svc: svc, mux: http.NewServeMux()}
	if opts != nil {
		h.opts = *opts
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = hclog.NewNullLogger()
	}
	h.mux.HandleFunc("GET /healthz", h.healthz)
	h.mux.HandleFunc("GET /readyz", h.readyz)
	if m := h.opts.Metrics; m != nil {
		metrics := promhttp.HandlerFor(m.Registry(), promhttp.HandlerOpts{
			// A collector that fails leaves its metrics out; the rest
			// are still served.
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      promLogger{h.log},
			// Scrapes that pile up behind a slow one are refused
			// rather than queued.
			MaxRequestsInFlight: 4,
			Timeout:             30 * time.Second,
		})
		h.mux.Handle("GET /metrics", h.authorized(metrics))
	}
	return h
}

// Handle adds a route (a net/http ServeMux pattern such as
// "GET /console/") to the listener's mux.
func (h *OpsHandler) Handle(pattern string, handler http.Handler) { h.mux.Handle(pattern, handler) }

// ServeHTTP serves the routes.
func (h *OpsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// BeginShutdown makes /healthz and /readyz answer 503 from now on: the
// server is stopping, load balancers should send no new calls.
func (h *OpsHandler) BeginShutdown() { h.stopping.Store(true) }

// healthz is liveness: 200 while the process serves, 503 once it is
// shutting down.
func (h *OpsHandler) healthz(w http.ResponseWriter, _ *http.Request) {
	if h.stopping.Load() {
		plain(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	plain(w, http.StatusOK, "ok")
}

// readyz is readiness: 200 when the root can be read and its tables
// listed, else 503 and one line naming what failed.
func (h *OpsHandler) readyz(w http.ResponseWriter, r *http.Request) {
	if err := h.Ready(r.Context()); err != nil {
		h.log.Warn("not ready", "reason", err.Error())
		plain(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
		return
	}
	plain(w, http.StatusOK, "ready")
}

// Ready says why the server cannot serve now, or nil: it is shutting
// down, or its root directory cannot be read or its tables listed. The
// reason is one line and names no path.
func (h *OpsHandler) Ready(ctx context.Context) error {
	if h.stopping.Load() {
		return errors.New("shutting down")
	}
	// A root on a hung disk hangs this check, and the probe's own timeout
	// then reports the server not ready, which it is not.
	if _, err := h.svc.TableNames(); err != nil {
		return fmt.Errorf("the root directory cannot be listed: %s", oneLine(status.Convert(err).Message()))
	}
	return ctx.Err()
}

// authorized lets a request through to next when Auth allows it, else
// answers 401 with the reason.
func (h *OpsHandler) authorized(next http.Handler) http.Handler {
	a := h.opts.Auth
	if a == nil || !a.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := a.CheckHTTP(r); err != nil {
			msg := status.Convert(err).Message()
			h.log.Info("HTTP request refused", "path", r.URL.Path, "peer", r.RemoteAddr, "reason", msg)
			w.Header().Set("WWW-Authenticate", `Bearer realm="tsflight"`)
			plain(w, http.StatusUnauthorized, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// plain answers with one line of text.
func plain(w http.ResponseWriter, code int, line string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, line)
}

// oneLine joins the lines of s.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// promLogger logs promhttp's errors (a failing collector).
type promLogger struct{ log hclog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Warn("metrics: " + strings.TrimSpace(fmt.Sprintln(v...)))
}
