package main

import (
	"encoding/json"
	"math"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The client commands' tests share one fixture: table m (index ts,
// granularity 10s, entity host) holding hosts a and b at 10 s steps from
// 2024-06-01T00:00:00Z (base), written in two appends:
//
//	version 1  create
//	version 2  steps 0…59  [00:00:00, 00:10:00)
//	version 3  steps 60…89 [00:10:00, 00:15:00)
//
// with these holes (steps, [from, to)):
//
//	b  10…19  [00:01:40, 00:03:20)
//	b  30…34  [00:05:00, 00:05:50)
//	a  45…47  [00:07:30, 00:08:00)
//	a  85…86  [00:14:10, 00:14:30)
//
// so a has 85 rows (57 in version 2), b 75 (45), the table 160 (102).
// Columns: ts timestamp[ms, UTC], host utf8, value float64 (a: step/10;
// b: step/4, NULL at step 5, NaN at step 6), n int64 (a: step, b: -step).
// Rows are written time-major, a before b.
const cliTable = "m"

var cliSchema = arrow.NewSchema([]arrow.Field{
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// cliHole reports whether host sent nothing at step.
func cliHole(host string, step int) bool {
	switch host {
	case "a":
		return (step >= 45 && step < 48) || (step >= 85 && step < 87)
	case "b":
		return (step >= 10 && step < 20) || (step >= 30 && step < 35)
	}
	return false
}

// cliRow is one fixture row.
type cliRow struct {
	step int
	host string
}

// cliRows are the fixture rows of steps [from, to) whose host is in hosts
// (both when empty), in the order they were written.
func cliRows(from, to int, hosts ...string) []cliRow {
	if len(hosts) == 0 {
		hosts = []string{"a", "b"}
	}
	var rows []cliRow
	for step := from; step < to; step++ {
		for _, h := range hosts {
			if !cliHole(h, step) {
				rows = append(rows, cliRow{step, h})
			}
		}
	}
	return rows
}

// value is the row's value column: nil for NULL.
func (r cliRow) value() *float64 {
	v := float64(r.step) / 10
	if r.host == "b" {
		switch r.step {
		case 5:
			return nil
		case 6:
			v = math.NaN()
		default:
			v = float64(r.step) / 4
		}
	}
	return &v
}

func (r cliRow) n() int64 {
	if r.host == "b" {
		return -int64(r.step)
	}
	return int64(r.step)
}

// cliTime is the RFC 3339 time of step.
func cliTime(step int) string {
	return time.UnixMilli(base + int64(step)*10_000).UTC().Format(time.RFC3339)
}

// csv is the row as the csv format writes it (all columns).
func (r cliRow) csv() string {
	v := ""
	if p := r.value(); p != nil {
		v = strconv.FormatFloat(*p, 'g', -1, 64)
	}
	return cliTime(r.step) + "," + r.host + "," + v + "," + strconv.FormatInt(r.n(), 10)
}

// json is the row as the json format writes it (all columns).
func (r cliRow) json() string {
	v := "null"
	switch p := r.value(); {
	case p != nil && math.IsNaN(*p):
		v = `"NaN"`
	case p != nil:
		v = strconv.FormatFloat(*p, 'g', -1, 64)
	}
	return `{"ts":"` + cliTime(r.step) + `","host":"` + r.host + `","value":` + v + `,"n":` + strconv.FormatInt(r.n(), 10) + `}`
}

// cliRecord builds the rows of steps [from, to).
func cliRecord(mem memory.Allocator, from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, cliSchema)
	defer b.Release()
	ts := b.Field(0).(*array.TimestampBuilder)
	host := b.Field(1).(*array.StringBuilder)
	val := b.Field(2).(*array.Float64Builder)
	n := b.Field(3).(*array.Int64Builder)
	for _, r := range cliRows(from, to) {
		ts.Append(arrow.Timestamp(base + int64(r.step)*10_000))
		host.Append(r.host)
		if p := r.value(); p != nil {
			val.Append(*p)
		} else {
			val.AppendNull()
		}
		n.Append(r.n())
	}
	return b.NewRecordBatch()
}

// cliPut appends rec to table in one DoPut and returns the PutResult.
func cliPut(t *testing.T, c flight.Client, table string, rec arrow.RecordBatch, mem memory.Allocator) map[string]any {
	t.Helper()
	p := openPutOf(t, testCtx(t), c, table, rec.Schema(), mem)
	rec.Retain() // write releases it; the caller keeps its own reference
	if err := p.write(rec); err != nil {
		t.Fatal(err)
	}
	out, err := p.finish()
	if err != nil {
		t.Fatalf("DoPut %s: %v", table, err)
	}
	return out
}

// cliFixture is a server of its own.
type cliFixture struct {
	srv    *serverProc
	server string // the --server value
	root   string
}

// newCLIServer starts a server on a new, empty root.
func newCLIServer(t *testing.T) *cliFixture {
	t.Helper()
	root := t.TempDir()
	srv := startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0")
	return &cliFixture{srv: srv, server: "grpc://" + srv.addr, root: root}
}

// newCLIFixture starts a server on a new root, creates table m with the
// create command and appends its two versions.
func newCLIFixture(t *testing.T) *cliFixture {
	t.Helper()
	f := newCLIServer(t)
	if out := f.ok(t, "create", "--index-column", "ts", "--granularity", "10s", "--entity", "host", cliTable); out != "created table m (version 1)\n" {
		t.Fatalf("create: %q", out)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := dial(t, f.srv.addr)
	for i, steps := range [][2]int{{0, 60}, {60, 90}} {
		rec := cliRecord(mem, steps[0], steps[1])
		res := cliPut(t, c, cliTable, rec, mem)
		rows := rec.NumRows()
		rec.Release()
		if num(t, res, "version") != int64(i+2) || num(t, res, "rows") != rows {
			t.Fatalf("append %d: %v, want version %d, %d rows", i, res, i+2, rows)
		}
	}
	return f
}

// run runs a client command with TSFLIGHT_SERVER naming the fixture's
// server.
func (f *cliFixture) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLI(t, []string{"TSFLIGHT_SERVER=" + f.server}, args...)
}

// ok runs a client command that must succeed with nothing on stderr.
func (f *cliFixture) ok(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := f.run(t, args...)
	if code != 0 || stderr != "" {
		t.Fatalf("tsflight %q: exit %d, stderr %q; want 0 and no stderr", args, code, stderr)
	}
	return stdout
}

// fail runs a client command that must fail with exit code want: nothing
// on stdout, and on stderr one message that contains every part of
// wantErr (see cliCheckFailure).
func (f *cliFixture) fail(t *testing.T, want int, wantErr []string, args ...string) {
	t.Helper()
	stdout, stderr, code := f.run(t, args...)
	cliCheckFailure(t, args, stdout, stderr, code, want, wantErr)
}

// cliFailure is a failing invocation of one command: its arguments, the
// exit code and the parts of the error message wanted.
type cliFailure struct {
	code int
	want []string
	args []string
}

// failAll runs "tsflight cmd ARGS" for each case and checks its failure as
// fail does.
func (f *cliFixture) failAll(t *testing.T, cmd string, cases []cliFailure) {
	t.Helper()
	for _, tc := range cases {
		f.fail(t, tc.code, tc.want, append([]string{cmd}, tc.args...)...)
	}
}

// cliCheckFailure checks a failed command: exit code want, no stdout, and
// stderr "tsflight CMD: error: MSG\n" (exit 1 or 3) or "tsflight CMD:
// MSG\nRun 'tsflight CMD --help' for usage.\n" (exit 2), where MSG
// contains every part of wantErr.
func cliCheckFailure(t *testing.T, args []string, stdout, stderr string, code, want int, wantErr []string) {
	t.Helper()
	if code != want || stdout != "" {
		t.Errorf("tsflight %q: exit %d, stdout %q, stderr %q; want exit %d and no stdout", args, code, stdout, stderr, want)
		return
	}
	prefix, suffix := "tsflight "+args[0]+": error: ", "\n"
	if want == exitUsage {
		prefix, suffix = "tsflight "+args[0]+": ", "\nRun 'tsflight "+args[0]+" --help' for usage.\n"
	}
	msg, ok := strings.CutPrefix(stderr, prefix)
	if ok {
		msg, ok = strings.CutSuffix(msg, suffix)
	}
	if !ok {
		t.Errorf("tsflight %q: stderr %q; want %q…%q", args, stderr, prefix, suffix)
		return
	}
	for _, w := range wantErr {
		if !strings.Contains(msg, w) {
			t.Errorf("tsflight %q: error %q; want it to contain %q", args, msg, w)
		}
	}
}

// cliLines splits output into lines, requiring a final newline.
func cliLines(t *testing.T, out string) []string {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output %q does not end with a newline", out)
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// cliText joins lines into output, each line ending in a newline.
func cliText(lines ...string) string {
	return strings.Join(lines, "\n") + "\n"
}

// cliClosedPort returns a 127.0.0.1 address nothing listens on.
func cliClosedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// cliDescribe returns the describe-table answer via describe --format json.
func (f *cliFixture) describe(t *testing.T, table string) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(f.ok(t, "describe", "--format", "json", table)), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// cliCommand is the binary run with args and the test's environment plus
// env, its output streams left to the caller.
func cliCommand(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = cleanEnv(env...)
	return cmd
}
