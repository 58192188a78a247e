// The pause between two compactions of background maintenance: the byte
// rate, and the busy share while the table takes appends (maintain.go).

package flightserver

import (
	"context"
	"time"

	"github.com/tsflight/tsflight/tableformat"
)

// pauseStep is how often a pause for the busy share looks again at
// whether it still applies.
const pauseStep = 50 * time.Millisecond

// wait sleeps after a merged group: at least rate, and up to share while
// the busy share still applies to tb (it is busy and its backlog small),
// which it checks every pauseStep, so that a backlog that builds up
// during the pause ends it. It reports false when ctx ended.
func (m *maintainer) wait(ctx context.Context, tb *tableformat.Table, rate, share time.Duration) bool {
	start := time.Now()
	end := start.Add(max(rate, share))
	for {
		now := time.Now()
		if !now.Before(end) || (now.Sub(start) >= rate && (share <= 0 || !m.shareApplies(tb))) {
			return true
		}
		t := time.NewTimer(min(pauseStep, end.Sub(now)))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// pause is how long maintenance waits after merging a group of bytes
// source bytes of tb that took took: what the byte rate asks (the group's
// bytes at the rate, less the time it took), and what the busy share asks
// while it applies to tb (0 when it does not); wait sleeps the longer.
func (m *maintainer) pause(tb *tableformat.Table, bytes uint64, took time.Duration) (rate, share time.Duration) {
	if r := m.opts.BytesPerSecond; r > 0 {
		rate = max(time.Duration(float64(bytes)/float64(r)*float64(time.Second))-took, 0)
	}
	if s := m.opts.BusyShare; s > 0 && s < 1 && m.shareApplies(tb) {
		share = time.Duration(float64(took) * (1 - s) / s)
	}
	return rate, share
}

// shareApplies reports whether the busy share bounds the compaction of
// tb now: tb took an append within BusyWindow and has fewer than
// BusyBacklog times MinSmallSegments small segments.
func (m *maintainer) shareApplies(tb *tableformat.Table) bool {
	m.mu.Lock()
	last, seen := m.lastAppend[tb]
	m.mu.Unlock()
	if !seen || time.Since(last) > BusyWindow {
		return false
	}
	if st := tb.State(); st != nil {
		if n, _ := m.smallSegments(st); n >= BusyBacklog*m.opts.MinSmallSegments {
			return false
		}
	}
	return true
}
