package flightserver

// The gRPC health service (grpc.health.v1) on the Flight port, for
// orchestrators and load balancers (Kubernetes gRPC probes,
// grpc_health_probe, Envoy): NOT_SERVING until the server serves, SERVING
// while it does, NOT_SERVING again from the moment a shutdown begins. It
// answers without a credential (auth.go lets its methods through): a
// probe learns nothing but whether the server is up.

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// FlightServiceName is the gRPC name of the Arrow Flight service. The
// health service reports it beside "", the server as a whole.
const FlightServiceName = "arrow.flight.protocol.FlightService"

// healthServices are the service names the health service reports.
var healthServices = []string{"", FlightServiceName}

// Health is the health service of one server. Make it with NewHealth,
// Register it before the server serves, call Serving when it does and
// Shutdown when a shutdown begins.
//
// Check and List are grpc-go's (health.Server). Watch is this type's own:
// grpc-go's keeps a watch open after a shutdown, and an open watch would
// hold a graceful stop until its timeout. Here every watch sends the
// NOT_SERVING of a shutdown and then ends with UNAVAILABLE.
type Health struct {
	*health.Server
	mu       sync.Mutex
	changed  chan struct{} // closed (and replaced) at every change
	stopping bool
}

// NewHealth returns a health service reporting NOT_SERVING.
func NewHealth() *Health {
	h := &Health{Server: health.NewServer(), changed: make(chan struct{})}
	for _, s := range healthServices {
		h.Server.SetServingStatus(s, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return h
}

// Register adds the health service to a gRPC server (a flight.Server is
// one).
func (h *Health) Register(r grpc.ServiceRegistrar) { healthpb.RegisterHealthServer(r, h) }

// Serving reports SERVING, unless a shutdown has begun.
func (h *Health) Serving() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return
	}
	for _, s := range healthServices {
		h.Server.SetServingStatus(s, healthpb.HealthCheckResponse_SERVING)
	}
	h.notifyLocked()
}

// Shutdown reports NOT_SERVING for good and ends every Watch once it has
// sent that.
func (h *Health) Shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return
	}
	h.stopping = true
	h.Server.Shutdown()
	h.notifyLocked()
}

func (h *Health) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// Check answers the status of a service; an unknown one is NOT_FOUND
// naming the services there are.
func (h *Health) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := h.Server.Check(ctx, req)
	if status.Code(err) == codes.NotFound {
		return nil, unknownHealthService(req.GetService())
	}
	return resp, err
}

func unknownHealthService(name string) error {
	return Status(reqerr.Errorf(tableformat.ErrNotFound, "unknown service %q: this server reports %q (the whole server) and %q",
		catalog.Truncate(name, 128), healthServices[0], healthServices[1]))
}

// Watch sends the service's status, and again whenever it changes, until
// the client goes away or a shutdown begins: the stream then ends, after
// the NOT_SERVING, with UNAVAILABLE. An unknown service is
// SERVICE_UNKNOWN, as the protocol asks (the client may be early).
func (h *Health) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx := stream.Context()
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	for {
		h.mu.Lock()
		changed, stopping := h.changed, h.stopping
		h.mu.Unlock()
		cur := healthpb.HealthCheckResponse_SERVICE_UNKNOWN
		if resp, err := h.Server.Check(ctx, req); err == nil {
			cur = resp.GetStatus()
		}
		if cur != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: cur}); err != nil {
				return err
			}
			last = cur
		}
		if stopping {
			return Status(reqerr.Errorf(reqerr.ErrUnavailable, "the server is shutting down (its last status was sent)"))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}
