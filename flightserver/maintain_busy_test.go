package flightserver

import (
	"context"
	"testing"
	"time"
)

// TestMaintenancePauseBusyShare: after a merged group, maintenance waits
// what the byte rate asks, and, while the table took an append within
// BusyWindow and its backlog is small, long enough that compaction runs at
// most BusyShare of the time; a backlog that builds up during the pause
// ends it.
func TestMaintenancePauseBusyShare(t *testing.T) {
	ts, ctx := startWithCPU(t)
	// Maintenance runs (appends are noted) but never compacts here.
	startMaintenance(t, ts, &MaintenanceOptions{Interval: time.Hour, MinSmallSegments: 2, BytesPerSecond: -1, QuietAfter: -1, Paused: true})
	ts.putSmall(ctx, 0, 3)
	tb, err := ts.svc.Table(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	m := ts.svc.maint
	set := func(share float64, rate int64, idle bool) {
		m.mu.Lock()
		m.opts.BusyShare, m.opts.BytesPerSecond = share, rate
		if idle {
			m.lastAppend[tb] = time.Now().Add(-2 * BusyWindow)
		} else {
			m.lastAppend[tb] = time.Now()
		}
		m.mu.Unlock()
	}
	const took = 100 * time.Millisecond
	for _, c := range []struct {
		name            string
		share           float64
		rate            int64
		bytes           uint64
		idle            bool // the last append is older than BusyWindow
		wantRate, wantS time.Duration
	}{
		{"busy, default share", DefaultBusyShare, -1, 0, false, 0, 900 * time.Millisecond},
		{"busy, share 0.5", 0.5, -1, 0, false, 0, took},
		{"busy, with a rate", 0.5, 1 << 20, 2 << 20, false, 2*time.Second - took, took},
		{"busy, no share bound", 1, -1, 0, false, 0, 0},
		{"idle", DefaultBusyShare, -1, 0, true, 0, 0},
		{"idle, the rate", DefaultBusyShare, 1 << 20, 2 << 20, true, 2*time.Second - took, 0},
		{"a group faster than the rate", DefaultBusyShare, 1 << 20, 1 << 10, true, 0, 0},
	} {
		set(c.share, c.rate, c.idle)
		if rate, share := m.pause(tb, c.bytes, took); rate != c.wantRate || share != c.wantS {
			t.Errorf("%s: pause %v (rate) %v (share), want %v %v", c.name, rate, share, c.wantRate, c.wantS)
		}
	}

	// wait: a share pause ends early once the table has gone idle, and
	// never before the rate's.
	set(DefaultBusyShare, -1, true)
	start := time.Now()
	if !m.wait(ctx, tb, 0, time.Hour) || time.Since(start) > 5*time.Second {
		t.Fatalf("a share pause for an idle table lasted %v", time.Since(start))
	}
	start = time.Now()
	if !m.wait(ctx, tb, 300*time.Millisecond, time.Hour) || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("the rate's pause of 300ms lasted %v", time.Since(start))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	set(DefaultBusyShare, -1, false)
	if m.wait(cctx, tb, 0, time.Hour) {
		t.Fatal("wait with a cancelled context reported true")
	}

	// A backlog of BusyBacklog x MinSmallSegments small segments (2 x 16
	// = 32) lifts the share bound, also in the middle of a pause.
	set(DefaultBusyShare, -1, false)
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		m.wait(ctx, tb, 0, time.Hour)
		done <- time.Since(start)
	}()
	select {
	case d := <-done:
		t.Fatalf("a share pause of a busy table with a small backlog ended after %v", d)
	case <-time.After(300 * time.Millisecond):
	}
	ts.putSmall(ctx, 3, BusyBacklog*2-3)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a share pause went on after the backlog reached 32 small segments")
	}
	if _, share := m.pause(tb, 0, took); share != 0 {
		t.Errorf("busy with a backlog of %d small segments: share pause %v, want 0", BusyBacklog*2, share)
	}
}
