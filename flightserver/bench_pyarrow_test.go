package flightserver

// The DoGet ceiling a user compares tsflight with: pyarrow's C++ Flight
// server streaming the same batches from memory (testdata/
// pyarrow_ceiling.py). Run:
//
//	go test -run '^$' -bench 'FlightDoGetPyArrow' -benchtime 10x ./flightserver/
//
// The table is TSBS cpu-only data (bench/tsbs), 400 hosts × 6 hours at
// 10 s (864,000 rows; TSFLIGHT_BENCH_TSBS_HOURS changes the hours), loaded
// in two shapes: "hourly", one DoPut (one segment) per hour as a collector
// appends, and "one-segment", one DoPut of everything (one segment of one
// row group, the shape compaction produces). Without python3 and pyarrow
// the benchmark is skipped, unless CI=true, where that is a failure.

import (
	"context"
	"fmt"
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

	"github.com/tsflight/tsflight/bench/tsbs"
	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
)

// tsbsParams are the benchmark's TSBS data: 400 hosts for
// TSFLIGHT_BENCH_TSBS_HOURS hours (default 6).
func tsbsParams() tsbs.Params {
	hours := 6
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_BENCH_TSBS_HOURS")); err == nil && v > 0 {
		hours = v
	}
	p := tsbs.DefaultParams()
	p.Hosts, p.Duration = 400, time.Duration(hours)*time.Hour
	return p
}

// tsbsTable builds (once per shape and size, under the temporary
// directory) a table cpu of tsbsParams' rows: one DoPut per hour
// ("hourly") or one DoPut of all ("one-segment").
func tsbsTable(b *testing.B, shape string) string {
	b.Helper()
	p := tsbsParams()
	root := filepath.Join(os.TempDir(), fmt.Sprintf("tsflight-bench-tsbs-%s-%d", shape, p.Rows()))
	if _, err := os.Stat(filepath.Join(root, "cpu", "_timeseries_log", "CURRENT")); err == nil {
		return root
	}
	os.RemoveAll(root)
	srv := startBenchServer(b, "tsflight", root)
	defer srv.stop()
	var held []arrow.RecordBatch
	put := func() {
		if len(held) == 0 {
			return
		}
		if err := putStream(context.Background(), srv.client, held); err != nil {
			os.RemoveAll(root)
			b.Fatal(err)
		}
		releaseAll(held)
		held = nil
	}
	for _, d := range p.Deliveries() {
		err := p.Batches(memory.DefaultAllocator, d, func(rec arrow.RecordBatch) error {
			rec.Retain()
			held = append(held, rec)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if shape == "hourly" {
			put()
		}
	}
	put()
	return root
}

// needPyArrow skips b when python3 with pyarrow.flight is missing (a
// failure when CI=true) and returns the interpreter's path.
func needPyArrow(b *testing.B) string {
	b.Helper()
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", "import pyarrow.flight").Run()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("python3 with pyarrow.flight is needed: %v", err)
		}
		b.Skipf("python3 with pyarrow.flight is missing: %v", err)
	}
	return py
}

// saveEndpoints reads every endpoint of table cpu from srv and writes each
// endpoint's batches, as sent, to an Arrow IPC file in dir; it returns the
// files in endpoint order and the rows.
func saveEndpoints(b *testing.B, srv *benchServer, dir string) ([]string, int64) {
	b.Helper()
	ctx := context.Background()
	info, err := srv.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"cpu"}})
	if err != nil {
		b.Fatal(err)
	}
	var files []string
	var rows int64
	for i, ep := range info.Endpoint {
		stream, err := srv.client.DoGet(ctx, ep.Ticket)
		if err != nil {
			b.Fatal(err)
		}
		rdr, err := flight.NewRecordReader(stream)
		if err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("ep%d.arrow", i))
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		w, err := ipc.NewFileWriter(f, ipc.WithSchema(rdr.Schema()))
		if err != nil {
			b.Fatal(err)
		}
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
			if err := w.Write(rdr.RecordBatch()); err != nil {
				b.Fatal(err)
			}
		}
		if err := rdr.Err(); err != nil {
			b.Fatal(err)
		}
		rdr.Release()
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		files = append(files, path)
	}
	return files, rows
}

// cpuTime is the user + system CPU time the process pid has used so far,
// from /proc/PID/stat (in clock ticks of 10 ms, Linux's USER_HZ).
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces): state
	// is field 3, utime 14 and stime 15.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkFlightDoGetPyArrow alternates whole-table fetches (every
// endpoint in parallel, every batch decoded, by the same arrow-go client)
// from tsflight and from pyarrow's C++ Flight server holding the very
// batches tsflight sends, over as many endpoints, and reports each one's
// median rows/s, the ratio tsflight/pyarrow, and the server CPU time per
// fetch of each (from /proc). One op is one fetch from each, in the
// order A B C, C B A, ... so that all meet the same machine load. The
// third server, "cached", is tsflight's own send path (the zero-copy
// codec and GRPCOptions) over batches decoded once and held in memory
// (the "memory-zerocopy" server of bench_test.go): what tsflight would
// reach without the Parquet decoding per fetch. The fourth, "hot", is
// tsflight with a scan cache of 512 MiB (the others have none: "tsflight"
// is the cold read, decoding every fetch), warmed by the unmeasured first
// fetch: a table read again, as a dashboard does. The order is A B C D,
// D C B A, ...
func BenchmarkFlightDoGetPyArrow(b *testing.B) {
	for _, shape := range []string{"hourly", "one-segment"} {
		b.Run(shape, func(b *testing.B) { benchDoGetPyArrow(b, shape) })
	}
}

func benchDoGetPyArrow(b *testing.B, shape string) {
	py := needPyArrow(b)
	root := tsbsTable(b, shape)
	ts := startBenchServer(b, "tsflight", root)
	files, rows := saveEndpoints(b, ts, b.TempDir())
	pa := startProcServer(b, exec.Command(py, append([]string{filepath.Join("testdata", "pyarrow_ceiling.py")}, files...)...))
	cached := startBenchServer(b, "memory-zerocopy", root)
	hot := startBenchServer(b, "tsflight", root, "TSFLIGHT_BENCH_SCAN_CACHE_MIB=512")
	ctx := context.Background()
	type sample struct {
		rate float64       // rows/s
		cpu  time.Duration // server CPU
	}
	var tsS, paS, caS, hoS []sample
	fetch := func(srv *benchServer) sample {
		pid := srv.cmd.Process.Pid
		cpu0, start := cpuTime(pid), time.Now()
		n, _, err := fetchAll(ctx, srv.client)
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(start)
		if n != rows {
			b.Fatalf("fetched %d rows, want %d", n, rows)
		}
		return sample{rate: float64(n) / el.Seconds(), cpu: cpuTime(pid) - cpu0}
	}
	// One fetch from each unmeasured: connections and buffers warm up.
	fetch(ts)
	fetch(pa)
	fetch(cached)
	fetch(hot) // fills its scan cache
	b.ResetTimer()
	for i := range b.N {
		testkit.Alternate(i,
			func() { tsS = append(tsS, fetch(ts)) },
			func() { paS = append(paS, fetch(pa)) },
			func() { caS = append(caS, fetch(cached)) },
			func() { hoS = append(hoS, fetch(hot)) })
	}
	b.StopTimer()
	medianRate := func(v []sample) float64 {
		r := make([]float64, len(v))
		for i, s := range v {
			r[i] = s.rate
		}
		return testkit.Median(r)
	}
	meanCPU := func(v []sample) float64 {
		var t time.Duration
		for _, s := range v {
			t += s.cpu
		}
		return float64(t.Milliseconds()) / float64(len(v))
	}
	b.ReportMetric(medianRate(tsS), "tsflight-rows/s")
	b.ReportMetric(medianRate(paS), "pyarrow-rows/s")
	b.ReportMetric(medianRate(tsS)/medianRate(paS), "ratio")
	b.ReportMetric(meanCPU(tsS), "tsflight-cpu-ms/fetch")
	b.ReportMetric(meanCPU(paS), "pyarrow-cpu-ms/fetch")
	b.ReportMetric(medianRate(caS)/medianRate(paS), "cached-ratio")
	b.ReportMetric(meanCPU(caS), "cached-cpu-ms/fetch")
	b.ReportMetric(medianRate(hoS)/medianRate(paS), "hot-ratio")
	b.ReportMetric(meanCPU(hoS), "hot-cpu-ms/fetch")
	b.ReportMetric(float64(len(files)), "endpoints")
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(0, "ns/op")
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTSBSScan is the decoding half of a whole-table DoGet, in this
// process and without gRPC: one op scans every row of the
// BenchmarkFlightDoGetPyArrow table as DoGet does (its batch size, the
// scan pool), reading every batch's rows. cpu-ms/op is this process's CPU
// time per scan, which a loaded machine hardly changes: the cost of
// decoding Parquet per request that an in-memory server does not pay.
func BenchmarkTSBSScan(b *testing.B) {
	for _, shape := range []string{"hourly", "one-segment"} {
		b.Run(shape, func(b *testing.B) {
			root := tsbsTable(b, shape)
			opts := DefaultOptions(root)
			if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_BENCH_BATCHROWS")); err == nil {
				opts.BatchRows = v
			}
			svc, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			tb, err := svc.Table(ctx, "cpu")
			if err != nil {
				b.Fatal(err)
			}
			want := tsbsParams().Rows()
			scan := func() {
				rdr, err := tb.Scan(ctx, nil, tableformat.ScanOptions{BatchRows: opts.BatchRows, Parallelism: 1})
				if err != nil {
					b.Fatal(err)
				}
				defer rdr.Release()
				var rows int64
				for rdr.Next() {
					rows += rdr.RecordBatch().NumRows()
				}
				if err := rdr.Err(); err != nil {
					b.Fatal(err)
				}
				if rows != want {
					b.Fatalf("scanned %d rows, want %d", rows, want)
				}
			}
			scan()
			cpu0 := processCPU()
			b.ResetTimer()
			for range b.N {
				scan()
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
