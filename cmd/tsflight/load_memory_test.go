package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// loadBigEnv enables TestLoadMemoryBig.
const loadBigEnv = "TSFLIGHT_LOAD_BIG"

// loadTSBSMetrics are the cpu measurements of TSBS's cpu-only use case.
var loadTSBSMetrics = []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
	"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}

// loadTSBSSchema is time, hostname and the ten metrics, float64 and int64
// in turn.
func loadTSBSSchema() *arrow.Schema {
	fields := []arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "hostname", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	for i, m := range loadTSBSMetrics {
		typ := arrow.DataType(arrow.PrimitiveTypes.Float64)
		if i%2 == 1 {
			typ = arrow.PrimitiveTypes.Int64
		}
		fields = append(fields, arrow.Field{Name: m, Type: typ, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

// loadCreateTSBS creates table cpu for TSBS files: index time (10 s),
// entity hostname.
func (f *loadFixture) createTSBS(table string) {
	f.t.Helper()
	mustAction(f.t, f.ctx, f.c, "create-table", map[string]any{
		"table": table, "index_column": "time", "index_type": "timestamp", "granularity": "10s",
		"entity_columns": []string{"hostname"},
	})
}

// writeTSBS writes a TSBS-like Parquet file of at least minBytes: one row
// per host and 10 s interval (so rows are unique per (hostname, interval)),
// random metric values that do not compress away, row groups of
// groupIntervals intervals. The file is written a column chunk at a time,
// so the test's memory stays at one column of one row group. It returns
// the rows and the file size.
func (f *loadFixture) writeTSBS(path string, hosts, groupIntervals int, minBytes int64) (rows, size int64) {
	f.t.Helper()
	out, err := os.Create(path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer out.Close()
	schema := loadTSBSSchema()
	props := parquet.NewWriterProperties(
		parquet.WithAllocator(f.mem),
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(false),
		parquet.WithDictionaryFor("time", true),
		parquet.WithDictionaryFor("hostname", true),
		parquet.WithMaxRowGroupLength(int64(hosts*groupIntervals)))
	w, err := pqarrow.NewFileWriter(schema, out, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(f.mem)))
	if err != nil {
		f.t.Fatal(err)
	}
	names := make([]string, hosts)
	for h := range names {
		names[h] = fmt.Sprintf("host_%d", h)
	}
	const step = int64(10 * time.Second)
	start := int64(base) * int64(time.Millisecond)
	n := hosts * groupIntervals
	for g := 0; w.TotalBytesWritten() < minBytes; g++ {
		if err := w.NewRowGroupChecked(); err != nil {
			f.t.Fatal(err)
		}
		first := g * groupIntervals
		for c, fld := range schema.Fields() {
			rng := rand.New(rand.NewPCG(uint64(g), uint64(c)))
			var arr arrow.Array
			switch c {
			case 0:
				b := array.NewTimestampBuilder(f.mem, fld.Type.(*arrow.TimestampType))
				b.Reserve(n)
				for r := range n {
					b.UnsafeAppend(arrow.Timestamp(start + int64(first+r/hosts)*step))
				}
				arr = b.NewArray()
				b.Release()
			case 1:
				b := array.NewStringBuilder(f.mem)
				b.Reserve(n)
				for r := range n {
					b.Append(names[r%hosts])
				}
				arr = b.NewArray()
				b.Release()
			default:
				if fld.Type.ID() == arrow.FLOAT64 {
					b := array.NewFloat64Builder(f.mem)
					b.Reserve(n)
					for range n {
						b.UnsafeAppend(rng.Float64() * 100)
					}
					arr = b.NewArray()
					b.Release()
				} else {
					b := array.NewInt64Builder(f.mem)
					b.Reserve(n)
					for range n {
						b.UnsafeAppend(rng.Int64N(1 << 40))
					}
					arr = b.NewArray()
					b.Release()
				}
			}
			err := w.WriteColumnData(arr)
			arr.Release()
			if err != nil {
				f.t.Fatal(err)
			}
		}
		rows += int64(n)
	}
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		f.t.Fatal(err)
	}
	return rows, st.Size()
}

// loadMeasured runs tsflight load against the fixture's server and
// returns its stderr, exit code, peak RSS in KiB (measureChild's), wall
// time and rusage's ru_maxrss in KiB.
func (f *loadFixture) loadMeasured(timeout time.Duration, args ...string) (stderr string, code int, peakKiB int64, wall time.Duration, rusageKiB int64) {
	f.t.Helper()
	cmd := exec.Command(binPath, append([]string{"load", "--server", "grpc://" + f.p.addr}, args...)...)
	cmd.Env = cleanEnv()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	peakKiB, rusageKiB, wall, err := measureChild(f.t, cmd, timeout)
	return errb.String(), exitCode(err), peakKiB, wall, rusageKiB
}

// measureChild runs cmd to its end (failing the test after timeout) and
// returns the child's peak RSS and rusage's ru_maxrss in KiB, the wall
// time and Wait's error.
//
// The peak is the child's own: its VmHWM (/proc/PID/status), polled every
// 20 ms while it runs. rusage's ru_maxrss is not: Go starts children with
// vfork, and at exec Linux carries the old (the test process's) memory
// high-water mark into the child's ru_maxrss, so a test process larger than
// the child would be measured instead. Without /proc (not Linux) it falls
// back on ru_maxrss.
func measureChild(t *testing.T, cmd *exec.Cmd, timeout time.Duration) (peakKiB, rusageKiB int64, wall time.Duration, err error) {
	t.Helper()
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for running := true; running; {
		if kib, ok := loadVmHWM(status); ok {
			peakKiB = max(peakKiB, kib)
		}
		select {
		case err = <-done:
			running = false
		case <-tick.C:
		case <-deadline:
			cmd.Process.Kill()
			<-done
			t.Fatalf("%s did not finish in %s", cmd.Args, timeout)
		}
	}
	wall = time.Since(begin)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatalf("no rusage: %T", cmd.ProcessState.SysUsage())
	}
	rusageKiB = ru.Maxrss // in KiB on Linux
	if peakKiB == 0 {
		t.Logf("no VmHWM in %s: the peak RSS is rusage's, which may be the test process's", status)
		peakKiB = rusageKiB
	}
	return peakKiB, rusageKiB, wall, err
}

// TestMeasureChildOwnPeak: the peak RSS measured is the child's, not the
// test process's high-water mark that rusage hands down at exec.
func TestMeasureChildOwnPeak(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// Raise the test process's high-water mark past bigMiB.
	const bigMiB = 192
	big := make([]byte, bigMiB<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	// A small child that lives a while: a scan whose server takes 300 ms.
	srv := startFakeServer(t, &fakeServer{get: func(_ *fakeServer, stream flight.FlightService_DoGetServer) error {
		time.Sleep(300 * time.Millisecond)
		return fakeSendRows(stream)
	}})
	cmd := exec.Command(binPath, "scan", "--server", "grpc://"+srv.addr, "cpu")
	cmd.Env = cleanEnv()
	peak, rusage, _, err := measureChild(t, cmd, time.Minute)
	runtime.KeepAlive(big)
	debug.FreeOSMemory()
	t.Logf("scan: %v; peak RSS %.1f MiB, rusage's ru_maxrss %.1f MiB", err, float64(peak)/1024, float64(rusage)/1024)
	if peak >= bigMiB<<10 {
		t.Errorf("the child's peak RSS measured as %.1f MiB: the test process's (over %d MiB), not the child's", float64(peak)/1024, bigMiB)
	}
}

// loadVmHWM reads the peak resident set size (VmHWM, in KiB) from a
// /proc/PID/status file.
func loadVmHWM(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kib, err == nil
		}
	}
	return 0, false
}

// loadMemoryCase writes a TSBS file of at least minBytes, loads it and
// checks the client's peak RSS against limitMiB.
func loadMemoryCase(t *testing.T, hosts, groupIntervals int, minBytes int64, limitMiB int64, timeout time.Duration) {
	f := newLoadFixture(t)
	f.createTSBS("tsbs")
	path := filepath.Join(t.TempDir(), "cpu.parquet")
	t.Cleanup(func() { os.Remove(path) })
	began := time.Now()
	rows, size := f.writeTSBS(path, hosts, groupIntervals, minBytes)
	t.Logf("wrote %s: %d rows, %d row groups of %d rows, %s, in %.1f s", filepath.Base(path), rows, rows/int64(hosts*groupIntervals), hosts*groupIntervals, humanBytes(size), time.Since(began).Seconds())

	stderr, code, rss, wall, rusage := f.loadMeasured(timeout, "--progress", "never", "tsbs", path)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	t.Logf("%s", strings.TrimSpace(stderr))
	t.Logf("file %s (%d bytes), %d rows, %.1f s wall, the client's own peak RSS %.1f MiB (VmHWM; rusage's ru_maxrss, which carries the test process's, %.1f MiB; limit %d MiB, race detector %v)",
		humanBytes(size), size, rows, wall.Seconds(), float64(rss)/1024, float64(rusage)/1024, limitMiB, raceEnabled)
	if got := num(t, f.describe("tsbs"), "rows"); got != rows {
		t.Errorf("table holds %d rows, want %d", got, rows)
	}
	if rss >= limitMiB<<10 {
		t.Errorf("peak RSS %.1f MiB, want under %d MiB", float64(rss)/1024, limitMiB)
	}
}

// TestLoadMemory: a ~64 MiB Parquet file (row groups of 200,000 rows)
// loads with a small, bounded client memory: about 140 MiB, whatever the
// file size (TestLoadMemoryBig). Under the race detector, which multiplies
// memory and time, an 8 MiB file and a looser bound.
func TestLoadMemory(t *testing.T) {
	if raceEnabled {
		loadMemoryCase(t, 100, 250, 8<<20, 384, 5*time.Minute)
		return
	}
	loadMemoryCase(t, 100, 2000, 64<<20, 192, 5*time.Minute)
}

// TestLoadMemoryBig is the acceptance check: a 1 GB Parquet file (row
// groups of 1,000,000 rows) loads in under 512 MiB of client memory.
func TestLoadMemoryBig(t *testing.T) {
	if os.Getenv(loadBigEnv) != "1" {
		t.Skipf("set %s=1 to load a 1 GiB Parquet file and check the client's peak RSS stays under 512 MiB (needs ~3 GiB of temporary disk)", loadBigEnv)
	}
	if raceEnabled {
		t.Skipf("%s measures memory: run it without -race", loadBigEnv)
	}
	loadMemoryCase(t, 1000, 1000, 1<<30, 512, 30*time.Minute)
}

// TestLoadInterrupt: SIGINT while a file is sent abandons the DoPut;
// nothing is committed.
func TestLoadInterrupt(t *testing.T) {
	f := newLoadFixture(t)
	f.createTSBS("tsbs")
	path := filepath.Join(t.TempDir(), "cpu.parquet")
	rows, _ := f.writeTSBS(path, 100, 500, 24<<20)
	cmd := exec.Command(binPath, "load", "--server", "grpc://"+f.p.addr, "--progress", "always", "--batch-rows", "500", "tsbs", path)
	cmd.Env = cleanEnv(loadTestEnv...)
	stderr, done := startCollecting(t, cmd)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), " rows, ") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no progress line; stderr:\n%s", stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("tsflight load still running 20 s after SIGINT; stderr:\n%s", stderr.String())
	}
	t.Logf("stderr:\n%s", stderr.String())
	if code := exitCode(err); code != 1 || !strings.Contains(stderr.String(), "interrupted while sending "+path+": nothing of it was committed") {
		t.Errorf("exit %d (want 1); the file has %d rows; stderr:\n%s", code, rows, stderr.String())
	}
	d := f.describe("tsbs")
	if num(t, d, "version") != 1 || num(t, d, "rows") != 0 {
		t.Errorf("after the interrupt: %v; want version 1, no rows", d)
	}
}
