// Tests of table properties and retention through a real server: the
// set-properties action and its refusals, describe-table, scans and
// actions pinned to an expired version (NOT_FOUND), and the vacuum
// action's keep_snapshots on a compaction-like commit.

package flightserver

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/tableformat"
)

// serverClock is a settable clock for the tables of a test server.
type serverClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *serverClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *serverClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// startClockServer starts a server whose tables run on a clock the test
// moves.
func startClockServer(t *testing.T) (*testServer, *serverClock) {
	clk := &serverClock{now: time.Now().UTC().Truncate(time.Second)}
	ts := startServer(t, func(o *Options) {
		o.Table = tableformat.DefaultOptions()
		o.Table.Now = clk.Now
	})
	return ts, clk
}

func setProps(t *testing.T, ts *testServer, body any) SetPropertiesResult {
	t.Helper()
	return runAction[SetPropertiesResult](t, ts, ctxT(t), ActionSetProperties, body)
}

func TestSetPropertiesAction(t *testing.T) {
	ts, _ := startClockServer(t)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	ts.mustPut(ctx, pathDesc("cpu"), genRows(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC), 10, 2), 40, 2)
	if d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"}); !reflect.DeepEqual(d["properties"], map[string]any{}) {
		t.Fatalf("describe before: properties %v", d["properties"])
	}
	res := setProps(t, ts, map[string]any{"table": "cpu", "properties": map[string]string{"tsflight.keep-snapshots": "1h", "owner": "ops"}})
	want := map[string]string{"tsflight.keep-snapshots": "1h", "owner": "ops"}
	if res.Table != "cpu" || res.Version != 3 || !reflect.DeepEqual(res.Properties, want) {
		t.Fatalf("set: %+v", res)
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if !reflect.DeepEqual(d["properties"], map[string]any{"tsflight.keep-snapshots": "1h", "owner": "ops"}) || d["version"] != float64(3) || d["rows"] != float64(20) {
		t.Fatalf("describe after: %v", d)
	}
	// Replace one, remove the other (empty string and null both remove).
	res = setProps(t, ts, `{"table":"cpu","properties":{"tsflight.keep-snapshots":"30m","owner":null}}`)
	if res.Version != 4 || !reflect.DeepEqual(res.Properties, map[string]string{"tsflight.keep-snapshots": "30m"}) {
		t.Fatalf("replace and remove: %+v", res)
	}
	res = setProps(t, ts, `{"table":"cpu","properties":{"tsflight.keep-snapshots":""}}`)
	if res.Version != 5 || len(res.Properties) != 0 || res.Properties == nil {
		t.Fatalf("remove all: %+v", res)
	}
	// The commit is durable: a fresh server on the same root reads it.
	setProps(t, ts, map[string]any{"table": "cpu", "properties": map[string]string{"team": "x"}})
	again := startServer(t, func(o *Options) { o.Root = ts.root })
	if d := again.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"}); !reflect.DeepEqual(d["properties"], map[string]any{"team": "x"}) {
		t.Fatalf("another server: %v", d["properties"])
	}
}

func TestSetPropertiesActionRefusals(t *testing.T) {
	ts, _ := startClockServer(t)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	ts.mustPut(ctx, pathDesc("cpu"), genRows(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC), 3, 1), 40, 2)
	ts.createTSBS(ctx, "empty")
	wantRefusals(t, ts, ctx, ActionSetProperties, []refusal{
		{"unknown table", `{"table":"nope","properties":{"owner":"x"}}`, codes.NotFound, []string{"nope"}},
		{"bad table name", `{"table":"../x","properties":{"owner":"x"}}`, codes.InvalidArgument, []string{"../x"}},
		{"no properties", `{"table":"cpu"}`, codes.InvalidArgument, []string{"properties is empty"}},
		{"empty properties", `{"table":"cpu","properties":{}}`, codes.InvalidArgument, []string{"properties is empty"}},
		{"unknown tsflight key", `{"table":"cpu","properties":{"tsflight.keep-snapshot":"1h"}}`, codes.InvalidArgument, []string{`"tsflight.keep-snapshot"`, "reserved", "tsflight.keep-snapshots"}},
		{"bad duration", `{"table":"cpu","properties":{"tsflight.keep-snapshots":"a week"}}`, codes.InvalidArgument, []string{"tsflight.keep-snapshots", `"a week"`, "not a duration"}},
		{"negative duration", `{"table":"cpu","properties":{"tsflight.keep-snapshots":"-1h"}}`, codes.InvalidArgument, []string{"tsflight.keep-snapshots", "negative"}},
		{"empty name", `{"table":"cpu","properties":{"":"x"}}`, codes.InvalidArgument, []string{"non-empty name"}},
		{"value not a string", `{"table":"cpu","properties":{"owner":7}}`, codes.InvalidArgument, []string{"properties"}},
		{"properties not an object", `{"table":"cpu","properties":["owner"]}`, codes.InvalidArgument, []string{"properties"}},
		{"unknown field", `{"table":"cpu","properties":{"owner":"x"},"apply":true}`, codes.InvalidArgument, []string{"apply"}},
		{"key twice", `{"table":"cpu","properties":{"owner":"x","owner":"y"}}`, codes.InvalidArgument, []string{"owner"}},
		{"no schema yet", `{"table":"empty","properties":{"owner":"x"}}`, codes.InvalidArgument, []string{`"empty"`, "no schema yet"}},
	})
	if d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"}); d["version"] != float64(2) {
		t.Fatalf("refusals committed: %v", d)
	}
}

// TestExpiredVersionRefused: GetFlightInfo, DoGet tickets and actions
// pinned to a version superseded longer ago than the keep window are
// NOT_FOUND with a message naming the version, when it was superseded and
// the window; inside the window they read it.
func TestExpiredVersionRefused(t *testing.T) {
	ts, clk := startClockServer(t)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	start := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	first := genRows(start, 10, 2)
	ts.mustPut(ctx, pathDesc("cpu"), first, 40, 2)
	v2 := uint64(2)
	info2 := ts.info(ctx, cmdDesc(t, ScanRequest{Table: "cpu", Version: &v2}))
	clk.advance(time.Minute)
	superseded := clk.Now()
	ts.mustPut(ctx, pathDesc("cpu"), genRows(start.Add(time.Hour), 10, 2), 40, 3)
	setProps(t, ts, map[string]any{"table": "cpu", "properties": map[string]string{"tsflight.keep-snapshots": "1h"}})

	// Inside the window: the pinned ticket, a new plan and an action read
	// version 2.
	got, err := ts.fetchAll(ctx, info2)
	if err != nil || len(got.rows) != len(first) {
		t.Fatalf("ticket of version 2 inside the window: %v", err)
	}
	if got, err := ts.fetchAll(ctx, ts.info(ctx, cmdDesc(t, ScanRequest{Table: "cpu", Version: &v2}))); err != nil || len(got.rows) != len(first) {
		t.Fatalf("version 2 inside the window: %v", err)
	}
	cov := map[string]any{"table": "cpu", "start": "2024-06-01T00:00:00Z", "end": "2024-06-01T03:00:00Z", "version": 2}
	if c := ts.mustAction(ctx, ActionCoverage, cov); c["version"] != float64(2) {
		t.Fatalf("coverage at version 2: %v", c)
	}

	clk.advance(time.Hour + time.Second)
	frags := []string{`table "cpu"`, "version 2 was superseded at " + superseded.Format(time.RFC3339Nano),
		"versions superseded more than 1h0m0s ago are not kept (table property tsflight.keep-snapshots)"}
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, ScanRequest{Table: "cpu", Version: &v2}))
	wantCode(t, "GetFlightInfo of an expired version", err, codes.NotFound, frags...)
	_, err = ts.doGet(ctx, info2.Endpoint[0].Ticket)
	wantCode(t, "DoGet of a ticket of an expired version", err, codes.NotFound, frags...)
	_, err = ts.action(ctx, ActionCoverage, cov)
	wantCode(t, "coverage at an expired version", err, codes.NotFound, frags...)
	grid := map[string]any{"table": "cpu", "version": 2}
	_, err = ts.action(ctx, ActionCoverageGrid, grid)
	wantCode(t, "coverage-grid at an expired version", err, codes.NotFound, frags...)
	// Version 3 was superseded by the property commit a moment later, so
	// it too has expired; the newest version reads.
	v3 := uint64(3)
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, ScanRequest{Table: "cpu", Version: &v3}))
	wantCode(t, "GetFlightInfo of version 3", err, codes.NotFound, "version 3 was superseded")
	if got, err := ts.fetchAll(ctx, ts.info(ctx, pathDesc("cpu"))); err != nil || len(got.rows) != 2*len(first) {
		t.Fatalf("newest version: %v", err)
	}
	// Widening the window brings them back (nothing was vacuumed).
	setProps(t, ts, map[string]any{"table": "cpu", "properties": map[string]string{"tsflight.keep-snapshots": "24h"}})
	if got, err := ts.fetchAll(ctx, info2); err != nil || len(got.rows) != len(first) {
		t.Fatalf("ticket of version 2 under a 24h window: %v", err)
	}
}

// replaceSegments commits, on the server's handle of table, the removal
// of every live segment and the addition of one segment holding the same
// rows, written by the server into a scratch table and copied over: what
// a compaction commits. It returns the replaced files.
func replaceSegments(t *testing.T, ts *testServer, table string, rows []row) []string {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, "scratch")
	ts.mustPut(ctx, pathDesc("scratch"), rows, 1<<20, 2)
	scratch, err := ts.svc.Table(ctx, "scratch")
	if err != nil {
		t.Fatal(err)
	}
	merged := scratch.State().Segments[0]
	for _, p := range []string{merged.Path, merged.CoveragePath} {
		data, err := os.ReadFile(filepath.Join(ts.root, "scratch", filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ts.root, table, filepath.FromSlash(p)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := ts.svc.Table(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	st := tb.State()
	var actions []tableformat.Action
	var replaced []string
	for _, s := range st.Segments {
		actions = append(actions, tableformat.RemoveSegment{Path: s.Path})
		replaced = append(replaced, s.Path, s.CoveragePath)
	}
	actions = append(actions, tableformat.AddSegment{Segment: merged})
	if _, err := tb.Commit(ctx, st.Version, actions); err != nil {
		t.Fatal(err)
	}
	slices.Sort(replaced)
	return replaced
}

func TestVacuumActionKeepSnapshots(t *testing.T) {
	ts, clk := startClockServer(t)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	start := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	a, b := genRows(start, 10, 2), genRows(start.Add(time.Hour), 10, 2)
	ts.mustPut(ctx, pathDesc("cpu"), a, 40, 2)
	ts.mustPut(ctx, pathDesc("cpu"), b, 40, 3)
	replaced := replaceSegments(t, ts, "cpu", append(slices.Clone(a), b...)) // v4
	run := func(body any) VacuumResult {
		t.Helper()
		return runAction[VacuumResult](t, ts, ctx, ActionVacuum, body)
	}
	expired := func(res VacuumResult) []string {
		var out []string
		for _, x := range res.Artifacts {
			if x.Reason == "expired" {
				out = append(out, x.Path)
			}
		}
		return out
	}

	// The table's default window keeps them.
	clk.advance(time.Second)
	res := run(map[string]any{"table": "cpu"})
	if res.KeepSnapshots != "168h0m0s" || res.Totals.Removable != 0 || res.Totals.Expired != 0 || res.Version != 4 {
		t.Fatalf("default: %+v", res)
	}
	if sb, err := time.Parse(time.RFC3339Nano, res.SupersededBefore); err != nil || !sb.Equal(clk.Now().Add(-tableformat.DefaultKeepSnapshots)) {
		t.Fatalf("superseded_before %q", res.SupersededBefore)
	}
	// keep_snapshots 0s: the replaced files are removable, reason expired.
	res = run(map[string]any{"table": "cpu", "keep_snapshots": "0s"})
	if got := expired(res); !slices.Equal(got, replaced) || res.Totals.Expired != len(replaced) || res.Totals.Removable != len(replaced) || res.KeepSnapshots != "0s" {
		t.Fatalf("keep_snapshots 0s: expired %v, want %v (%+v)", got, replaced, res.Totals)
	}
	for _, x := range res.Artifacts {
		if x.Reason == "expired" && (x.Disposition != "removable" || x.Kind == "") {
			t.Fatalf("expired artifact %+v", x)
		}
	}
	// A table property of 1h keeps them until the clock passes it.
	setProps(t, ts, map[string]any{"table": "cpu", "properties": map[string]string{"tsflight.keep-snapshots": "1h"}})
	if res = run(map[string]any{"table": "cpu"}); res.Totals.Expired != 0 || res.KeepSnapshots != "1h0m0s" {
		t.Fatalf("1h window: %+v", res.Totals)
	}
	clk.advance(2 * time.Hour)
	res = run(map[string]any{"table": "cpu", "apply": true})
	if got := vacuumPaths(res, "deleted"); !slices.Equal(got, replaced) || res.Totals.Deleted != len(replaced) || res.Totals.Expired != len(replaced) {
		t.Fatalf("apply past the 1h window: deleted %v, want %v", got, replaced)
	}
	for _, p := range replaced {
		if _, err := os.Stat(filepath.Join(ts.root, "cpu", filepath.FromSlash(p))); !os.IsNotExist(err) {
			t.Fatalf("%s survived: %v", p, err)
		}
	}
	got, err := ts.fetchAll(ctx, ts.info(ctx, pathDesc("cpu")))
	if err != nil || len(got.rows) != len(a)+len(b) {
		t.Fatalf("scan after vacuum: %v", err)
	}
	ts.mustPut(ctx, pathDesc("cpu"), genRows(start.Add(2*time.Hour), 3, 2), 40, 6)

	for _, c := range []struct {
		name, body string
		frags      []string
	}{
		{"bad keep_snapshots", `{"table":"cpu","keep_snapshots":"a week"}`, []string{"keep_snapshots", `"a week"`, "duration"}},
		{"negative keep_snapshots", `{"table":"cpu","keep_snapshots":"-1h"}`, []string{"keep_snapshots", "negative"}},
		{"keep_snapshots not a string", `{"table":"cpu","keep_snapshots":3600}`, []string{"keep_snapshots"}},
	} {
		_, err := ts.action(ctx, ActionVacuum, c.body)
		wantCode(t, c.name, err, codes.InvalidArgument, c.frags...)
	}
	// keep_snapshots with apply still needs write scope; without, it reads.
	if _, write := classifyAction(&flight.Action{Type: ActionVacuum, Body: []byte(`{"table":"cpu","keep_snapshots":"0s"}`)}); write {
		t.Fatal("a vacuum dry run with keep_snapshots is classified as writing")
	}
	if _, write := classifyAction(&flight.Action{Type: ActionVacuum, Body: []byte(`{"table":"cpu","keep_snapshots":"0s","apply":true}`)}); !write {
		t.Fatal("a vacuum apply with keep_snapshots is classified as reading")
	}
}
