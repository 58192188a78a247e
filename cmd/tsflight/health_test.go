package main

// tsflight serve's gRPC health service, on a server with tokens: checked
// from arrow-go's connection (a Flight client and a health client on one
// gRPC connection) and from Python (grpcio's health stub), without a
// token, SERVING while serving and NOT_SERVING, seen by a Watch, as soon
// as SIGTERM starts the shutdown that an open DoPut holds; the exit is
// still clean. And --root refuses URLs.

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
)

// startTokenServer serves a fresh root with a tokens file holding a
// write token, on loopback; it returns the server and the token.
func startTokenServer(t *testing.T, extra ...string) (*serverProc, string) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	write := newToken(t, tokens, "write", "writer")
	args := append([]string{"--root", t.TempDir(), "--listen", "127.0.0.1:0", "--auth-tokens", tokens, "--log-level", "trace"}, extra...)
	return startServer(t, nil, args...), write
}

func TestServeHealth(t *testing.T) {
	srv, write := startTokenServer(t)
	ctx := testCtx(t)
	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fl := flight.NewClientFromConn(conn, nil)
	hc := healthpb.NewHealthClient(conn)

	for _, service := range []string{"", flightserver.FlightServiceName} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) without a token: %v, %v; want SERVING", service, resp.GetStatus(), err)
		}
	}
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "tsflight"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `unknown service "tsflight"`) {
		t.Fatalf("Check of an unknown service: %v", err)
	}
	// The same connection without a token is refused Flight calls.
	if _, err := fl.GetFlightInfo(ctx, pathDesc("t")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("GetFlightInfo without a token: %v, want Unauthenticated", err)
	}

	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v, %v; want SERVING", resp.GetStatus(), err)
	}
	// A DoPut in flight holds the shutdown open.
	wctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+write)
	p := newPut(t, wctx, fl, "t", 10)
	srv.sigtermDuringPut()
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after SIGTERM: %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}
	if _, err := watch.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("Watch after NOT_SERVING: %v, want Unavailable", err)
	}
	// A check racing the stop: NOT_SERVING, or refused as the connection
	// goes away; never SERVING.
	if resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check during the shutdown: %v", resp.GetStatus())
	}
	select {
	case <-srv.done:
		t.Fatal("the server exited while a DoPut was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	if err := p.write(batch(10, 10)); err != nil {
		t.Fatal(err)
	}
	res, err := p.finish()
	if err != nil {
		t.Fatalf("DoPut during the shutdown: %v", err)
	}
	if num(t, res, "rows") != 20 {
		t.Fatalf("PutResult %v, want 20 rows", res)
	}
	if code := srv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0 (the watch must not hold the stop)", code)
	}
}

// healthPython returns the interpreter with grpcio and
// grpcio-health-checking, or "" (the test skips) when they are missing
// outside CI.
func healthPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TSFLIGHT_PYTHON")
	if py == "" {
		py = "python3"
	}
	if out, err := exec.Command(py, "-c", "import grpc, grpc_health.v1.health_pb2_grpc").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must have grpcio and grpcio-health-checking (.ci/requirements.txt): %v: %s", err, out)
		}
		t.Skipf("grpcio or grpcio-health-checking is not installed (%v): python3 -m pip install grpcio grpcio-health-checking", err)
	}
	return py
}

func TestServeHealthPython(t *testing.T) {
	py := healthPython(t)
	script := filepath.Join("..", "..", "examples", "python", "health_check.py")
	srv, _ := startTokenServer(t)
	out, err := exec.Command(py, script, srv.addr).CombinedOutput()
	if err != nil || string(out) != "\"\" SERVING\narrow.flight.protocol.FlightService SERVING\n" {
		t.Fatalf("health_check.py: %v\n%s", err, out)
	}
	out, err = exec.Command(py, script, srv.addr, "--unknown", "nope").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), `NOT_FOUND unknown service "nope": this server reports "" (the whole server) and "arrow.flight.protocol.FlightService"`) {
		t.Fatalf("health_check.py --unknown: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script, srv.addr, "--watch")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("health_check.py --watch ended early (%v); stderr:\n%s", lines.Err(), stderr.String())
		}
		return lines.Text()
	}
	if l := next(); l != "SERVING" {
		t.Fatalf("watch: first %q, want SERVING", l)
	}
	srv.signal(syscall.SIGTERM)
	if l := next(); l != "NOT_SERVING" {
		t.Fatalf("watch after SIGTERM: %q, want NOT_SERVING", l)
	}
	if l := next(); l != "ended UNAVAILABLE" {
		t.Fatalf("watch after NOT_SERVING: %q, want ended UNAVAILABLE", l)
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("health_check.py --watch: %v; stderr:\n%s", err, stderr.String())
	}
	if code := srv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
}

// serve refuses a root that is a URL (it made a directory named "s3:"),
// naming the scheme but not the rest (a query may hold credentials), with
// what to do instead; nothing is created.
func TestServeRefusesURLRoot(t *testing.T) {
	for _, c := range []struct {
		args  []string
		env   []string
		frags []string
	}{
		{[]string{"--root", "s3://bucket/x?endpoint=http://minio:9000&secret_key=abc"}, nil,
			[]string{`tsflight serve: --root s3://… is a URL (scheme "s3")`, "local directory only", "object storage is planned", "mount the bucket", "give a local path"}},
		{nil, []string{"TSFLIGHT_ROOT=gs://bucket/tables"}, []string{`--root gs://… is a URL (scheme "gs")`}},
		{[]string{"--root", "file:///srv/tsflight"}, nil, []string{`--root file://… is a URL (scheme "file")`, "give the path itself: /srv/tsflight"}},
	} {
		dir := t.TempDir()
		cmd := exec.Command(binPath, append([]string{"serve", "--listen", "127.0.0.1:0"}, c.args...)...)
		cmd.Dir = dir
		cmd.Env = cleanEnv(c.env...)
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code != exitUsage {
			t.Fatalf("serve %v %v: exit %d, want %d (usage); output:\n%s", c.args, c.env, code, exitUsage, out)
		}
		for _, f := range append(c.frags, "tsflight serve: ") {
			if !strings.Contains(string(out), f) {
				t.Errorf("serve %v %v: output lacks %q:\n%s", c.args, c.env, f, out)
			}
		}
		for _, secret := range []string{"secret_key", "bucket/x", "minio"} {
			if strings.Contains(string(out), secret) {
				t.Errorf("serve %v: the message repeats the URL (%q):\n%s", c.args, secret, out)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("serve %v %v created %v in its working directory", c.args, c.env, entries)
		}
	}
}
