//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/internal/testkit"
)

// TestTsGapsCancelStopsWork cancels a ts_gaps query over 100,000 gaps at
// several points while the server computes it, through a real listener
// and Flight SQL client. Each time the client must get Canceled at once,
// and the server's work must end promptly: its goroutines back to their
// count before the query, and the process's CPU idle just after. (Loaded
// as INSERT … VALUES statements, the gaps kept a core busy for seconds
// after an early cancel: the handler ran statement after statement, each
// started after the interrupt.) Then the same query gets its whole
// answer, and no staging table is left in DuckDB.
func TestTsGapsCancelStopsWork(t *testing.T) {
	const n = 100_000
	cl, sql, stop := gapsServer(t, n)
	defer stop()
	ctx := context.Background()
	q := gapsQuery(n)
	want := fmt.Sprintf("%d|%d", n, n)

	// One uncancelled run: how long the query takes here, and the lazily
	// started goroutines in place before the baseline.
	began := time.Now()
	if got, err := runScalar(ctx, cl, q); err != nil || got != want {
		t.Fatalf("%s = %q, %v; want %s", q, got, err, want)
	}
	full := time.Since(began)
	t.Logf("uncancelled query: %v", full)
	base := testkit.SettledGoroutines()

	const (
		returnBound = 500 * time.Millisecond // the client's call, after the cancel
		workBound   = time.Second            // the server's goroutines, after the cancel
	)
	cancelled := 0
	for _, frac := range []float64{0.01, 0.05, 0.25, 0.6} {
		delay := time.Duration(frac * float64(full))
		cctx, cancel := context.WithCancel(ctx)
		fired := make(chan time.Time, 1)
		timer := time.AfterFunc(delay, func() {
			fired <- time.Now()
			cancel()
		})
		_, err := runScalar(cctx, cl, q)
		returned := time.Now()
		if timer.Stop() {
			// The query beat the cancel.
			cancel()
			if err != nil {
				t.Fatalf("uncancelled run: %v", err)
			}
			continue
		}
		at := <-fired
		if err == nil {
			continue // done just as the cancel fired
		}
		cancelled++
		if code := status.Code(err); code != codes.Canceled {
			t.Fatalf("cancelled %v in: %v (code %v), want Canceled", delay, err, code)
		}
		if d := returned.Sub(at); d > returnBound {
			t.Errorf("cancelled %v in: the call returned %v after the cancel, want at most %v", delay, d, returnBound)
		}
		// The server's work ends: its goroutines come back to the baseline.
		var ended time.Duration
		for {
			ended = time.Since(at)
			if runtime.NumGoroutine() <= base {
				break
			}
			if ended > 3*workBound {
				t.Fatalf("cancelled %v in: %d goroutines %v after the cancel, baseline %d: the server still works on the query",
					delay, runtime.NumGoroutine(), ended, base)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// And nothing is left running in DuckDB: the process is about idle.
		used, measured := cpuUsedOver(300 * time.Millisecond)
		t.Logf("cancelled %v in: the call returned %v after the cancel, the server's goroutines were back to the baseline %v after it, then %v of CPU in 300 ms",
			delay, returned.Sub(at), ended, used)
		if ended > workBound {
			t.Errorf("cancelled %v in: the server worked on for %v after the cancel, want at most %v", delay, ended, workBound)
		}
		if measured && used > 150*time.Millisecond {
			t.Errorf("cancelled %v in: the process used %v of CPU in the 300 ms after the server's work ended, want it about idle", delay, used)
		}
	}
	if cancelled == 0 {
		t.Fatalf("the query (%v uncancelled) finished before every cancel", full)
	}

	// The server answers the same query in full.
	if got, err := runScalar(ctx, cl, q); err != nil || got != want {
		t.Fatalf("after the cancels: %s = %q, %v; want %s", q, got, err, want)
	}
	// No staging table is left behind (each is dropped by the query's
	// setup, or when its request ends).
	sess, err := sql.engine.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, err := sess.scalarString(ctx, `SELECT count(*)::VARCHAR FROM duckdb_tables() WHERE starts_with(table_name, '__tsflight_stage_')`)
		if err != nil {
			t.Fatal(err)
		}
		if left == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s staging tables left in DuckDB after the queries ended", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cpuUsedOver returns the CPU time (user and system) the process uses
// over the next d, from /proc/self/stat; ok is false where there is none.
func cpuUsedOver(d time.Duration) (used time.Duration, ok bool) {
	before, ok := processCPU()
	if !ok {
		return 0, false
	}
	time.Sleep(d)
	after, ok := processCPU()
	return after - before, ok
}

// processCPU is the process's user plus system time so far, in clock
// ticks of 10 ms (Linux's USER_HZ).
func processCPU() (time.Duration, bool) {
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid … utime stime: fields 14 and 15, after the
	// command name, which may hold spaces.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}
