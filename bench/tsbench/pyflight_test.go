package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tsflight/tsflight/bench/tsbs"
)

// addPyRows adds every row of the Python workloads and of the big
// segment to r, with made-up times, and lists their steps as run.
func addPyRows(r *report) {
	add := func(group, workload, system string, times, cpu []float64, rows, bytes int64) {
		r.add(&measurement{Group: group, Workload: workload, System: system, Times: times, CPU: cpu, Rows: rows, Bytes: bytes})
	}
	add("pyingest", pyIngestWorkload, "tsflight", []float64{0.4, 0.4, 0.4}, []float64{0.3, 0.5, 0.4}, 864_000, 150e6)
	add("pyingest", pyIngestWorkload, pkgName, []float64{1, 1, 1}, nil, 864_000, 150e6)
	add("pyscan", "whole table", "tsflight", []float64{0.3, 0.3, 0.3}, nil, 864_000, 150e6)
	add("pyscan", "whole table", cppName, []float64{0.125, 0.125, 0.125}, nil, 864_000, 150e6)
	add("pyscan", "whole table", pkgName, []float64{0.3, 0.3, 0.3}, nil, 864_000, 150e6)
	ms := func(v float64) []float64 { // 100 runs: 89 of v ms, then 11 of 10·v: p90 is 10·v
		out := make([]float64, 100)
		for i := range out {
			out[i] = v / 1e3
			if i >= 89 {
				out[i] *= 10
			}
		}
		return out
	}
	add("latency", latSelect1, "tsflight", ms(1.5), nil, 0, 0)
	add("latency", latPrepared, "tsflight", ms(2), nil, 0, 0)
	add("latency", latFloor, "tsflight", ms(0.5), nil, 0, 0)
	for _, w := range bigsegWorkloads {
		add("bigseg", w, "tsflight", []float64{0.011, 0.011}, nil, 1, 0)
		add("bigseg", w, "DuckDB", []float64{0.01, 0.01}, nil, 1, 0)
	}
	r.Workloads = append(r.Workloads, "pyingest", "pyscan", "latency", "bigseg")
}

func TestReportPyRows(t *testing.T) {
	dir := t.TempDir()
	r := fullReport()
	addStreamRows(r)
	addPyRows(r)
	md := writeAndCheck(t, r, dir, "a complete report with the Python and big-segment rows")
	wantInMarkdown(t, md,
		"| pyingest | all rows, one call | timeseries-table-format | 0.4 | <= 0.5 (>= 2x the package) | met |",
		"| pyscan | whole table | C++ Flight (pyarrow) | 2.4 | <= 1.11 (>= 0.9x the C++ rate) | **missed** |",
		"| pyscan | whole table | timeseries-table-format | 1 | <= 1.0 | met |",
		"| pyscan | whole table, tsflight (MB/s) | (absolute) | 500 MB/s | none |  |",
		"| pyscan | whole table, C++ Flight (pyarrow) (MB/s) | (absolute) | 1200 MB/s | none |  |",
		"| latency | SELECT 1, new cursor (p50) | (absolute) | 1.5 ms | <= 2 ms | met |",
		"| latency | SELECT 1, new cursor (p90) | (absolute) | 15 ms | none |  |",
		"| latency | SELECT 1, prepared once, executed again (p50) | (absolute) | 2 ms | <= 1.5 ms | **missed** |",
		"| latency | list_actions (the floor) (p50) | (absolute) | 0.5 ms | none |  |",
		"| bigseg | count(*), 10 minutes | DuckDB | 1.1 | <= 1.2 | met |",
		// The mean CPU per run, where it was measured.
		"| pyingest | all rows, one call | tsflight | 400.00 ms | 400.00 ms–400.00 ms | 400.00 ms | 3 | 864000 | 2.16 M | 400.00 ms | - |",
		"| pyingest | all rows, one call | timeseries-table-format | 1.00 s | 1.00 s–1.00 s | 1.00 s | 3 | 864000 | 864.0 k | - | - |",
	)
}

func TestCheckReportWantsPyRows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	r := fullReport()
	addStreamRows(r)
	addPyRows(r)
	kept := r.Measurements[:0]
	for _, m := range r.Measurements {
		if m.System == cppName || (m.Group == "bigseg" && m.System == "DuckDB" && m.Workload == bigsegWorkloads[1]) {
			continue
		}
		kept = append(kept, m)
	}
	r.Measurements = kept
	r.find("pyingest", pyIngestWorkload, pkgName).Rows = 0
	wantCheckFails(t, r, path, "a report without the C++ server's row",
		`no measurement of pyscan "whole table" on C++ Flight (pyarrow)`,
		`no comparison of pyscan "whole table" against "C++ Flight (pyarrow)"`,
		`no comparison of pyscan "whole table, C++ Flight (pyarrow) (MB/s)" against ""`,
		`no measurement of bigseg "count(*), 10 minutes" on DuckDB`,
		`pyingest "all rows, one call" on timeseries-table-format: 0 rows`,
	)

	// A report whose run did not list these steps (older ones) is checked
	// without them.
	r = fullReport()
	addStreamRows(r)
	if err := checkJSON(t, r, path); err != nil {
		t.Errorf("a report from before the Python workloads fails the check: %v", err)
	}
}

// The committed full run predates the Python workloads and must stay
// valid until it is run again.
func TestCommittedResultsPassTheCheck(t *testing.T) {
	if err := checkReport(filepath.Join("..", "results.json")); err != nil {
		t.Errorf("bench/results.json: %v", err)
	}
}

func TestABBA(t *testing.T) {
	var got []string
	for i := range 4 {
		got = append(got, abba(i, "A", "B")...)
	}
	if want := []string{"A", "B", "B", "A", "A", "B", "B", "A"}; !slices.Equal(got, want) {
		t.Errorf("abba: %v, want %v", got, want)
	}
	if got := abba(1, "A", "B", "C"); !slices.Equal(got, []string{"C", "B", "A"}) {
		t.Errorf("abba(1, A, B, C) = %v", got)
	}
}

func TestBigsegQueries(t *testing.T) {
	p := pyParams("full", tsbs.DefaultParams())
	if p.Hosts != 400 || p.Duration != 6*time.Hour || p.Rows() < 800_000 {
		t.Fatalf("full mode's Python data: %d hosts, %v, %d rows; want 400 hosts, 6 h, >= 800,000 rows", p.Hosts, p.Duration, p.Rows())
	}
	qs := bigsegQueries(p)
	if len(qs) != 2 || qs[0].Name != bigsegWorkloads[0] || qs[1].Name != bigsegWorkloads[1] {
		t.Fatalf("queries %v", qs)
	}
	var tsbsOne string
	for _, q := range p.Queries(table) {
		if q.Name == "single-groupby-1-1-1" {
			tsbsOne = q.SQL
		}
	}
	if tsbsOne == "" || qs[0].SQL != tsbsOne {
		t.Errorf("the one-host query %q is not TSBS's single-groupby-1-1-1 %q", qs[0].SQL, tsbsOne)
	}
	from := p.Start.Add(3 * time.Hour).UTC()
	want := "SELECT count(*) AS n FROM cpu WHERE time >= '" + from.Format(time.RFC3339Nano) + "' AND time < '" + from.Add(10*time.Minute).Format(time.RFC3339Nano) + "'"
	if qs[1].SQL != want {
		t.Errorf("count query\n%s\nwant\n%s", qs[1].SQL, want)
	}
	if q := pyParams("quick", tsbs.DefaultParams()); q != tsbs.DefaultParams() {
		t.Errorf("quick mode's Python data differs from the mode's: %+v", q)
	}
}

// The Python side's self-check (bench/peers/test_flight_peer.py: the C++
// server serves the batches it was given, as the scan mode's client reads
// them), run here so that CI runs it.
func TestFlightPeerSelfCheck(t *testing.T) {
	python := os.Getenv("TSFLIGHT_PYTHON")
	if python == "" {
		python = "python3"
	}
	skip := func(reason string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: not skipping)", reason)
		}
		t.Skip(reason)
	}
	if _, err := exec.LookPath(python); err != nil {
		skip(fmt.Sprintf("no Python interpreter %q (set TSFLIGHT_PYTHON)", python))
	}
	if err := exec.Command(python, "-c", "import pyarrow.flight").Run(); err != nil {
		skip("pyarrow.flight is not installed: pip install -r .ci/requirements.txt")
	}
	out, err := exec.Command(python, filepath.Join("..", "peers", "test_flight_peer.py")).CombinedOutput()
	if err != nil {
		t.Fatalf("test_flight_peer.py: %v\n%s", err, out)
	}
}
