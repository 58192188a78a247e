// Tests of the compact action through a real server: dry run, compaction,
// what DoGet and the next DoPut see afterwards, and the refusals.

package flightserver

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/tableformat"
)

// compactRun runs the compact action and decodes its answer strictly.
func (ts *testServer) compactRun(t *testing.T, body any) CompactResult {
	t.Helper()
	return runAction[CompactResult](t, ts, ctxT(t), ActionCompact, body)
}

func TestCompactAction(t *testing.T) {
	ts, ctx := startWithCPU(t)
	var all []row
	for i := range 20 {
		rows := genRows(t0.Add(timeOfStep(2*i)), 2, 3) // 6 rows an append
		ts.mustPut(ctx, pathDesc("cpu"), rows, 6, uint64(i+2))
		all = append(all, rows...)
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	bytesBefore := d["bytes"].(float64)

	// A dry run reports the one group and changes nothing.
	res := ts.compactRun(t, map[string]any{"table": "cpu", "dry_run": true})
	if res.Table != "cpu" || !res.DryRun || res.NoOp || res.StartingVersion != 21 || res.CommittedVersion != 0 || len(res.Groups) != 1 ||
		res.SourceSegments != 20 || res.OutputSegments != 0 || res.BytesBefore != uint64(bytesBefore) || res.Groups[0].Rows != 120 ||
		res.Groups[0].IndexMin != "2024-06-01T00:00:00Z" || res.Groups[0].IndexMax != "2024-06-01T00:06:30Z" {
		t.Fatalf("dry run: %+v", res)
	}
	if d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"}); d["version"] != float64(21) || d["segments"] != float64(20) {
		t.Fatalf("after the dry run: %v", d)
	}

	// The compaction: one segment, the same rows.
	res = ts.compactRun(t, map[string]any{"table": "cpu"})
	if res.DryRun || res.NoOp || res.CommittedVersion != 22 || res.SourceSegments != 20 || res.OutputSegments != 1 || res.RowsRead != 120 ||
		res.RowsWritten != 120 || res.BytesAfter == 0 || res.BytesAfter >= res.BytesBefore || len(res.Groups[0].Outputs) != 1 ||
		!strings.HasPrefix(res.Groups[0].Outputs[0], "data/_managed/append/") {
		t.Fatalf("compaction: %+v", res)
	}
	d = ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if d["version"] != float64(22) || d["segments"] != float64(1) || d["rows"] != float64(120) || d["bytes"] != float64(res.BytesAfter) {
		t.Fatalf("after the compaction: %v", d)
	}
	got := ts.readAll(t, ctx, "cpu")
	sameRows(t, "DoGet after the compaction", got.rows, all)

	// Coverage answers are unchanged, a repeated compaction has nothing
	// to do, and appends go on.
	cov := ts.mustAction(ctx, ActionCoverage, map[string]any{"table": "cpu", "start": "2024-06-01T00:00:00Z", "end": "2024-06-01T00:10:00Z"})
	if cov["covered"] != float64(120) || cov["expected"] != float64(180) {
		t.Fatalf("coverage after the compaction: %v", cov)
	}
	if res := ts.compactRun(t, `{"table":"cpu"}`); !res.NoOp || res.CommittedVersion != 0 || len(res.Groups) != 0 || res.StartingVersion != 22 {
		t.Fatalf("second compaction: %+v", res)
	}
	more := genRows(t0.Add(timeOfStep(40)), 2, 3)
	ts.mustPut(ctx, pathDesc("cpu"), more, 6, 23)
	got = ts.readAll(t, ctx, "cpu")
	sameRows(t, "DoGet after the next DoPut", got.rows, append(all, more...))
	again := buildBatches(ts.cliMem, all[:6], 6)
	defer releaseAll(again)
	if _, err := ts.put(ctx, pathDesc("cpu"), tsbsSchema, again...); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a DoPut of rows the compacted segment holds: %v, want FAILED_PRECONDITION", err)
	}
	chk := ts.mustAction(ctx, ActionCheck, map[string]any{"table": "cpu"})
	if chk["ok"] != true {
		t.Fatalf("check after the compaction: %v", chk)
	}
}

func TestCompactActionEmptyTable(t *testing.T) {
	ts := startServer(t, nil)
	ts.createTSBS(ctxT(t), "cpu")
	if res := ts.compactRun(t, map[string]any{"table": "cpu"}); !res.NoOp || res.StartingVersion != 1 || res.Groups == nil {
		t.Fatalf("empty table: %+v", res)
	}
}

func TestCompactActionRefusals(t *testing.T) {
	ts, ctx := startWithCPU(t)
	wantRefusals(t, ts, ctx, ActionCompact, []refusal{
		{"unknown table", `{"table":"nope"}`, codes.NotFound, []string{"nope"}},
		{"bad table name", `{"table":"../x"}`, codes.InvalidArgument, []string{"../x"}},
		{"no table", `{}`, codes.InvalidArgument, []string{"table"}},
		{"unknown field", `{"table":"cpu","apply":true}`, codes.InvalidArgument, []string{"apply"}},
		{"dry_run not a bool", `{"table":"cpu","dry_run":"yes"}`, codes.InvalidArgument, []string{"dry_run"}},
		{"dry_run twice", `{"table":"cpu","dry_run":true,"dry_run":false}`, codes.InvalidArgument, []string{"dry_run", "more than once"}},
		{"malformed", `{"table":`, codes.InvalidArgument, []string{"compact", "malformed JSON"}},
		{"trailing data", `{"table":"cpu"} {}`, codes.InvalidArgument, []string{"unexpected data"}},
	})
}

// TestCompactActionMemoryBound: the compact action holds at most
// Options.CompactMemory of rows (tsflight serve's --maintenance-memory):
// rows beyond it are spilled in sorted runs, and the table reads the same.
func TestCompactActionMemoryBound(t *testing.T) {
	if _, err := New(&Options{Root: t.TempDir(), CompactMemory: 512 << 10}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "CompactMemory") {
		t.Fatalf("New with CompactMemory 512 KiB: %v, want INVALID_ARGUMENT naming CompactMemory", err)
	}
	ts := startServer(t, func(o *Options) { o.CompactMemory = tableformat.MinCompactMemoryBytes })
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	var all []row
	for i := range 10 {
		rows := genRows(t0.Add(timeOfStep(10*i)), 10, 300) // 3,000 rows an append
		ts.mustPut(ctx, pathDesc("cpu"), rows, 3000, uint64(i+2))
		all = append(all, rows...)
	}
	res := ts.compactRun(t, map[string]any{"table": "cpu"})
	if res.NoOp || res.RowsWritten != 30000 || res.SpilledRuns == 0 || res.SpillBytes == 0 {
		t.Fatalf("compaction at a 1 MiB bound: %+v, want spilled runs", res)
	}
	if res.MemoryPeak == 0 || res.MemoryPeak > 2*uint64(tableformat.MinCompactMemoryBytes) {
		t.Fatalf("compaction at a 1 MiB bound held %d bytes at its peak", res.MemoryPeak)
	}
	got := ts.readAll(t, ctx, "cpu")
	sameRows(t, "DoGet after the bounded compaction", got.rows, all)
}
