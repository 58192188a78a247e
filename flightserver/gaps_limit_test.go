package flightserver

import (
	"encoding/json"
	"os"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// loadAlternating puts one host's rows at every other 10 s interval from
// t0: steps rows, so steps gaps (the last one the range's tail).
func loadAlternating(t *testing.T, ts *testServer, steps int) {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	rows := genRows(t0, 2*steps, 1)
	kept := rows[:0]
	for i, r := range rows {
		if i%2 == 0 {
			kept = append(kept, r)
		}
	}
	ts.mustPut(ctx, pathDesc("cpu"), kept, 1<<16, 2)
}

type gapsAnswerT struct {
	Gaps             []json.RawMessage `json:"gaps"`
	Truncated        *bool             `json:"truncated"`
	MissingIntervals uint64            `json:"missing_intervals"`
	Longest          json.RawMessage   `json:"longest"`
	LastCovered      json.RawMessage   `json:"last_covered"`
}

func TestGapsDefaultLimitTruncates(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	const steps = DefaultGapsLimit + 500
	loadAlternating(t, ts, steps)
	end := t0.Add(time.Duration(2*steps) * 10 * time.Second).Format(time.RFC3339)
	body := map[string]any{"table": "cpu", "start": t0.Format(time.RFC3339), "end": end}
	get := func(limit any) gapsAnswerT {
		t.Helper()
		b := map[string]any{}
		for k, v := range body {
			b[k] = v
		}
		if limit != nil {
			b["limit"] = limit
		}
		raw, err := ts.action(ctx, ActionGaps, b)
		if err != nil {
			t.Fatalf("gaps limit %v: %v", limit, err)
		}
		var a gapsAnswerT
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("gaps answer %s: %v", raw[:min(len(raw), 200)], err)
		}
		return a
	}
	for _, limit := range []any{nil, 0} {
		a := get(limit)
		if len(a.Gaps) != DefaultGapsLimit || a.Truncated == nil || !*a.Truncated {
			t.Fatalf("limit %v: %d gaps, truncated %v; want %d, true", limit, len(a.Gaps), a.Truncated, DefaultGapsLimit)
		}
		// Totals cover the whole range whatever the limit.
		if a.MissingIntervals != steps {
			t.Fatalf("limit %v: missing_intervals %d, want %d", limit, a.MissingIntervals, steps)
		}
		if string(a.Longest) == "null" || string(a.LastCovered) == "null" {
			t.Fatalf("limit %v: longest %s, last_covered %s", limit, a.Longest, a.LastCovered)
		}
	}
	if a := get(steps); len(a.Gaps) != steps || *a.Truncated {
		t.Fatalf("limit %d: %d gaps, truncated %v", steps, len(a.Gaps), *a.Truncated)
	}
	if a := get(steps - 1); len(a.Gaps) != steps-1 || !*a.Truncated {
		t.Fatalf("limit %d: %d gaps, truncated %v", steps-1, len(a.Gaps), *a.Truncated)
	}
	b := map[string]any{"limit": MaxGapsLimit + 1}
	for k, v := range body {
		b[k] = v
	}
	_, err := ts.action(ctx, ActionGaps, b)
	wantCode(t, "limit above the maximum", err, codes.InvalidArgument, "limit", "500001", "500000")
	b["limit"] = -1
	_, err = ts.action(ctx, ActionGaps, b)
	wantCode(t, "negative limit", err, codes.InvalidArgument, "limit", "-1")
}

// TestGapsMillionMemory measures the server's heap growth answering the
// gaps of a table with 1 M gaps, with the default limit and with the
// maximum. Set TSFLIGHT_GAPS_MILLION=1 (it loads 1 M rows).
func TestGapsMillionMemory(t *testing.T) {
	if os.Getenv("TSFLIGHT_GAPS_MILLION") == "" {
		t.Skip("set TSFLIGHT_GAPS_MILLION=1")
	}
	ts := startServer(t, nil)
	ctx := ctxT(t)
	const steps = 1_000_000
	loadAlternating(t, ts, steps)
	end := t0.Add(time.Duration(2*steps) * 10 * time.Second).Format(time.RFC3339)
	for _, limit := range []int{0, MaxGapsLimit} {
		body := map[string]any{"table": "cpu", "start": t0.Format(time.RFC3339), "end": end}
		if limit > 0 {
			body["limit"] = limit
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		raw, err := ts.action(ctx, ActionGaps, body)
		if err != nil {
			t.Fatalf("gaps limit %d: %v", limit, err)
		}
		runtime.ReadMemStats(&after)
		t.Logf("limit %d: answer %d bytes, allocated %.1f MiB during the call, heap in use peak-ish %.1f MiB (before %.1f)",
			limit, len(raw), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), float64(after.HeapInuse)/(1<<20), float64(before.HeapInuse)/(1<<20))
	}
}
