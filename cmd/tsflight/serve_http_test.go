package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/tlstest"
)

var httpListeningRE = regexp.MustCompile(`tsflight http listening on (\S+)`)

// opsURL is the URL of the server's HTTP endpoints, from its log.
func (p *serverProc) opsURL() string {
	p.t.Helper()
	m := httpListeningRE.FindStringSubmatch(p.waitLog("tsflight http listening on ", 5*time.Second))
	if m == nil {
		p.t.Fatal("no HTTP address in the log")
	}
	return m[1]
}

// viaLoopback is url (of endpoints bound to every interface) with
// 127.0.0.1 for its host: tests talk to this machine only.
func viaLoopback(t *testing.T, url string) string {
	t.Helper()
	scheme, hostport, _ := strings.Cut(url, "://")
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("URL %q: %v", url, err)
	}
	return scheme + "://127.0.0.1:" + port
}

// httpGet fetches url with the given headers ("Name: value") and returns
// the status code and body.
func httpGet(t *testing.T, c *http.Client, url string, headers ...string) (int, string) {
	t.Helper()
	return httpDo(t, c, http.MethodGet, url, headers...)
}

func httpDo(t *testing.T, c *http.Client, method, url string, headers ...string) (int, string) {
	t.Helper()
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

// metricValue is the sum of the samples of name in a /metrics body whose
// labels include labels ("k=v").
func metricValue(t *testing.T, body, name string, labels ...string) (float64, bool) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	var v float64
	found := false
next:
	for _, m := range mfs[name].GetMetric() {
		for _, l := range labels {
			k, want, _ := strings.Cut(l, "=")
			if !hasLabel(m, k, want) {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v, found
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == k && lp.GetValue() == v {
			return true
		}
	}
	return false
}

// TestServeHTTPEndpoints: serve --http answers the probes and the metrics
// move with Flight traffic; /readyz follows the root; once SIGTERM
// arrives both probes answer 503 while calls in flight finish.
func TestServeHTTPEndpoints(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	srv := startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "trace")
	url := srv.opsURL()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("HTTP endpoints at %q, want http://127.0.0.1:PORT", url)
	}
	if code, body := httpGet(t, nil, url+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(t, nil, url+"/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}

	ctx := testCtx(t)
	c := dial(t, srv.addr)
	p := newPut(t, ctx, c, "metrics", 100)
	if _, err := p.finish(); err != nil {
		t.Fatal(err)
	}
	if rows, _ := scanRows(t, ctx, c, pathDesc("metrics")); rows != 100 {
		t.Fatalf("scan: %d rows", rows)
	}
	_, err := c.GetFlightInfo(ctx, pathDesc("nosuch"))
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetFlightInfo of an unknown table: %v", err)
	}
	code, body := httpGet(t, nil, url+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tsflight_rows_received_total", []string{"via=doput"}, 100},
		{"tsflight_rows_sent_total", []string{"via=doget"}, 100},
		{"tsflight_append_commits_total", nil, 1},
		{"tsflight_grpc_calls_total", []string{"method=DoPut", "code=OK"}, 1},
		{"tsflight_grpc_calls_total", []string{"method=GetFlightInfo", "code=NotFound"}, 1},
		{"tsflight_grpc_open_streams", []string{"method=DoGet"}, 0},
		{"tsflight_table_rows", []string{"table=metrics"}, 100},
		{"tsflight_calls_refused_total", nil, 0},
		{"tsflight_maintenance_enabled", nil, 1},
	} {
		if v, ok := metricValue(t, body, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if v, ok := metricValue(t, body, "tsflight_grpc_sent_bytes_total", "method=DoGet"); !ok || v < 1000 {
		t.Errorf("DoGet sent %v bytes, want the 100 rows", v)
	}
	if v, ok := metricValue(t, body, "tsflight_calls_in_flight"); !ok || v != 0 {
		t.Errorf("calls_in_flight %v (present %v) while no call runs, want 0", v, ok)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := metricValue(t, body, name); !ok {
			t.Errorf("no %s: the Go and process collectors are registered", name)
		}
	}

	// The root moved away: not ready, and why; back: ready.
	if err := os.Rename(root, root+".aside"); err != nil {
		t.Fatal(err)
	}
	code, body = httpGet(t, nil, url+"/readyz")
	os.Rename(root+".aside", root)
	if code != 503 || !strings.HasPrefix(body, "not ready: the root directory cannot be listed") || strings.Contains(body, root) {
		t.Fatalf("/readyz without the root: %d %q", code, body)
	}
	if code, _ := httpGet(t, nil, url+"/readyz"); code != 200 {
		t.Fatalf("/readyz with the root back: %d", code)
	}

	// A DoPut in flight holds the graceful shutdown open: meanwhile the
	// probes say the server is going away.
	p = openPut(t, ctx, c, "metrics")
	if err := p.write(batch(100, 10)); err != nil {
		t.Fatal(err)
	}
	srv.sigtermDuringPut()
	srv.waitLog("shutting down", 10*time.Second)
	if code, body := httpGet(t, nil, url+"/healthz"); code != 503 || body != "shutting down\n" {
		t.Errorf("/healthz during the shutdown: %d %q, want 503", code, body)
	}
	if code, body := httpGet(t, nil, url+"/readyz"); code != 503 || body != "not ready: shutting down\n" {
		t.Errorf("/readyz during the shutdown: %d %q, want 503", code, body)
	}
	if _, err := p.finish(); err != nil {
		t.Fatalf("the DoPut in flight: %v", err)
	}
	if code := srv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("the HTTP endpoints still answer after the server exited")
	}
}

// TestServeHTTPGuard: --http follows the rule of --listen: beyond
// loopback addresses only with authentication or --insecure.
func TestServeHTTPGuard(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		_, stderr, code := runCLI(t, nil, "serve", "--root", t.TempDir(), "--http", addr)
		if code != exitUsage || !strings.Contains(stderr, "--http "+addr+" is reachable from other machines and no authentication is configured") ||
			!strings.Contains(stderr, "--insecure") || !strings.Contains(stderr, "127.0.0.1:9090") {
			t.Errorf("serve --http %s: exit %d, stderr %q; want a usage error", addr, code, stderr)
		}
	}
	_, stderr, code := runCLI(t, nil, "serve", "--root", t.TempDir(), "--http", "9090")
	if code != exitUsage || !strings.Contains(stderr, "--http 9090: want HOST:PORT") {
		t.Errorf("serve --http 9090: exit %d, stderr %q; want a usage error", code, stderr)
	}
	_, stderr, code = runCLI(t, []string{"TSFLIGHT_HTTP=0.0.0.0:0"}, "serve", "--root", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "--http 0.0.0.0:0 is reachable") {
		t.Errorf("TSFLIGHT_HTTP=0.0.0.0:0: exit %d, stderr %q; want a usage error", code, stderr)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, stderr, code = runCLI(t, nil, "serve", "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--http", busy.Addr().String())
	if code != exitFail || !strings.Contains(stderr, "--http "+busy.Addr().String()+": ") || !strings.Contains(stderr, "address already in use") {
		t.Errorf("serve --http on a busy port: exit %d, stderr %q", code, stderr)
	}

	srv := startServer(t, nil, "--root", t.TempDir(), "--http", "0.0.0.0:0", "--insecure")
	url := viaLoopback(t, srv.opsURL())
	if code, _ := httpGet(t, nil, url+"/metrics"); code != 200 {
		t.Errorf("--insecure: /metrics %d, want 200 (no authentication)", code)
	}
	srv.stop()
}

// With tokens and TLS, the HTTP endpoints speak HTTPS with the Flight
// port's certificate and /metrics asks for a token; the probes stay open.
func TestServeHTTPWithTLSAndTokens(t *testing.T) {
	ca := tlstest.NewCA(t, "tsflight-test")
	cert, key := ca.Issue(t, "server", true)
	tokens := filepath.Join(t.TempDir(), "tokens")
	reader := newToken(t, tokens, "read", "prometheus")
	srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "0.0.0.0:0",
		"--auth-tokens", tokens, "--tls-cert", cert, "--tls-key", key)
	url := viaLoopback(t, srv.opsURL())
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("HTTP endpoints at %q, want https", url)
	}
	pem, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	if code, body := httpGet(t, client, url+"/metrics"); code != 401 || !strings.Contains(body, "authentication required") {
		t.Errorf("/metrics without a token: %d %q, want 401", code, body)
	}
	if code, body := httpGet(t, client, url+"/metrics", "Authorization: Bearer "+reader); code != 200 || !strings.Contains(body, "tsflight_tables") {
		t.Errorf("/metrics with the read token: %d", code)
	}
	if code, _ := httpGet(t, client, url+"/healthz"); code != 200 {
		t.Errorf("/healthz over TLS without a token: %d, want 200", code)
	}
	// A call the auth middleware refuses is counted with its code: the
	// metrics run before the middleware.
	fc := secureClient{t: t, uri: "grpc+tls://" + srv.addr, caFile: ca.File}
	fc.refused(reader, []string{"action create-table needs write scope", "(permission denied)"}, createArgs("t1")...)
	_, body := httpGet(t, client, url+"/metrics", "Authorization: Bearer "+reader)
	if v, ok := metricValue(t, body, "tsflight_grpc_calls_total", "method=DoAction", "code=PermissionDenied"); !ok || v != 1 {
		t.Errorf("DoAction PermissionDenied calls %v (present %v), want 1", v, ok)
	}
	// A call without a token is refused by the authentication tap, before
	// any interceptor: it is counted all the same.
	fc.refused("", []string{"authentication required"}, "tables")
	_, body = httpGet(t, client, url+"/metrics", "Authorization: Bearer "+reader)
	if v, ok := metricValue(t, body, "tsflight_grpc_calls_total", "method=ListFlights", "code=Unauthenticated"); !ok || v != 1 {
		t.Errorf("ListFlights Unauthenticated calls %v (present %v), want 1", v, ok)
	}
	if logs := srv.stderr.String(); strings.Contains(logs, reader) {
		t.Error("the log quotes the token")
	}
	srv.stop()
}

func TestCheckHTTPBound(t *testing.T) {
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}
	lan := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 9090}
	for _, c := range []struct {
		bound          net.Addr
		auth, insecure bool
		refused        bool
	}{
		{lo, false, false, false},
		{lan, false, false, true},
		{&net.TCPAddr{IP: net.IPv4zero}, false, false, true},
		{lan, true, false, false},
		{lan, false, true, false},
	} {
		err := checkHTTPBound("ops.example:9090", c.bound, c.auth, c.insecure)
		if (err != nil) != c.refused || (err != nil && !strings.Contains(err.Error(), "--http ops.example:9090 bound")) {
			t.Errorf("checkHTTPBound(%v, auth=%v, insecure=%v) = %v, want refused=%v", c.bound, c.auth, c.insecure, err, c.refused)
		}
	}
}
