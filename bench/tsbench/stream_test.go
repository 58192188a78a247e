package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/bench/tsbs"
)

func TestPutWindow(t *testing.T) {
	for _, c := range []struct{ puts, want int }{{10_000, 1000}, {50_000, 1000}, {300, 30}, {5, 1}, {0, 1}} {
		if got := putWindow(c.puts); got != c.want {
			t.Errorf("putWindow(%d) = %d, want %d", c.puts, got, c.want)
		}
	}
}

func TestWindowRatio(t *testing.T) {
	lat := []float64{1, 1, 5, 5, 2, 4}
	if got := windowRatio(lat, 2); got != 3 {
		t.Errorf("mean(2, 4) / mean(1, 1) = %v, want 3", got)
	}
	if got := windowRatio(lat, 7); got != 0 {
		t.Errorf("a window beyond the puts gives %v, want 0", got)
	}
}

func TestMaintenancePending(t *testing.T) {
	for _, c := range []struct {
		body           string
		pending, known bool
	}{
		{`{"table": "stream", "rows": 3}`, false, false},
		{`{"maintenance": {"pending": false}}`, false, true},
		{`{"maintenance": {"pending": true}}`, true, true},
		{`{"maintenance": {"pending": 0}}`, false, true},
		{`{"maintenance": {"pending": 3}}`, true, true},
		{`{"maintenance": {"pending": []}}`, false, true},
		{`{"maintenance": {"pending": [{"kind": "compact"}]}}`, true, true},
		{`{"maintenance": {"pending": {}}}`, false, true},
		{`{"maintenance": {"pending": null}}`, false, true},
		{`{"maintenance": {"last_compaction": "x"}}`, false, false},
		{`{"maintenance": null}`, false, false},
	} {
		var info map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.body), &info); err != nil {
			t.Fatal(err)
		}
		if p, k := maintenancePending(info); p != c.pending || k != c.known {
			t.Errorf("%s: pending %v known %v, want %v %v", c.body, p, k, c.pending, c.known)
		}
	}
}

// The stream tables' rows come one step at a time, each step every host
// in order, and they are the rows the generator gives in one piece.
// appendTimes appends the timestamps of b's first column to dst.
func appendTimes(dst []int64, b arrow.RecordBatch) []int64 {
	ts := b.Column(0).(*array.Timestamp)
	for i := range ts.Len() {
		dst = append(dst, int64(ts.Value(i)))
	}
	return dst
}

func TestEachStepMatchesBulk(t *testing.T) {
	base := tsbs.DefaultParams()
	p := streamParams(base, 3, 400, tsbs.DefaultBatchRows) // crosses an hour
	var steps []int
	var times []int64
	if err := eachStep(p, 0, 3, func(s int, b arrow.RecordBatch) error {
		steps = append(steps, s)
		times = appendTimes(times, b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 400 || steps[0] != 0 || steps[399] != 399 {
		t.Fatalf("steps %d…%d (%d), want 0…399", steps[0], steps[len(steps)-1], len(steps))
	}
	var bulk []int64
	for _, d := range p.Deliveries() {
		if err := p.Batches(memory.DefaultAllocator, d, func(b arrow.RecordBatch) error {
			bulk = appendTimes(bulk, b)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(bulk) != len(times) || len(bulk) != 1200 {
		t.Fatalf("%d rows by step, %d in bulk, want 1200", len(times), len(bulk))
	}
	for i := range bulk {
		if bulk[i] != times[i] {
			t.Fatalf("row %d: %d by step, %d in bulk", i, times[i], bulk[i])
		}
	}
	if want := p.StepTime(399).UnixMicro(); times[1199] != want {
		t.Errorf("last time %d, want %d", times[1199], want)
	}
	if p.Step != 10*time.Second {
		t.Errorf("step %v", p.Step)
	}
}

// addStreamRows adds every row of the stream workload to r, with made-up
// times: the stream table 1.2× the bulk table on reads.
func addStreamRows(r *report) {
	add := func(workload, system string, times []float64, rows int64) {
		r.add(&measurement{Group: streamGroup, Workload: workload, System: system, Times: times, Rows: rows})
	}
	lat := make([]float64, 300)
	for i := range lat {
		lat[i] = 0.02
	}
	add(wPut, sysStream, lat, streamHosts)
	add(wAllRows, sysStream, []float64{6}, 30_000)
	add(wAllRows, sysBulk, []float64{0.1}, 30_000)
	add(wSettle, sysStream, []float64{0.01}, 0)
	add(wSettle, sysBulk, []float64{0.01}, 0)
	for _, w := range streamReads {
		add(w, sysStream, []float64{0.012, 0.012, 0.012}, 1)
		add(w, sysBulk, []float64{0.01, 0.01, 0.01}, 1)
	}
	add(wWriterPut, sysWriters, []float64{0.01, 0.02, 0.03}, streamHosts)
	add(wWriterAll, sysWriters, []float64{0.2}, 32_000)
	r.Workloads = []string{"generate", "ingest", "scan", "sql", "coverage", "stream"}
	r.Stream = &streamFigures{Hosts: streamHosts, Puts: 300, Window: 30, Writers: 8, WriterPuts: 40,
		DiskBytesA: 3 << 20, DiskBytesB: 2 << 20, FilesA: 600, FilesB: 3}
}

func TestCheckReportWantsStreamRows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	r := fullReport()
	addStreamRows(r)
	md := writeAndCheck(t, r, dir, "a complete report with the stream rows")
	wantInMarkdown(t, md,
		"| stream | whole-table DoGet | bulk table | 1.2 | <= 1.5 | met |",
		"| stream | disk bytes after settling (3.0 MiB / 2.0 MiB) | bulk table | 1.5 | <= 2 | met |",
		"| stream | 8 writers: aggregate | (absolute) | 160 k rows/s | >= 100 k rows/s | met |",
		"| stream | DoPut mean, last 30 / first 30 puts | (absolute) | 1 | none |  |",
		"| stream | DoPut p50 (100 rows) | (absolute) | 20 ms | none |  |",
	)

	// Without the restart rows and the disk figures, the check fails.
	kept := r.Measurements[:0]
	for _, m := range r.Measurements {
		if m.Workload != wRestartGet {
			kept = append(kept, m)
		}
	}
	r.Measurements = kept
	r.Stream.DiskBytesA = 0
	wantCheckFails(t, r, path, "a report without the restart rows",
		`no measurement of stream "restart to first DoGet batch" on stream table`,
		`no comparison of stream "restart to first DoGet batch" against "bulk table"`,
		`no comparison of stream "disk bytes after settling" against "bulk table"`,
	)

	// A run that lists its workloads without the stream workload fails.
	r = fullReport()
	r.Workloads = []string{"generate", "ingest", "scan", "sql", "coverage"}
	if err := r.writeJSON(path); err != nil {
		t.Fatal(err)
	}
	if err := checkReport(path); err == nil || !strings.Contains(err.Error(), `lack "stream"`) {
		t.Errorf("a run without the stream workload: %v", err)
	}
}

func TestChartCutsHugeRatios(t *testing.T) {
	r := fullReport()
	addStreamRows(r)
	m := r.find(streamGroup, wDoGet, sysStream)
	m.Times = []float64{10, 10, 10} // 1000× the bulk table
	m.stat = statsOf(m.Times)
	retarget(r)
	var b bytes.Buffer
	if err := r.writeChart(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "&gt; 1000.00") {
		t.Errorf("the chart does not cut the 1000× bar")
	}
	if strings.Contains(b.String(), ">1000.0<") {
		t.Errorf("the chart's axis runs to 1000")
	}
}
