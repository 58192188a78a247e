// Tests of Vacuum: what it classifies and removes on real directories, and
// each of its error paths on a fault-injecting file system.

package tableformat

import (
	"context"
	"errors"
	"io/fs"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// crashAppend runs an append through a second handle on fsys that crashes
// just before its commit file would appear, as a process killed inside its
// commit would, and returns the files the attempt left (table-relative).
func crashAppend(t *testing.T, fsys storage.FS, mem memory.Allocator, rows ...row) []string {
	t.Helper()
	ctx := context.Background()
	before := listAll(t, fsys)
	ffs, tb := openFaulty(t, fsys, nil)
	ffs.Inject(storage.Fault{Op: storage.OpLink, Match: func(n string) bool { return reCommitFile.MatchString(n) }})
	rdr := readerOf(t, inSchema(), inBatch(mem, rows...))
	defer rdr.Release()
	opts := DefaultAppendOptions()
	opts.Alloc = mem
	if _, err := tb.Append(ctx, rdr, opts); !errors.Is(err, storage.ErrCrashed) {
		t.Fatalf("append on a crashing FS: %v", err)
	}
	var left []string
	for p := range listAll(t, fsys) {
		if !before[p] {
			left = append(left, p)
		}
	}
	sort.Strings(left)
	return left
}

// listAll is the set of files of fsys (every directory walked).
func listAll(t *testing.T, fsys storage.FS) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := n
			if dir != "." {
				p = dir + "/" + n
			}
			info, err := fsys.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if info.IsDir {
				walk(p)
			} else {
				out[p] = true
			}
		}
	}
	walk(".")
	return out
}

// byDisposition lists the paths of rep's artifacts with disposition d.
func byDisposition(rep *VacuumReport, d VacuumDisposition) []string {
	return artifactPaths(rep, func(a VacuumArtifact) bool { return a.Disposition == d })
}

// artifactPaths lists the paths of rep's artifacts that keep accepts, in
// the report's order.
func artifactPaths(rep *VacuumReport, keep func(VacuumArtifact) bool) []string {
	var out []string
	for _, a := range rep.Artifacts {
		if keep(a) {
			out = append(out, a.Path)
		}
	}
	return out
}

func artifact(t *testing.T, rep *VacuumReport, p string) VacuumArtifact {
	t.Helper()
	for _, a := range rep.Artifacts {
		if a.Path == p {
			return a
		}
	}
	t.Fatalf("no artifact %s in the report", p)
	return VacuumArtifact{}
}

// TestVacuumRemovesWhatACrashedAppendLeft: on a real directory, the files
// of an append killed inside its commit are young, so the default
// retention keeps them; with the cutoff at now they are exactly the
// removable files; Apply deletes them and nothing else, and the table
// still reads the same and takes the next append.
func TestVacuumRemovesWhatACrashedAppendLeft(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h1", 1}, row{10, "h1", 2})
	e.mustAppend(t, row{20, "h1", 3})
	left := crashAppend(t, e.tb.FS(), e.mem, row{30, "h1", 4})
	kinds := map[string]bool{}
	for _, p := range left {
		kinds[vacuumKind(p)] = true
	}
	for _, k := range []string{"segment", "segment_coverage", "commit_temp"} {
		if !kinds[k] {
			t.Fatalf("the crashed append left %v; want a %s among them", left, k)
		}
	}
	if kinds["table_coverage"] {
		t.Fatalf("the crashed append left %v: appends write no table coverage snapshot", left)
	}
	// Files no writer makes, and a CURRENT temp file of a killed publisher.
	for p, data := range map[string]string{
		"data/notes.txt":                           "mine",
		"_coverage/segments/README":                "x",
		LogDir + "/CURRENT.tmp-0123456789abcdef":   "3\n",
		LogDir + "/_orphaned/0000000009.json.1234": "{",
	} {
		writeTableFile(t, e.dir, p, []byte(data))
	}
	stray := append(append([]string(nil), left...), LogDir+"/CURRENT.tmp-0123456789abcdef")
	sort.Strings(stray)
	ctx := context.Background()
	snap := dirSnapshot(t, e.dir)

	// Default retention: everything young is kept.
	rep, err := e.tb.Vacuum(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Removable != 0 || rep.Applied {
		t.Fatalf("default dry run: %d removable, applied %v", rep.Removable, rep.Applied)
	}
	for _, p := range stray {
		if a := artifact(t, rep, p); a.Reason != VacuumWithinRetention {
			t.Fatalf("%s: %s/%s, want within_retention", p, a.Disposition, a.Reason)
		}
	}
	if d := time.Since(rep.OlderThan) - DefaultVacuumRetention; d < 0 || d > time.Minute {
		t.Fatalf("default cutoff %s is not DefaultVacuumRetention ago", rep.OlderThan)
	}

	// Cutoff now: exactly the stray files.
	rep, err = e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if got := byDisposition(rep, VacuumRemovable); strings.Join(got, " ") != strings.Join(stray, " ") {
		t.Fatalf("removable %v, want %v", got, stray)
	}
	for _, p := range []string{"data/notes.txt", "_coverage/segments/README"} {
		if a := artifact(t, rep, p); a.Disposition != VacuumRetained || a.Reason != VacuumUnrecognized || a.Kind != "" {
			t.Fatalf("%s: %+v, want retained unrecognized_artifact", p, a)
		}
	}
	st := e.tb.State()
	for _, seg := range st.Segments {
		for _, p := range []string{seg.Path, seg.CoveragePath} {
			if a := artifact(t, rep, p); a.Disposition != VacuumRetained || a.Reason != VacuumReferenced {
				t.Fatalf("%s: %+v, want referenced_by_commit", p, a)
			}
		}
	}
	// Two segments, their sidecars and the segment-union marker that
	// commit 2 points at (appends write no table snapshots).
	if a := artifact(t, rep, unionCoveragePath); a.Disposition != VacuumRetained || a.Reason != VacuumReferenced {
		t.Fatalf("the marker: %+v, want referenced_by_commit", a)
	}
	if rep.Referenced != 5 || rep.Files != len(stray)+7 || rep.Version != 3 {
		t.Fatalf("totals %+v", rep)
	}
	var bytes int64
	for _, p := range stray {
		bytes += artifact(t, rep, p).Size
	}
	if rep.RemovableBytes != bytes || bytes == 0 {
		t.Fatalf("removable bytes %d, want %d", rep.RemovableBytes, bytes)
	}
	for _, a := range rep.Artifacts {
		if strings.Contains(a.Path, "_orphaned") || a.Path == LogDir+"/CURRENT" || reCommitFile.MatchString(a.Path) {
			t.Fatalf("the log itself is listed: %s", a.Path)
		}
	}
	if diff := sameSnapshot(snap, dirSnapshot(t, e.dir)); diff != "" {
		t.Fatalf("a dry run changed files: %s", diff)
	}

	// Apply removes exactly those.
	rep, err = e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := byDisposition(rep, VacuumDeleted); strings.Join(got, " ") != strings.Join(stray, " ") || rep.Deleted != len(stray) || rep.DeletedBytes != bytes || !rep.Applied {
		t.Fatalf("deleted %v (%+v), want %v", got, rep, stray)
	}
	after := dirSnapshot(t, e.dir)
	for _, p := range stray {
		delete(snap, "/"+p)
	}
	if diff := sameSnapshot(snap, after); diff != "" {
		t.Fatalf("apply changed more than the stray files: %s", diff)
	}
	rep, err = e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
	if err != nil || rep.Removable != 0 {
		t.Fatalf("second dry run: %v, %+v", err, rep)
	}
	tb := mustOpen(t, storage.Local(e.dir), nil)
	if n, sum := scanCountSum(t, tb, e.mem, "v"); n != 3 || sum != 6 {
		t.Fatalf("after vacuum: %d rows, sum %d; want 3, 6", n, sum)
	}
	if _, err := e.append(row{30, "h1", 4}); err != nil {
		t.Fatalf("append after vacuum: %v", err)
	}
}

// TestVacuumRetention: on a MemFS with set times, only files modified
// strictly before the cutoff are removable, and a future cutoff is refused
// with nothing changed.
func TestVacuumRetention(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fsys := storage.NewMem()
	tb := mustCreate(t, fsys)
	left := crashAppend(t, fsys, mem, row{0, "h1", 1})
	cutoff := time.Now().Add(-10 * time.Minute)
	// The segment is older than the cutoff, a sidecar exactly at it, the
	// others younger.
	if err := fsys.SetModTime(left[0], cutoff.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SetModTime(left[1], cutoff); err != nil {
		t.Fatal(err)
	}
	rep, err := tb.Vacuum(ctx, &VacuumOptions{OlderThan: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	if got := byDisposition(rep, VacuumRemovable); len(got) != 1 || got[0] != left[0] {
		t.Fatalf("removable %v, want only %s", got, left[0])
	}
	if a := artifact(t, rep, left[1]); a.Reason != VacuumWithinRetention {
		t.Fatalf("a file modified at the cutoff: %+v", a)
	}
	_, err = tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now().Add(time.Minute), Apply: true})
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "older_than") || !strings.Contains(err.Error(), "future") {
		t.Fatalf("future cutoff: %v", err)
	}
	if n := len(listAll(t, fsys)); n != len(left)+2 {
		t.Fatalf("%d files after a refused vacuum", n)
	}
}

// TestVacuumKeepsWhatUnknownActionsName: a commit holding an action this
// build does not know may name files; every string in it counts as a
// reference.
func TestVacuumKeepsWhatUnknownActionsName(t *testing.T) {
	dir := t.TempDir()
	seg := "data/_managed/append/0e8d2b4c-6a1f-4c9e-9d3b-2f1e5a7c8b90.parquet"
	other := "data/_managed/append/1e8d2b4c-6a1f-4c9e-9d3b-2f1e5a7c8b90.parquet"
	writeLog(t, dir, "2\n", createOK, commitJSON(2, `{"FutureAction":{"files":[{"path":"`+seg+`"}]}}`))
	for _, p := range []string{seg, other} {
		writeTableFile(t, dir, p, []byte("PAR1"))
	}
	tb := mustOpen(t, storage.Local(dir), nil)
	rep, err := tb.Vacuum(context.Background(), &VacuumOptions{OlderThan: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if a := artifact(t, rep, seg); a.Reason != VacuumReferenced {
		t.Fatalf("file named by an unknown action: %+v", a)
	}
	if a := artifact(t, rep, other); a.Disposition != VacuumRemovable {
		t.Fatalf("unnamed file: %+v", a)
	}
}

// TestVacuumRefusesNewerWriters: a table whose writer features this build
// does not know is not vacuumed, not even as a dry run.
func TestVacuumRefusesNewerWriters(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, "1\n", commitJSON(1, metaJSON(7, "[]", `["time_travel_v9"]`, "", "")))
	tb := mustOpen(t, storage.Local(dir), nil)
	if _, err := tb.Vacuum(context.Background(), nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("vacuum of a table with an unknown writer feature: %v", err)
	}
}

// vacuumFaultEnv is a MemFS table at version 2 with the files of one
// crashed append, opened through a FaultFS.
type vacuumFaultEnv struct {
	mem  *storage.MemFS
	ffs  *storage.FaultFS
	tb   *Table
	left []string
}

func newVacuumFaultEnv(t *testing.T) *vacuumFaultEnv {
	t.Helper()
	alloc := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { alloc.AssertSize(t, 0) })
	e := &vacuumFaultEnv{mem: storage.NewMem()}
	tb := mustCreate(t, e.mem)
	rdr := readerOf(t, inSchema(), inBatch(alloc, row{0, "h1", 1}))
	defer rdr.Release()
	opts := DefaultAppendOptions()
	opts.Alloc = alloc
	if _, err := tb.Append(context.Background(), rdr, opts); err != nil {
		t.Fatal(err)
	}
	e.left = crashAppend(t, e.mem, alloc, row{10, "h1", 2})
	// Appends write no table coverage snapshot; a crashed 0.9.0 append or
	// check --repair leaves one, which vacuum handles like the others.
	snap := tableCoverageDir + "/3-tblcov-0123456789abcdef0123456789abcdef-00000000-0000-4000-8000-000000000000.roar"
	if f, err := e.mem.CreateExclusive(snap); err != nil {
		t.Fatal(err)
	} else if _, err := f.Write([]byte("snapshot")); err != nil || f.Close() != nil {
		t.Fatal(err)
	}
	e.left = append(e.left, snap)
	sort.Strings(e.left)
	e.ffs = storage.NewFaultFS(e.mem)
	var err error
	if e.tb, err = Open(context.Background(), e.ffs, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *vacuumFaultEnv) apply(t *testing.T) (*VacuumReport, error) {
	t.Helper()
	return e.tb.Vacuum(context.Background(), &VacuumOptions{OlderThan: time.Now(), Apply: true})
}

// TestVacuumStorageErrors: each storage failure is an ErrStorage (or
// ErrCorrupt for a vanished commit) naming the path.
func TestVacuumStorageErrors(t *testing.T) {
	boom := errors.New("EIO")
	cases := []struct {
		name  string
		fault storage.Fault
		want  error
		frag  string
	}{
		{"list", storage.Fault{Op: storage.OpList, Match: func(n string) bool { return n == "_coverage" }, Err: boom}, ErrStorage, "list _coverage"},
		{"stat", storage.Fault{Op: storage.OpStat, Match: func(n string) bool { return strings.HasSuffix(n, ".parquet") }, Err: boom}, ErrStorage, "stat data/_managed/append/"},
		{"read current", storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool { return n == currentPath }, Err: boom}, ErrStorage, "CURRENT"},
		{"read commit", storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool { return n == CommitPath(2) }, Err: boom}, ErrStorage, CommitPath(2)},
		{"commit vanished", storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool { return n == CommitPath(1) }, Err: fs.ErrNotExist}, ErrCorrupt, "commit 1 is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newVacuumFaultEnv(t)
			e.ffs.Inject(c.fault)
			rep, err := e.apply(t)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.frag) || rep != nil {
				t.Fatalf("got %v (report %v), want %v naming %q", err, rep, c.want, c.frag)
			}
			if e.ffs.CountOps(storage.OpRemove) != 0 {
				t.Fatal("files were removed despite the error")
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		e := newVacuumFaultEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := e.tb.Vacuum(ctx, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
	})
}

// TestVacuumApplyFailures: a failed delete leaves the file removable with
// reason delete_failed and the others deleted; a failed directory sync is
// reported after the deletions; both return the report with an ErrStorage.
func TestVacuumApplyFailures(t *testing.T) {
	boom := errors.New("EACCES")
	t.Run("remove", func(t *testing.T) {
		e := newVacuumFaultEnv(t)
		e.ffs.Inject(storage.Fault{Op: storage.OpRemove, Match: func(n string) bool { return strings.HasSuffix(n, ".parquet") }, Err: boom})
		rep, err := e.apply(t)
		if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "could not delete 1 file") || rep == nil {
			t.Fatalf("got %v, %v", err, rep)
		}
		if rep.Deleted != len(e.left)-1 || rep.Removable != 1 {
			t.Fatalf("totals %+v", rep)
		}
		a := artifact(t, rep, byDisposition(rep, VacuumRemovable)[0])
		if a.Reason != VacuumDeleteFailed || !strings.Contains(a.Error, "EACCES") || a.Kind != "segment" {
			t.Fatalf("failed artifact %+v", a)
		}
	})
	t.Run("stat before delete", func(t *testing.T) {
		e := newVacuumFaultEnv(t)
		seg := e.left[0] // data/... sorts first
		e.ffs.Inject(storage.Fault{Op: storage.OpStat, Match: func(n string) bool { return n == seg }, Nth: 2, Err: boom})
		rep, err := e.apply(t)
		if !errors.Is(err, ErrStorage) || rep == nil || rep.Removable != 1 || rep.Deleted != len(e.left)-1 {
			t.Fatalf("got %v, %+v", err, rep)
		}
	})
	t.Run("sync", func(t *testing.T) {
		e := newVacuumFaultEnv(t)
		e.ffs.Inject(storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == appendDir }, Err: boom})
		rep, err := e.apply(t)
		if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "sync "+appendDir) || rep == nil || rep.Deleted != len(e.left) {
			t.Fatalf("got %v, %+v", err, rep)
		}
	})
}

// TestVacuumApplyRechecks: between planning and deleting, a file that
// changed is kept, one that vanished is already_absent, and one a new
// commit references is kept as referenced.
func TestVacuumApplyRechecks(t *testing.T) {
	e := newVacuumFaultEnv(t)
	var segment, sidecar, tableCov string
	for _, p := range e.left {
		switch vacuumKind(p) {
		case "segment":
			segment = p
		case "segment_coverage":
			sidecar = p
		case "table_coverage":
			tableCov = p
		}
	}
	other := mustOpen(t, e.mem, nil)
	stats := map[string]int{}
	currentReads := 0
	// Match functions run at each call, before it: they stage what another
	// process would do meanwhile (on the MemFS underneath).
	e.ffs.Inject(
		storage.Fault{Op: storage.OpStat, Match: func(n string) bool {
			stats[n]++
			if stats[n] == 2 && n == segment {
				_ = e.mem.SetModTime(n, time.Now().Add(-time.Hour))
			}
			if stats[n] == 2 && n == sidecar {
				_ = e.mem.Remove(n)
			}
			return false
		}},
		storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool {
			if n == currentPath {
				if currentReads++; currentReads == 2 {
					if _, err := other.Commit(context.Background(), 2, []Action{RemoveSegment{Path: tableCov}}); err != nil {
						t.Errorf("staged commit: %v", err)
					}
				}
			}
			return false
		}},
	)
	rep, err := e.apply(t)
	if err != nil {
		t.Fatal(err)
	}
	if a := artifact(t, rep, segment); a.Disposition != VacuumRetained || a.Reason != VacuumChanged {
		t.Fatalf("changed segment: %+v", a)
	}
	if a := artifact(t, rep, sidecar); a.Disposition != VacuumAlreadyAbsent {
		t.Fatalf("vanished sidecar: %+v", a)
	}
	if a := artifact(t, rep, tableCov); a.Disposition != VacuumRetained || a.Reason != VacuumReferenced {
		t.Fatalf("newly referenced table coverage: %+v", a)
	}
	if rep.Version != 3 || rep.AlreadyAbsent != 1 || rep.Deleted != len(e.left)-3 {
		t.Fatalf("totals %+v", rep)
	}
	if _, err := e.mem.Stat(segment); err != nil {
		t.Fatalf("the changed segment was removed: %v", err)
	}
}
