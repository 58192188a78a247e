package tableformat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// TestCompactFailures: every failure before the commit removes the files
// the call wrote; an ambiguous commit keeps them and says so.
func TestCompactFailures(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*appendEnv, *storage.FaultFS, *Table) {
		e, _ := newCompactEnv(t, 12)
		ffs, tb := openFaulty(t, storage.Local(e.dir), nil)
		return e, ffs, tb
	}
	unchanged := func(t *testing.T, e *appendEnv, before map[string]string, v uint64) {
		t.Helper()
		if diff := sameSnapshot(before, dirSnapshot(t, e.dir)); diff != "" {
			t.Fatalf("files changed: %s", diff)
		}
		if st, _ := e.tb.Refresh(ctx); st.Version != v {
			t.Fatalf("committed: version %d", st.Version)
		}
	}
	injected := errors.New("injected")

	t.Run("sidecar write fails", func(t *testing.T) {
		e, ffs, tb := setup(t)
		before, v := dirSnapshot(t, e.dir), e.tb.State().Version
		ffs.Inject(storage.Fault{Op: storage.OpCreateExclusive, Match: func(n string) bool { return strings.HasPrefix(n, segmentCoverageDir) }, Err: injected})
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrStorage) || !errors.Is(err, injected) {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("segment sync fails", func(t *testing.T) {
		e, ffs, tb := setup(t)
		before, v := dirSnapshot(t, e.dir), e.tb.State().Version
		ffs.Inject(storage.Fault{Op: storage.OpSync, Match: func(n string) bool { return strings.HasPrefix(n, appendDir) }, Err: injected})
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrStorage) {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("parent sync fails", func(t *testing.T) {
		e, ffs, tb := setup(t)
		before, v := dirSnapshot(t, e.dir), e.tb.State().Version
		ffs.Inject(storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == "data" }, Err: injected})
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "sync data") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("output removed before the commit", func(t *testing.T) {
		e, _, tb := setup(t)
		before, v := dirSnapshot(t, e.dir), e.tb.State().Version
		withCompactHook(t, func(int) {
			for name := range dirSnapshot(t, e.dir) {
				if _, ok := before[name]; !ok && strings.HasSuffix(name, ".parquet") {
					_ = os.Remove(filepath.Join(e.dir, name))
				}
			}
		})
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "disappeared before its commit") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("retries exhausted", func(t *testing.T) {
		e, _, tb := setup(t)
		next := 100
		withCompactHook(t, func(int) {
			appendSmall(t, ctx, e.tb, e.mem, next, next+1)
			next++
		})
		o := compactOpts(e.mem)
		o.MaxRetries = 2
		_, err := tb.Compact(ctx, o)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "gave up after 2 retries") || next != 103 {
			t.Fatalf("got %v", err)
		}
		// No file of the compaction is left.
		vac, err := e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
		if err != nil || vac.Removable != 0 {
			t.Fatalf("vacuum finds %d stray files (%v)", vac.Removable, err)
		}
	})
	t.Run("table replaced by another schema", func(t *testing.T) {
		e, _, tb := setup(t)
		withCompactHook(t, func(int) {
			// A new table in the directory; the old files stay.
			if err := os.RemoveAll(filepath.Join(e.dir, LogDir)); err != nil {
				t.Fatal(err)
			}
			nt := mustCreateTable(t, storage.Local(e.dir), CreateOptions{Index: IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 10}}}, nil)
			s := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
			b := array.NewRecordBuilder(e.mem, s)
			b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 20, 30}, nil)
			rdr := readerOf(t, s, b.NewRecordBatch())
			b.Release()
			defer rdr.Release()
			if _, err := nt.Append(ctx, rdr, e.opts()); err != nil {
				t.Fatal(err)
			}
		})
		_, err := tb.Compact(ctx, compactOpts(e.mem))
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "schema changed") {
			t.Fatalf("got %v", err)
		}
		if n := len(dirSnapshot(t, filepath.Join(e.dir, appendDir))); n != 13 {
			t.Fatalf("%d segment files, want the old table's 12 and the new table's one", n)
		}
	})
	t.Run("sidecars disagree with the rows", func(t *testing.T) {
		e, _, tb := setup(t)
		st := e.tb.State()
		// Segment 0's sidecar now holds segment 11's coverage (same count).
		data, err := os.ReadFile(filepath.Join(e.dir, st.Segments[11].CoveragePath))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.dir, st.Segments[0].CoveragePath), data, 0o644); err != nil {
			t.Fatal(err)
		}
		before := dirSnapshot(t, e.dir)
		_, err = tb.Compact(ctx, compactOpts(e.mem))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "differs from the union of the 12 sources' sidecars") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, st.Version)
	})
	t.Run("sources overlap", func(t *testing.T) {
		e, _, tb := setup(t)
		st := e.tb.State()
		// Commit a second copy of segment 3 under new names.
		seg := st.Segments[3]
		cp := seg
		cp.Path = appendDir + "/00000000-0000-4000-8000-000000000001.parquet"
		cp.CoveragePath = segmentCoverageDir + "/copy.roar"
		for from, to := range map[string]string{seg.Path: cp.Path, seg.CoveragePath: cp.CoveragePath} {
			data, err := os.ReadFile(filepath.Join(e.dir, from))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.dir, to), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.tb.Commit(ctx, st.Version, []Action{AddSegment{Segment: cp}}); err != nil {
			t.Fatal(err)
		}
		before, v := dirSnapshot(t, e.dir), st.Version+1
		_, err := tb.Compact(ctx, compactOpts(e.mem))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "the source segments overlap") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, v)
	})
	t.Run("sidecar missing", func(t *testing.T) {
		e, _, tb := setup(t)
		st := e.tb.State()
		if err := os.Remove(filepath.Join(e.dir, st.Segments[2].CoveragePath)); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), st.Segments[2].CoveragePath) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("source missing", func(t *testing.T) {
		e, _, tb := setup(t)
		st := e.tb.State()
		if err := os.Remove(filepath.Join(e.dir, st.Segments[5].Path)); err != nil {
			t.Fatal(err)
		}
		before := dirSnapshot(t, e.dir)
		if _, err := tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), st.Segments[5].Path) {
			t.Fatalf("got %v", err)
		}
		unchanged(t, e, before, st.Version)
	})
	t.Run("ambiguous commit keeps the files", func(t *testing.T) {
		e, ffs, tb := setup(t)
		before := dirSnapshot(t, e.dir)
		ffs.Inject(storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == LogDir }, Nth: 1, Err: injected})
		rep, err := tb.Compact(ctx, compactOpts(e.mem))
		if !errors.Is(err, ErrAmbiguousOutcome) || rep == nil || rep.SourceSegments != 12 || rep.OutputSegments != 1 || rep.CommittedVersion != 0 {
			t.Fatalf("got %+v %v", rep, err)
		}
		out := rep.Groups[0].Outputs[0]
		if _, err := os.Stat(filepath.Join(e.dir, out)); err != nil {
			t.Fatalf("the output of an ambiguous commit was removed: %v", err)
		}
		// Here the commit did land: the table holds the output.
		st, err := e.tb.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st.Segment(out); !ok || len(st.Segments) != 1 {
			t.Fatalf("after the ambiguous commit: %d segments", len(st.Segments))
		}
		if diff := sameSnapshot(before, dirSnapshot(t, e.dir)); !strings.Contains(diff, out) {
			t.Fatalf("new files %s do not include the output %s", diff, out)
		}
	})
}
