// Tests of the rollback action through a real server: a dry run, the
// rollback (DoGet, coverage and describe-table see the older content), the
// rollback of the rollback, and each refusal's code and message, with
// nothing written.

package flightserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// rollbackRun runs the rollback action and decodes its answer strictly.
func (ts *testServer) rollbackRun(t *testing.T, body any) RollbackResult {
	t.Helper()
	return runAction[RollbackResult](t, ts, ctxT(t), ActionRollback, body)
}

// rollbackTable fills "cpu": puts 0-2 (versions 2-4), a compaction (5),
// put 3 (6). It returns the rows of version 3 and of version 6.
func rollbackTable(t *testing.T, ts *testServer) (v3, v6 []row) {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	var all []row
	for i := range 4 {
		if i == 3 {
			if res := ts.compactRun(t, map[string]any{"table": "cpu"}); res.CommittedVersion != 5 {
				t.Fatalf("compaction: %+v", res)
			}
		}
		rows := genRows(t0.Add(timeOfStep(2*i)), 2, 3)
		want := uint64(i + 2)
		if i == 3 {
			want = 6
		}
		ts.mustPut(ctx, pathDesc("cpu"), rows, 6, want)
		all = append(all, rows...)
		if i == 1 {
			v3 = append([]row(nil), all...)
		}
	}
	return v3, all
}

func (ts *testServer) cpuRows(t *testing.T) []row {
	t.Helper()
	ctx := ctxT(t)
	got := ts.readAll(t, ctx, "cpu")
	return got.rows
}

func TestRollbackAction(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	v3, v6 := rollbackTable(t, ts)
	covQ := map[string]any{"table": "cpu", "start": "2024-06-01T00:00:00Z", "end": "2024-06-01T00:10:00Z"}
	covAt3 := ts.mustAction(ctx, ActionCoverage, map[string]any{"table": "cpu", "start": covQ["start"], "end": covQ["end"], "version": 3})
	gapsAt3 := ts.mustAction(ctx, ActionGaps, map[string]any{"table": "cpu", "start": covQ["start"], "end": covQ["end"], "version": 3})
	// The answers name the version they read; the rest must be equal.
	unversioned := func(m map[string]any) string {
		if m["version"] == nil {
			t.Fatalf("an answer without its version: %v", m)
		}
		delete(m, "version")
		return fmt.Sprint(m)
	}

	// A dry run says what would change and writes nothing.
	before := snapshot(t, ts.root)
	dry := ts.rollbackRun(t, map[string]any{"table": "cpu", "version": 3, "dry_run": true})
	if dry.Table != "cpu" || !dry.DryRun || dry.NoOp || dry.StartingVersion != 6 || dry.TargetVersion != 3 || dry.CommittedVersion != 0 ||
		len(dry.Removed) != 2 || len(dry.Added) != 2 || dry.RowsBefore != 24 || dry.RowsAfter != 12 || dry.Coverage == "" {
		t.Fatalf("dry run: %+v", dry)
	}
	sameSnapshot(t, "rollback dry run", before, snapshot(t, ts.root))

	// The rollback: version 3's rows, coverage and gaps, in version 7.
	res := ts.rollbackRun(t, `{"table":"cpu","version":3}`)
	if res.DryRun || res.CommittedVersion != 7 || fmt.Sprint(res.Removed, res.Added) != fmt.Sprint(dry.Removed, dry.Added) || res.RowsAfter != 12 {
		t.Fatalf("rollback: %+v", res)
	}
	sameRows(t, "DoGet after the rollback", ts.cpuRows(t), v3)
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if d["version"] != float64(7) || d["rows"] != float64(12) || d["segments"] != float64(2) {
		t.Fatalf("describe after the rollback: %v", d)
	}
	if cov := ts.mustAction(ctx, ActionCoverage, covQ); unversioned(cov) != unversioned(covAt3) {
		t.Fatalf("coverage after the rollback %v, at version 3 %v", cov, covAt3)
	}
	if gaps := ts.mustAction(ctx, ActionGaps, map[string]any{"table": "cpu", "start": covQ["start"], "end": covQ["end"]}); unversioned(gaps) != unversioned(gapsAt3) {
		t.Fatalf("gaps after the rollback %v, at version 3 %v", gaps, gapsAt3)
	}
	if chk := ts.mustAction(ctx, ActionCheck, map[string]any{"table": "cpu"}); chk["ok"] != true {
		t.Fatalf("check after the rollback: %v", chk)
	}

	// Undone by a rollback to the version before it.
	back := ts.rollbackRun(t, map[string]any{"table": "cpu", "version": 6})
	if back.CommittedVersion != 8 || back.RowsBefore != 12 || back.RowsAfter != 24 {
		t.Fatalf("rollback of the rollback: %+v", back)
	}
	sameRows(t, "DoGet after the rollback of the rollback", ts.cpuRows(t), v6)
}

func TestRollbackActionRefusals(t *testing.T) {
	var armed atomic.Bool
	var root string
	concurrent := make(chan uint64, 1)
	ts := startServer(t, func(o *Options) {
		// The clock of the tables: armed, its first reading (a rollback's,
		// between its plan and its commit) appends through another handle.
		o.Table = tableformat.DefaultOptions()
		o.Table.Now = func() time.Time {
			if armed.CompareAndSwap(true, false) {
				concurrent <- appendBeside(t, filepath.Join(root, "cpu"))
			}
			return time.Now()
		}
	})
	root = ts.root
	ctx := ctxT(t)
	rollbackTable(t, ts)
	wantRefusals(t, ts, ctx, ActionRollback, []refusal{
		{"unknown table", `{"table":"nope","version":2}`, codes.NotFound, []string{"nope"}},
		{"bad table name", `{"table":"../x","version":2}`, codes.InvalidArgument, []string{"../x"}},
		{"no table", `{"version":2}`, codes.InvalidArgument, []string{"table"}},
		{"no version", `{"table":"cpu"}`, codes.InvalidArgument, []string{"version is required"}},
		{"version null", `{"table":"cpu","version":null}`, codes.InvalidArgument, []string{"version is required"}},
		{"version a string", `{"table":"cpu","version":"3"}`, codes.InvalidArgument, []string{"version"}},
		{"version negative", `{"table":"cpu","version":-3}`, codes.InvalidArgument, []string{"version"}},
		{"version fractional", `{"table":"cpu","version":3.5}`, codes.InvalidArgument, []string{"version"}},
		{"version 0", `{"table":"cpu","version":0}`, codes.InvalidArgument, []string{`table "cpu"`, "version must be at least 1"}},
		{"newest version", `{"table":"cpu","version":6}`, codes.InvalidArgument, []string{"version 6 is the table's newest version", "nothing to roll back"}},
		{"future version", `{"table":"cpu","version":9}`, codes.NotFound, []string{"version 9 does not exist", "newest version is 6"}},
		{"unknown field", `{"table":"cpu","version":3,"apply":true}`, codes.InvalidArgument, []string{"apply"}},
		{"dry_run not a bool", `{"table":"cpu","version":3,"dry_run":"yes"}`, codes.InvalidArgument, []string{"dry_run"}},
		{"version twice", `{"table":"cpu","version":3,"version":4}`, codes.InvalidArgument, []string{"version", "more than once"}},
		{"malformed", `{"table":`, codes.InvalidArgument, []string{"rollback", "malformed JSON"}},
		{"trailing data", `{"table":"cpu","version":3} {}`, codes.InvalidArgument, []string{"unexpected data"}},
	})

	// A file version 3 needs is gone.
	dir := filepath.Join(ts.root, "cpu")
	dry := ts.rollbackRun(t, map[string]any{"table": "cpu", "version": 3, "dry_run": true})
	gone := dry.Added[1]
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(gone)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(gone))); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ts.root)
	_, err = ts.action(ctx, ActionRollback, map[string]any{"table": "cpu", "version": 3})
	wantCode(t, "missing segment", err, codes.NotFound, "cannot roll back to version 3: its segment "+gone+" is missing")
	sameSnapshot(t, "missing segment", before, snapshot(t, ts.root))
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(gone)), data, 0o644); err != nil {
		t.Fatal(err)
	}

	// Another writer commits between the plan and the commit.
	armed.Store(true)
	_, err = ts.action(ctx, ActionRollback, map[string]any{"table": "cpu", "version": 3})
	wantCode(t, "concurrent append", err, codes.Aborted, "the table changed since the rollback to version 3 was planned on version 6: version 7 was committed meanwhile", "nothing was committed")
	if v := <-concurrent; v != 7 {
		t.Fatalf("the concurrent append committed version %d", v)
	}
	if d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"}); d["version"] != float64(7) || d["rows"] != float64(30) {
		t.Fatalf("after the conflict: %v", d)
	}

	// Columns added since.
	ts.mustAction(ctx, ActionAddColumns, map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": "temp", "type": "float64", "nullable": true}}})
	before = snapshot(t, ts.root)
	_, err = ts.action(ctx, ActionRollback, map[string]any{"table": "cpu", "version": 7})
	wantCode(t, "added column", err, codes.FailedPrecondition, "cannot roll back to version 7: columns were added since (temp)", "cannot remove a column")
	sameSnapshot(t, "added column", before, snapshot(t, ts.root))

	// Expired: the window is 0s.
	ts.mustAction(ctx, ActionSetProperties, map[string]any{"table": "cpu", "properties": map[string]string{"tsflight.keep-snapshots": "0s"}})
	time.Sleep(10 * time.Millisecond)
	before = snapshot(t, ts.root)
	_, err = ts.action(ctx, ActionRollback, map[string]any{"table": "cpu", "version": 8, "dry_run": true})
	wantCode(t, "expired", err, codes.NotFound, "cannot roll back to version 8", "versions superseded more than 0s ago are not kept (table property tsflight.keep-snapshots)")
	sameSnapshot(t, "expired", before, snapshot(t, ts.root))
}

// appendBeside appends one row through a handle of its own on the table
// in dir, and returns the version it committed.
func appendBeside(t *testing.T, dir string) uint64 {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	tb, err := tableformat.Open(context.Background(), storage.Local(dir), nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	recs := buildBatches(mem, genRows(t0.Add(timeOfStep(100)), 2, 3), 6)
	rdr, err := array.NewRecordReader(tsbsSchema, recs)
	releaseAll(recs)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer rdr.Release()
	o := tableformat.DefaultAppendOptions()
	o.Alloc = mem
	res, err := tb.Append(context.Background(), rdr, o)
	if err != nil {
		t.Error(err)
		return 0
	}
	return res.Version
}
