// Tests of Check: each kind of damage on a real directory is found with the
// right file, --repair fixes exactly the repairable ones (a second check is
// then clean for them), and repaired tables still open and take appends in
// tsflight and in the 0.9.0 reference package.

package tableformat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// checkEnv is a table of version 3: two segments with entity host.
type checkEnv struct {
	*appendEnv
	segs []SegmentMeta
	cov  string // the table coverage snapshot
}

func newCheckEnv(t *testing.T) *checkEnv {
	t.Helper()
	e := newAppendEnv(t, tsIndex())
	e.snapshots = true // the snapshot cases need one; TestCheckUnionMarker checks the marker
	e.mustAppend(t, row{0, "h1", 1}, row{10, "h1", 2}, row{0, "h2", 3})
	e.mustAppend(t, row{20, "h1", 4}, row{30, "h2", 5})
	st := e.tb.State()
	if st.Version != 3 || len(st.Segments) != 2 || st.Coverage == nil {
		t.Fatalf("fixture: version %d, %d segments", st.Version, len(st.Segments))
	}
	return &checkEnv{appendEnv: e, segs: st.Segments, cov: st.Coverage.Path}
}

func (e *checkEnv) path(p string) string { return filepath.Join(e.dir, filepath.FromSlash(p)) }

func (e *checkEnv) write(p string, data []byte) {
	e.t.Helper()
	if err := os.WriteFile(e.path(p), data, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *checkEnv) read(p string) []byte {
	e.t.Helper()
	b, err := os.ReadFile(e.path(p))
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *checkEnv) remove(p string) {
	e.t.Helper()
	if err := os.Remove(e.path(p)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *checkEnv) check(repair bool) *CheckReport {
	e.t.Helper()
	rep, err := Check(e.ctx, storage.Local(e.dir), CheckOptions{Repair: repair})
	if err != nil {
		e.t.Fatalf("check (repair %v): %v", repair, err)
	}
	return rep
}

// findingList renders findings as "code path" lines, sorted.
func findingList(rep *CheckReport) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.Code+" "+f.Path)
	}
	sort.Strings(out)
	return out
}

func TestCheckHealthyTable(t *testing.T) {
	e := newCheckEnv(t)
	rep := e.check(false)
	if len(rep.Findings) != 0 || !rep.OK() {
		t.Fatalf("healthy table: %+v", rep.Findings)
	}
	if rep.Version != 3 || rep.Current != 3 || rep.Segments != 2 || rep.Rows != 5 {
		t.Fatalf("healthy table: report %+v", rep)
	}
	// Through the handle too, and an empty table.
	if rep, err := e.tb.Check(e.ctx, CheckOptions{}); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("Table.Check: %v, %+v", err, rep)
	}
	empty := t.TempDir()
	mustCreate(t, storage.Local(empty))
	if rep, err := Check(e.ctx, storage.Local(empty), CheckOptions{}); err != nil || len(rep.Findings) != 0 || rep.Version != 1 {
		t.Fatalf("a fresh table: %v, %+v", err, rep)
	}
	// No table at all.
	if _, err := Check(e.ctx, storage.Local(t.TempDir()), CheckOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an empty directory: %v, want ErrNotFound", err)
	}
}

// checkCase damages a fresh fixture and says what Check must find.
type checkCase struct {
	name   string
	damage func(e *checkEnv)
	// want lists the findings as "code path" (path with %s for the
	// fixture's files: resolved by the case).
	want       func(e *checkEnv) []string
	severity   CheckSeverity
	repairable bool
	// version is the table version after a repair.
	version uint64
	// problem is part of the finding's problem text, when set.
	problem string
}

func checkCases() []checkCase {
	c2 := CommitPath(2)
	return []checkCase{
		{name: "missing segment", severity: CheckError,
			damage: func(e *checkEnv) { e.remove(e.segs[0].Path) },
			want:   func(e *checkEnv) []string { return []string{CheckSegmentMissing + " " + e.segs[0].Path} }},
		{name: "truncated segment", severity: CheckError,
			damage: func(e *checkEnv) {
				b := e.read(e.segs[1].Path)
				e.write(e.segs[1].Path, b[:len(b)/2])
			},
			want: func(e *checkEnv) []string { return []string{CheckSegmentDamaged + " " + e.segs[1].Path} }},
		{name: "segment swapped for another", severity: CheckError,
			damage: func(e *checkEnv) { e.write(e.segs[0].Path, e.read(e.segs[1].Path)) },
			want:   func(e *checkEnv) []string { return []string{CheckSegmentDamaged + " " + e.segs[0].Path} }},
		{name: "sidecar corrupted", severity: CheckError,
			damage: func(e *checkEnv) { e.write(e.segs[1].CoveragePath, []byte("TSTECOV2 garbage")) },
			want:   func(e *checkEnv) []string { return []string{CheckSidecarCorrupt + " " + e.segs[1].CoveragePath} }},
		{name: "sidecar of another segment", severity: CheckError,
			damage: func(e *checkEnv) { e.write(e.segs[0].CoveragePath, e.read(e.segs[1].CoveragePath)) },
			want:   func(e *checkEnv) []string { return []string{CheckSidecarMismatch + " " + e.segs[0].CoveragePath} }},
		{name: "sidecar lacking a row's interval", severity: CheckError,
			// Within the segment's bounds, so only the rows tell.
			damage: func(e *checkEnv) {
				set := coverage.NewEntity()
				id, err := indexDomain(e.tb.State().Index()).TimestampID(t0.Unix(), 1)
				if err != nil {
					e.t.Fatal(err)
				}
				for _, h := range []string{"h1", "h2"} {
					if _, err := set.Add(coverage.Identity{coverage.Utf8(h)}, id); err != nil {
						e.t.Fatal(err)
					}
				}
				data, err := set.Encode()
				if err != nil {
					e.t.Fatal(err)
				}
				e.write(e.segs[0].CoveragePath, data)
			},
			want:    func(e *checkEnv) []string { return []string{CheckSidecarMismatch + " " + e.segs[0].CoveragePath} },
			problem: `e.g. host=utf8:"h1" [2024-06-01T00:00:10Z, 2024-06-01T00:00:20Z) is missing from the file`},
		{name: "sidecar missing", severity: CheckError,
			damage: func(e *checkEnv) { e.remove(e.segs[0].CoveragePath) },
			want:   func(e *checkEnv) []string { return []string{CheckSidecarMissing + " " + e.segs[0].CoveragePath} }},
		{name: "table coverage deleted", severity: CheckWarning, repairable: true, version: 4,
			damage: func(e *checkEnv) { e.remove(e.cov) },
			want:   func(e *checkEnv) []string { return []string{CheckTableCoverageMissing + " " + e.cov} }},
		{name: "table coverage corrupted", severity: CheckWarning, repairable: true, version: 4,
			damage: func(e *checkEnv) { e.write(e.cov, []byte{1, 2, 3}) },
			want:   func(e *checkEnv) []string { return []string{CheckTableCoverageCorrupt + " " + e.cov} }},
		{name: "table coverage disagrees", severity: CheckError, repairable: true, version: 4,
			// The snapshot of version 2: only the first segment.
			damage: func(e *checkEnv) { e.write(e.cov, e.read(e.segs[0].CoveragePath)) },
			want:   func(e *checkEnv) []string { return []string{CheckTableCoverageMismatch + " " + e.cov} }},
		{name: "CURRENT lagging", severity: CheckWarning, repairable: true, version: 3,
			damage: func(e *checkEnv) { e.write(currentPath, []byte("2\n")) },
			want:   func(e *checkEnv) []string { return []string{CheckCurrentLagging + " " + currentPath} }},
		{name: "CURRENT garbage", severity: CheckError, repairable: true, version: 3,
			damage: func(e *checkEnv) { e.write(currentPath, []byte("three\n")) },
			want:   func(e *checkEnv) []string { return []string{CheckCurrentInvalid + " " + currentPath} }},
		{name: "CURRENT missing", severity: CheckWarning, repairable: true, version: 3,
			damage: func(e *checkEnv) { e.remove(currentPath) },
			want:   func(e *checkEnv) []string { return []string{CheckCurrentMissing + " " + currentPath} }},
		{name: "missing commit below CURRENT", severity: CheckError,
			damage: func(e *checkEnv) { e.remove(c2) },
			want:   func(e *checkEnv) []string { return []string{CheckCommitMissing + " " + c2} }},
		{name: "malformed commit", severity: CheckError,
			damage: func(e *checkEnv) { e.write(c2, []byte(`{"version":2,"base_version":1,"actions":[{"AddSegment":{}}]}`)) },
			want:   func(e *checkEnv) []string { return []string{CheckCommitMalformed + " " + c2} }},
		{name: "torn commit above CURRENT", severity: CheckWarning,
			damage: func(e *checkEnv) { e.write(CommitPath(4), []byte(`{"version":4,"base`)) },
			want:   func(e *checkEnv) []string { return []string{CheckCommitTorn + " " + CommitPath(4)} }},
	}
}

// TestCheckFindsDamage: each damage is one finding naming the damaged file,
// with its severity, a problem and an action, and marked repairable
// exactly when it is.
func TestCheckFindsDamage(t *testing.T) {
	for _, tc := range checkCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := newCheckEnv(t)
			tc.damage(e)
			rep := e.check(false)
			got, want := findingList(rep), tc.want(e)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("findings:\n%s\nwant:\n%s\n%+v", strings.Join(got, "\n"), strings.Join(want, "\n"), rep.Findings)
			}
			f := rep.Findings[0]
			if f.Severity != tc.severity || f.Repairable != tc.repairable || f.Problem == "" || f.Action == "" || f.Repaired || rep.OK() {
				t.Fatalf("finding %+v; want severity %s, repairable %v", f, tc.severity, tc.repairable)
			}
			if !strings.Contains(f.Problem, tc.problem) {
				t.Fatalf("problem %q; want it to contain %q", f.Problem, tc.problem)
			}
			t.Logf("%s %s %s (version %d)\n  problem: %s\n  action: %s", f.Severity, f.Code, f.Path, f.Version, f.Problem, f.Action)
		})
	}
}

// TestCheckRepair: --repair fixes the repairable damage (a second check is
// clean, the table opens and appends) and leaves the rest exactly as it
// was: no file removed or changed, no commit made.
func TestCheckRepair(t *testing.T) {
	for _, tc := range checkCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := newCheckEnv(t)
			tc.damage(e)
			before := dirSnapshot(t, e.dir)
			rep := e.check(true)
			after := dirSnapshot(t, e.dir)
			for p, data := range before {
				if p == "/"+currentPath && tc.repairable {
					continue
				}
				if after[p] != data {
					t.Errorf("repair changed or removed %s", p)
				}
			}
			if !tc.repairable {
				if len(after) != len(before) || rep.OK() || len(rep.Findings) != 1 || rep.Findings[0].Repaired {
					t.Fatalf("not repairable: %d files before, %d after; report %+v", len(before), len(after), rep.Findings)
				}
				return
			}
			if !rep.OK() || len(rep.Findings) != 1 || !rep.Findings[0].Repaired || rep.Findings[0].Repair == "" || !rep.Repair {
				t.Fatalf("repair: %+v", rep.Findings)
			}
			if rep.Version != tc.version {
				t.Fatalf("after repair the table is at version %d, want %d", rep.Version, tc.version)
			}
			if again := e.check(false); len(again.Findings) != 0 {
				t.Fatalf("second check: %+v", again.Findings)
			}
			tb := mustOpen(t, storage.Local(e.dir), nil)
			e.tb = tb
			if _, err := e.append(row{40, "h1", 6}); err != nil {
				t.Fatalf("append after repair: %v", err)
			}
			// The repaired coverage still refuses an overlap.
			if _, err := e.append(row{0, "h2", 7}); !errors.Is(err, ErrOverlap) {
				t.Fatalf("overlapping append after repair: %v", err)
			}
			if again := e.check(false); len(again.Findings) != 0 || again.Rows != 6 {
				t.Fatalf("check after the append: %+v", again)
			}
		})
	}
}

// TestCheckRepairNeedsIntactSidecars: a table coverage snapshot is not
// rebuilt from sidecars that are themselves damaged, nor CURRENT
// republished over a broken log.
func TestCheckRepairNeedsIntactSidecars(t *testing.T) {
	e := newCheckEnv(t)
	e.remove(e.cov)
	e.write(e.segs[0].CoveragePath, []byte("nope"))
	rep := e.check(true)
	got := findingList(rep)
	want := []string{CheckSidecarCorrupt + " " + e.segs[0].CoveragePath, CheckTableCoverageMissing + " " + e.cov}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") || rep.OK() || rep.Version != 3 {
		t.Fatalf("findings %v; want %v, version 3", got, want)
	}
	for _, f := range rep.Findings {
		if f.Repairable || f.Repaired {
			t.Fatalf("%+v: should not be repairable", f)
		}
	}

	e = newCheckEnv(t)
	e.remove(CommitPath(2))
	e.write(currentPath, []byte("x"))
	rep = e.check(true)
	if got := findingList(rep); len(got) != 2 || got[0] != CheckCommitMissing+" "+CommitPath(2) || got[1] != CheckCurrentInvalid+" "+currentPath || rep.OK() {
		t.Fatalf("findings %v", got)
	}
	if string(e.read(currentPath)) != "x" {
		t.Fatalf("CURRENT was rewritten over a broken log")
	}
}

// TestCheckSeveralDamages: findings accumulate over the whole table, and a
// repair fixes the repairable ones among them.
func TestCheckSeveralDamages(t *testing.T) {
	e := newCheckEnv(t)
	e.write(currentPath, []byte("1\n"))
	e.write(e.cov, []byte("junk"))
	e.remove(e.segs[1].Path)
	rep := e.check(true)
	want := []string{CheckCurrentLagging + " " + currentPath, CheckSegmentMissing + " " + e.segs[1].Path, CheckTableCoverageCorrupt + " " + e.cov}
	sort.Strings(want)
	if got := findingList(rep); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("findings %v; want %v", got, want)
	}
	for _, f := range rep.Findings {
		if f.Repaired != (f.Code != CheckSegmentMissing) {
			t.Errorf("%s: repaired %v", f.Code, f.Repaired)
		}
	}
	if rep.OK() || rep.Version != 4 {
		t.Fatalf("ok %v, version %d", rep.OK(), rep.Version)
	}
	if got := findingList(e.check(false)); len(got) != 1 || got[0] != CheckSegmentMissing+" "+e.segs[1].Path {
		t.Fatalf("second check: %v", got)
	}
}

// TestCheckRepairedTablesInReference: repaired tables open in the 0.9.0
// package, which appends to them; tsflight then finds them consistent.
func TestCheckRepairedTablesInReference(t *testing.T) {
	requireReference(t)
	var dirs []string
	versions := map[string]uint64{}
	for _, tc := range checkCases() {
		if !tc.repairable {
			continue
		}
		e := newCheckEnv(t)
		tc.damage(e)
		if rep := e.check(true); !rep.OK() {
			t.Fatalf("%s: repair: %+v", tc.name, rep.Findings)
		}
		dirs = append(dirs, e.dir)
		versions[e.dir] = tc.version
	}
	res := inspectWithReference(t, true, dirs...)
	for _, dir := range dirs {
		r := res[filepath.Clean(dir)]
		if !r.OK || r.Version != versions[dir] || r.ProbeSkipped != "" || r.VersionAfterProbe != versions[dir]+1 {
			t.Errorf("%s: reference saw %+v, want version %d then %d", dir, r, versions[dir], versions[dir]+1)
			continue
		}
		rep, err := Check(context.Background(), storage.Local(dir), CheckOptions{})
		if err != nil || len(rep.Findings) != 0 || rep.Rows != 6 {
			t.Errorf("%s after the package appended: %v, %+v", dir, err, rep)
		}
	}
}

// TestCheckRepairRacesAWriter: a writer committing between the check and
// its repair commit makes the repair rebase, not fail or lose the commit.
func TestCheckRepairRacesAWriter(t *testing.T) {
	e := newCheckEnv(t)
	e.remove(e.cov)
	r, err := runCheck(e.ctx, storage.Local(e.dir), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	// Another writer commits (a marker) before the repair.
	if _, err := e.tb.Commit(e.ctx, 3, marker("other")); err != nil {
		t.Fatal(err)
	}
	done := r.repair(e.ctx)
	var what string
	for _, v := range done {
		what = v.what
	}
	if len(done) != 1 || !strings.Contains(what, "version 5") {
		t.Fatalf("repair: %v", done)
	}
	if rep := e.check(false); len(rep.Findings) != 0 || rep.Version != 5 {
		t.Fatalf("after the raced repair: %+v", rep)
	}
}

// TestCheckWhileAppending: a check running alongside appends (another
// handle, as a server's) finds nothing: CURRENT published meanwhile is not
// "lagging", new segments are complete when their commit appears.
func TestCheckWhileAppending(t *testing.T) {
	e := newCheckEnv(t)
	done := make(chan error, 1)
	go func() {
		for i := range 15 {
			if _, err := e.append(row{int64(100 + 10*i), "h1", int64(i)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for checks := 0; ; checks++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if rep := e.check(false); len(rep.Findings) != 0 || rep.Version != 18 {
				t.Fatalf("final check: %+v", rep)
			}
			t.Logf("%d checks ran alongside the appends", checks)
			return
		default:
		}
		rep, err := Check(e.ctx, storage.Local(e.dir), CheckOptions{})
		if err == nil && len(rep.Findings) != 0 {
			err = fmt.Errorf("check during appends (version %d): %+v", rep.Version, rep.Findings)
		}
		if err != nil {
			<-done // let the appends finish before failing
			t.Fatal(err)
		}
	}
}

// TestCheckNoCoveragePointer: a table whose segments were committed without
// a table coverage snapshot (as a writer that only adds segments leaves it)
// gets one from --repair.
func TestCheckNoCoveragePointer(t *testing.T) {
	src := newCheckEnv(t)
	e := newAppendEnv(t, tsIndex())
	st := src.tb.State()
	seg := st.Segments[0]
	for _, p := range []string{seg.Path, seg.CoveragePath} {
		data := (&checkEnv{appendEnv: src.appendEnv}).read(p)
		writeTableFile(t, e.dir, p, data)
	}
	m := e.tb.State().Meta.Clone()
	m.Schema = st.Schema()
	if _, err := e.tb.Commit(e.ctx, 1, []Action{UpdateTableMeta{Meta: *m}, AddSegment{Segment: seg}}); err != nil {
		t.Fatal(err)
	}
	ce := &checkEnv{appendEnv: e}
	rep := ce.check(false)
	if got := findingList(rep); len(got) != 1 || got[0] != CheckTableCoverageNoPointer+" "+tableCoverageDir || !rep.Findings[0].Repairable {
		t.Fatalf("findings %v", got)
	}
	rep = ce.check(true)
	if !rep.OK() || rep.Version != 3 {
		t.Fatalf("repair: %+v", rep)
	}
	if rep := ce.check(false); len(rep.Findings) != 0 {
		t.Fatalf("after repair: %+v", rep.Findings)
	}
	tb := mustOpen(t, storage.Local(e.dir), nil)
	e.tb = tb
	if _, err := e.append(row{0, "h1", 9}); !errors.Is(err, ErrOverlap) {
		t.Fatalf("an append overlapping the segment after the repair: %v", err)
	}
}

// TestCheckSwappedSegmentSameShape: a segment swapped for another valid one
// with the same row count, where the log records no size, is found by its
// rows' index bounds (and its sidecar is then only range-checked).
func TestCheckSwappedSegmentSameShape(t *testing.T) {
	src := newAppendEnv(t, tsIndex())
	a, err := src.append(row{0, "h1", 1}, row{10, "h2", 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.append(row{20, "h1", 3}, row{30, "h2", 4})
	if err != nil {
		t.Fatal(err)
	}
	e := newAppendEnv(t, tsIndex())
	copyFile := func(from, to string) {
		data, err := os.ReadFile(filepath.Join(src.dir, filepath.FromSlash(from)))
		if err != nil {
			t.Fatal(err)
		}
		writeTableFile(t, e.dir, to, data)
	}
	copyFile(b.Segment.Path, a.Segment.Path) // b's rows under a's name
	copyFile(a.Segment.CoveragePath, a.Segment.CoveragePath)
	seg := a.Segment
	seg.FileSize = nil
	m := e.tb.State().Meta.Clone()
	m.Schema = src.tb.State().Schema()
	if _, err := e.tb.Commit(e.ctx, 1, []Action{UpdateTableMeta{Meta: *m}, AddSegment{Segment: seg}}); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(e.ctx, storage.Local(e.dir), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := findingList(rep)
	want := []string{CheckSegmentDamaged + " " + seg.Path, CheckTableCoverageNoPointer + " " + tableCoverageDir}
	if strings.Join(got, "|") != strings.Join(want, "|") || !strings.Contains(rep.Findings[0].Problem, "the rows hold 2024-06-01T00:00:20Z..2024-06-01T00:00:30Z") {
		t.Fatalf("findings %v; want %v\n%+v", got, want, rep.Findings)
	}
	// The sidecar is sound, so the table coverage can still be rebuilt;
	// only the segment needs restoring.
	if !rep.Findings[1].Repairable {
		t.Fatalf("%+v", rep.Findings[1])
	}
}

// TestCheckReferenceTables: every table the 0.9.0 package wrote (the
// committed fixtures, and in CI a fresh set) checks clean: its sidecars
// equal the coverage tsflight computes from the segments' rows, its
// snapshot the union of them. Check only reads.
func TestCheckReferenceTables(t *testing.T) {
	for _, set := range referenceSets(t) {
		for _, f := range referenceExpected(t, set) {
			dir := strings.TrimSuffix(f, ".expected.json")
			before := dirSnapshot(t, dir)
			rep, err := Check(context.Background(), storage.Local(dir), CheckOptions{Options: &Options{ReadOnly: true}})
			if err != nil || len(rep.Findings) != 0 || rep.Version == 0 {
				t.Errorf("%s: %v, %+v", dir, err, rep)
			}
			if d := sameSnapshot(before, dirSnapshot(t, dir)); d != "" {
				t.Errorf("%s: check changed %s", dir, d)
			}
		}
	}
}

// TestCheckUnionMarker: on a table whose coverage pointer is the
// segment-union marker, a healthy marker raises nothing; a missing one is a
// repairable warning (readers do not need it); one holding other bytes (a
// coverage encoding another reader would believe) is a repairable error,
// and appends refuse to run over it until check --repair rewrites it.
func TestCheckUnionMarker(t *testing.T) {
	e := &checkEnv{appendEnv: newAppendEnv(t, tsIndex())}
	e.mustAppend(t, row{0, "h1", 1}, row{0, "h2", 2})
	e.mustAppend(t, row{10, "h1", 3})
	if st := e.tb.State(); !st.coverageIsUnion() || st.CoverageVersion != 2 {
		t.Fatalf("pointer %v at version %d, want the marker from version 2", st.Coverage, st.CoverageVersion)
	}
	if rep := e.check(false); len(rep.Findings) != 0 {
		t.Fatalf("healthy: %+v", rep.Findings)
	}

	e.remove(unionCoveragePath)
	rep := e.check(false)
	if got := findingList(rep); len(got) != 1 || got[0] != CheckTableCoverageMissing+" "+unionCoveragePath ||
		rep.Findings[0].Severity != CheckWarning || !rep.Findings[0].Repairable {
		t.Fatalf("missing marker: %+v", rep.Findings)
	}
	if rep := e.check(true); len(rep.Findings) != 1 || !rep.Findings[0].Repaired || rep.Version != 3 {
		t.Fatalf("repair of a missing marker: %+v", rep)
	}
	if !bytes.Equal(e.read(unionCoveragePath), unionCoverageBytes) {
		t.Fatal("repair did not write the marker's bytes")
	}

	// Bytes that decode as coverage (the segment sidecar's).
	e.remove(unionCoveragePath)
	e.write(unionCoveragePath, e.read(e.tb.State().Segments[0].CoveragePath))
	rep = e.check(false)
	if got := findingList(rep); len(got) != 1 || got[0] != CheckTableCoverageCorrupt+" "+unionCoveragePath ||
		rep.Findings[0].Severity != CheckError || !rep.Findings[0].Repairable || rep.OK() {
		t.Fatalf("damaged marker: %+v", rep.Findings)
	}
	fresh := mustOpen(t, storage.Local(e.dir), nil)
	e.tb = fresh
	if _, err := e.append(row{20, "h1", 4}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), unionCoveragePath) {
		t.Fatalf("append over a damaged marker: %v, want ErrCorrupt naming it", err)
	}
	if rep := e.check(true); len(rep.Findings) != 1 || !rep.Findings[0].Repaired {
		t.Fatalf("repair of a damaged marker: %+v", rep.Findings)
	}
	if again := e.check(false); len(again.Findings) != 0 {
		t.Fatalf("after repair: %+v", again.Findings)
	}
	fresh, err := Open(e.ctx, storage.Local(e.dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.tb = fresh
	if _, err := e.append(row{20, "h1", 4}); err != nil {
		t.Fatalf("append after repair: %v", err)
	}
	if _, err := e.append(row{0, "h2", 5}); !errors.Is(err, ErrOverlap) {
		t.Fatalf("overlap after repair: %v", err)
	}
}
