package flightserver

import (
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
)

// stallStreams opens n DoGet streams of the table's whole scan, each on
// its own connection, reads the schema from each
// and then stops reading. It returns once the server's held bytes have
// settled, with resume, which reads every stream to its end at once (the
// streams waiting for budget must get it as the others drain) and then
// closes the connections. The clients read to the end rather than cancel:
// gRPC drops what it queued for a cancelled stream without handing the
// buffers back, so the garbage collector, not the allocator, frees them
// and a checked allocator cannot see it (docs/reliability.md).
func stallStreams(t *testing.T, ts *testServer, n, batches int) (resume func() error) {
	t.Helper()
	ctx, cancelAll := context.WithCancel(context.Background())
	info := ts.info(ctxT(t), pathDesc("cpu"))
	var conns []*grpc.ClientConn
	var streams []flight.FlightService_DoGetClient
	var firstBatches []chan error
	for i := range n {
		conn, err := grpc.NewClient(ts.srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		cl := flight.NewFlightServiceClient(conn)
		stream, err := cl.DoGet(ctx, info.Endpoint[i%len(info.Endpoint)].Ticket)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		// The schema only: past the budget a stream's first batch
		// waits for budget that the stalled streams never return.
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		streams = append(streams, stream)
		// Then the first batches, in the background: past the budget a
		// stream's first batch waits for budget (and eviction).
		if batches > 0 {
			got := make(chan error, 1)
			go func() {
				for range batches {
					if _, err := stream.Recv(); err != nil {
						got <- err
						return
					}
				}
				got <- nil
			}()
			firstBatches = append(firstBatches, got)
		}
	}
	// Let the servers' sends run into the stalled windows and the budget.
	last, same := int64(-1), 0
	for start := time.Now(); same < 10 && time.Since(start) < 20*time.Second; {
		time.Sleep(50 * time.Millisecond)
		h := ts.svc.streamBytesHeld()
		if h == last {
			same++
		} else {
			last, same = h, 0
		}
	}
	return func() error {
		defer func() {
			cancelAll()
			for _, c := range conns {
				c.Close()
			}
		}()
		errs := make(chan error, len(streams))
		for i, st := range streams {
			go func() {
				// A stream past the budget gets its first batches
				// only as the others read on.
				if i < len(firstBatches) {
					if err := <-firstBatches[i]; err != nil {
						errs <- err
						return
					}
				}
				for {
					if _, err := st.Recv(); err != nil {
						if err == io.EOF {
							err = nil
						}
						errs <- err
						return
					}
				}
			}()
		}
		var first error
		for range streams {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

// TestStallBudget: n stalled DoGet streams hold at most the stream budget
// plus one stream's next message, however many they are (each stream's
// scan decodes only while the budget allows); without a budget they hold
// a few batches each. Once the clients read on, everything is released.
func TestStallBudget(t *testing.T) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_STALL_STREAMS")); err == nil {
		n = v
	}
	const batchRows = 4096
	for _, tc := range []struct {
		name    string
		budget  int64
		streams int
		read    int // batches each client reads before it stalls
	}{{"unbounded", -1, n, 0}, {"budget", 8 << 20, n, 0}, {"budget-2n", 8 << 20, 2 * n, 0}, {"budget-2n-read-one", 8 << 20, 2 * n, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			// Registered first, so run last: after the server has stopped.
			t.Cleanup(func() {
				deadline := time.Now().Add(10 * time.Second)
				for runtime.NumGoroutine() > goroutines+2 && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if g := runtime.NumGoroutine(); g > goroutines+2 {
					buf := make([]byte, 1<<20)
					t.Errorf("%d goroutines after the test, %d before\n%s", g, goroutines, buf[:runtime.Stack(buf, true)])
				}
			})
			ts := startServer(t, func(o *Options) {
				o.BatchRows = batchRows
				o.StreamBudget = tc.budget
				o.MaxEndpoints = 1
			})
			maxBatch := stallTable(t, ts)
			stop := stallStreams(t, ts, tc.streams, tc.read)
			held, alloc, peak := ts.svc.streamBytesHeld(), ts.srvMem.CurrentAlloc(), ts.svc.budget.peak.Load()
			t.Logf("%d stalled streams, budget %d: on the streams' accounts %.1f MiB (peak %.1f), server Arrow memory %.1f MiB = %.1f batches of %.0f KiB per stream",
				tc.streams, tc.budget, float64(held)/(1<<20), float64(peak)/(1<<20), float64(alloc)/(1<<20), float64(alloc)/float64(tc.streams*maxBatch), float64(maxBatch)/1024)
			if int64(alloc) > held {
				t.Errorf("server Arrow memory %d is more than the streams' accounts %d: something a stream holds is not on its account", alloc, held)
			}
			if tc.budget > 0 {
				// Beyond the budget: one stream's next message (a
				// group of up to two batches, merged) and what the
				// decoders that passed the budget together hold.
				if slack := int64(6 * maxBatch); peak > tc.budget+slack {
					t.Errorf("peak %d above budget %d + %d (six batches), with %d streams", peak, tc.budget, slack, tc.streams)
				}
			} else if alloc < tc.streams*maxBatch {
				// Unbounded, each stalled stream holds at least the
				// message gRPC cannot write: the budget is what bounds.
				t.Errorf("without a budget %d stalled streams hold %d bytes, less than a batch each (%d): the test did not stall them", tc.streams, alloc, maxBatch)
			}
			if err := stop(); err != nil {
				t.Fatalf("the stalled streams, read again to their end: %v", err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for (ts.srvMem.CurrentAlloc() != 0 || ts.svc.streamBytesHeld() != 0) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if a, h := ts.srvMem.CurrentAlloc(), ts.svc.streamBytesHeld(); a != 0 || h != 0 {
				buf := make([]byte, 4<<20)
				os.WriteFile("/tmp/stall_stacks.txt", buf[:runtime.Stack(buf, true)], 0o644)
				t.Fatalf("after the streams ended: server Arrow memory %d, held %d (stacks in /tmp/stall_stacks.txt)", a, h)
			}
		})
	}
}

// stallTable writes the table cpu the stall tests read and returns the
// largest batch its scan sends.
func stallTable(t *testing.T, ts *testServer) int {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 60_000, 2), 1<<16, 2)
	rr := ts.mustStream(t, ctx, ts.info(ctx, pathDesc("cpu")).Endpoint[0].Ticket)
	defer rr.Release()
	var maxBatch, batches int
	for rr.Next() {
		maxBatch = max(maxBatch, BatchBytes(rr.RecordBatch()))
		batches++
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the scan: %d batches, the largest %d bytes", batches, maxBatch)
	return maxBatch
}

// TestStallEviction: stalled streams that have spent the stream budget
// keep another client waiting only for the stall timeout; then their
// connections are closed, the budget comes back and the new client reads
// the whole table. The stalled clients learn it as UNAVAILABLE.
func TestStallEviction(t *testing.T) {
	gate, err := guard.NewGate(nil)
	if err != nil {
		t.Fatal(err)
	}
	const stall = time.Second
	ts := startGatedServer(t, func(o *Options) {
		o.BatchRows = 4096
		o.StreamBudget = 4 << 20
		o.StallTimeout = stall
		o.MaxEndpoints = 1
		// gRPC drops what it held for a connection that closed without
		// handing it back, so the checked allocator cannot see it freed
		// (the garbage collector frees it); the accounts are checked.
		o.ScanAlloc = memory.NewGoAllocator()
	}, gate)
	stallTable(t, ts)
	stop := stallStreams(t, ts, 12, 0)
	if h, limit := ts.svc.streamBytesHeld(), int64(4<<20); h < limit {
		t.Fatalf("12 stalled streams hold %d bytes, under the budget of %d: the test did not spend it", h, limit)
	}
	start := time.Now()
	ctx := ctxT(t)
	rr := ts.mustStream(t, ctx, ts.info(ctx, pathDesc("cpu")).Endpoint[0].Ticket)
	var rows int64
	for rr.Next() {
		rows += rr.RecordBatch().NumRows()
	}
	err = rr.Err()
	rr.Release()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the new client's scan: %v", err)
	}
	if rows != 120_000 {
		t.Fatalf("the new client read %d rows, want 120000", rows)
	}
	if ev := ts.svc.budget.evicted.Load(); ev == 0 {
		t.Fatalf("no stalled connection was closed (the new client took %v)", took)
	}
	// It waited for the stall timeout, not for its request deadline.
	if took > stall+15*time.Second {
		t.Errorf("the new client took %v with a stall timeout of %v", took, stall)
	}
	t.Logf("the new client read %d rows in %v; %d stalled connections closed", rows, took, ts.svc.budget.evicted.Load())
	err = stop()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("the evicted clients, reading again: %v, want UNAVAILABLE", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ts.svc.streamBytesHeld() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h := ts.svc.streamBytesHeld(); h != 0 {
		t.Fatalf("after the evictions the streams' accounts still hold %d bytes", h)
	}
}

// TestStallNoEvictionWithoutPressure: a client that stops reading keeps
// its connection past the stall timeout while nobody waits for the
// budget. (With the budget spent by stalled streams alone, one whose
// client's flow-control window still took everything it was sent looks
// like a client waiting for data, and may close the others: the server
// cannot tell the two apart.)
func TestStallNoEvictionWithoutPressure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"default-budget", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			gate, err := guard.NewGate(nil)
			if err != nil {
				t.Fatal(err)
			}
			ts := startGatedServer(t, func(o *Options) {
				o.BatchRows = 4096
				o.StreamBudget = tc.budget
				o.StallTimeout = 200 * time.Millisecond
				o.MaxEndpoints = 1
			}, gate)
			stallTable(t, ts)
			stop := stallStreams(t, ts, 3, 1)
			if tc.budget > 0 {
				if h := ts.svc.streamBytesHeld(); h < tc.budget {
					t.Fatalf("3 stalled streams hold %d bytes, under the budget of %d", h, tc.budget)
				}
			}
			time.Sleep(time.Second)
			if ev := ts.svc.budget.evicted.Load(); ev != 0 {
				t.Fatalf("%d connections closed with no client waiting for data", ev)
			}
			if err := stop(); err != nil {
				t.Fatalf("the stalled streams, read again to their end: %v", err)
			}
		})
	}
}

// TestStreamBudgetManyReaders: more clients reading at once than the
// stream budget holds working sets for all finish, every row once (the
// turns and the progress rule never leave streams waiting on each other),
// and the streams together stay near the budget.
func TestStreamBudgetManyReaders(t *testing.T) {
	const budget = 2 << 20
	ts := startServer(t, func(o *Options) {
		o.BatchRows = 4096
		o.StreamBudget = budget
	})
	maxBatch := stallTable(t, ts)
	ctx := ctxT(t)
	info := ts.info(ctx, pathDesc("cpu"))
	const readers = 16
	errs := make(chan error, readers)
	rowsOf := make(chan int64, readers)
	for range readers {
		go func() {
			var rows int64
			for _, ep := range info.Endpoint {
				rr, err := ts.stream(ctx, ep.Ticket)
				if err != nil {
					errs <- err
					return
				}
				for rr.Next() {
					rows += rr.RecordBatch().NumRows()
				}
				err = rr.Err()
				rr.Release()
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
			rowsOf <- rows
		}()
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Fatalf("a reader: %v", err)
		}
		if rows := <-rowsOf; rows != 120_000 {
			t.Fatalf("a reader got %d rows, want 120000", rows)
		}
	}
	peak := ts.svc.budget.peak.Load()
	t.Logf("%d readers, budget %d: peak %.1f MiB (batches of %d KiB)", readers, budget, float64(peak)/(1<<20), maxBatch/1024)
	if slack := int64(6 * maxBatch); peak > budget+slack {
		t.Errorf("peak %d above budget %d + %d (six batches)", peak, budget, slack)
	}
}

// TestStallBudgetWaitEndsWithDeadline: a stream waiting for budget that
// stalled streams hold (no eviction: the server was not given its
// connections) ends at its deadline with DEADLINE_EXCEEDED, leaving
// nothing on its account and no goroutine behind.
func TestStallBudgetWaitEndsWithDeadline(t *testing.T) {
	const budget = 2 << 20
	ts := startServer(t, func(o *Options) {
		o.BatchRows = 4096
		o.StreamBudget = budget
		o.MaxEndpoints = 1
	})
	stallTable(t, ts)
	stop := stallStreams(t, ts, 8, 0)
	held := ts.svc.streamBytesHeld()
	if held < budget {
		t.Fatalf("8 stalled streams hold %d bytes, under the budget of %d", held, budget)
	}
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(ctxT(t), 500*time.Millisecond)
	defer cancel()
	info := ts.info(ctxT(t), pathDesc("cpu"))
	stream, err := ts.client.DoGet(ctx, info.Endpoint[0].Ticket)
	if err == nil {
		for err == nil {
			_, err = stream.Recv()
		}
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a stream waiting for budget: %v, want DEADLINE_EXCEEDED", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for (ts.svc.streamBytesHeld() != held || runtime.NumGoroutine() > goroutines) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h := ts.svc.streamBytesHeld(); h != held {
		t.Errorf("after the waiting stream ended the accounts hold %d bytes, %d before it", h, held)
	}
	if g := runtime.NumGoroutine(); g > goroutines {
		t.Errorf("%d goroutines after the waiting stream ended, %d before it", g, goroutines)
	}
	if err := stop(); err != nil {
		t.Fatalf("the stalled streams, read again to their end: %v", err)
	}
}
