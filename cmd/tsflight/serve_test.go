package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func pathDesc(table string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}}
}

func TestServeRoundTrip(t *testing.T) {
	root := t.TempDir()
	srv := startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0")
	if !strings.HasPrefix(srv.addr, "127.0.0.1:") || strings.HasSuffix(srv.addr, ":0") {
		t.Fatalf("listening address %q: want the bound 127.0.0.1 port", srv.addr)
	}
	ctx := testCtx(t)
	c := dial(t, srv.addr)

	p := newPut(t, ctx, c, "metrics", 100)
	if err := p.write(batch(100, 50)); err != nil {
		t.Fatal(err)
	}
	res, err := p.finish()
	if err != nil {
		t.Fatal(err)
	}
	if num(t, res, "version") != 2 || num(t, res, "rows") != 150 {
		t.Fatalf("PutResult %v: want version 2, 150 rows", res)
	}

	if rows, sum := scanRows(t, ctx, c, pathDesc("metrics")); rows != 150 || sum != 149*150/2 {
		t.Fatalf("full scan: %d rows, sum %v; want 150, %d", rows, sum, 149*150/2)
	}
	cmd, _ := json.Marshal(map[string]any{"table": "metrics", "start": "2024-06-01T00:01:00Z", "end": "2024-06-01T00:02:00Z"})
	if rows, sum := scanRows(t, ctx, c, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}); rows != 6 || sum != 6+7+8+9+10+11 {
		t.Fatalf("range scan: %d rows, sum %v; want 6, 51", rows, sum)
	}
	d := mustAction(t, ctx, c, "describe-table", map[string]any{"table": "metrics"})
	if num(t, d, "rows") != 150 || num(t, d, "version") != 2 {
		t.Fatalf("describe-table: %v", d)
	}

	srv.stop()
	log := srv.stderr.String()
	if strings.Contains(log, "[ERROR]") || !strings.Contains(log, "stopped") {
		t.Fatalf("log:\n%s", log)
	}
}

// A DoPut in flight when SIGTERM arrives finishes and commits; then the
// server exits 0.
func TestServeShutdownLetsCallsFinish(t *testing.T) {
	root := t.TempDir()
	srv := startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0", "--log-level", "trace", "--shutdown-timeout", "30s")
	ctx := testCtx(t)
	c := dial(t, srv.addr)
	p := newPut(t, ctx, c, "t", 10)
	srv.sigtermDuringPut()
	srv.waitLog("shutting down", 10*time.Second)
	if err := p.write(batch(10, 10)); err != nil {
		t.Fatal(err)
	}
	res, err := p.finish()
	if err != nil {
		t.Fatalf("DoPut during a graceful shutdown: %v", err)
	}
	if num(t, res, "rows") != 20 || num(t, res, "version") != 2 {
		t.Fatalf("PutResult %v: want version 2, 20 rows", res)
	}
	if code := srv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

// After the shutdown deadline (or on a second signal) calls in flight are
// cancelled: the DoPut fails, nothing is committed, no file is left, and the
// exit code is 1.
func TestServeHardStopCancelsPut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout string
		second  bool
	}{
		{"deadline", "300ms", false},
		{"second signal", "30s", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			srv := startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0", "--log-level", "trace", "--shutdown-timeout", tc.timeout)
			ctx := testCtx(t)
			c := dial(t, srv.addr)
			p := newPut(t, ctx, c, "t", 1000)
			srv.sigtermDuringPut()
			if tc.second {
				srv.waitLog("shutting down", 10*time.Second)
				srv.signal(syscall.SIGINT)
			}
			if code := srv.wait(20 * time.Second); code != 1 {
				t.Fatalf("exit code %d after a hard stop, want 1", code)
			}
			srv.waitLog("stopping hard", time.Second)
			p.write(batch(1000, 10)) // the stream is gone; the error shows in finish
			if res, err := p.finish(); err == nil {
				t.Fatalf("DoPut succeeded after a hard stop: %v", res)
			}

			// Nothing was committed and the attempt's files are gone.
			srv2 := startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0")
			d := mustAction(t, ctx, dial(t, srv2.addr), "describe-table", map[string]any{"table": "t"})
			if num(t, d, "version") != 1 || num(t, d, "rows") != 0 {
				t.Fatalf("after the cancelled DoPut: %v; want version 1, 0 rows", d)
			}
			srv2.stop()
			var left []string
			err := filepath.WalkDir(filepath.Join(root, "t"), func(path string, e fs.DirEntry, err error) error {
				if err == nil && !e.IsDir() && strings.HasSuffix(path, ".parquet") {
					left = append(left, path)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Fatalf("files left by the cancelled DoPut: %v", left)
			}
		})
	}
}

func TestServeEnvFallback(t *testing.T) {
	envRoot, flagRoot := t.TempDir(), t.TempDir()
	ctx := testCtx(t)

	srv := startServer(t, []string{"TSFLIGHT_ROOT=" + envRoot, "TSFLIGHT_LISTEN=127.0.0.1:0"})
	createTable(t, ctx, dial(t, srv.addr), "from_env")
	srv.stop()
	if _, err := os.Stat(filepath.Join(envRoot, "from_env", "_timeseries_log")); err != nil {
		t.Fatalf("TSFLIGHT_ROOT was not used: %v", err)
	}

	// Flags win over the environment.
	srv = startServer(t, []string{"TSFLIGHT_ROOT=" + envRoot, "TSFLIGHT_LISTEN=192.0.2.1:1"}, "--root", flagRoot, "--listen", "127.0.0.1:0")
	createTable(t, ctx, dial(t, srv.addr), "from_flag")
	srv.stop()
	if _, err := os.Stat(filepath.Join(flagRoot, "from_flag", "_timeseries_log")); err != nil {
		t.Fatalf("--root was not used: %v", err)
	}
	if _, err := os.Stat(filepath.Join(envRoot, "from_flag")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("TSFLIGHT_ROOT was used although --root was given (%v)", err)
	}
}

func TestServeJSONLogs(t *testing.T) {
	srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug")
	ctx := testCtx(t)
	c := dial(t, srv.addr)
	if _, err := doAction(ctx, c, "describe-table", map[string]any{"table": "missing"}); status.Code(err) != codes.NotFound {
		t.Fatalf("describe-table of a missing table: %v, want NotFound", err)
	}
	srv.stop()

	var messages, modules []string
	for _, line := range strings.Split(strings.TrimSpace(srv.stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q (%v)", line, err)
		}
		for _, k := range []string{"@level", "@message", "@timestamp"} {
			if _, ok := rec[k]; !ok {
				t.Fatalf("log line without %s: %q", k, line)
			}
		}
		messages = append(messages, rec["@message"].(string))
		if m, ok := rec["@module"].(string); ok {
			modules = append(modules, m)
		}
	}
	all := strings.Join(messages, "\n")
	for _, want := range []string{"tsflight listening on " + srv.addr, "DoAction refused", "shutting down", "stopped"} {
		if !strings.Contains(all, want) {
			t.Errorf("no log message %q in:\n%s", want, all)
		}
	}
	if !strings.Contains(strings.Join(modules, " "), "rpc") {
		t.Errorf("no rpc module in %v", modules)
	}
}

// --max-recv-msg-size bounds a batch's body; headers come on top.
func TestServeMaxRecvMsgSize(t *testing.T) {
	srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--max-recv-msg-size", "1MiB")
	ctx := testCtx(t)
	c := dial(t, srv.addr)
	// 65536 rows of two 8-byte columns: a body of exactly 1 MiB.
	p := newPut(t, ctx, c, "t", 1<<16)
	if _, err := p.finish(); err != nil {
		t.Fatalf("a 1 MiB batch with --max-recv-msg-size 1MiB: %v", err)
	}

	p = openPut(t, ctx, c, "t")
	p.write(batch(1<<16, 1<<17)) // 2 MiB; an error shows in finish
	_, err := p.finish()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 2 MiB batch with --max-recv-msg-size 1MiB: %v, want ResourceExhausted", err)
	}
	d := mustAction(t, ctx, c, "describe-table", map[string]any{"table": "t"})
	if num(t, d, "rows") != 1<<16 {
		t.Fatalf("describe-table: %v", d)
	}
	srv.stop()
}

// --request-timeout ends a call whose client went silent, and --max-calls
// refuses calls beyond the limit while it runs; both name their flag.
func TestServeCallLimits(t *testing.T) {
	srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--max-calls", "1", "--request-timeout", "5s", "--log-level", "trace")
	ctx := testCtx(t)
	c := dial(t, srv.addr)
	p := newPut(t, ctx, c, "t", 100)
	// The put is (soon) the one call the server runs: under -race on a
	// loaded machine its headers can take a while to arrive, so wait for
	// the server to log it (the call log runs just before the count).
	srv.waitLog("DoPut started", 30*time.Second)
	var err error
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); {
		if _, err = doAction(ctx, c, "describe-table", map[string]any{"table": "t"}); status.Code(err) == codes.ResourceExhausted {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-calls") {
		t.Fatalf("a second call with --max-calls 1: %v, want ResourceExhausted naming --max-calls", err)
	}
	// The silent put ends at the request timeout, having committed nothing.
	recv, rerr := p.stream.Recv()
	if status.Code(rerr) != codes.DeadlineExceeded {
		t.Fatalf("a silent DoPut with --request-timeout 5s: %v %v, want DeadlineExceeded", recv, rerr)
	}
	var d map[string]any
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if d, err = doAction(ctx, c, "describe-table", map[string]any{"table": "t"}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || num(t, d, "version") != 1 {
		t.Fatalf("describe-table after the timed-out put: %v %v, want version 1", d, err)
	}
	srv.stop()
}

// Failures to start are errors (exit 1), not usage errors.
func TestServeStartFailures(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", t.TempDir(), "--listen", busy.Addr().String()}, "address already in use"},
		{[]string{"--root", t.TempDir(), "--listen", "nonsense"}, "missing port in address"},
		{[]string{"--root", filepath.Join(file, "root")}, "not a directory"},
	} {
		_, stderr, code := runCLI(t, nil, append([]string{"serve"}, tc.args...)...)
		if code != 1 || !strings.HasPrefix(stderr, "tsflight serve: error: ") || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
