package flightserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
)

// opsServer is a testServer whose gRPC server counts calls with Metrics,
// and the operators' HTTP endpoints on a loopback port of their own.
type opsServer struct {
	*testServer
	metrics *Metrics
	ops     *OpsHandler
	http    *httptest.Server
}

// startOpsServer starts a real Flight server with the metrics middleware
// and an HTTP server for its OpsHandler. The middleware goes in through
// chained interceptors, whose Metrics is set once the service exists.
func startOpsServer(t *testing.T, mopts *MetricsOptions, oopts *OpsOptions, extra ...grpc.ServerOption) *opsServer {
	t.Helper()
	var m atomic.Pointer[Metrics]
	opts := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return m.Load().Middleware().Unary(ctx, req, info, h)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return m.Load().Middleware().Stream(srv, ss, info, h)
		}),
	}, extra...)
	ts := startGatedServer(t, nil, nil, opts...)
	metrics, err := NewMetrics(ts.svc, mopts)
	if err != nil {
		t.Fatal(err)
	}
	m.Store(metrics)
	o := OpsOptions{}
	if oopts != nil {
		o = *oopts
	}
	o.Metrics = metrics
	h := NewOpsHandler(ts.svc, &o)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &opsServer{testServer: ts, metrics: metrics, ops: h, http: hs}
}

// get fetches path from the HTTP endpoints with the given headers
// ("Name: value"), and returns the status code and body.
func (s *opsServer) get(path string, headers ...string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.http.URL+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	res, err := s.http.Client().Do(req)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode, string(body)
}

// scrape reads /metrics and parses it as Prometheus does.
func (s *opsServer) scrape() scraped {
	s.t.Helper()
	code, body := s.get("/metrics")
	if code != http.StatusOK {
		s.t.Fatalf("GET /metrics: %d %s", code, body)
	}
	return parseMetrics(s.t, body)
}

// scraped is a parsed scrape.
type scraped map[string]*dto.MetricFamily

func parseMetrics(t *testing.T, body string) scraped {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return mfs
}

// value is the sum of the samples of family name whose labels include
// labels ("k=v"); a histogram counts its observations. ok is false when
// no sample matches.
func (m scraped) value(name string, labels ...string) (v float64, ok bool) {
	mf := m[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, metric := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range metric.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for _, l := range labels {
			k, want, _ := strings.Cut(l, "=")
			if have[k] != want {
				continue next
			}
		}
		ok = true
		switch {
		case metric.Counter != nil:
			v += metric.Counter.GetValue()
		case metric.Gauge != nil:
			v += metric.Gauge.GetValue()
		case metric.Histogram != nil:
			v += float64(metric.Histogram.GetSampleCount())
		case metric.Untyped != nil:
			v += metric.Untyped.GetValue()
		}
	}
	return v, ok
}

// must is value that fails the test when no sample matches.
func (m scraped) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := m.value(name, labels...)
	if !ok {
		t.Fatalf("no sample of %s%v in the scrape", name, labels)
	}
	return v
}

func TestMetricsMoveWithTraffic(t *testing.T) {
	s := startOpsServer(t, &MetricsOptions{TableCacheFor: time.Nanosecond}, nil)
	ctx := ctxT(t)
	before := s.scrape()
	for _, name := range []string{"go_goroutines", "process_start_time_seconds", "tsflight_scan_slots", "tsflight_scan_slots_in_use", "tsflight_stream_budget_held_bytes"} {
		s.scrape().must(t, name)
	}
	if v := before.must(t, "tsflight_rows_received_total", "via=doput"); v != 0 {
		t.Fatalf("rows received before any put: %v", v)
	}
	if v := before.must(t, "tsflight_scan_slots"); v != float64(runtime.GOMAXPROCS(0)) {
		t.Fatalf("tsflight_scan_slots %v, want GOMAXPROCS %d", v, runtime.GOMAXPROCS(0))
	}

	s.createTSBS(ctx, "cpu")
	rows := genRows(t0, 50, 4)
	s.mustPut(ctx, pathDesc("cpu"), rows, 60, 2)
	after := s.scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tsflight_rows_received_total", []string{"via=doput"}, float64(len(rows))},
		{"tsflight_append_commits_total", nil, 1},
		{"tsflight_append_commit_retries_total", nil, 0},
		{"tsflight_append_commit_conflicts_total", nil, 0},
		{"tsflight_grpc_calls_total", []string{"method=DoPut", "code=OK"}, 1},
		{"tsflight_grpc_calls_total", []string{"method=DoAction", "code=OK"}, 1},
		{"tsflight_grpc_call_duration_seconds", []string{"method=DoPut"}, 1},
		{"tsflight_grpc_open_streams", []string{"method=DoPut"}, 0},
		{"tsflight_tables", nil, 1},
		{"tsflight_table_rows", []string{"table=cpu"}, float64(len(rows))},
		{"tsflight_table_segments", []string{"table=cpu"}, 1},
		{"tsflight_table_version", []string{"table=cpu"}, 2},
	} {
		if got := after.must(t, c.name, c.labels...); got != c.want {
			t.Errorf("after the put: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The put's batches are about 60 rows of 5 columns: several KiB.
	if in := after.must(t, "tsflight_grpc_received_bytes_total", "method=DoPut"); in < 5000 {
		t.Errorf("DoPut received %v bytes, want the batches' several KiB", in)
	}
	if b := after.must(t, "tsflight_table_bytes", "table=cpu"); b <= 0 {
		t.Errorf("tsflight_table_bytes of cpu = %v, want the segment's size", b)
	}

	f, err := s.fetchAll(ctx, s.info(ctx, pathDesc("cpu")))
	if err != nil || len(f.rows) != len(rows) {
		t.Fatalf("scan: %v, %d rows", err, len(f.rows))
	}
	read := s.scrape()
	if got := read.must(t, "tsflight_rows_sent_total", "via=doget"); got != float64(len(rows)) {
		t.Errorf("rows sent %v, want %d", got, len(rows))
	}
	if out := read.must(t, "tsflight_grpc_sent_bytes_total", "method=DoGet"); out < 5000 {
		t.Errorf("DoGet sent %v bytes, want the rows' several KiB", out)
	}
	if n := read.must(t, "tsflight_grpc_calls_total", "method=GetFlightInfo", "code=OK"); n != 1 {
		t.Errorf("GetFlightInfo OK calls %v, want 1", n)
	}

	// Failing calls count under their codes: a ticket for a table that
	// does not exist, a FlightInfo of one.
	v := uint64(1)
	_, err = s.doGet(ctx, &flight.Ticket{Ticket: encodeTicket(&ticket{ScanRequest: ScanRequest{Table: "nosuch", Version: &v}, Parts: 1})})
	wantCode(t, "DoGet of an unknown table", err, codes.NotFound, `"nosuch"`)
	_, err = s.client.GetFlightInfo(ctx, pathDesc("nosuch"))
	wantCode(t, "GetFlightInfo of an unknown table", err, codes.NotFound, `"nosuch"`)
	failed := s.scrape()
	if n := failed.must(t, "tsflight_grpc_calls_total", "method=DoGet", "code=NotFound"); n != 1 {
		t.Errorf("DoGet NotFound calls %v, want 1", n)
	}
	if n := failed.must(t, "tsflight_grpc_calls_total", "method=GetFlightInfo", "code=NotFound"); n != 1 {
		t.Errorf("GetFlightInfo NotFound calls %v, want 1", n)
	}
	if got := failed.must(t, "tsflight_rows_sent_total", "via=doget"); got != float64(len(rows)) {
		t.Errorf("rows sent %v after failed calls, want still %d", got, len(rows))
	}
}

// A stream is open from its first message to its end: the gauge goes up
// while a DoPut is open and back to 0 when it ends.
func TestMetricsOpenStreams(t *testing.T) {
	s := startOpsServer(t, nil, nil)
	ctx := ctxT(t)
	s.createTSBS(ctx, "cpu")
	stream, err := s.client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(s.cliMem))
	w.SetFlightDescriptor(pathDesc("cpu"))
	batches := buildBatches(s.cliMem, genRows(t0, 10, 2), 20)
	defer releaseAll(batches)
	if err := w.Write(batches[0]); err != nil {
		t.Fatal(err)
	}
	open := func() float64 {
		v, _ := s.scrape().value("tsflight_grpc_open_streams", "method=DoPut")
		return v
	}
	if !waitFor(5*time.Second, func() bool { return open() == 1 }) {
		t.Fatalf("open DoPut streams %v while one is open, want 1", open())
	}
	w.Close()
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := testkit.Drain(stream.Recv); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return open() == 0 }) {
		t.Fatalf("open DoPut streams %v after it ended, want 0", open())
	}
}

// Tables beyond MaxTables are summed under _other: the series stay
// bounded however many tables the root holds.
func TestMetricsTablesBounded(t *testing.T) {
	s := startOpsServer(t, &MetricsOptions{MaxTables: 1, TableCacheFor: time.Nanosecond}, nil)
	ctx := ctxT(t)
	for i, name := range []string{"a", "b", "c"} {
		s.createTSBS(ctx, name)
		s.mustPut(ctx, pathDesc(name), genRows(t0, 5*(i+1), 2), 100, 2)
	}
	m := s.scrape()
	if got := len(m["tsflight_table_rows"].GetMetric()); got != 2 {
		t.Fatalf("%d series of tsflight_table_rows, want 2 (a and _other)", got)
	}
	if v := m.must(t, "tsflight_table_rows", "table=a"); v != 10 {
		t.Errorf("rows of a %v, want 10", v)
	}
	if v := m.must(t, "tsflight_table_rows", "table="+OtherTables); v != 20+30 {
		t.Errorf("rows of _other %v, want 50 (b and c)", v)
	}
	if v := m.must(t, "tsflight_table_segments", "table="+OtherTables); v != 2 {
		t.Errorf("segments of _other %v, want 2", v)
	}
	if _, ok := m.value("tsflight_table_version", "table="+OtherTables); ok {
		t.Error("_other has a version; versions do not add up")
	}
	if v := m.must(t, "tsflight_tables"); v != 3 {
		t.Errorf("tsflight_tables %v, want 3", v)
	}
	if _, err := NewMetrics(s.svc, &MetricsOptions{MaxTables: -1}); err == nil || !strings.Contains(err.Error(), "MaxTables must not be negative") {
		t.Errorf("MaxTables -1: %v, want refused", err)
	}
}

// Maintenance's backlog and last run are per table.
func TestMetricsMaintenance(t *testing.T) {
	s := startOpsServer(t, &MetricsOptions{TableCacheFor: time.Nanosecond}, nil)
	ctx := ctxT(t)
	s.createTSBS(ctx, "cpu")
	for i := range 3 {
		s.mustPut(ctx, pathDesc("cpu"), genRows(t0.Add(time.Duration(i)*time.Hour), 5, 2), 100, uint64(2+i))
	}
	m := s.scrape()
	if v := m.must(t, "tsflight_maintenance_enabled"); v != 0 {
		t.Errorf("maintenance_enabled %v without RunMaintenance, want 0", v)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.svc.RunMaintenance(mctx, &MaintenanceOptions{Interval: 20 * time.Millisecond, MinSmallSegments: 2, QuietAfter: time.Millisecond})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if !waitFor(20*time.Second, func() bool {
		_, ran := s.scrape().value("tsflight_maintenance_last_run_timestamp_seconds", "table=cpu")
		return ran
	}) {
		t.Fatal("no maintenance_last_run_timestamp_seconds for cpu after maintenance ran")
	}
	m = s.scrape()
	if v := m.must(t, "tsflight_maintenance_enabled"); v != 1 {
		t.Errorf("maintenance_enabled %v while it runs, want 1", v)
	}
	if !waitFor(20*time.Second, func() bool { return s.scrape().must(t, "tsflight_table_segments", "table=cpu") == 1 }) {
		t.Fatalf("cpu still has %v segments", s.scrape().must(t, "tsflight_table_segments", "table=cpu"))
	}
	m = s.scrape()
	if v := m.must(t, "tsflight_maintenance_pending_segments", "table=cpu"); v != 0 {
		t.Errorf("pending segments %v after the compaction, want 0", v)
	}
	last := m.must(t, "tsflight_maintenance_last_run_timestamp_seconds", "table=cpu")
	if now := float64(time.Now().Unix()); last < now-60 || last > now+1 {
		t.Errorf("last run at %v, now is %v", last, now)
	}
}

func TestOpsHealthAndReadiness(t *testing.T) {
	s := startOpsServer(t, nil, nil)
	if code, body := s.get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q, want 200 ok", code, body)
	}
	if code, body := s.get("/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz: %d %q, want 200 ready", code, body)
	}

	// The root replaced by a file, then moved away: not ready, saying why
	// in one line without the root's path; restored: ready again.
	aside := s.root + ".aside"
	if err := os.Rename(s.root, aside); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			os.Remove(s.root)
			if err := os.Rename(aside, s.root); err != nil {
				t.Fatal(err)
			}
			restored = true
		}
	}
	defer restore()
	code, body := s.get("/readyz")
	if code != 503 || !strings.HasPrefix(body, "not ready: the root directory cannot be listed: ") || !strings.Contains(body, "no such file") {
		t.Fatalf("/readyz without the root: %d %q, want 503 naming the root", code, body)
	}
	if err := os.WriteFile(s.root, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, body = s.get("/readyz")
	if code != 503 || !strings.Contains(body, "the root directory cannot be listed") || !strings.Contains(body, "not a directory") {
		t.Fatalf("/readyz with a file for the root: %d %q, want 503", code, body)
	}
	if strings.Count(body, "\n") != 1 || strings.Contains(body, s.root) {
		t.Fatalf("/readyz reason %q: want one line without the root's path", body)
	}
	if code, _ := s.get("/healthz"); code != 200 {
		t.Fatalf("/healthz with the root gone: %d, want 200 (the process still serves)", code)
	}
	if v := s.scrape().must(t, "tsflight_tables_list_failed"); v != 1 {
		t.Errorf("tables_list_failed %v without the root, want 1", v)
	}
	restore()
	if code, body := s.get("/readyz"); code != 200 {
		t.Fatalf("/readyz with the root back: %d %q, want 200", code, body)
	}

	s.ops.BeginShutdown()
	if code, body := s.get("/healthz"); code != 503 || body != "shutting down\n" {
		t.Fatalf("/healthz after BeginShutdown: %d %q, want 503 shutting down", code, body)
	}
	if code, body := s.get("/readyz"); code != 503 || body != "not ready: shutting down\n" {
		t.Fatalf("/readyz after BeginShutdown: %d %q, want 503", code, body)
	}
}

// Only GET (and HEAD) are served, only the routes that exist, and later
// features can add routes on the same mux.
func TestOpsRoutes(t *testing.T) {
	s := startOpsServer(t, nil, nil)
	res, err := s.http.Client().Post(s.http.URL+"/metrics", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(res.Header.Get("Allow"), "GET") {
		t.Fatalf("POST /metrics: %d (Allow %q), want 405 allowing GET", res.StatusCode, res.Header.Get("Allow"))
	}
	if code, _ := s.get("/nosuch"); code != http.StatusNotFound {
		t.Fatalf("GET /nosuch: %d, want 404", code)
	}
	s.ops.Handle("GET /console/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "console") }))
	if code, body := s.get("/console/"); code != 200 || body != "console" {
		t.Fatalf("an added route: %d %q", code, body)
	}
	// Without Metrics there is no /metrics.
	bare := httptest.NewServer(NewOpsHandler(s.svc, nil))
	defer bare.Close()
	r2, err := bare.Client().Get(bare.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics without Metrics: %d, want 404", r2.StatusCode)
	}
}

// With authentication on, /metrics (which names the tables) asks for a
// token, as Flight calls do; the probes stay open.
func TestOpsMetricsNeedToken(t *testing.T) {
	tok := newCatTokens(t)
	s := startOpsServer(t, nil, &OpsOptions{Auth: guard.NewAuth(guard.AuthOptions{Classify: Scopes(), Tokens: tok.set.Load})})
	for _, c := range []struct {
		header, want string
	}{
		{"", "authentication required"},
		{"Authorization: Bearer not-a-token-of-this-server", "unknown token"},
		{"Authorization: Bearer " + tok.expired, "expired"},
		{"Authorization: Token abc", `scheme "Token" is not supported`},
	} {
		var hs []string
		if c.header != "" {
			hs = append(hs, c.header)
		}
		code, body := s.get("/metrics", hs...)
		if code != http.StatusUnauthorized || !strings.Contains(body, c.want) {
			t.Errorf("/metrics with %q: %d %q, want 401 saying %q", c.header, code, body, c.want)
		}
		for _, secret := range []string{tok.read, tok.write, tok.expired} {
			if strings.Contains(body, secret) {
				t.Errorf("/metrics with %q quotes a secret: %q", c.header, body)
			}
		}
	}
	for _, secret := range []string{tok.read, tok.write} {
		code, body := s.get("/metrics", "Authorization: Bearer "+secret)
		if code != 200 {
			t.Fatalf("/metrics with a valid token: %d %q", code, body)
		}
		parseMetrics(t, body).must(t, "tsflight_tables")
	}
	if code, _ := s.get("/metrics", "Authorization: Basic "+basicOf("prometheus", tok.read)); code != 200 {
		t.Errorf("/metrics with Basic credentials: %d, want 200", code)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := s.get(p); code != 200 {
			t.Errorf("%s without a token: %d, want 200", p, code)
		}
	}
}

// The HTTP endpoints and the metrics leave no goroutine behind.
func TestOpsNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Run("server", func(t *testing.T) {
		s := startOpsServer(t, nil, nil)
		ctx := ctxT(t)
		s.createTSBS(ctx, "cpu")
		s.mustPut(ctx, pathDesc("cpu"), genRows(t0, 5, 2), 100, 2)
		s.scrape()
		s.get("/readyz")
		s.http.Client().CloseIdleConnections()
	})
	if !waitFor(5*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after the server stopped, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
	}
}

// Commit races count from the append's result: its retries, and an append
// that failed on a conflict.
func TestMetricsCommitRaces(t *testing.T) {
	s := startOpsServer(t, nil, nil)
	s.svc.countAppend(&tableformat.AppendResult{Rows: 5, Retries: 3}, nil)
	s.svc.countAppend(nil, fmt.Errorf("%w: gave up after 64 retries", tableformat.ErrConflict))
	s.svc.countAppend(nil, errors.New("some other failure"))
	m := s.scrape()
	for name, want := range map[string]float64{"tsflight_append_commits_total": 1, "tsflight_append_commit_retries_total": 3, "tsflight_append_commit_conflicts_total": 1} {
		if got := m.must(t, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// NewMetrics refuses what it cannot count, and Register what the registry
// holds already.
func TestMetricsRefusals(t *testing.T) {
	if _, err := NewMetrics(nil, nil); err == nil || !strings.Contains(err.Error(), "metrics: no service") {
		t.Errorf("NewMetrics(nil): %v", err)
	}
	s := startOpsServer(t, nil, nil)
	c := newServiceCollector(s.svc, nil)
	if err := s.metrics.Register(c); err == nil {
		t.Error("registering the service's metrics twice succeeded")
	}
}

// With client certificates as the only authentication, a request that
// came without a verified certificate (not over TLS) is refused.
func TestOpsMetricsNeedClientCertificate(t *testing.T) {
	s := startOpsServer(t, nil, &OpsOptions{Auth: guard.NewAuth(guard.AuthOptions{Classify: Scopes(), ClientCertificates: true})})
	if code, body := s.get("/metrics"); code != http.StatusUnauthorized || !strings.Contains(body, "a verified client certificate is required") {
		t.Fatalf("/metrics without a certificate: %d %q, want 401", code, body)
	}
	if code, _ := s.get("/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
}
