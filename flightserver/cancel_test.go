package flightserver

import (
	"context"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/internal/testkit"
)

// bigBatch builds steps × hosts rows starting at step first, quickly (no
// per-row model): usage_user = step, the others constant.
func bigBatch(mem memory.Allocator, first, steps, hosts int) arrow.RecordBatch {
	n := steps * hosts
	tsb := array.NewTimestampBuilder(mem, tsbsSchema.Field(0).Type.(*arrow.TimestampType))
	hb := array.NewStringBuilder(mem)
	ints := [3]*array.Int64Builder{array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem)}
	tsb.Reserve(n)
	hb.Reserve(n)
	hostNames := make([]string, hosts)
	for h := range hosts {
		hostNames[h] = "host_" + string(rune('a'+h%26)) + string(rune('a'+h/26))
	}
	for s := first; s < first+steps; s++ {
		ts := arrow.Timestamp(t0.Add(timeOfStep(s)).UnixNano())
		for h := range hosts {
			tsb.UnsafeAppend(ts)
			hb.Append(hostNames[h])
		}
	}
	for i, b := range ints {
		b.Reserve(n)
		for s := first; s < first+steps; s++ {
			for range hosts {
				b.UnsafeAppend(int64(s * (1 - i/2)))
			}
		}
	}
	cols := []arrow.Array{tsb.NewArray(), hb.NewArray(), ints[0].NewArray(), ints[1].NewArray(), ints[2].NewArray()}
	tsb.Release()
	hb.Release()
	for _, b := range ints {
		b.Release()
	}
	rec := array.NewRecordBatch(tsbsSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// loadBig puts segments × stepsPerSeg × hosts rows, one segment per put,
// in batches of batchSteps × hosts rows.
func loadBig(t *testing.T, ts *testServer, name string, segments, stepsPerSeg, hosts, batchSteps int) int {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, name)
	for seg := range segments {
		var batches []arrow.RecordBatch
		for s := 0; s < stepsPerSeg; s += batchSteps {
			batches = append(batches, bigBatch(ts.cliMem, seg*stepsPerSeg+s, min(batchSteps, stepsPerSeg-s), hosts))
		}
		res, err := ts.put(ctx, pathDesc(name), tsbsSchema, batches...)
		releaseAll(batches)
		if err != nil {
			t.Fatalf("put %d: %v", seg, err)
		}
		if len(res) != 1 || res[0].Rows != uint64(stepsPerSeg*hosts) {
			t.Fatalf("put %d: %+v", seg, res)
		}
	}
	return segments * stepsPerSeg * hosts
}

func TestLargeScanBatchesAndCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a few million rows")
	}
	ts := startServer(t, func(o *Options) { o.MaxEndpoints = 2 })
	ctx := ctxT(t)
	// 4 segments of 600,000 rows (6,000 steps × 100 hosts): 2.4 M rows.
	total := loadBig(t, ts, "big", 4, 6000, 100, 700)

	// A full read: every batch but the last of each endpoint holds 64 Ki
	// to 128 Ki rows.
	info := ts.info(ctx, pathDesc("big"))
	if len(info.Endpoint) != 2 || info.TotalRecords != int64(total) {
		t.Fatalf("%d endpoints and %d rows, want 2 and %d", len(info.Endpoint), info.TotalRecords, total)
	}
	var rows int64
	for i, ep := range info.Endpoint {
		rdr := ts.mustStream(t, ctx, ep.Ticket)
		var sizes []int64
		for rdr.Next() {
			sizes = append(sizes, rdr.RecordBatch().NumRows())
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		rdr.Release()
		for j, n := range sizes {
			rows += n
			if n > 2*65536-1 || (j < len(sizes)-1 && n < 65536) {
				t.Fatalf("endpoint %d: batch %d of %d holds %d rows; want 65536..131071 (only the last may be shorter)", i, j, len(sizes), n)
			}
		}
	}
	if rows != int64(total) {
		t.Fatalf("read %d rows, want %d", rows, total)
	}

	// Cancel a DoGet after one batch: the server's scan goroutines exit
	// and every buffer is freed within a couple of seconds.
	base := testkit.SettledGoroutines()
	cctx, cancel := context.WithCancel(ctx)
	rdr := ts.mustStream(t, cctx, info.Endpoint[0].Ticket)
	if !rdr.Next() {
		t.Fatalf("no first batch: %v", rdr.Err())
	}
	if during := runtime.NumGoroutine(); during <= base {
		t.Logf("note: %d goroutines during the scan, %d before", during, base)
	}
	cancel()
	for rdr.Next() {
	}
	wantCode(t, "reading after cancel", rdr.Err(), codes.Canceled)
	rdr.Release()
	testkit.WaitGoroutines(t, base, 2*time.Second)
	if !waitFor(2*time.Second, func() bool { return ts.srvMem.CurrentAlloc() == 0 }) {
		t.Fatalf("server still holds %d bytes 2 s after the cancel", ts.srvMem.CurrentAlloc())
	}
}

func TestPutCancelLeavesNothing(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	loadBig(t, ts, "big", 1, 100, 10, 100)
	tableDir := filepath.Join(ts.root, "big")
	files := segmentFiles(t, tableDir)
	logBefore := snapshot(t, filepath.Join(tableDir, "_timeseries_log"))

	cctx, cancel := context.WithCancel(ctx)
	stream, err := ts.client.DoPut(cctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(ts.cliMem))
	w.SetFlightDescriptor(pathDesc("big"))
	// A put is buffered in memory up to the group-commit limit (65,536
	// rows), then streamed into its segment: write until the segment file
	// appears.
	step := 1000
	for n := 0; len(segmentFiles(t, tableDir)) == len(files); n++ {
		if n == 100 {
			t.Fatal("no segment file appeared while streaming 100,000 rows")
		}
		rec := bigBatch(ts.cliMem, step, 100, 10)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		step += 100
		if n >= 65 {
			waitFor(time.Second, func() bool { return len(segmentFiles(t, tableDir)) > len(files) })
		}
	}
	cancel()
	w.Close()
	if !waitFor(2*time.Second, func() bool { return reflect.DeepEqual(segmentFiles(t, tableDir), files) }) {
		t.Fatalf("files left after a cancelled put: %v (before: %v)", segmentFiles(t, tableDir), files)
	}
	sameSnapshot(t, "log after a cancelled put", logBefore, snapshot(t, filepath.Join(tableDir, "_timeseries_log")))
	if !waitFor(2*time.Second, func() bool { return ts.srvMem.CurrentAlloc() == 0 }) {
		t.Fatalf("server still holds %d bytes after the cancelled put", ts.srvMem.CurrentAlloc())
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "big"})
	if d["version"] != 2.0 || d["rows"] != 1000.0 {
		t.Fatalf("after a cancelled put: version %v rows %v, want 2 and 1000", d["version"], d["rows"])
	}
	// The table still takes the same rows afterwards.
	rec := bigBatch(ts.cliMem, 1000, 500, 10)
	defer rec.Release()
	res, err := ts.put(ctx, pathDesc("big"), tsbsSchema, rec)
	if err != nil || len(res) != 1 || res[0].Version != 3 {
		t.Fatalf("put after the cancelled one: %+v, %v", res, err)
	}
}
