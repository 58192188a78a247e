package flightserver

import (
	"testing"
	"time"
)

// TestMaintenancePauseBusyShare: after a merged group, maintenance waits
// what the byte rate asks, and, while the table took an append within
// BusyWindow and its backlog is small, long enough that compaction runs at
// most BusyShare of the time.
func TestMaintenancePauseBusyShare(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	// Maintenance runs (appends are noted) but never compacts here.
	startMaintenance(t, ts, &MaintenanceOptions{Interval: time.Hour, MinSmallSegments: 2, BytesPerSecond: -1, QuietAfter: -1, Paused: true})
	ts.putSmall(ctx, 0, 3)
	tb, err := ts.svc.Table(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	m := ts.svc.maint
	set := func(share float64, rate int64) {
		m.mu.Lock()
		m.opts.BusyShare, m.opts.BytesPerSecond = share, rate
		m.mu.Unlock()
	}
	const took = 100 * time.Millisecond
	for _, c := range []struct {
		name  string
		share float64
		rate  int64
		bytes uint64
		idle  bool // the last append is older than BusyWindow
		want  time.Duration
	}{
		{"busy, default share", DefaultBusyShare, -1, 0, false, 900 * time.Millisecond},
		{"busy, share 0.5", 0.5, -1, 0, false, took},
		{"busy, the rate asks more", 0.5, 1 << 20, 2 << 20, false, 2*time.Second - took},
		{"busy, the share asks more", DefaultBusyShare, 1 << 20, 512 << 10, false, 900 * time.Millisecond},
		{"busy, no share bound", 1, -1, 0, false, 0},
		{"idle", DefaultBusyShare, -1, 0, true, 0},
		{"idle, the rate", DefaultBusyShare, 1 << 20, 2 << 20, true, 2*time.Second - took},
	} {
		set(c.share, c.rate)
		m.mu.Lock()
		if c.idle {
			m.lastAppend[tb] = time.Now().Add(-2 * BusyWindow)
		} else {
			m.lastAppend[tb] = time.Now()
		}
		m.mu.Unlock()
		if got := m.pause(tb, c.bytes, took); got != c.want {
			t.Errorf("%s: pause %v, want %v", c.name, got, c.want)
		}
	}
	// A backlog of BusyBacklog x MinSmallSegments small segments lifts the
	// share bound: 2 x 16 = 32 segments.
	ts.putSmall(ctx, 3, BusyBacklog*2-3)
	if _, err := tb.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	set(DefaultBusyShare, -1)
	if got := m.pause(tb, 0, took); got != 0 {
		t.Errorf("busy with a backlog of %d small segments: pause %v, want 0", BusyBacklog*2, got)
	}
}
