package flightserver

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// loadHoles builds a table over [00:00, 00:10) at 10 s with known holes:
// host_0 misses [00:02, 00:03), host_1 stops at 00:05.
func loadHoles(t *testing.T, ts *testServer) {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	var rows []row
	for _, r := range genRows(t0, 60, 2) {
		at := time.Duration(r.ts - t0.UnixNano())
		switch {
		case r.host == "host_0" && at >= 2*time.Minute && at < 3*time.Minute:
		case r.host == "host_1" && at >= 5*time.Minute:
		default:
			rows = append(rows, r)
		}
	}
	ts.mustPut(ctx, pathDesc("cpu"), rows, 40, 2)
}

// sameJSON compares a result with the expected JSON document.
func sameJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: result %s: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: expected %s: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func TestCoverageAndGaps(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	loadHoles(t, ts)
	before := snapshot(t, ts.root)
	rng := map[string]any{"table": "cpu", "start": "2024-06-01T00:00:00Z", "end": "2024-06-01T00:10:00Z"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range rng {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	run := func(name string, body any) []byte {
		t.Helper()
		res, err := ts.action(ctx, name, body)
		if err != nil {
			t.Fatalf("%s %v: %v", name, body, err)
		}
		return res
	}

	// Coverage: whole table (mean over both hosts) and one host.
	sameJSON(t, "coverage of the table", run(ActionCoverage, rng), `{
		"table":"cpu","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:10:00Z",
		"intervals":60,"identities":2,"expected":120,"covered":84,"ratio":0.7}`)
	sameJSON(t, "coverage of host_0", run(ActionCoverage, with("entity", map[string]any{"hostname": "host_0"})), `{
		"table":"cpu","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:10:00Z","entity":{"hostname":"host_0"},
		"intervals":60,"identities":1,"expected":60,"covered":54,"ratio":0.9}`)
	// Bounds with an offset are reported in UTC.
	sameJSON(t, "coverage of host_1, offset bounds", run(ActionCoverage, map[string]any{
		"table": "cpu", "start": "2024-06-01T02:00:00+02:00", "end": "2024-06-01T02:05:00+02:00", "entity": map[string]any{"hostname": "host_1"},
	}), `{
		"table":"cpu","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:05:00Z","entity":{"hostname":"host_1"},
		"intervals":30,"identities":1,"expected":30,"covered":30,"ratio":1}`)

	// Gaps of one host.
	sameJSON(t, "gaps of host_0", run(ActionGaps, with("entity", map[string]any{"hostname": "host_0"})), `{
		"table":"cpu","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:10:00Z","entity":{"hostname":"host_0"},
		"gaps":[{"start":"2024-06-01T00:02:00Z","end":"2024-06-01T00:03:00Z","intervals":6}],
		"truncated":false,"missing_intervals":6,
		"longest":{"start":"2024-06-01T00:02:00Z","end":"2024-06-01T00:03:00Z","intervals":6},
		"last_covered":{"start":"2024-06-01T00:03:00Z","end":"2024-06-01T00:10:00Z","intervals":42}}`)
	// Gaps of the table: an interval counts only when every host has it.
	sameJSON(t, "gaps of the table", run(ActionGaps, rng), `{
		"table":"cpu","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:10:00Z",
		"gaps":[{"start":"2024-06-01T00:02:00Z","end":"2024-06-01T00:03:00Z","intervals":6},
		        {"start":"2024-06-01T00:05:00Z","end":"2024-06-01T00:10:00Z","intervals":30}],
		"truncated":false,"missing_intervals":36,
		"longest":{"start":"2024-06-01T00:05:00Z","end":"2024-06-01T00:10:00Z","intervals":30},
		"last_covered":{"start":"2024-06-01T00:03:00Z","end":"2024-06-01T00:05:00Z","intervals":12}}`)
	// A limit cuts the list, not the summary.
	sameJSON(t, "gaps with limit 1", run(ActionGaps, with("limit", 1)), `{
		"table":"cpu","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:10:00Z",
		"gaps":[{"start":"2024-06-01T00:02:00Z","end":"2024-06-01T00:03:00Z","intervals":6}],
		"truncated":true,"missing_intervals":36,
		"longest":{"start":"2024-06-01T00:05:00Z","end":"2024-06-01T00:10:00Z","intervals":30},
		"last_covered":{"start":"2024-06-01T00:03:00Z","end":"2024-06-01T00:05:00Z","intervals":12}}`)
	// An entity the table has never seen is simply not covered.
	sameJSON(t, "coverage of an unseen host", run(ActionCoverage, with("entity", map[string]any{"hostname": "host_9"})), `{
		"table":"cpu","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:10:00Z","entity":{"hostname":"host_9"},
		"intervals":60,"identities":1,"expected":60,"covered":0,"ratio":0}`)
	// A range with nothing in it: one gap, no covered window.
	sameJSON(t, "gaps of an empty range", run(ActionGaps, map[string]any{"table": "cpu", "start": "2024-06-02T00:00:00Z", "end": "2024-06-02T00:01:00Z"}), `{
		"table":"cpu","version":2,"start":"2024-06-02T00:00:00Z","end":"2024-06-02T00:01:00Z",
		"gaps":[{"start":"2024-06-02T00:00:00Z","end":"2024-06-02T00:01:00Z","intervals":6}],
		"truncated":false,"missing_intervals":6,
		"longest":{"start":"2024-06-02T00:00:00Z","end":"2024-06-02T00:01:00Z","intervals":6},
		"last_covered":null}`)

	// Errors.
	for _, c := range []struct {
		what   string
		action string
		body   any
		code   codes.Code
		frags  []string
	}{
		{"missing end", ActionCoverage, map[string]any{"table": "cpu", "start": "2024-06-01T00:00:00Z"}, codes.InvalidArgument, []string{"end"}},
		{"start after end", ActionGaps, map[string]any{"table": "cpu", "start": "2024-06-01T00:10:00Z", "end": "2024-06-01T00:00:00Z"}, codes.InvalidArgument, []string{"start", "2024-06-01T00:10:00Z"}},
		{"bad timestamp", ActionCoverage, with("start", "June 1st"), codes.InvalidArgument, []string{"start", "June 1st"}},
		{"limit on coverage", ActionCoverage, with("limit", 3), codes.InvalidArgument, []string{"limit"}},
		{"negative limit", ActionGaps, with("limit", -1), codes.InvalidArgument, []string{"limit", "-1"}},
		{"unknown entity column", ActionGaps, with("entity", map[string]any{"host": "host_0"}), codes.InvalidArgument, []string{"host"}},
		{"entity of the wrong type", ActionCoverage, with("entity", map[string]any{"hostname": 3}), codes.InvalidArgument, []string{"entity", "hostname"}},
		{"unknown field", ActionGaps, with("step", 1), codes.InvalidArgument, []string{"step"}},
		{"missing table", ActionCoverage, map[string]any{"table": "nosuch", "start": "2024-06-01T00:00:00Z", "end": "2024-06-01T00:10:00Z"}, codes.NotFound, []string{"nosuch"}},
	} {
		_, err := ts.action(ctx, c.action, c.body)
		wantCode(t, c.what, err, c.code, c.frags...)
	}
	sameSnapshot(t, "coverage and gaps", before, snapshot(t, ts.root))
}

// TestCoverageIntegerIndex checks int64 indexes: bounds are integers and
// spans come back in index units.
func TestCoverageIntegerIndex(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.mustAction(ctx, ActionCreateTable, map[string]any{"table": "seq", "index_column": "n", "index_type": "int64", "granularity": 10})
	rec := int64Batch(ts, []int64{0, 10, 20, 50, 60})
	defer rec.Release()
	if _, err := ts.put(ctx, pathDesc("seq"), rec.Schema(), rec); err != nil {
		t.Fatal(err)
	}
	res, err := ts.action(ctx, ActionGaps, map[string]any{"table": "seq", "start": 0, "end": 100})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "int64 gaps", res, `{"table":"seq","version":2,"start":0,"end":100,
		"gaps":[{"start":30,"end":50,"intervals":2},{"start":70,"end":100,"intervals":3}],
		"truncated":false,"missing_intervals":5,
		"longest":{"start":70,"end":100,"intervals":3},
		"last_covered":{"start":50,"end":70,"intervals":2}}`)
	_, err = ts.action(ctx, ActionGaps, map[string]any{"table": "seq", "start": "2024-06-01T00:00:00Z", "end": 100})
	wantCode(t, "timestamp bound on an int64 index", err, codes.InvalidArgument, "start", "2024-06-01T00:00:00Z")
	_, err = ts.action(ctx, ActionCoverage, map[string]any{"table": "seq", "start": 0, "end": 100, "entity": map[string]any{"x": 1}})
	wantCode(t, "entity on a table without entity columns", err, codes.InvalidArgument, "entity")
}
