// Crash trials with real processes (server mode): a `tsflight serve`
// process, and a writer that is a `tsflight load` process appending one
// small Arrow file per DoPut. At random moments either the server (most
// trials) or the writer is killed with SIGKILL, many of them inside a
// DoPut or its commit; the server is restarted on the same root. After
// every kill: the table opens with the library and reads the same through
// the restarted server, every acknowledged batch (its PutResult reached
// the writer, which printed it) is there exactly once and whole, no batch
// is partly visible, vacuum finds exactly the files of the killed attempt,
// and the next DoPut succeeds.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 50; the long
// mode is 500), TSFLIGHT_CRASH_SEED the seed (default: the clock, printed).

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

const (
	crashTableName = "crash"
	crashRows      = testkit.CrashRows // rows per batch
	crashFiles     = 6                 // files (batches) per writer life
)

var crashSchema = testkit.CrashSchema()

// crashBatch is batch id: crashRows rows of host w at 10 s steps from
// base, in a time range no other batch touches.
func crashBatch(mem memory.Allocator, id int64) arrow.RecordBatch {
	return testkit.CrashBatch(mem, base, id)
}

// writeCrashFile writes batch id as an Arrow IPC file.
func writeCrashFile(t *testing.T, mem memory.Allocator, path string, id int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(crashSchema), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	rec := crashBatch(mem, id)
	err = w.Write(rec)
	rec.Release()
	if err == nil {
		err = w.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// crashServerTally counts what the trials saw.
type crashServerTally struct {
	trials, serverKills, writerKills           int
	killsInCommit, killsInAppend, killsBetween int
	acked, unackedCommitted, strayRemoved      int
	unreadable, lost, dups, partial            int
	appendFailed, vacuumMismatches, pyChecks   int
}

func (c *crashServerTally) failures() int {
	return c.unreadable + c.lost + c.dups + c.partial + c.appendFailed + c.vacuumMismatches
}

func (c *crashServerTally) line(seed uint64) string {
	return fmt.Sprintf("crash trials: mode=server trials=%d kills_in_commit=%d acked=%d unacked_committed=%d stray_files_removed=%d unreadable=%d lost=%d duplicates=%d"+
		" (server_kills=%d writer_kills=%d kills_in_append=%d kills_between_appends=%d partial=%d append_failed=%d vacuum_mismatches=%d python_checks=%d seed=%d)",
		c.trials, c.killsInCommit, c.acked, c.unackedCommitted, c.strayRemoved, c.unreadable, c.lost, c.dups,
		c.serverKills, c.writerKills, c.killsInAppend, c.killsBetween, c.partial, c.appendFailed, c.vacuumMismatches, c.pyChecks, seed)
}

// crashRun is the state of a server-mode run.
type crashRun struct {
	t       *testing.T
	rng     *rand.Rand
	mem     *memory.CheckedAllocator
	root    string
	dir     string // the table's directory
	files   string // where the writer's input files go
	ackLog  *os.File
	srv     *serverProc
	client  flight.Client
	tally   crashServerTally
	acked   map[int64]uint64
	named   map[string]bool
	namedTo uint64
	next    int64
}

func (r *crashRun) startServer() {
	r.srv = startServer(r.t, nil, "--root", r.root, "--listen", "127.0.0.1:0")
	r.client = dial(r.t, r.srv.addr)
}

// dumpServer makes the server print its goroutines into its log (shown
// when the test fails), to tell a stuck call from a slow one.
func (r *crashRun) dumpServer() {
	_ = r.srv.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-r.srv.done:
	case <-time.After(5 * time.Second):
	}
}

// ack records an acknowledged batch durably.
func (r *crashRun) ack(id int64, v uint64) {
	r.t.Helper()
	if _, ok := r.acked[id]; !ok {
		r.tally.acked++
	}
	r.acked[id] = v
	testkit.WriteAck(r.t, r.ackLog, id, v)
}

// writer starts a `tsflight load` of the next crashFiles batches.
func (r *crashRun) writer() (*exec.Cmd, *syncBuffer, chan error) {
	r.t.Helper()
	args := []string{"load", "--server", "grpc://" + r.srv.addr, "--format", "json", "--progress", "never", crashTableName}
	for id := r.next; id < r.next+crashFiles; id++ {
		p := filepath.Join(r.files, fmt.Sprintf("b%d.arrow", id))
		if _, err := os.Stat(p); err != nil {
			writeCrashFile(r.t, r.mem, p, id)
		}
		args = append(args, p)
	}
	cmd := cliCommand(r.t, nil, args...)
	out := &syncBuffer{}
	cmd.Stdout = out
	_, done := startCollecting(r.t, cmd)
	return cmd, out, done
}

// collectAcks records the batches whose JSON line the writer printed (its
// PutResult arrived).
func (r *crashRun) collectAcks(out string) {
	r.t.Helper()
	for _, line := range testkit.CompleteLines(out) {
		var res struct {
			File    string  `json:"file"`
			Version *uint64 `json:"version"`
		}
		if err := json.Unmarshal([]byte(line), &res); err != nil || res.Version == nil {
			r.t.Fatalf("writer output line %q: %v", line, err)
		}
		id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(res.File), "b"), ".arrow"), 10, 64)
		if err != nil {
			r.t.Fatal(err)
		}
		r.ack(id, *res.Version)
	}
}

// libraryCounts opens the table with the library and counts rows per
// batch.
func (r *crashRun) libraryCounts() (map[int64]int, uint64, error) {
	ctx := context.Background()
	tb, err := tableformat.Open(ctx, storage.Local(r.dir), nil)
	if err != nil {
		return nil, 0, err
	}
	rdr, err := tb.Scan(ctx, tb.State(), tableformat.ScanOptions{Columns: []string{"batch"}, Alloc: r.mem})
	if err != nil {
		return nil, 0, err
	}
	defer rdr.Release()
	out := map[int64]int{}
	err = testkit.AddBatchCounts(out, rdr)
	return out, tb.State().Version, err
}

// serverCounts scans the table through the server (GetFlightInfo, then
// DoGet of every endpoint) and counts rows per batch.
func (r *crashRun) serverCounts() (map[int64]int, error) {
	ctx := testCtx(r.t)
	info, err := r.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{crashTableName}})
	if err != nil {
		return nil, err
	}
	out := map[int64]int{}
	for _, ep := range info.Endpoint {
		stream, err := r.client.DoGet(ctx, ep.Ticket)
		if err != nil {
			return nil, err
		}
		rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(r.mem))
		if err != nil {
			return nil, err
		}
		err = testkit.AddBatchCounts(out, rdr)
		rdr.Release()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkCounts compares rows per batch with the acknowledged batches and
// returns the unacknowledged batches found whole.
func (r *crashRun) checkCounts(trial int, counts map[int64]int) []int64 {
	r.t.Helper()
	unacked, f := testkit.CheckBatches(r.t, fmt.Sprintf("trial %d: ", trial), counts, r.acked)
	r.tally.lost += f.Lost
	r.tally.dups += f.Dups
	r.tally.partial += f.Partial
	return unacked
}

// updateNamed adds the paths that commits namedTo+1..to name.
func (r *crashRun) updateNamed(to uint64) {
	r.t.Helper()
	testkit.NamedPaths(r.t, r.dir, tableformat.CommitPath, r.namedTo, to, r.named)
	r.namedTo = max(r.namedTo, to)
}

// strays lists, independently of vacuum, the files under data/ and
// _coverage/ and the log's temporary files that no commit names.
func (r *crashRun) strays() []string {
	r.t.Helper()
	return testkit.ExpectedStrays(r.t, r.dir, tableformat.LogDir, r.named)
}

// quiesce waits until the table's files stop changing (an append the
// server runs for a killed client finishes or cleans up).
func (r *crashRun) quiesce() {
	r.t.Helper()
	snapshot := func() string {
		var b strings.Builder
		_ = filepath.Walk(r.dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				fmt.Fprintf(&b, "%s %d\n", p, info.Size())
			}
			return nil
		})
		return b.String()
	}
	last, stable := snapshot(), 0
	for deadline := time.Now().Add(20 * time.Second); stable < 6; {
		if time.Now().After(deadline) {
			r.t.Fatal("the table's files kept changing for 20 s after the writer was killed")
		}
		time.Sleep(50 * time.Millisecond)
		if s := snapshot(); s == last {
			stable++
		} else {
			last, stable = s, 0
		}
	}
}

// vacuum runs the vacuum action with the cutoff at now.
func (r *crashRun) vacuum(apply bool) flightserver.VacuumResult {
	r.t.Helper()
	body := map[string]any{"table": crashTableName, "older_than": time.Now().UTC().Format(time.RFC3339Nano), "apply": apply}
	raw, err := json.Marshal(body)
	if err != nil {
		r.t.Fatal(err)
	}
	stream, err := r.client.DoAction(testCtx(r.t), &flight.Action{Type: flightserver.ActionVacuum, Body: raw})
	if err != nil {
		r.t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		r.t.Fatalf("vacuum: %v", err)
	}
	var out flightserver.VacuumResult
	if err := json.Unmarshal(res.Body, &out); err != nil {
		r.t.Fatal(err)
	}
	return out
}

func vacuumList(res flightserver.VacuumResult, disposition string) []string {
	var out []string
	for _, a := range res.Artifacts {
		if a.Disposition == disposition {
			out = append(out, a.Path)
		}
	}
	return out
}

// put appends batch id through the server; the PutResult is the ack.
func (r *crashRun) put(id int64) (uint64, error) {
	ctx := testCtx(r.t)
	stream, err := r.client.DoPut(ctx)
	if err != nil {
		return 0, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(crashSchema), ipc.WithAllocator(r.mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{crashTableName}})
	rec := crashBatch(r.mem, id)
	err = w.Write(rec)
	rec.Release()
	if err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	if err := stream.CloseSend(); err != nil {
		return 0, err
	}
	res, err := stream.Recv()
	if err != nil {
		return 0, err
	}
	var pr flightserver.PutResult
	if err := json.Unmarshal(res.AppMetadata, &pr); err != nil {
		return 0, err
	}
	return pr.Version, nil
}

// TestCrashTrialsServer runs the server-mode crash trials.
func TestCrashTrialsServer(t *testing.T) {
	if testing.Short() {
		t.Skip("crash trials run processes")
	}
	trials, seed := testkit.CrashSettings(t, 50)
	t.Logf("crash trials: mode=server trials=%d seed=%d (replay with TSFLIGHT_CRASH_SEED=%d)", trials, seed, seed)
	py := testkit.CrashPython(t)
	r := &crashRun{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), mem: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		root: t.TempDir(), files: t.TempDir(), acked: map[int64]uint64{}, named: map[string]bool{}}
	defer r.mem.AssertSize(t, 0)
	r.dir = filepath.Join(r.root, crashTableName)
	var err error
	if r.ackLog, err = os.OpenFile(filepath.Join(t.TempDir(), "acked.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
	defer r.ackLog.Close()
	r.startServer()
	mustAction(t, testCtx(t), r.client, "create-table", map[string]any{
		"table": crashTableName, "index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"host"},
	})
	// One whole writer life, not killed, measures how long a life lasts.
	start := time.Now()
	_, out, done := r.writer()
	if err := <-done; err != nil {
		t.Fatalf("calibration load: %v\n%s", err, out)
	}
	life := time.Since(start)
	r.collectAcks(out.String())
	r.next = crashFiles
	t.Logf("a writer life (%d DoPuts from process start) takes about %s; kills are drawn in [0, that)", crashFiles, life)

	defer func() {
		t.Log(r.tally.line(seed))
		fmt.Println(r.tally.line(seed))
	}()
	for trial := 1; trial <= trials; trial++ {
		r.tally.trials = trial
		cmd, out, done := r.writer()
		time.Sleep(time.Duration(r.rng.Int64N(int64(life))))
		killServer := r.rng.IntN(10) < 7
		if killServer {
			r.tally.serverKills++
			_ = r.srv.cmd.Process.Kill()
			<-r.srv.done
		} else {
			r.tally.writerKills++
			_ = cmd.Process.Kill()
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("trial %d: the writer did not end within 30 s of the server's death", trial)
		}
		r.collectAcks(out.String())
		if !killServer {
			r.quiesce()
		}

		// The library opens the table as the kill left it.
		cur, _ := os.ReadFile(filepath.Join(r.dir, tableformat.LogDir, "CURRENT"))
		counts, version, err := r.libraryCounts()
		if err != nil {
			r.tally.unreadable++
			t.Fatalf("trial %d: the library cannot read the table after the kill: %v\n%s", trial, err, r.tally.line(seed))
		}
		unacked := r.checkCounts(trial, counts)
		for _, id := range unacked {
			r.acked[id] = version
		}
		r.tally.unackedCommitted += len(unacked)
		if killServer {
			r.startServer()
		}
		// The restarted (or surviving) server reads the same.
		if got, err := r.serverCounts(); err != nil || !maps.Equal(got, counts) {
			r.tally.unreadable++
			r.dumpServer()
			t.Fatalf("trial %d: the server reads %d batches (%v), the library %d", trial, len(got), err, len(counts))
		}

		r.updateNamed(version)
		want := r.strays()
		inCommit := len(unacked) > 0 || strings.TrimSpace(string(cur)) != strconv.FormatUint(version, 10)
		for _, p := range want {
			if strings.HasPrefix(p, tableformat.LogDir+"/") {
				inCommit = true
			}
		}
		switch {
		case inCommit:
			r.tally.killsInCommit++
		case len(want) > 0:
			r.tally.killsInAppend++
		default:
			r.tally.killsBetween++
		}
		if got := vacuumList(r.vacuum(false), "removable"); strings.Join(got, " ") != strings.Join(want, " ") {
			r.tally.vacuumMismatches++
			t.Errorf("trial %d: vacuum lists %v as removable, want %v", trial, got, want)
		}
		res := r.vacuum(true)
		if got := vacuumList(res, "deleted"); strings.Join(got, " ") != strings.Join(want, " ") {
			r.tally.vacuumMismatches++
			t.Errorf("trial %d: vacuum deleted %v, want %v", trial, got, want)
		}
		r.tally.strayRemoved += res.Totals.Deleted
		if res := r.vacuum(false); res.Totals.Removable != 0 {
			r.tally.vacuumMismatches++
			t.Errorf("trial %d: a second dry run finds %d removable files", trial, res.Totals.Removable)
		}
		if got, err := r.serverCounts(); err != nil || !maps.Equal(got, counts) {
			r.tally.unreadable++
			r.dumpServer()
			t.Errorf("trial %d: the table reads differently after vacuum (%v)", trial, err)
		}

		// The next DoPut succeeds.
		for id := range counts {
			r.next = max(r.next, id+1)
		}
		for id := range r.acked {
			r.next = max(r.next, id+1)
		}
		v, err := r.put(r.next)
		if err != nil {
			r.tally.appendFailed++
			t.Fatalf("trial %d: the DoPut after the kill failed: %v", trial, err)
		}
		r.ack(r.next, v)
		r.updateNamed(v)
		r.next++

		if py != "" && (trial == trials || trial%50 == 0) {
			if n := testkit.PythonRowCount(t, py, r.dir); n != int64(len(r.acked)*crashRows) {
				r.tally.unreadable++
				t.Errorf("trial %d: timeseries-table-format counts %d rows, Go %d", trial, n, len(r.acked)*crashRows)
			}
			r.tally.pyChecks++
		}
		if r.tally.failures() > 0 {
			t.Fatalf("trial %d failed; replay with TSFLIGHT_CRASH_SEED=%d\n%s", trial, seed, r.tally.line(seed))
		}
	}
}
