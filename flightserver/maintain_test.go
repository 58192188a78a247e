package flightserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/tableformat"
)

// startMaintenance runs ts's maintenance until the test ends (and checks
// that it returns once stopped).
func startMaintenance(t *testing.T, ts *testServer, opts *MaintenanceOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.svc.RunMaintenance(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("RunMaintenance: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("RunMaintenance did not return 10 s after its context ended")
		}
	})
	if !waitFor(5*time.Second, func() bool { return ts.svc.maintenanceInfo("", nil).Enabled }) {
		t.Fatal("maintenance did not start")
	}
}

func (ts *testServer) maintenance(ctx context.Context, table string) map[string]any {
	ts.t.Helper()
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": table})
	m, ok := d["maintenance"].(map[string]any)
	if !ok {
		ts.t.Fatalf("describe-table has no maintenance: %v", d)
	}
	m["segments"] = d["segments"]
	m["rows"] = d["rows"]
	return m
}

// putSmall makes n puts of one step of 20 hosts each to table cpu.
func (ts *testServer) putSmall(ctx context.Context, first, n int) []row {
	ts.t.Helper()
	var all []row
	for i := range n {
		rows := genRows(t0.Add(timeOfStep(first+i)), 1, 20)
		batches := buildBatches(ts.cliMem, rows, len(rows))
		_, err := ts.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
		releaseAll(batches)
		if err != nil {
			ts.t.Fatalf("put %d: %v", first+i, err)
		}
		all = append(all, rows...)
	}
	return all
}

// TestMaintenanceCompactsSmallSegments: once a table has enough small
// segments, maintenance compacts them (woken by the append, long before
// its interval), describe-table says what is pending and what was done,
// and the table reads the same rows.
func TestMaintenanceCompactsSmallSegments(t *testing.T) {
	ts, ctx := startWithCPU(t)
	if m := ts.maintenance(ctx, "cpu"); m["enabled"] != false || m["pending"] != 0.0 {
		t.Fatalf("before maintenance runs: %v", m)
	}
	startMaintenance(t, ts, &MaintenanceOptions{Interval: time.Hour, MinSmallSegments: 6, BytesPerSecond: -1})
	want := ts.putSmall(ctx, 0, 5)
	m := ts.maintenance(ctx, "cpu")
	// Pending: merged once the table is quiet (30 s), if no tier fills first.
	if m["enabled"] != true || m["small_segments"] != 5.0 || m["pending"] != 5.0 || m["min_small_segments"] != 6.0 || m["runs"] != 0.0 {
		t.Fatalf("below the threshold: %v", m)
	}
	want = append(want, ts.putSmall(ctx, 5, 1)...)
	if !waitFor(10*time.Second, func() bool { return ts.maintenance(ctx, "cpu")["runs"] == 1.0 }) {
		t.Fatalf("no compaction after the sixth small segment: %v", ts.maintenance(ctx, "cpu"))
	}
	m = ts.maintenance(ctx, "cpu")
	if m["segments"] != 1.0 || m["small_segments"] != 1.0 || m["pending"] != 0.0 || m["merged"] != 6.0 || m["last_run"] == nil || m["last_error"] != nil {
		t.Fatalf("after the compaction: %v", m)
	}
	got := ts.readAll(t, ctx, "cpu")
	sameRows(t, "after maintenance", got.rows, want)
}

// TestMaintenancePauseAndResume: a paused table is left alone however many
// small segments it gets; resuming compacts it. The action answers for one
// table or all, and refuses bad bodies.
func TestMaintenancePauseAndResume(t *testing.T) {
	ts, ctx := startWithCPU(t)
	startMaintenance(t, ts, &MaintenanceOptions{Interval: 50 * time.Millisecond, MinSmallSegments: 2, BytesPerSecond: -1})
	res := ts.mustAction(ctx, ActionMaintenance, map[string]any{"table": "cpu", "paused": true})
	tables := res["tables"].([]any)
	if res["enabled"] != true || res["paused_all"] != false || len(tables) != 1 || tables[0].(map[string]any)["paused"] != true {
		t.Fatalf("pause: %v", res)
	}
	want := ts.putSmall(ctx, 0, 4)
	time.Sleep(300 * time.Millisecond) // six ticks
	if m := ts.maintenance(ctx, "cpu"); m["segments"] != 4.0 || m["paused"] != true || m["pending"] != 0.0 || m["runs"] != 0.0 {
		t.Fatalf("paused table after 4 small puts: %v", m)
	}
	// Pausing everything and resuming everything.
	if res := ts.mustAction(ctx, ActionMaintenance, map[string]any{"paused": true}); res["paused_all"] != true {
		t.Fatalf("pause all: %v", res)
	}
	if res := ts.mustAction(ctx, ActionMaintenance, map[string]any{"paused": false}); res["paused_all"] != false {
		t.Fatalf("resume all: %v", res)
	}
	if !waitFor(10*time.Second, func() bool { return ts.maintenance(ctx, "cpu")["segments"] == 1.0 }) {
		t.Fatalf("not compacted after resuming: %v", ts.maintenance(ctx, "cpu"))
	}
	got := ts.readAll(t, ctx, "cpu")
	sameRows(t, "after resuming", got.rows, want)
	// Status of every table.
	if res := ts.mustAction(ctx, ActionMaintenance, map[string]any{}); len(res["tables"].([]any)) != 1 {
		t.Fatalf("status of all tables: %v", res)
	}
	_, err := ts.action(ctx, ActionMaintenance, map[string]any{"table": "nope"})
	wantCode(t, "unknown table", err, codes.NotFound, `"nope"`)
	_, err = ts.action(ctx, ActionMaintenance, map[string]any{"table": "../x"})
	wantCode(t, "bad table name", err, codes.InvalidArgument, "not allowed")
	_, err = ts.action(ctx, ActionMaintenance, map[string]any{"pause": true})
	wantCode(t, "unknown field", err, codes.InvalidArgument, "pause")
	_, err = ts.action(ctx, ActionMaintenance, map[string]any{"paused": "yes"})
	wantCode(t, "paused not a bool", err, codes.InvalidArgument, "paused")
}

// TestMaintenanceDuringAppends: writers keep appending while maintenance
// compacts: no append fails, and the table ends with every row once.
func TestMaintenanceDuringAppends(t *testing.T) {
	ts, ctx := startWithCPU(t)
	startMaintenance(t, ts, &MaintenanceOptions{Interval: 20 * time.Millisecond, MinSmallSegments: 2, BytesPerSecond: -1, QuietAfter: 300 * time.Millisecond})
	const writers, puts = 4, 15
	var (
		mu   sync.Mutex
		want []row
		wg   sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range puts {
				rows := genRows(t0.Add(timeOfStep(w*1000+p)), 1, 10)
				batches := buildBatches(ts.cliMem, rows, len(rows))
				_, err := ts.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
				releaseAll(batches)
				if err != nil {
					t.Errorf("writer %d put %d: %v", w, p, err)
					return
				}
				mu.Lock()
				want = append(want, rows...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if !waitFor(10*time.Second, func() bool { m := ts.maintenance(ctx, "cpu"); return m["pending"] == 0.0 && m["running"] == false }) {
		t.Fatalf("maintenance did not settle: %v", ts.maintenance(ctx, "cpu"))
	}
	m := ts.maintenance(ctx, "cpu")
	if m["runs"] == 0.0 || m["rows"] != float64(len(want)) {
		t.Fatalf("after the appends: %v", m)
	}
	got := ts.readAll(t, ctx, "cpu")
	sameRows(t, "appends during maintenance", got.rows, want)
	t.Logf("%d puts, %d compactions merging %v segments, %v segments left", writers*puts, int(m["runs"].(float64)), m["merged"], m["segments"])
}

// TestMaintenanceRunsOnce: a second RunMaintenance on one service is
// refused while the first runs.
func TestMaintenanceRunsOnce(t *testing.T) {
	ts := startServer(t, nil)
	startMaintenance(t, ts, &MaintenanceOptions{Interval: time.Hour})
	if err := ts.svc.RunMaintenance(context.Background(), nil); err == nil {
		t.Fatal("a second RunMaintenance was accepted")
	}
}

// TestMaintenanceTiers: while a table takes appends, only segments of
// similar size are merged (a large one is not rewritten for every few
// small ones); once the table is quiet, every small segment is.
func TestMaintenanceTiers(t *testing.T) {
	ts, ctx := startWithCPU(t)
	startMaintenance(t, ts, &MaintenanceOptions{Interval: 50 * time.Millisecond, MinSmallSegments: 4, BytesPerSecond: -1, QuietAfter: 8 * time.Second})
	big := genRows(t0.Add(timeOfStep(10000)), 1000, 40)
	batches := buildBatches(ts.cliMem, big, 8192)
	_, err := ts.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
	releaseAll(batches)
	if err != nil {
		t.Fatal(err)
	}
	if m := ts.maintenance(ctx, "cpu"); m["small_bytes"].(float64) < tierBase {
		t.Fatalf("the big put wrote %v bytes, want a segment over the first tier (%d)", m["small_bytes"], tierBase)
	}
	want := append(big, ts.putSmall(ctx, 0, 4)...)
	// The busy merge must come before the table turns quiet (QuietAfter:
	// 8 s, long enough for a loaded 2-core CI machine; 2 s of 3 was not).
	if !waitFor(7*time.Second, func() bool { return ts.maintenance(ctx, "cpu")["runs"] == 1.0 }) {
		t.Fatalf("the four small segments were not merged: %v", ts.maintenance(ctx, "cpu"))
	}
	if m := ts.maintenance(ctx, "cpu"); m["segments"] != 2.0 || m["merged"] != 4.0 {
		t.Fatalf("busy table: %v, want the big segment kept and the four small ones merged", m)
	}
	// Quiet: the two small segments become one (and the run that merged
	// them has finished: its segment shows before its counts do).
	if !waitFor(30*time.Second, func() bool { m := ts.maintenance(ctx, "cpu"); return m["segments"] == 1.0 && m["running"] == false }) {
		t.Fatalf("quiet table not merged: %v", ts.maintenance(ctx, "cpu"))
	}
	if m := ts.maintenance(ctx, "cpu"); m["runs"] != 2.0 || m["merged"] != 6.0 || m["pending"] != 0.0 {
		t.Fatalf("after the quiet merge: %v", m)
	}
	got := ts.readAll(t, ctx, "cpu")
	sameRows(t, "after the tiers", got.rows, want)
}

// TestMaintenanceMemoryOptions: the memory bound of background compaction
// defaults to 64 MiB, takes Compact.MemoryBytes when only that is set, is
// overridden by MemoryBytes, and a bound compaction would refuse makes
// RunMaintenance fail before it starts.
func TestMaintenanceMemoryOptions(t *testing.T) {
	for _, c := range []struct {
		opts MaintenanceOptions
		want int64
	}{
		{MaintenanceOptions{}, DefaultMaintenanceMemoryBytes},
		{*DefaultMaintenanceOptions(), DefaultMaintenanceMemoryBytes},
		{MaintenanceOptions{Compact: &tableformat.CompactOptions{MemoryBytes: 8 << 20}}, 8 << 20},
		{MaintenanceOptions{Compact: &tableformat.CompactOptions{}}, DefaultMaintenanceMemoryBytes},
		{MaintenanceOptions{MemoryBytes: 2 << 20, Compact: &tableformat.CompactOptions{MemoryBytes: 8 << 20}}, 2 << 20},
	} {
		if err := c.opts.check(); err != nil {
			t.Errorf("%+v: %v", c.opts, err)
		}
		if r := c.opts.resolve(); r.MemoryBytes != c.want || r.Compact.MemoryBytes != c.want {
			t.Errorf("%+v resolves to %d (compaction %d), want %d", c.opts, r.MemoryBytes, r.Compact.MemoryBytes, c.want)
		}
	}
	ts := startServer(t, nil)
	for _, bad := range []int64{-1, 1, tableformat.MinCompactMemoryBytes - 1} {
		err := ts.svc.RunMaintenance(context.Background(), &MaintenanceOptions{MemoryBytes: bad})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("MemoryBytes must be at least 1048576 (1 MiB; 0 = 67108864), got %d", bad)) {
			t.Errorf("MemoryBytes %d: %v", bad, err)
		}
	}
	if ts.svc.maintenanceInfo("", nil).Enabled {
		t.Fatal("maintenance runs after refusing its options")
	}
}

// TestMaintenanceMemoryBound: with a 1 MiB bound, maintenance compacts
// small segments whose rows decode to several times that by spilling
// sorted runs; its log says how much it held (within the bound) and how
// much it spilled, the table reads the same rows, and every Arrow buffer
// went through the server's allocator (checked to be freed at the end).
func TestMaintenanceMemoryBound(t *testing.T) {
	ts, logs := startLoggedServer(t)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	var want []row
	for i := range 6 {
		rows := genRows(t0.Add(timeOfStep(i*100)), 100, 20)
		batches := buildBatches(ts.cliMem, rows, len(rows))
		_, err := ts.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
		releaseAll(batches)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rows...)
	}
	startMaintenance(t, ts, &MaintenanceOptions{Interval: 50 * time.Millisecond, MinSmallSegments: 2, BytesPerSecond: -1,
		QuietAfter: time.Millisecond, MemoryBytes: tableformat.MinCompactMemoryBytes})
	// Done: one segment left, and a log line for every compaction (the
	// line follows the commit).
	compacted := func() []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "maintenance: compacted") {
				var line map[string]any
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatal(err)
				}
				out = append(out, line)
			}
		}
		return out
	}
	if !waitFor(20*time.Second, func() bool {
		m := ts.maintenance(ctx, "cpu")
		return m["segments"] == 1.0 && m["running"] == false && float64(len(compacted())) == m["runs"]
	}) {
		t.Fatalf("not compacted: %v", ts.maintenance(ctx, "cpu"))
	}
	spilled := 0.0
	for _, line := range compacted() {
		peak, _ := line["memory_peak"].(float64)
		runs, _ := line["spilled_runs"].(float64)
		t.Logf("compacted %v segments: memory_peak %v, spilled_runs %v, spill_bytes %v", line["segments"], line["memory_peak"], line["spilled_runs"], line["spill_bytes"])
		if peak <= 0 || peak > tableformat.MinCompactMemoryBytes {
			t.Fatalf("maintenance log: %v", line)
		}
		spilled = max(spilled, runs)
	}
	if spilled < 2 {
		t.Fatalf("no compaction spilled: %v", compacted())
	}
	got := ts.readAll(t, ctx, "cpu")
	sameRows(t, "after a bounded compaction", got.rows, want)
}
