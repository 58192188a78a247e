package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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

// loadRunMeasured runs tsflight load against the fixture's server and
// returns its stderr, exit code, peak RSS in KiB and wall time.
func (f *loadFixture) loadMeasured(timeout time.Duration, args ...string) (stderr string, code int, maxRSS int64, wall time.Duration) {
	f.t.Helper()
	cmd := exec.Command(binPath, append([]string{"load", "--server", "grpc://" + f.p.addr}, args...)...)
	cmd.Env = cleanEnv()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		f.t.Fatalf("tsflight load did not finish in %s; stderr:\n%s", timeout, errb.String())
	}
	wall = time.Since(begin)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		f.t.Fatalf("no rusage: %T", cmd.ProcessState.SysUsage())
	}
	return errb.String(), exitCode(err), ru.Maxrss, wall // Maxrss is in KiB on Linux
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
	t.Logf("wrote %s: %d rows, %d row groups of %d rows, %s, in %.1f s", filepath.Base(path), rows, rows/int64(hosts*groupIntervals), hosts*groupIntervals, loadHumanBytes(size), time.Since(began).Seconds())

	stderr, code, rss, wall := f.loadMeasured(timeout, "--progress", "never", "tsbs", path)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	t.Logf("%s", strings.TrimSpace(stderr))
	t.Logf("file %s (%d bytes), %d rows, %.1f s wall, peak RSS %.1f MiB (limit %d MiB, race detector %v)",
		loadHumanBytes(size), size, rows, wall.Seconds(), float64(rss)/1024, limitMiB, raceEnabled)
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
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
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
