// Tests of Rollback on real directories: the content, coverage and gaps of
// the rolled-back table equal the target version's (scans pinned at it),
// a rollback of the rollback restores the later content, a handle that
// cached the coverage before a rollback sees the smaller one after, and
// every refusal (expired, vacuumed file, schema change, concurrent commit,
// bad versions) writes nothing. The 0.9.0 package reads and appends to a
// rolled-back table.

package tableformat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// refAppendReport is what interop.py says of the appends it made.
type refAppendReport struct {
	Appends []struct {
		Version uint64 `json:"version"`
	} `json:"appends"`
}

// refAppendRows has the reference package append rec (which it releases)
// to the entity table (tsIndex) in dir.
func refAppendRows(t *testing.T, dir string, rec arrow.RecordBatch) refAppendReport {
	t.Helper()
	p := filepath.Join(t.TempDir(), "more.arrows")
	writeIPC(t, p, rec)
	rec.Release()
	var rep refAppendReport
	interop(t, &rep, "append", `{"index_column":"ts","index_type":"timestamp","index_granularity":"10s","entity_columns":["host"]}`, dir, p)
	return rep
}

// sameHashes fails when the directory's files changed since before.
func sameHashes(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	reportDiff(t, what, before, after, "was written", "was removed")
}

// rollbackEnv builds the history of the tests: appends 0-3 (version
// target = 5), appends 4-7, a compaction of everything, append 8.
func rollbackEnv(t *testing.T, snapshots bool) (*retentionEnv, uint64) {
	t.Helper()
	e := newRetentionEnv(t, snapshots)
	for i := range 4 {
		e.append(compactRowsOf(i)...)
	}
	target := e.tb.State().Version
	for i := 4; i < 8; i++ {
		e.append(compactRowsOf(i)...)
	}
	if rep, err := e.tb.Compact(e.ctx, compactOpts(e.mem)); err != nil || rep.NoOp || rep.SourceSegments != 8 {
		t.Fatalf("compaction: %+v %v", rep, err)
	}
	e.append(compactRowsOf(8)...)
	return e, target
}

// wantContentOf checks that st reads exactly as want: rows, coverage and
// gaps answers, and the table coverage equals the union of the sidecars.
func wantContentOf(t *testing.T, e *retentionEnv, tb *Table, st, want *State) {
	t.Helper()
	got, exp := tableRows(t, e.ctx, tb, st, e.mem), tableRows(t, e.ctx, e.tb, want, e.mem)
	if !slices.Equal(got, exp) {
		t.Fatalf("version %d reads %d rows, version %d %d", st.Version, len(got), want.Version, len(exp))
	}
	if st.RowCount() != want.RowCount() {
		t.Fatalf("row counts %d and %d", st.RowCount(), want.RowCount())
	}
	start, end := tsAt(0), tsAt(400)
	if g, w := coverageAnswers(t, e.ctx, tb, st, start, end), coverageAnswers(t, e.ctx, e.tb, want, start, end); g != w {
		t.Fatalf("coverage of version %d:\n%s\nof version %d:\n%s", st.Version, g, want.Version, w)
	}
	cov, err := tb.loadCoverage(e.ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if u := liveUnion(t, tb, st); !cov.set.Equal(u) {
		t.Fatalf("table coverage of version %d has %d pairs, its sidecars %d", st.Version, cov.set.Cardinality(), u.Cardinality())
	}
}

func TestRollbackRestoresVersion(t *testing.T) {
	for _, snapshots := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshots=", snapshots), func(t *testing.T) {
			e, target := rollbackEnv(t, snapshots)
			ctx := e.ctx
			// A second handle that holds the coverage of the newest
			// version before the rollback (its cache must not be extended
			// over the rollback).
			other := mustOpen(t, storage.Local(e.dir), nil)
			if _, err := other.loadCoverage(ctx, other.State()); err != nil {
				t.Fatal(err)
			}
			before := e.tb.State()
			want := mustStateAt(t, e.tb, target)
			wantRemoved := []string{before.Segments[0].Path, before.Segments[1].Path} // the compacted segment, append 8
			var wantAdded []string
			for _, s := range want.Segments {
				wantAdded = append(wantAdded, s.Path)
			}

			rep, err := e.tb.Rollback(ctx, target, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.StartingVersion != before.Version || rep.TargetVersion != target || rep.CommittedVersion != before.Version+1 || rep.DryRun || rep.NoOp ||
				!slices.Equal(rep.Removed, wantRemoved) || !slices.Equal(rep.Added, wantAdded) || rep.RowsBefore != 90 || rep.RowsAfter != 40 {
				t.Fatalf("report %+v, want removed %v added %v", rep, wantRemoved, wantAdded)
			}
			wantPointer := unionCoveragePath
			if snapshots {
				wantPointer = want.Coverage.Path
			}
			rolled := e.tb.State()
			if rep.Coverage != wantPointer || rolled.Coverage.Path != wantPointer || rolled.CoverageVersion != rolled.Version {
				t.Fatalf("coverage pointer %s (report %s, set at %d), want %s", rolled.Coverage.Path, rep.Coverage, rolled.CoverageVersion, wantPointer)
			}
			wantContentOf(t, e, e.tb, rolled, want)
			checkTable(t, ctx, e.tb)
			// The exact SegmentMeta of the target came back.
			for _, s := range want.Segments {
				if got, ok := rolled.Segment(s.Path); !ok || fmt.Sprint(*got) != fmt.Sprint(s) {
					t.Fatalf("segment %s after the rollback: %+v, want %+v", s.Path, got, s)
				}
			}
			// A fresh handle replays the log to the same content.
			fresh := mustOpen(t, storage.Local(e.dir), nil)
			wantContentOf(t, e, fresh, fresh.State(), want)
			// The handle that cached the pre-rollback coverage sees the
			// smaller one.
			ost, err := other.Refresh(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantContentOf(t, e, other, ost, want)

			// Rolling back the rollback restores the later content.
			back, err := e.tb.Rollback(ctx, before.Version, nil)
			if err != nil {
				t.Fatal(err)
			}
			if back.CommittedVersion != rolled.Version+1 || !slices.Equal(back.Added, wantRemoved) || !slices.Equal(back.Removed, wantAdded) ||
				back.RowsBefore != 40 || back.RowsAfter != 90 {
				t.Fatalf("rollback of the rollback: %+v", back)
			}
			wantContentOf(t, e, e.tb, e.tb.State(), before)
			checkTable(t, ctx, e.tb)

			// Roll back again and append, through the other handle, the
			// rows only the rolled-back versions held: no overlap, and the
			// coverage is the target's plus them.
			if _, err := e.tb.Rollback(ctx, target, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := other.loadCoverage(ctx, other.State()); err != nil {
				t.Fatal(err)
			}
			for i := 4; i < 9; i++ {
				if _, err := appendRows(ctx, other, e.mem, compactRowsOf(i)); err != nil {
					t.Fatalf("append %d after the rollback: %v", i, err)
				}
			}
			if _, err := e.tb.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			wantContentOf(t, e, e.tb, e.tb.State(), before)
			checkTable(t, ctx, e.tb)
			if _, err := appendRows(ctx, e.tb, e.mem, compactRowsOf(8)); !errors.Is(err, ErrOverlap) {
				t.Fatalf("append 8 again: %v, want an overlap", err)
			}
		})
	}
}

// TestRollbackDryRun: the report of the commit, and no byte written.
func TestRollbackDryRun(t *testing.T) {
	e, target := rollbackEnv(t, false)
	before := testkit.Snapshot(t, e.dir)
	st := e.tb.State()
	rep, err := e.tb.Rollback(e.ctx, target, &RollbackOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.DryRun || rep.NoOp || rep.CommittedVersion != 0 || rep.StartingVersion != st.Version || len(rep.Removed) != 2 || len(rep.Added) != 4 ||
		rep.RowsBefore != 90 || rep.RowsAfter != 40 || rep.Coverage != unionCoveragePath {
		t.Fatalf("dry run: %+v", rep)
	}
	sameHashes(t, "dry run", before, testkit.Snapshot(t, e.dir))
	if v := e.tb.State().Version; v != st.Version {
		t.Fatalf("dry run moved the handle to %d", v)
	}
	// The same plan commits.
	done, err := e.tb.Rollback(e.ctx, target, DefaultRollbackOptions())
	if err != nil || !slices.Equal(done.Removed, rep.Removed) || !slices.Equal(done.Added, rep.Added) || done.CommittedVersion != st.Version+1 {
		t.Fatalf("after the dry run: %+v %v", done, err)
	}
}

// TestRollbackNoOp: a version whose segments are the live ones (only a
// property changed since) needs no commit.
func TestRollbackNoOp(t *testing.T) {
	e := newRetentionEnv(t, false)
	e.append(compactRowsOf(0)...)
	v := e.tb.State().Version
	if _, err := e.tb.SetProperties(e.ctx, v, map[string]string{"owner": "ops"}); err != nil {
		t.Fatal(err)
	}
	before := testkit.Snapshot(t, e.dir)
	rep, err := e.tb.Rollback(e.ctx, v, nil)
	if err != nil || !rep.NoOp || rep.CommittedVersion != 0 || len(rep.Removed)+len(rep.Added) != 0 || rep.RowsBefore != 10 || rep.RowsAfter != 10 {
		t.Fatalf("no-op rollback: %+v %v", rep, err)
	}
	sameHashes(t, "no-op rollback", before, testkit.Snapshot(t, e.dir))
}

// wantRefused runs a rollback that must fail with category cat and every
// fragment in its message, and checks that nothing was written.
func wantRefused(t *testing.T, e *retentionEnv, version uint64, cat error, frags ...string) {
	t.Helper()
	before := testkit.Snapshot(t, e.dir)
	v := e.tb.State().Version
	for _, dry := range []bool{true, false} {
		rep, err := e.tb.Rollback(e.ctx, version, &RollbackOptions{DryRun: dry})
		if !errors.Is(err, cat) || rep != nil {
			t.Fatalf("rollback to %d (dry run %v): %+v %v, want %v", version, dry, rep, err, cat)
		}
		for _, f := range frags {
			if !strings.Contains(err.Error(), f) {
				t.Fatalf("rollback to %d: %q does not say %q", version, err, f)
			}
		}
	}
	sameHashes(t, "refused rollback", before, testkit.Snapshot(t, e.dir))
	if st, err := e.tb.Refresh(e.ctx); err != nil || st.Version != v {
		t.Fatalf("after the refusal: %v %v", st, err)
	}
}

func TestRollbackRefusesVersions(t *testing.T) {
	e, target := rollbackEnv(t, false)
	newest := e.tb.State().Version
	wantRefused(t, e, 0, ErrInvalidInput, "version must be at least 1")
	wantRefused(t, e, newest, ErrInvalidInput, fmt.Sprintf("version %d is the table's newest version", newest), "nothing to roll back")
	wantRefused(t, e, newest+1, ErrNotFound, fmt.Sprintf("version %d does not exist", newest+1), fmt.Sprintf("newest version is %d", newest))
	// Expired: the commit after the target is older than the window.
	if _, err := e.tb.SetProperties(e.ctx, newest, map[string]string{PropertyKeepSnapshots: "1h"}); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(2 * time.Hour)
	wantRefused(t, e, target, ErrNotFound, fmt.Sprintf("cannot roll back to version %d", target), "are not kept (table property tsflight.keep-snapshots)", "more than 1h0m0s ago")
}

func TestRollbackRefusesMissingFiles(t *testing.T) {
	for _, which := range []string{"segment", "coverage sidecar", "table coverage snapshot"} {
		t.Run(which, func(t *testing.T) {
			e, target := rollbackEnv(t, true)
			want := mustStateAt(t, e.tb, target)
			p := want.Segments[2].Path
			switch which {
			case "coverage sidecar":
				p = want.Segments[2].CoveragePath
			case "table coverage snapshot":
				p = want.Coverage.Path
			}
			if err := os.Remove(filepath.Join(e.dir, filepath.FromSlash(p))); err != nil {
				t.Fatal(err)
			}
			if which == "table coverage snapshot" {
				// The snapshot is only a cache of the sidecars' union: the
				// rollback points at the segment-union marker instead.
				rep, err := e.tb.Rollback(e.ctx, target, nil)
				if err != nil || rep.Coverage != unionCoveragePath {
					t.Fatalf("snapshot missing: %+v %v", rep, err)
				}
				wantContentOf(t, e, e.tb, e.tb.State(), want)
				return
			}
			wantRefused(t, e, target, ErrNotFound, fmt.Sprintf("cannot roll back to version %d: its %s %s is missing", target, which, p))
		})
	}
}

// TestRollbackRefusesAfterVacuum: vacuum after expiry deleted the files
// of the target; with a window that still serves it (raised again), the
// rollback names the missing segment.
func TestRollbackRefusesAfterVacuum(t *testing.T) {
	e, target := rollbackEnv(t, false)
	v := e.tb.State().Version
	e.clock.advance(time.Second)
	if rep := e.vacuum(durp(0), true); rep.Deleted == 0 {
		t.Fatalf("vacuum deleted nothing: %+v", rep)
	}
	want, err := e.tb.StateAt(e.ctx, target)
	if err != nil {
		t.Fatal(err) // the table's own window (7 days) still serves it
	}
	if e.exists(want.Segments[0].Path) {
		t.Fatalf("vacuum kept %s", want.Segments[0].Path)
	}
	wantRefused(t, e, target, ErrNotFound, "its segment "+want.Segments[0].Path+" is missing", "vacuum")
	if e.tb.State().Version != v {
		t.Fatal("the refused rollback committed")
	}
}

func TestRollbackRefusesSchemaChange(t *testing.T) {
	e, target := rollbackEnv(t, false)
	if _, err := e.tb.AddColumns(e.ctx, []Field{
		{Name: "note", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		{Name: "w", Type: DataType{Kind: TypeFloat64}, Nullable: true},
	}); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, e, target, ErrUnsupported, fmt.Sprintf("cannot roll back to version %d: columns were added since (note, w)", target), "cannot remove a column")
	// Back to before the table had a schema: no rows, any schema.
	rep, err := e.tb.Rollback(e.ctx, 1, nil)
	if err != nil || rep.RowsAfter != 0 || len(rep.Added) != 0 || len(rep.Removed) != 2 {
		t.Fatalf("rollback to version 1: %+v %v", rep, err)
	}
	st := e.tb.State()
	if st.RowCount() != 0 || len(st.Schema().Columns) != 5 {
		t.Fatalf("after the rollback to version 1: %d rows, schema %v", st.RowCount(), st.Schema())
	}
	checkTable(t, e.ctx, e.tb)
	for i := range 9 { // every interval is free again
		e.append(compactRowsOf(i)...)
	}
}

// TestRollbackConflict: a commit between the plan and the rollback's
// commit (through the same handle or another one) fails the rollback with
// ErrConflict naming the new version; the concurrent append stays.
func TestRollbackConflict(t *testing.T) {
	for _, sameHandle := range []bool{true, false} {
		t.Run(fmt.Sprint("same_handle=", sameHandle), func(t *testing.T) {
			e, target := rollbackEnv(t, false)
			planned := e.tb.State().Version
			writer := e.tb
			if !sameHandle {
				var err error
				if writer, err = Open(e.ctx, storage.Local(e.dir), nil); err != nil {
					t.Fatal(err)
				}
			}
			testHookRollbackBeforeCommit = func() {
				testHookRollbackBeforeCommit = nil
				if _, err := appendRows(e.ctx, writer, e.mem, compactRowsOf(20)); err != nil {
					t.Errorf("concurrent append: %v", err)
				}
			}
			t.Cleanup(func() { testHookRollbackBeforeCommit = nil })
			rep, err := e.tb.Rollback(e.ctx, target, nil)
			want := fmt.Sprintf("the table changed since the rollback to version %d was planned on version %d: version %d was committed meanwhile", target, planned, planned+1)
			if !errors.Is(err, ErrConflict) || rep != nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing was committed") {
				t.Fatalf("rollback over a concurrent append: %+v %v\nwant %q", rep, err, want)
			}
			st, err := e.tb.Refresh(e.ctx)
			if err != nil || st.Version != planned+1 || st.RowCount() != 100 {
				t.Fatalf("after the conflict: %v rows %d, %v", st.Version, st.RowCount(), err)
			}
			if _, err := os.Stat(filepath.Join(e.dir, filepath.FromSlash(CommitPath(planned+2)))); !os.IsNotExist(err) {
				t.Fatalf("commit %d exists: %v", planned+2, err)
			}
			// Planned again, the rollback removes the new append too.
			rep, err = e.tb.Rollback(e.ctx, target, nil)
			if err != nil || len(rep.Removed) != 3 || rep.RowsBefore != 100 || rep.RowsAfter != 40 {
				t.Fatalf("the rollback planned again: %+v %v", rep, err)
			}
		})
	}
}

// TestRollbackInterop: the 0.9.0 package opens a rolled-back table (on
// the union marker, and on the target's own snapshot), counts the
// target's rows and appends.
func TestRollbackInterop(t *testing.T) {
	requireReference(t)
	for _, snapshots := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshots=", snapshots), func(t *testing.T) {
			e, target := rollbackEnv(t, snapshots)
			if _, err := e.tb.Rollback(e.ctx, target, nil); err != nil {
				t.Fatal(err)
			}
			var q struct {
				Rows [][]any `json:"rows"`
			}
			interop(t, &q, "query", e.dir, "SELECT count(*) AS n, sum(v) AS s FROM t")
			n, sum := scanCountSum(t, e.tb, e.mem, "v")
			if got, want := fmt.Sprint(q.Rows), fmt.Sprintf("[[%d %d]]", n, sum); got != want || n != 40 {
				t.Fatalf("0.9.0 reads %s, tsflight [[%d %d]]", got, n, sum)
			}
			// Its append of rows the rollback removed is no overlap.
			if rep := refAppendRows(t, e.dir, inBatch(e.mem, compactRowsOf(8)...)); len(rep.Appends) != 1 || rep.Appends[0].Version != e.tb.State().Version+1 {
				t.Fatalf("0.9.0 append: %+v", rep)
			}
			interop(t, &q, "query", e.dir, "SELECT count(*) AS n FROM t")
			if got := fmt.Sprint(q.Rows); got != "[[50]]" {
				t.Fatalf("0.9.0 after its append: %s", got)
			}
			if _, err := e.tb.Refresh(e.ctx); err != nil {
				t.Fatal(err)
			}
			if n, _ := scanCountSum(t, e.tb, e.mem, "v"); n != 50 {
				t.Fatalf("tsflight reads %d rows after the package's append", n)
			}
			checkTable(t, e.ctx, e.tb)
		})
	}
}
