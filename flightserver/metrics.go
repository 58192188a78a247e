package flightserver

// Metrics: what a server did and holds, in the Prometheus text format.
// A Metrics owns a registry of its own (never the process-wide default
// one), so that two servers in one process, as in tests, count apart. The
// gRPC side (calls, latency, open streams, message bytes) is counted by
// the middleware this file builds; rows, commits and what the service
// holds are read from the Service when a scrape asks (metrics_service.go),
// and the per-table gauges from the tables (metrics_tables.go). Every
// metric is listed in docs/operations.md.

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tsflight/tsflight/flightserver/guard"
)

// MetricsNamespace starts the name of every metric a tsflight server
// exports.
const MetricsNamespace = "tsflight"

// DefaultMaxTableSeries is the default of MetricsOptions.MaxTables.
const DefaultMaxTableSeries = 100

// callDurationBuckets are the bounds, in seconds, of the call latency
// histograms: from a millisecond (a describe) to five minutes (a DoGet
// streaming a large table to a slow client).
var callDurationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// MetricsOptions configure NewMetrics. The zero value is usable.
type MetricsOptions struct {
	// Gate, when set, adds the calls it runs and refuses.
	Gate *guard.Gate
	// MaxTables bounds the tables that get series of their own in the
	// per-table gauges (0 = DefaultMaxTableSeries): the first MaxTables
	// in name order; the rest are summed under table="_other".
	MaxTables int
	// TableCacheFor is how long one reading of the tables serves scrapes
	// (0 = one second), so that scrapes close together read the tables
	// once.
	TableCacheFor time.Duration
}

// Metrics is the Prometheus instrumentation of one Service and the gRPC
// server that serves it: [Metrics.ServerOptions] go to the gRPC server
// (or [Metrics.Middleware] first in the Flight middleware list), and
// [Metrics.Registry] is what /metrics serves (see OpsHandler).
type Metrics struct {
	reg *prometheus.Registry

	calls       *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	openStreams *prometheus.GaugeVec
	bytesIn     *prometheus.CounterVec
	bytesOut    *prometheus.CounterVec
}

// NewMetrics returns the metrics of svc, registered in a new registry
// together with the Go runtime's and the process's collectors.
func NewMetrics(svc *Service, opts *MetricsOptions) (*Metrics, error) {
	if svc == nil {
		return nil, errors.New("metrics: no service")
	}
	var o MetricsOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxTables < 0:
		return nil, Status(invalidf("metrics: MaxTables must not be negative, got %d", o.MaxTables))
	case o.MaxTables == 0:
		o.MaxTables = DefaultMaxTableSeries
	}
	if o.TableCacheFor <= 0 {
		o.TableCacheFor = time.Second
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "grpc_calls_total",
			Help: "gRPC calls finished, by method (FlightService's DoGet, DoPut, ...) and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: MetricsNamespace, Name: "grpc_call_duration_seconds",
			Help:    "Time from a gRPC call's start to its end (a stream's whole life), by method.",
			Buckets: callDurationBuckets,
		}, []string{"method"}),
		openStreams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: MetricsNamespace, Name: "grpc_open_streams",
			Help: "Streaming gRPC calls (DoGet, DoPut, DoAction, ...) open now, by method.",
		}, []string{"method"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "grpc_received_bytes_total",
			Help: "Bytes of the gRPC messages the server received (protobuf encoding, before gRPC framing), by method: DoPut carries appends and Flight SQL ingest.",
		}, []string{"method"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "grpc_sent_bytes_total",
			Help: "Bytes of the gRPC messages the server sent (protobuf encoding, before gRPC framing), by method: DoGet carries scans and Flight SQL results.",
		}, []string{"method"}),
	}
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.calls, m.latency, m.openStreams, m.bytesIn, m.bytesOut,
		newServiceCollector(svc, o.Gate),
		newTableCollector(svc, o.MaxTables, o.TableCacheFor),
	}
	if err := m.Register(cs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Registry returns the registry /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Register adds collectors to the registry (Flight SQL's, say:
// flightsql's Server.Collectors).
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Middleware counts every call the interceptors see. Put it first in the
// middleware list, so that calls the later ones refuse (the gate's
// RESOURCE_EXHAUSTED, authentication's UNAUTHENTICATED) are counted with
// their codes too.
func (m *Metrics) Middleware() flight.ServerMiddleware {
	return flight.ServerMiddleware{
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			// methodName (scope.go): "/arrow.flight.protocol.FlightService/DoGet"
			// → "DoGet". The interceptors see only the methods of registered
			// services, so the label takes a bounded set of values.
			method := guard.MethodName(info.FullMethod)
			start := time.Now()
			defer func() { m.finish(method, start, err) }()
			m.bytesIn.WithLabelValues(method).Add(float64(messageSize(req)))
			resp, err = h(ctx, req)
			if err == nil {
				m.bytesOut.WithLabelValues(method).Add(float64(messageSize(resp)))
			}
			return resp, err
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			method := guard.MethodName(info.FullMethod)
			start := time.Now()
			open := m.openStreams.WithLabelValues(method)
			open.Inc()
			defer func() {
				open.Dec()
				m.finish(method, start, err)
			}()
			return h(srv, &countingStream{ServerStream: ss, in: m.bytesIn.WithLabelValues(method), out: m.bytesOut.WithLabelValues(method)})
		},
	}
}

// ServerOptions are the Middleware as gRPC server options: with
// flight.NewServerWithMiddleware, interceptors given as options run
// before (outside) the middleware list, so the metrics count the calls
// the middleware refuses too.
func (m *Metrics) ServerOptions() []grpc.ServerOption {
	mw := m.Middleware()
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(mw.Unary), grpc.ChainStreamInterceptor(mw.Stream)}
}

// CountRefused counts a call refused before any interceptor saw it (the
// authentication tap: Auth.OnTapRefusal) as an UNAUTHENTICATED call of its
// method. Only the methods of the Flight and health services are
// labelled by name, others as "other", so that a client cannot grow the
// label set.
func (m *Metrics) CountRefused(fullMethod string) {
	method := "other"
	if strings.HasPrefix(fullMethod, "/arrow.flight.protocol.FlightService/") {
		method = guard.MethodName(fullMethod)
	}
	m.calls.WithLabelValues(method, codes.Unauthenticated.String()).Inc()
}

// finish counts a call's end.
func (m *Metrics) finish(method string, start time.Time, err error) {
	m.latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
	m.calls.WithLabelValues(method, codeOf(err).String()).Inc()
}

// codeOf is the status code a call's error reaches its client with; a
// handler that returns its context's error is counted as gRPC sends it.
func codeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	return codes.Unknown
}

// messageSize is the encoded size of a gRPC message: a DoGet batch sent
// through the zero-copy codec, or a protobuf message.
func messageSize(msg any) int {
	switch m := msg.(type) {
	case *zeroCopyMessage:
		return zeroCopySize(m)
	case proto.Message:
		return proto.Size(m)
	}
	return 0
}

// zeroCopySize is the size of the FlightData zeroCopyCodec frames around
// m: data_header (field 2) and data_body (field 1000), each with its tag
// and length.
func zeroCopySize(m *zeroCopyMessage) int {
	n := 1 + varintLen(len(m.header)) + len(m.header)
	if m.bodyLen > 0 {
		n += 2 + varintLen(m.bodyLen) + m.bodyLen
	}
	return n
}

func varintLen(v int) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// countingStream counts the bytes of a stream's messages.
type countingStream struct {
	grpc.ServerStream
	in, out prometheus.Counter
}

func (s *countingStream) SendMsg(msg any) error {
	n := messageSize(msg) // before gRPC owns (and may release) the message
	err := s.ServerStream.SendMsg(msg)
	if err == nil {
		s.out.Add(float64(n))
	}
	return err
}

func (s *countingStream) RecvMsg(msg any) error {
	err := s.ServerStream.RecvMsg(msg)
	if err == nil {
		s.in.Add(float64(messageSize(msg)))
	}
	return err
}
