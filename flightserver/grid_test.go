package flightserver

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// loadGridHoles builds "cpu" over [00:00, 01:00) at 10 s (360 intervals)
// with known holes: host_0 is complete, host_1 misses [00:20, 00:30) and
// host_2 starts late, at 00:45. Version 2 holds host_0 and host_1,
// version 3 adds host_2.
func loadGridHoles(t *testing.T, ts *testServer) {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	var early, late []row
	for _, r := range genRows(t0, 360, 3) {
		at := time.Duration(r.ts - t0.UnixNano())
		switch {
		case r.host == "host_1" && at >= 20*time.Minute && at < 30*time.Minute:
		case r.host == "host_2" && at < 45*time.Minute:
		case r.host == "host_2":
			late = append(late, r)
		default:
			early = append(early, r)
		}
	}
	ts.mustPut(ctx, pathDesc("cpu"), early, 200, 2)
	ts.mustPut(ctx, pathDesc("cpu"), late, 200, 3)
}

// gridRun runs a coverage-grid request that must succeed.
func gridRun(t *testing.T, ts *testServer, ctx context.Context, body any) []byte {
	t.Helper()
	res, err := ts.action(ctx, ActionCoverageGrid, body)
	if err != nil {
		t.Fatalf("coverage-grid %v: %v", body, err)
	}
	return res
}

func TestCoverageGrid(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	loadGridHoles(t, ts)
	before := snapshot(t, ts.root)

	// The range defaults to the data; four 15-minute bins of 90 intervals.
	// host_1 misses 60 intervals of bin 1; host_2 covers bin 3 only.
	sameJSON(t, "four columns", gridRun(t, ts, ctx, map[string]any{"table": "cpu", "columns": 4}), `{
		"table":"cpu","version":3,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T01:00:00Z",
		"intervals":360,"identities":3,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:00:00Z","2024-06-01T00:15:00Z","2024-06-01T00:30:00Z","2024-06-01T00:45:00Z","2024-06-01T01:00:00Z"],
		"column_intervals":[90,90,90,90],
		"rows":[{"first":"host_0","last":"host_0","identities":1},
		        {"first":"host_1","last":"host_1","identities":1},
		        {"first":"host_2","last":"host_2","identities":1}],
		"covered":[[90,90,90,90],[90,30,90,90],[0,0,0,90]]}`)

	// Two rows for three hosts: {host_0, host_1} and {host_2}, summed.
	sameJSON(t, "two rows", gridRun(t, ts, ctx, map[string]any{"table": "cpu", "columns": 4, "rows": 2}), `{
		"table":"cpu","version":3,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T01:00:00Z",
		"intervals":360,"identities":3,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:00:00Z","2024-06-01T00:15:00Z","2024-06-01T00:30:00Z","2024-06-01T00:45:00Z","2024-06-01T01:00:00Z"],
		"column_intervals":[90,90,90,90],
		"rows":[{"first":"host_0","last":"host_1","identities":2},{"first":"host_2","last":"host_2","identities":1}],
		"covered":[[180,120,180,180],[0,0,0,90]]}`)

	// Uneven bins (360 = 7 × 51 + 3: three bins of 52, four of 51) and an
	// explicit version: version 2 has no host_2. host_1's hole, intervals
	// 120..179, takes 36 from bin 2 [104, 156) and 24 from bin 3 [156, 207).
	sameJSON(t, "seven columns at version 2", gridRun(t, ts, ctx, map[string]any{"table": "cpu", "columns": 7, "version": 2}), `{
		"table":"cpu","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T01:00:00Z",
		"intervals":360,"identities":2,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:00:00Z","2024-06-01T00:08:40Z","2024-06-01T00:17:20Z","2024-06-01T00:26:00Z",
		         "2024-06-01T00:34:30Z","2024-06-01T00:43:00Z","2024-06-01T00:51:30Z","2024-06-01T01:00:00Z"],
		"column_intervals":[52,52,52,51,51,51,51],
		"rows":[{"first":"host_0","last":"host_0","identities":1},{"first":"host_1","last":"host_1","identities":1}],
		"covered":[[52,52,52,51,51,51,51],[52,52,16,27,51,51,51]]}`)

	// Explicit bounds off interval boundaries and with an offset: the
	// range is reported in UTC, the edges on interval boundaries. 00:19:55
	// to 00:20:15 touches intervals 00:19:50, 00:20:00 and 00:20:10.
	sameJSON(t, "explicit range", gridRun(t, ts, ctx, map[string]any{
		"table": "cpu", "start": "2024-06-01T02:19:55+02:00", "end": "2024-06-01T00:20:15Z",
	}), `{
		"table":"cpu","version":3,"start":"2024-06-01T00:19:55Z","end":"2024-06-01T00:20:15Z",
		"intervals":3,"identities":3,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:19:50Z","2024-06-01T00:20:00Z","2024-06-01T00:20:10Z","2024-06-01T00:20:20Z"],
		"column_intervals":[1,1,1],
		"rows":[{"first":"host_0","last":"host_0","identities":1},
		        {"first":"host_1","last":"host_1","identities":1},
		        {"first":"host_2","last":"host_2","identities":1}],
		"covered":[[1,1,1],[1,0,0],[0,0,0]]}`)

	// Only a start (null end = absent): the end is the data's.
	sameJSON(t, "start only", gridRun(t, ts, ctx, map[string]any{"table": "cpu", "start": "2024-06-01T00:40:00Z", "end": nil, "columns": 2, "rows": 1}), `{
		"table":"cpu","version":3,"start":"2024-06-01T00:40:00Z","end":"2024-06-01T01:00:00Z",
		"intervals":120,"identities":3,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:40:00Z","2024-06-01T00:50:00Z","2024-06-01T01:00:00Z"],
		"column_intervals":[60,60],
		"rows":[{"first":"host_0","last":"host_2","identities":3}],
		"covered":[[150,180]]}`)
	// Only an end: the start is the data's.
	sameJSON(t, "end only", gridRun(t, ts, ctx, map[string]any{"table": "cpu", "end": "2024-06-01T00:30:00Z", "columns": 1, "rows": 1}), `{
		"table":"cpu","version":3,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:30:00Z",
		"intervals":180,"identities":3,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:00:00Z","2024-06-01T00:30:00Z"],
		"column_intervals":[180],
		"rows":[{"first":"host_0","last":"host_2","identities":3}],
		"covered":[[300]]}`)
	// Default columns and rows: 360 intervals in 200 bins (160 of 2, 40 of 1).
	res := ts.mustAction(ctx, ActionCoverageGrid, map[string]any{"table": "cpu"})
	ci := res["column_intervals"].([]any)
	if len(ci) != 200 || ci[0] != float64(2) || ci[159] != float64(2) || ci[160] != float64(1) || len(res["edges"].([]any)) != 201 || len(res["rows"].([]any)) != 3 {
		t.Fatalf("default grid: %d bins, %v", len(ci), res["rows"])
	}
	sameSnapshot(t, "coverage-grid", before, snapshot(t, ts.root))
}

// TestCoverageGridGroups: five hosts in two rows are groups of three and
// two, and each cell sums its group.
func TestCoverageGridGroups(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "five")
	var rows []row
	for _, r := range genRows(t0, 6, 5) {
		step := (r.ts - t0.UnixNano()) / 10e9
		switch {
		case r.host == "host_1" && step == 0:
		case r.host == "host_3" && step >= 3:
		case r.host == "host_4" && step == 5:
		default:
			rows = append(rows, r)
		}
	}
	ts.mustPut(ctx, pathDesc("five"), rows, 100, 2)
	sameJSON(t, "five hosts in two rows", gridRun(t, ts, ctx, map[string]any{"table": "five", "columns": 2, "rows": 2}), `{
		"table":"five","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:01:00Z",
		"intervals":6,"identities":5,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:00:00Z","2024-06-01T00:00:30Z","2024-06-01T00:01:00Z"],
		"column_intervals":[3,3],
		"rows":[{"first":"host_0","last":"host_2","identities":3},{"first":"host_3","last":"host_4","identities":2}],
		"covered":[[8,9],[6,2]]}`)
	// More columns than intervals: one bin per interval.
	sameJSON(t, "more columns than intervals", gridRun(t, ts, ctx, map[string]any{"table": "five", "columns": 4096, "rows": 4096}), `{
		"table":"five","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:01:00Z",
		"intervals":6,"identities":5,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:00:00Z","2024-06-01T00:00:10Z","2024-06-01T00:00:20Z","2024-06-01T00:00:30Z","2024-06-01T00:00:40Z","2024-06-01T00:00:50Z","2024-06-01T00:01:00Z"],
		"column_intervals":[1,1,1,1,1,1],
		"rows":[{"first":"host_0","last":"host_0","identities":1},{"first":"host_1","last":"host_1","identities":1},
		        {"first":"host_2","last":"host_2","identities":1},{"first":"host_3","last":"host_3","identities":1},
		        {"first":"host_4","last":"host_4","identities":1}],
		"covered":[[1,1,1,1,1,1],[0,1,1,1,1,1],[1,1,1,1,1,1],[1,1,1,0,0,0],[1,1,1,1,1,0]]}`)
}

// TestCoverageGridIntegerIndex: an int64 index without entity columns has
// one unlabelled row and integer edges.
func TestCoverageGridIntegerIndex(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.mustAction(ctx, ActionCreateTable, map[string]any{"table": "seq", "index_column": "n", "index_type": "int64", "granularity": 10})
	rec := int64Batch(ts, []int64{3, 10, 29, 55, 61})
	defer rec.Release()
	if _, err := ts.put(ctx, pathDesc("seq"), rec.Schema(), rec); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "int64 defaults", gridRun(t, ts, ctx, map[string]any{"table": "seq", "columns": 3}), `{
		"table":"seq","version":2,"start":0,"end":70,
		"intervals":7,"identities":1,"entity_columns":[],
		"edges":[0,30,50,70],"column_intervals":[3,2,2],
		"rows":[{"first":"","last":"","identities":1}],
		"covered":[[3,0,2]]}`)
	sameJSON(t, "int64 explicit range", gridRun(t, ts, ctx, `{"table":"seq","start":-20,"end":"15","columns":2,"rows":9}`), `{
		"table":"seq","version":2,"start":-20,"end":15,
		"intervals":4,"identities":1,"entity_columns":[],
		"edges":[-20,0,20],"column_intervals":[2,2],
		"rows":[{"first":"","last":"","identities":1}],
		"covered":[[0,2]]}`)
	_, err := ts.action(ctx, ActionCoverageGrid, map[string]any{"table": "seq", "start": "2024-06-01T00:00:00Z"})
	wantCode(t, "timestamp bound on an int64 index", err, codes.InvalidArgument, "start", "2024-06-01T00:00:00Z")
}

func TestCoverageGridErrors(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	loadGridHoles(t, ts)
	ts.createTSBS(ctx, "empty")
	for _, c := range []struct {
		what  string
		body  any
		code  codes.Code
		frags []string
	}{
		{"zero columns", `{"table":"cpu","columns":0}`, codes.InvalidArgument, []string{"columns", "0", "4096"}},
		{"too many columns", `{"table":"cpu","columns":4097}`, codes.InvalidArgument, []string{"columns", "4097"}},
		{"negative columns", `{"table":"cpu","columns":-5}`, codes.InvalidArgument, []string{"columns", "-5"}},
		{"fractional columns", `{"table":"cpu","columns":1.5}`, codes.InvalidArgument, []string{"columns", "1.5"}},
		{"columns as a string", `{"table":"cpu","columns":"200"}`, codes.InvalidArgument, []string{"columns", `"200"`}},
		{"huge columns", `{"table":"cpu","columns":99999999999999999999}`, codes.InvalidArgument, []string{"columns", "99999999999999999999"}},
		{"zero rows", `{"table":"cpu","rows":0}`, codes.InvalidArgument, []string{"rows", "0", "4096"}},
		{"too many rows", `{"table":"cpu","rows":10000}`, codes.InvalidArgument, []string{"rows", "10000"}},
		{"unknown table", `{"table":"nosuch"}`, codes.NotFound, []string{"nosuch"}},
		{"no table", `{"columns":3}`, codes.InvalidArgument, nil},
		{"unknown version", `{"table":"cpu","version":99}`, codes.NotFound, []string{"99"}},
		{"bad timestamp", `{"table":"cpu","start":"June 1st"}`, codes.InvalidArgument, []string{"start", "June 1st"}},
		{"number on a timestamp index", `{"table":"cpu","end":5}`, codes.InvalidArgument, []string{"end", "5"}},
		{"start equals end", `{"table":"cpu","start":"2024-06-01T00:10:00Z","end":"2024-06-01T00:10:00Z"}`, codes.InvalidArgument, []string{"start", "must be before end"}},
		{"start after end", `{"table":"cpu","start":"2024-06-01T00:20:00Z","end":"2024-06-01T00:10:00Z"}`, codes.InvalidArgument, []string{"2024-06-01T00:20:00Z", "must be before end"}},
		{"start after the data", `{"table":"cpu","start":"2024-06-01T01:00:00Z"}`, codes.InvalidArgument, []string{"must be before end 2024-06-01T01:00:00Z"}},
		{"end before the data", `{"table":"cpu","end":"2024-06-01T00:00:00Z"}`, codes.InvalidArgument, []string{"must be before end 2024-06-01T00:00:00Z"}},
		{"unknown field", `{"table":"cpu","entity":{"hostname":"host_0"}}`, codes.InvalidArgument, []string{"entity"}},
		{"malformed body", `{"table":`, codes.InvalidArgument, []string{"coverage-grid"}},
		{"empty table, no range", `{"table":"empty"}`, codes.FailedPrecondition, []string{`"empty"`, "no data yet"}},
		{"empty table, no end", `{"table":"empty","start":"2024-06-01T00:00:00Z"}`, codes.FailedPrecondition, []string{`"empty"`, "no data yet"}},
	} {
		_, err := ts.action(ctx, ActionCoverageGrid, c.body)
		wantCode(t, c.what, err, c.code, c.frags...)
	}
	// An empty table with both bounds: the bins, and no rows.
	sameJSON(t, "empty table with a range", gridRun(t, ts, ctx, map[string]any{
		"table": "empty", "start": "2024-06-01T00:00:00Z", "end": "2024-06-01T00:00:20Z",
	}), `{
		"table":"empty","version":1,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:00:20Z",
		"intervals":2,"identities":0,"entity_columns":["hostname"],
		"edges":["2024-06-01T00:00:00Z","2024-06-01T00:00:10Z","2024-06-01T00:00:20Z"],
		"column_intervals":[1,1],"rows":[],"covered":[]}`)
}
