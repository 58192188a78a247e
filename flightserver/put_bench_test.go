package flightserver

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tsflight/tsflight/bench/tsbs"
	"github.com/tsflight/tsflight/internal/testkit"
)

// BenchmarkPyarrowPutRatio measures issue 21's ingest target: one DoPut of
// 864,000 TSBS rows (400 hosts × 6 h) from a pyarrow client to a tsflight
// server in another process, against the 0.9.0 package's in-process
// append of the same pyarrow Table, alternating A B B A in one Python run
// (testdata/put_ratio.py). One op is one put and one append. It reports
// put-s and append-s (medians), put/append (the target is ≤ 0.5), the
// server's CPU seconds per put (from /proc) and the pyarrow client's, the
// package's CPU seconds
// per append (all its threads), the segment size ratio and, as a floor for
// encoding the rows, pyarrow's own Parquet writer (floor-s and
// floor-cpu-s: C++, same codec and settings, no fsync). Run:
//
//	go test -run '^$' -bench PyarrowPutRatio -benchtime 5x ./flightserver/
//
// TSFLIGHT_BENCH_PUT_CHUNK sets the client's batch size in rows (default:
// the Parquet files' row groups, 144,000 rows), TSFLIGHT_BENCH_PUT_IPC
// the client's IPC compression (lz4 or zstd), and TSFLIGHT_BENCH_CPUPROF
// a CPU profile file for the server. It is skipped without python3,
// pyarrow and timeseries-table-format 0.9.0, except under CI=true.
func BenchmarkPyarrowPutRatio(b *testing.B) {
	py := benchPython(b)
	files := tsbsParquet(b)
	root := b.TempDir()
	srv := startBenchServer(b, "tsflight", root)
	chunk := 0
	if v := os.Getenv("TSFLIGHT_BENCH_PUT_CHUNK"); v != "" {
		if err := json.Unmarshal([]byte(v), &chunk); err != nil {
			b.Fatalf("TSFLIGHT_BENCH_PUT_CHUNK: %v", err)
		}
	}
	var compression any
	if v := os.Getenv("TSFLIGHT_BENCH_PUT_IPC"); v != "" {
		compression = v
	}
	args, err := json.Marshal(map[string]any{
		"addr": srv.addr, "server_pid": srv.cmd.Process.Pid, "server_root": root,
		"files": files, "work_dir": b.TempDir(), "rounds": b.N,
		"chunk_rows": chunk, "compression": compression, "floor": true,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cmd := exec.Command(py, filepath.Join("testdata", "put_ratio.py"), string(args))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("put_ratio.py: %v", err)
	}
	var res struct {
		Rows    int64 `json:"rows"`
		Batches int   `json:"batches"`
		Puts    []struct {
			Wall  float64 `json:"wall_s"`
			CPU   float64 `json:"server_cpu_s"`
			Cli   float64 `json:"client_cpu_s"`
			Bytes int64   `json:"segment_bytes"`
		} `json:"puts"`
		Appends []struct {
			Wall  float64 `json:"wall_s"`
			CPU   float64 `json:"cpu_s"`
			Bytes int64   `json:"segment_bytes"`
		} `json:"appends"`
		Floor []struct {
			Wall float64 `json:"wall_s"`
			CPU  float64 `json:"cpu_s"`
		} `json:"floor"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("put_ratio.py printed %q: %v", out, err)
	}
	if len(res.Puts) != b.N || len(res.Appends) != b.N {
		b.Fatalf("put_ratio.py timed %d puts and %d appends, want %d each", len(res.Puts), len(res.Appends), b.N)
	}
	var put, cpu, cli, app, appCPU, floor, floorCPU []float64
	for i := range b.N {
		put = append(put, res.Puts[i].Wall)
		cpu = append(cpu, res.Puts[i].CPU)
		cli = append(cli, res.Puts[i].Cli)
		app = append(app, res.Appends[i].Wall)
		appCPU = append(appCPU, res.Appends[i].CPU)
	}
	for _, f := range res.Floor {
		floor = append(floor, f.Wall)
		floorCPU = append(floorCPU, f.CPU)
	}
	b.ReportMetric(testkit.Median(put), "put-s")
	b.ReportMetric(testkit.Median(app), "append-s")
	b.ReportMetric(testkit.Median(put)/testkit.Median(app), "put/append")
	b.ReportMetric(testkit.Median(cpu), "server-cpu-s/put")
	b.ReportMetric(testkit.Median(cli), "client-cpu-s/put")
	b.ReportMetric(testkit.Median(appCPU), "append-cpu-s")
	b.ReportMetric(float64(res.Puts[0].Bytes)/float64(res.Appends[0].Bytes), "size/package")
	if len(floor) > 0 {
		b.ReportMetric(testkit.Median(floor), "floor-s")
		b.ReportMetric(testkit.Median(floorCPU), "floor-cpu-s")
	}
	b.Logf("%d rows in %d batches; puts %v s (server CPU %v s), appends %v s, pyarrow write_table %v s",
		res.Rows, res.Batches, rounded(put), rounded(cpu), rounded(app), rounded(floor))
}

func rounded(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(x*1e3) / 1e3
	}
	return out
}

// benchPython returns python3 with pyarrow and timeseries-table-format
// 0.9.0, skipping the benchmark when they are missing outside CI.
func benchPython(b *testing.B) string {
	b.Helper()
	py := os.Getenv("TSFLIGHT_PYTHON")
	if py == "" {
		py = "python3"
	}
	out, err := exec.Command(py, "-c", "import pyarrow.flight, timeseries_table_format as m; print(m.__version__)").CombinedOutput()
	if err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("CI must have pyarrow and timeseries-table-format 0.9.0: %v: %s", err, out)
		}
		b.Skipf("pyarrow or timeseries-table-format missing (%v)", err)
	}
	return py
}

// tsbsParquet writes (once, in the temporary directory) 400 hosts × 6 h
// of TSBS cpu-only rows as Parquet, one file per hour, and returns the
// files.
func tsbsParquet(b *testing.B) []string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), "tsflight-bench-tsbs-400x6h")
	m, err := tsbs.ReadManifest(dir)
	if err != nil {
		os.RemoveAll(dir)
		p := tsbs.Params{Hosts: 400, Start: tsbs.TSBSStart, Duration: 6 * time.Hour, Seed: 123}
		if _, err := p.WriteParquet(dir); err != nil {
			b.Fatal(err)
		}
		if m, err = tsbs.ReadManifest(dir); err != nil {
			b.Fatal(err)
		}
	}
	var files []string
	for _, f := range m.Files {
		files = append(files, f.Path)
	}
	return files
}
