// Tests of Rollback's remaining error paths: a cancelled context, storage
// errors while checking the files, a segment whose size changed, a target
// segment without a sidecar and no snapshot, features declared since, and
// an ambiguous commit outcome (the report comes back with the error).

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

func TestRollbackCancelled(t *testing.T) {
	e, target := rollbackEnv(t, false)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	before := testkit.Snapshot(t, e.dir)
	if rep, err := e.tb.Rollback(ctx, target, nil); !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("cancelled: %+v %v", rep, err)
	}
	sameHashes(t, "cancelled rollback", before, testkit.Snapshot(t, e.dir))
}

// TestRollbackStorageErrors: a stat that fails (not "does not exist") on
// a file the rollback checks is ErrStorage naming the file.
func TestRollbackStorageErrors(t *testing.T) {
	for _, which := range []string{"segment", "sidecar", "snapshot"} {
		t.Run(which, func(t *testing.T) {
			e, target := rollbackEnv(t, true)
			want := mustStateAt(t, e.tb, target)
			p := map[string]string{"segment": want.Segments[1].Path, "sidecar": want.Segments[1].CoveragePath, "snapshot": want.Coverage.Path}[which]
			ffs := storage.NewFaultFS(storage.Local(e.dir))
			tb, err := Open(e.ctx, ffs, e.opts)
			if err != nil {
				t.Fatal(err)
			}
			ffs.Inject(storage.Fault{Op: storage.OpStat, Match: func(n string) bool { return n == p }, Err: errors.New("EIO")})
			before := testkit.Snapshot(t, e.dir)
			rep, err := tb.Rollback(e.ctx, target, nil)
			if !errors.Is(err, ErrStorage) || rep != nil || !strings.Contains(err.Error(), "stat "+p) {
				t.Fatalf("stat of the %s fails: %+v %v", which, rep, err)
			}
			sameHashes(t, "rollback over a failing stat", before, testkit.Snapshot(t, e.dir))
		})
	}
}

// TestRollbackSegmentChanged: a target segment whose size is not the one
// its commit recorded is corruption, named.
func TestRollbackSegmentChanged(t *testing.T) {
	e, target := rollbackEnv(t, false)
	want := mustStateAt(t, e.tb, target)
	seg := want.Segments[3]
	f, err := os.OpenFile(filepath.Join(e.dir, filepath.FromSlash(seg.Path)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("extra")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	wantRefused(t, e, target, ErrCorrupt, seg.Path, fmt.Sprintf("the segment holds %d bytes, its commit recorded %d", *seg.FileSize+5, *seg.FileSize))
}

// TestRollbackNoSidecarNoSnapshot: a target segment without a coverage
// sidecar (a hand-made commit) on a table without a snapshot to take the
// coverage from is refused, naming the segment.
func TestRollbackNoSidecarNoSnapshot(t *testing.T) {
	e := newRetentionEnv(t, false)
	e.append(compactRowsOf(0)...) // v2
	bare := e.merged(compactRowsOf(1)...)
	bare.CoveragePath = ""
	if _, err := e.tb.Commit(e.ctx, 2, []Action{AddSegment{Segment: bare}}); err != nil { // v3
		t.Fatal(err)
	}
	if _, err := e.tb.Commit(e.ctx, 3, []Action{RemoveSegment{Path: bare.Path}}); err != nil { // v4
		t.Fatal(err)
	}
	wantRefused(t, e, 3, ErrNotFound, "cannot roll back to version 3: its segment "+bare.Path+" has no coverage sidecar")
}

// TestRollbackRefusesFeatureChange: a feature declared since the target
// (features only move forward) is refused.
func TestRollbackRefusesFeatureChange(t *testing.T) {
	e, target := rollbackEnv(t, false)
	st := e.tb.State()
	m := st.Meta.Clone()
	m.WriterFeatures = []string{FeatureSchemaMetadata}
	m.ReaderFeatures = []string{FeatureSchemaMetadata}
	if _, err := e.tb.Commit(e.ctx, st.Version, []Action{UpdateTableMeta{Meta: *m}}); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, e, target, ErrUnsupported, fmt.Sprintf("cannot roll back to version %d: the table's protocol or features changed since", target),
		"reader [schema_metadata] writer [schema_metadata] now")
}

// TestRollbackAmbiguous: the commit file is visible but the log directory
// cannot be synced: the error says so and comes with the report, and the
// rollback is in the log.
func TestRollbackAmbiguous(t *testing.T) {
	e, target := rollbackEnv(t, false)
	ffs := storage.NewFaultFS(storage.Local(e.dir))
	tb, err := Open(e.ctx, ffs, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	v := tb.State().Version
	ffs.Inject(storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == LogDir }, After: true, Err: errors.New("EIO")})
	rep, err := tb.Rollback(e.ctx, target, nil)
	if !errors.Is(err, ErrAmbiguousOutcome) || rep == nil || rep.CommittedVersion != 0 || len(rep.Removed) != 2 ||
		!strings.Contains(err.Error(), fmt.Sprintf("the rollback to version %d; reopen the table", target)) {
		t.Fatalf("ambiguous rollback: %+v %v", rep, err)
	}
	re, err := Open(e.ctx, storage.Local(e.dir), nil)
	if err != nil || re.State().Version != v+1 || re.State().RowCount() != 40 {
		t.Fatalf("reopened after the ambiguous rollback: %v", err)
	}
}
