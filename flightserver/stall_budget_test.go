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
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
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
func stallStreams(t *testing.T, ts *testServer, n int) (resume func() error) {
	t.Helper()
	ctx, cancelAll := context.WithCancel(context.Background())
	info := ts.info(ctxT(t), pathDesc("cpu"))
	var conns []*grpc.ClientConn
	var streams []flight.FlightService_DoGetClient
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
	}
	// Let the servers' sends run into the stalled windows and the budget.
	last, same := int64(-1), 0
	for start := time.Now(); same < 10 && time.Since(start) < 20*time.Second; {
		time.Sleep(50 * time.Millisecond)
		h := ts.srvMem.CurrentAlloc()
		if int64(h) == last {
			same++
		} else {
			last, same = int64(h), 0
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
		for _, st := range streams {
			go func() {
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
// plus a bounded amount each; once the clients go away everything is
// released.
func TestStallBudget(t *testing.T) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_STALL_STREAMS")); err == nil {
		n = v
	}
	const batchRows = 4096
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"unbounded", -1}, {"budget", 8 << 20}} {
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
			ctx := ctxT(t)
			ts.createTSBS(ctx, "cpu")
			ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 60_000, 2), 1<<16, 2)
			// The largest batch the stream sends: 2 × batchRows rows.
			stream, err := ts.client.DoGet(ctx, ts.info(ctx, pathDesc("cpu")).Endpoint[0].Ticket)
			if err != nil {
				t.Fatal(err)
			}
			rr, err := flight.NewRecordReader(stream, ipc.WithAllocator(ts.cliMem))
			if err != nil {
				t.Fatal(err)
			}
			var maxBatch, batches int
			for rr.Next() {
				maxBatch = max(maxBatch, BatchBytes(rr.RecordBatch()))
				batches++
			}
			if err := rr.Err(); err != nil {
				t.Fatal(err)
			}
			rr.Release()
			t.Logf("the scan: %d batches, the largest %d bytes", batches, maxBatch)
			stop := stallStreams(t, ts, n)
			held, alloc, peak := ts.svc.streamBytesHeld(), ts.srvMem.CurrentAlloc(), ts.svc.budget.peak.Load()
			t.Logf("%d stalled streams, budget %d: held in gRPC %.1f MiB (peak %.1f), server Arrow memory %.1f MiB = %.1f batches of %.0f KiB per stream",
				n, tc.budget, float64(held)/(1<<20), float64(peak)/(1<<20), float64(alloc)/(1<<20), float64(alloc)/float64(n*maxBatch), float64(maxBatch)/1024)
			if tc.budget > 0 {
				if peak > tc.budget+int64(maxBatch) {
					t.Errorf("held peak %d above budget %d + one batch %d", peak, tc.budget, maxBatch)
				}
				// Per stream beyond the budget: the scan's decoded
				// and partial batches and the group being merged.
				const perStream = 6
				if limit := int(tc.budget) + n*perStream*maxBatch; alloc > limit {
					t.Errorf("server Arrow memory %d above budget + %d × %d batches = %d", alloc, n, perStream, limit)
				}
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
