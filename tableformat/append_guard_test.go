package tableformat

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// TestAppendRefusesToCommitMissingFiles: when one of an append's files is
// gone before it commits (a vacuum with too young a cutoff), the append
// fails with ErrStorage naming the file and commits nothing, rather than
// commit a reference to a missing file.
func TestAppendRefusesToCommitMissingFiles(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h1", 1})
	var removed string
	testHookBeforeCommit = func() {
		testHookBeforeCommit = nil
		for _, p := range e.dataFiles() {
			p = strings.TrimPrefix(p, "/")
			if filepath.Ext(p) == ".parquet" && !e.isLive(p) {
				removed = p
				if err := os.Remove(filepath.Join(e.dir, filepath.FromSlash(p))); err != nil {
					t.Error(err)
				}
			}
		}
	}
	_, err := e.append(row{100, "h2", 1})
	testHookBeforeCommit = nil
	if removed == "" {
		t.Fatal("the hook found no new segment to remove")
	}
	if !errors.Is(err, ErrStorage) || !containsAll(err.Error(), removed, "disappeared before its commit", "nothing was committed") {
		t.Fatalf("append whose segment vanished: %v, want ErrStorage naming %s", err, removed)
	}
	st, rerr := e.tb.Refresh(e.ctx)
	if rerr != nil || st.Version != 2 || len(st.Segments) != 1 {
		t.Fatalf("after the refused append: version %v, %v", st, rerr)
	}
	// The next append works.
	if res, err := e.append(row{200, "h3", 1}); err != nil || res.Version != 3 {
		t.Fatalf("next append: %+v %v", res, err)
	}
}

// isLive reports whether p is a segment of the handle's state.
func (e *appendEnv) isLive(p string) bool {
	for _, s := range e.tb.State().Segments {
		if s.Path == p {
			return true
		}
	}
	return false
}

// TestVacuumKeepsFilesUnreplayedCommitsName: a file that only a set-aside
// commit file (or one above the newest the replay reached) mentions is
// kept, even with a cutoff of now; an unmentioned stray of the same shape
// goes.
func TestVacuumKeepsFilesUnreplayedCommitsName(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h1", 1})
	const named = appendDir + "/11111111-2222-4333-8444-555555555555.parquet"
	const stray = appendDir + "/99999999-2222-4333-8444-555555555555.parquet"
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{named, stray} {
		full := filepath.Join(e.dir, filepath.FromSlash(p))
		if err := os.WriteFile(full, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, old, old); err != nil {
			t.Fatal(err)
		}
	}
	orphans := filepath.Join(e.dir, filepath.FromSlash(orphanDir))
	if err := os.MkdirAll(orphans, 0o755); err != nil {
		t.Fatal(err)
	}
	torn := `{"version":3,"base_version":2,"actions":[{"AddSegment":{"path":"` + named + `","format":"parq`
	if err := os.WriteFile(filepath.Join(orphans, "0000000003.json.1"), []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := e.tb.Vacuum(e.ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true})
	if err != nil {
		t.Fatal(err)
	}
	if a := artifact(t, rep, named); a.Disposition != VacuumRetained || a.Reason != VacuumReferenced {
		t.Fatalf("%s, named only by a set-aside commit: %s/%s, want retained/referenced_by_commit", named, a.Disposition, a.Reason)
	}
	if a := artifact(t, rep, stray); a.Disposition != VacuumDeleted {
		t.Fatalf("%s: %s/%s, want deleted", stray, a.Disposition, a.Reason)
	}
	if _, err := os.Stat(filepath.Join(e.dir, filepath.FromSlash(named))); err != nil {
		t.Fatalf("the named file is gone: %v", err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestAppendGivesUpAfterMaxRetries: an append that keeps losing the commit
// race gives up after MaxRetries with ErrConflict saying so, and commits
// nothing.
func TestAppendGivesUpAfterMaxRetries(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h1", 1})
	other := mustOpen(t, storage.Local(e.dir), nil)
	testHookBeforeCommit = func() {
		testHookBeforeCommit = nil
		rdr := readerOf(t, inSchema(), inBatch(e.mem, row{100, "h2", 1}))
		defer rdr.Release()
		if _, err := other.Append(e.ctx, rdr, e.opts()); err != nil {
			t.Errorf("other append: %v", err)
		}
	}
	rdr := readerOf(t, inSchema(), inBatch(e.mem, row{200, "h3", 1}))
	defer rdr.Release()
	o := e.opts()
	o.MaxRetries = 0
	_, err := e.tb.Append(e.ctx, rdr, o)
	testHookBeforeCommit = nil
	if !errors.Is(err, ErrConflict) || !containsAll(err.Error(), "gave up after 0 retries", "nothing was committed") {
		t.Fatalf("append that lost its only try: %v, want ErrConflict saying it gave up", err)
	}
	st, err := e.tb.Refresh(e.ctx)
	if err != nil || st.Version != 3 || len(st.Segments) != 2 {
		t.Fatalf("after the give-up: %+v %v, want version 3 with the other writer's 2 segments", st, err)
	}
	if d := DefaultAppendOptions().MaxRetries; d != 64 {
		t.Fatalf("default MaxRetries %d, want 64", d)
	}
}

// TestVacuumNeverFollowsLinks: a symbolic link under data/ (to a directory
// outside the table, or to a file) is neither walked, listed nor deleted,
// even when what it leads to has the shape of a stray segment.
func TestVacuumNeverFollowsLinks(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h1", 1})
	outside := t.TempDir()
	const seg = "11111111-2222-4333-8444-555555555555.parquet"
	target := filepath.Join(outside, seg)
	old := time.Now().Add(-time.Hour)
	if err := os.WriteFile(target, []byte("PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(target, old, old); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(e.dir, filepath.FromSlash(appendDir))
	if err := os.Symlink(outside, filepath.Join(data, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(data, "99999999-2222-4333-8444-555555555555.parquet")); err != nil {
		t.Fatal(err)
	}
	rep, err := e.tb.Vacuum(e.ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rep.Artifacts {
		if strings.Contains(a.Path, "elsewhere") || strings.HasPrefix(path.Base(a.Path), "99999999") {
			t.Fatalf("vacuum listed %s (%s/%s) through a link", a.Path, a.Disposition, a.Reason)
		}
	}
	if rep.Deleted != 0 {
		t.Fatalf("vacuum deleted %d files", rep.Deleted)
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the file outside the table is gone: %v", err)
	}
}
