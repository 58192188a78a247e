package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsflight/tsflight/internal/testkit"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// binPath is the tsflight binary TestMain builds (with -race when the tests
// run with it, so the server process is checked too, and with the
// duckdb_arrow tag when they run with that).
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tsflight-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "tsflight")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	if sqlEnabled {
		args = append(args, "-tags", "duckdb_arrow")
	}
	gocmd := exec.Command("go", append(args, ".")...)
	if out, err := gocmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building tsflight: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ---- the server process ----

// syncBuffer collects a process's stderr while it runs.
type syncBuffer = testkit.Buffer

type serverProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	stdout *syncBuffer // the connect help; kept apart from the log
	addr   string
	done   chan struct{}
	err    error // from Wait, valid after done
}

var listeningRE = regexp.MustCompile(`tsflight listening on ([^\s"]+)`)

// cleanEnv is the test's environment without TSFLIGHT_ variables, plus env.
// A race-enabled binary would sleep a second at every clean exit; GORACE
// turns that off.
func cleanEnv(env ...string) []string {
	gorace := "atexit_sleep_ms=0"
	var out []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "TSFLIGHT_"):
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		default:
			out = append(out, kv)
		}
	}
	return append(append(out, "GORACE="+gorace), env...)
}

// startServer runs "tsflight serve args..." with the extra environment env
// and waits until it logs its address.
func startServer(t *testing.T, env []string, args ...string) *serverProc {
	t.Helper()
	return startServerWait(t, 20*time.Second, env, args...)
}

// startServerWait is startServer waiting up to wait for the address.
func startServerWait(t *testing.T, wait time.Duration, env []string, args ...string) *serverProc {
	t.Helper()
	p := &serverProc{t: t, stderr: &syncBuffer{}, stdout: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binPath, append([]string{"serve"}, args...)...)
	p.cmd.Env = cleanEnv(env...)
	p.cmd.Stderr = p.stderr
	p.cmd.Stdout = p.stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("server log:\n%s\nserver stdout:\n%s", p.stderr.String(), p.stdout.String())
		}
	})
	line := p.waitLog("tsflight listening on ", wait)
	m := listeningRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no address in %q", line)
	}
	p.addr = m[1]
	return p
}

// waitLog waits until the log holds want and returns the line holding it.
func (p *serverProc) waitLog(want string, timeout time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(line, want) {
				return line
			}
		}
		select {
		case <-p.done:
			p.t.Fatalf("server exited (%v) before logging %q; log:\n%s", p.err, want, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("server did not log %q within %s; log:\n%s", want, timeout, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *serverProc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// wait returns the exit code, failing the test if the process runs longer
// than timeout.
func (p *serverProc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("server still running %s after the signal; log:\n%s", timeout, p.stderr.String())
	}
	return exitCode(p.err)
}

// stop sends SIGTERM and requires a clean exit.
func (p *serverProc) stop() {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	if code := p.wait(20 * time.Second); code != 0 {
		p.t.Fatalf("exit code %d after SIGTERM, want 0; log:\n%s", code, p.stderr.String())
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// runCLI runs the binary to completion.
func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = cleanEnv(env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), errb.String(), exitCode(err)
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("tsflight %v did not exit", args)
	}
	return "", "", -1
}

// ---- the Flight client ----

func dial(t *testing.T, addr string) flight.Client {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func doAction(ctx context.Context, c flight.Client, name string, body any) (map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	stream, err := c.DoAction(ctx, &flight.Action{Type: name, Body: b})
	if err != nil {
		return nil, err
	}
	res, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(res.Body, &out)
}

func mustAction(t *testing.T, ctx context.Context, c flight.Client, name string, body any) map[string]any {
	t.Helper()
	out, err := doAction(ctx, c, name, body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func createTable(t *testing.T, ctx context.Context, c flight.Client, name string) {
	t.Helper()
	mustAction(t, ctx, c, "create-table", map[string]any{
		"table": name, "index_column": "ts", "index_type": "timestamp", "granularity": "10s",
	})
}

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// base is 2024-06-01T00:00:00Z in milliseconds.
const base = 1_717_200_000_000

// batch returns n rows at 10 s steps from interval first; value = step.
func batch(first, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	ts := b.Field(0).(*array.TimestampBuilder)
	val := b.Field(1).(*array.Float64Builder)
	for i := first; i < first+n; i++ {
		ts.Append(arrow.Timestamp(base + int64(i)*10_000))
		val.Append(float64(i))
	}
	return b.NewRecordBatch()
}

// putStream is an open DoPut: write batches, then finish.
type putStream struct {
	stream flight.FlightService_DoPutClient
	w      *flight.Writer
}

// startCollecting starts cmd with its standard error collected, and
// returns that and a channel that gets cmd's exit.
func startCollecting(t *testing.T, cmd *exec.Cmd) (*syncBuffer, chan error) {
	t.Helper()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return stderr, done
}

// newPut creates table through c and opens a DoPut of it that has sent
// the first rows rows (batch(0, rows)).
func newPut(t *testing.T, ctx context.Context, c flight.Client, table string, rows int) *putStream {
	t.Helper()
	createTable(t, ctx, c, table)
	p := openPut(t, ctx, c, table)
	if err := p.write(batch(0, rows)); err != nil {
		t.Fatal(err)
	}
	return p
}

// sigtermDuringPut waits until the server logs that a DoPut started, then
// sends it SIGTERM.
func (p *serverProc) sigtermDuringPut() {
	p.t.Helper()
	p.waitLog("DoPut started", 10*time.Second)
	p.signal(syscall.SIGTERM)
}

// openPut opens a DoPut of table with the schema testSchema.
func openPut(t *testing.T, ctx context.Context, c flight.Client, table string) *putStream {
	t.Helper()
	return openPutOf(t, ctx, c, table, testSchema, memory.DefaultAllocator)
}

// openPutOf opens a DoPut of table with schema, its batches written with
// mem.
func openPutOf(t *testing.T, ctx context.Context, c flight.Client, table string, schema *arrow.Schema, mem memory.Allocator) *putStream {
	t.Helper()
	stream, err := c.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	return &putStream{stream: stream, w: w}
}

func (p *putStream) write(rec arrow.RecordBatch) error {
	defer rec.Release()
	return p.w.Write(rec)
}

// finish ends the stream and returns the PutResult's JSON.
func (p *putStream) finish() (map[string]any, error) {
	if err := p.w.Close(); err != nil {
		return nil, err
	}
	if err := p.stream.CloseSend(); err != nil {
		return nil, err
	}
	res, err := p.stream.Recv()
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(res.AppMetadata, &out)
}

// scanRows plans desc and reads every endpoint, returning the row count
// and the sum of column "value".
func scanRows(t *testing.T, ctx context.Context, c flight.Client, desc *flight.FlightDescriptor) (rows int64, sum float64) {
	t.Helper()
	info, err := c.GetFlightInfo(ctx, desc)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range info.Endpoint {
		stream, err := c.DoGet(ctx, ep.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := flight.NewRecordReader(stream)
		if err != nil {
			t.Fatal(err)
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			rows += rec.NumRows()
			idx := rec.Schema().FieldIndices("value")
			if len(idx) == 1 {
				col := rec.Column(idx[0]).(*array.Float64)
				for i := 0; i < col.Len(); i++ {
					sum += col.Value(i)
				}
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		rdr.Release()
	}
	return rows, sum
}

func num(t *testing.T, m map[string]any, key string) int64 {
	t.Helper()
	f, ok := m[key].(float64)
	if !ok {
		t.Fatalf("%s missing or not a number in %v", key, m)
	}
	return int64(f)
}
