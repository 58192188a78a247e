// Tests of retention: StateAt inside and outside the keep window, and
// vacuum of the files only expired versions hold, on real directories with
// a controllable clock. Compaction-like commits (RemoveSegment +
// AddSegment) are built directly with Table.Commit from real segments.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// testClock is a settable clock for Options.Now.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Now().UTC().Truncate(time.Second)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *testClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// retentionEnv is a table in a temporary directory on a test clock.
type retentionEnv struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	clock *testClock
	opts  *Options
	mem   *memory.CheckedAllocator
	tb    *Table
	// snapshots makes appends write table coverage snapshots.
	snapshots bool
}

func newRetentionEnv(t *testing.T, snapshots bool) *retentionEnv {
	e := &retentionEnv{t: t, ctx: context.Background(), dir: t.TempDir(), clock: newTestClock(),
		mem: memory.NewCheckedAllocator(memory.DefaultAllocator), snapshots: snapshots}
	e.opts = DefaultOptions()
	e.opts.Now = e.clock.Now
	var err error
	if e.tb, err = Create(e.ctx, storage.Local(e.dir), CreateOptions{Index: tsIndex()}, e.opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.mem.AssertSize(t, 0) })
	return e
}

func (e *retentionEnv) append(rows ...row) SegmentMeta {
	e.t.Helper()
	return appendTo(e.t, e.tb, e.mem, e.snapshots, rows...)
}

func appendTo(t *testing.T, tb *Table, mem memory.Allocator, snapshots bool, rows ...row) SegmentMeta {
	t.Helper()
	rdr := readerOf(t, inSchema(), inBatch(mem, rows...))
	defer rdr.Release()
	o := DefaultAppendOptions()
	o.Alloc = mem
	o.TableSnapshot = snapshots
	res, err := tb.Append(context.Background(), rdr, o)
	if err != nil {
		t.Fatal(err)
	}
	return res.Segment
}

// merged writes rows as one segment of a scratch table with the same
// index and schema, copies its Parquet file and sidecar into the table and
// returns its SegmentMeta: what a compaction of the segments holding
// those rows would add.
func (e *retentionEnv) merged(rows ...row) SegmentMeta {
	e.t.Helper()
	scratch := e.t.TempDir()
	tb, err := Create(e.ctx, storage.Local(scratch), CreateOptions{Index: tsIndex()}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	seg := appendTo(e.t, tb, e.mem, false, rows...)
	for _, p := range []string{seg.Path, seg.CoveragePath} {
		data, err := os.ReadFile(filepath.Join(scratch, filepath.FromSlash(p)))
		if err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.dir, filepath.FromSlash(p)), data, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	return seg
}

// replace commits the removal of old and the addition of repl in one
// commit, as a compaction does, and returns its version.
func (e *retentionEnv) replace(old []SegmentMeta, repl ...SegmentMeta) uint64 {
	e.t.Helper()
	var actions []Action
	for _, s := range old {
		actions = append(actions, RemoveSegment{Path: s.Path})
	}
	for _, s := range repl {
		actions = append(actions, AddSegment{Segment: s})
	}
	v, err := e.tb.Commit(e.ctx, e.tb.State().Version, actions)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *retentionEnv) vacuum(keep *time.Duration, apply bool) *VacuumReport {
	e.t.Helper()
	rep, err := e.tb.Vacuum(e.ctx, &VacuumOptions{KeepSnapshots: keep, Apply: apply})
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func (e *retentionEnv) exists(p string) bool {
	_, err := os.Stat(filepath.Join(e.dir, filepath.FromSlash(p)))
	return err == nil
}

func durp(d time.Duration) *time.Duration { return &d }

// files returns the segment and sidecar paths of segs.
func segFiles(segs ...SegmentMeta) []string {
	var out []string
	for _, s := range segs {
		out = append(out, s.Path, s.CoveragePath)
	}
	slices.Sort(out)
	return out
}

// byReason lists the paths of rep's artifacts with reason r, sorted.
func byReason(rep *VacuumReport, r VacuumReason) []string {
	return artifactPaths(rep, func(a VacuumArtifact) bool { return a.Reason == r })
}

// wantNeverRemoved checks that every file the newest state holds is
// retained and on disk.
func (e *retentionEnv) wantNeverRemoved(rep *VacuumReport) {
	e.t.Helper()
	st := e.tb.State()
	var cur []string
	for _, s := range st.Segments {
		cur = append(cur, s.Path, s.CoveragePath)
	}
	if st.Coverage != nil {
		cur = append(cur, st.Coverage.Path)
	}
	for _, p := range cur {
		if a := artifact(e.t, rep, p); a.Disposition != VacuumRetained || a.Reason != VacuumReferenced || !e.exists(p) {
			e.t.Fatalf("a file of the newest version: %+v (on disk: %v)", a, e.exists(p))
		}
	}
}

// TestRetentionStateAt: versions are readable while the commit that
// superseded them is younger than the window (at the boundary too), and
// ErrNotFound with the version, the time and the window after, cached
// snapshots included; the window follows the property and its default.
func TestRetentionStateAt(t *testing.T) {
	e := newRetentionEnv(t, false)
	t0 := e.clock.Now()
	e.append(row{0, "h1", 1}) // v2 at t0
	e.clock.set(t0.Add(10 * time.Minute))
	if _, err := e.tb.SetProperties(e.ctx, 2, map[string]string{PropertyKeepSnapshots: "1h"}); err != nil { // v3
		t.Fatal(err)
	}
	e.clock.set(t0.Add(30 * time.Minute))
	e.append(row{10, "h1", 2}) // v4
	for v := uint64(1); v <= 4; v++ {
		if st, err := e.tb.StateAt(e.ctx, v); err != nil || st.Version != v {
			t.Fatalf("StateAt(%d) inside the window: %v", v, err)
		}
	}
	// Version 1 was superseded at t0 by the first append.
	e.clock.set(t0.Add(time.Hour + 5*time.Minute))
	_, err := e.tb.StateAt(e.ctx, 1)
	want := fmt.Sprintf("version 1 was superseded at %s; versions superseded more than 1h0m0s ago are not kept (table property tsflight.keep-snapshots)", formatTime(t0))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), want) {
		t.Fatalf("expired version 1: %v\nwant %q", err, want)
	}
	for _, v := range []uint64{2, 3, 4} {
		if _, err := e.tb.StateAt(e.ctx, v); err != nil {
			t.Fatalf("StateAt(%d): %v", v, err)
		}
	}
	// Exactly at the boundary version 2 (superseded at t0+10m) is kept;
	// a nanosecond later it is not, though the handle remembers it.
	e.clock.set(t0.Add(70 * time.Minute))
	if _, err := e.tb.StateAt(e.ctx, 2); err != nil {
		t.Fatalf("StateAt(2) at the boundary: %v", err)
	}
	e.clock.set(t0.Add(70*time.Minute + time.Nanosecond))
	if _, err := e.tb.StateAt(e.ctx, 2); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "version 2 was superseded at "+formatTime(t0.Add(10*time.Minute))) {
		t.Fatalf("StateAt(2) after the boundary: %v", err)
	}
	// The newest version never expires; a version that does not exist is
	// still "does not exist".
	e.clock.set(t0.Add(1000 * time.Hour))
	if st, err := e.tb.StateAt(e.ctx, 4); err != nil || st != e.tb.State() {
		t.Fatalf("StateAt(newest): %v", err)
	}
	if _, err := e.tb.StateAt(e.ctx, 9); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("StateAt(9): %v", err)
	}
	// "0s": a version expires as soon as the clock passes its successor.
	now := e.clock.Now()
	if _, err := e.tb.SetProperties(e.ctx, 4, map[string]string{PropertyKeepSnapshots: "0s"}); err != nil { // v5 at now
		t.Fatal(err)
	}
	if _, err := e.tb.StateAt(e.ctx, 4); err != nil {
		t.Fatalf("0s, same instant: %v", err)
	}
	e.clock.set(now.Add(time.Nanosecond))
	if _, err := e.tb.StateAt(e.ctx, 4); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "more than 0s ago") {
		t.Fatalf("0s, a nanosecond later: %v", err)
	}
	// Without the property the default window applies, and says so.
	if _, err := e.tb.SetProperties(e.ctx, 5, map[string]string{PropertyKeepSnapshots: ""}); err != nil { // v6
		t.Fatal(err)
	}
	if _, err := e.tb.StateAt(e.ctx, 4); err != nil {
		t.Fatalf("default window: %v", err)
	}
	e.clock.advance(DefaultKeepSnapshots + time.Second)
	if _, err := e.tb.StateAt(e.ctx, 5); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "more than 168h0m0s ago are not kept (the default of table property tsflight.keep-snapshots)") {
		t.Fatalf("default window expired: %v", err)
	}
}

// TestRetentionStateAtErrors: the superseding commit must be readable.
func TestRetentionStateAtErrors(t *testing.T) {
	e := newRetentionEnv(t, false)
	e.append(row{0, "h1", 1})  // v2
	e.append(row{10, "h1", 2}) // v3
	e.append(row{20, "h1", 3}) // v4
	// A handle that never read commit 3 (the writing handle remembers the
	// timestamps of its own commits and needs no file).
	other := mustOpen(t, storage.Local(e.dir), nil)
	if err := os.Remove(filepath.Join(e.dir, filepath.FromSlash(CommitPath(3)))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tb.StateAt(e.ctx, 2); err != nil {
		t.Fatalf("the writing handle's StateAt(2): %v", err)
	}
	if _, err := other.StateAt(e.ctx, 2); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "commit 3 is missing") {
		t.Fatalf("superseding commit missing: %v", err)
	}
	mem := storage.NewMem()
	tb := mustCreateTable(t, mem, CreateOptions{Index: tsIndex(), Schema: tsSchema()}, nil)
	ffs := storage.NewFaultFS(mem)
	if _, err := tb.SetProperties(e.ctx, 1, map[string]string{"owner": "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.SetProperties(e.ctx, 2, map[string]string{"owner": "y"}); err != nil {
		t.Fatal(err)
	}
	other2 := mustOpen(t, ffs, nil)
	ffs.Inject(storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool { return n == CommitPath(2) }, Err: errors.New("EIO")})
	if _, err := other2.StateAt(e.ctx, 1); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), CommitPath(2)) {
		t.Fatalf("superseding commit unreadable: %v", err)
	}
}

// TestRetentionVacuumExpiresReplacedFiles: the segments (and sidecars)
// a compaction-like commit removed, and the table coverage snapshots
// later pointers replaced, are retained inside the window and removable
// with reason expired outside it (the table's window, or the run's
// override); Apply deletes them, the table scans the same, and the files
// of the newest version are never removed.
func TestRetentionVacuumExpiresReplacedFiles(t *testing.T) {
	e := newRetentionEnv(t, true)
	t0 := e.clock.Now()
	a := e.append(row{0, "h1", 1}, row{10, "h1", 2}) // v2, snapshot s2
	e.clock.advance(time.Minute)
	b := e.append(row{20, "h1", 3}, row{0, "h2", 4}) // v3, snapshot s3
	var snaps []string                               // sorted: 2-tblcov-…, 3-tblcov-…
	for _, x := range e.vacuum(nil, false).Artifacts {
		if x.Kind == "table_coverage" {
			snaps = append(snaps, x.Path)
		}
	}
	if len(snaps) != 2 || e.tb.State().Coverage.Path != snaps[1] {
		t.Fatalf("snapshots %v, pointer %v", snaps, e.tb.State().Coverage)
	}
	n0, sum0 := scanCountSum(t, e.tb, e.mem, "v")
	e.clock.advance(time.Hour)
	tCompact := e.clock.Now()
	m := e.merged(row{0, "h1", 1}, row{10, "h1", 2}, row{20, "h1", 3}, row{0, "h2", 4})
	if v := e.replace([]SegmentMeta{a, b}, m); v != 4 {
		t.Fatalf("compaction commit at version %d", v)
	}
	if n, sum := scanCountSum(t, e.tb, e.mem, "v"); n != n0 || sum != sum0 {
		t.Fatalf("after the replacement: %d rows, sum %d; want %d, %d", n, sum, n0, sum0)
	}
	replaced := segFiles(a, b)
	expiredAll := append(slices.Clone(replaced), snaps[0])
	slices.Sort(expiredAll)

	// Inside the default window nothing expires.
	e.clock.advance(time.Minute)
	rep := e.vacuum(nil, false)
	if rep.Removable != 0 || rep.KeepSnapshots != DefaultKeepSnapshots || !rep.SupersededBefore.Equal(e.clock.Now().Add(-DefaultKeepSnapshots)) {
		t.Fatalf("inside the window: %+v", rep)
	}
	for _, p := range expiredAll {
		if x := artifact(t, rep, p); x.Disposition != VacuumRetained || x.Reason != VacuumReferenced {
			t.Fatalf("%s inside the window: %+v", p, x)
		}
	}
	e.wantNeverRemoved(rep)

	// The run's override: 0s expires every superseded version.
	rep = e.vacuum(durp(0), false)
	if got := byReason(rep, VacuumExpired); !slices.Equal(got, expiredAll) || rep.Removable != len(expiredAll) || rep.Expired != len(expiredAll) || rep.KeepSnapshots != 0 {
		t.Fatalf("override 0s: expired %v, want %v (%+v)", got, expiredAll, rep)
	}
	e.wantNeverRemoved(rep)
	// A window reaching back past the compaction (t0+1h1m) but not to
	// commit 3 (t0+1m) expires only version 2, so only its snapshot.
	rep = e.vacuum(durp(e.clock.Now().Sub(t0.Add(30*time.Minute))), false)
	if got := byReason(rep, VacuumExpired); !slices.Equal(got, snaps[:1]) {
		t.Fatalf("window to t0+30m: expired %v, want %v", got, snaps[:1])
	}

	// Past the default window, the same files expire without an override,
	// and a longer override keeps them.
	e.clock.set(tCompact.Add(DefaultKeepSnapshots + time.Second))
	rep = e.vacuum(nil, false)
	if got := byReason(rep, VacuumExpired); !slices.Equal(got, expiredAll) {
		t.Fatalf("past the window: expired %v, want %v", got, expiredAll)
	}
	if rep = e.vacuum(durp(30*24*time.Hour), false); rep.Removable != 0 {
		t.Fatalf("a 30-day override: %d removable", rep.Removable)
	}
	// The table property widens the window: a 30-day window keeps them;
	// the property commit itself supersedes version 4 only now.
	if _, err := e.tb.SetProperties(e.ctx, 4, map[string]string{PropertyKeepSnapshots: "720h"}); err != nil {
		t.Fatal(err)
	}
	if rep = e.vacuum(nil, false); rep.Removable != 0 || rep.KeepSnapshots != 720*time.Hour {
		t.Fatalf("with a 720h property: %+v", rep)
	}
	if _, err := e.tb.StateAt(e.ctx, 3); err != nil {
		t.Fatalf("StateAt(3) under 720h: %v", err)
	}
	if _, err := e.tb.SetProperties(e.ctx, 5, map[string]string{PropertyKeepSnapshots: "24h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tb.StateAt(e.ctx, 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("StateAt(3) under 24h: %v", err)
	}
	// A dry run changed nothing; Apply deletes exactly those.
	for _, p := range expiredAll {
		if !e.exists(p) {
			t.Fatalf("a dry run removed %s", p)
		}
	}
	rep = e.vacuum(nil, true)
	if got := byDisposition(rep, VacuumDeleted); !slices.Equal(got, expiredAll) || rep.Deleted != len(expiredAll) || rep.Expired != len(expiredAll) {
		t.Fatalf("apply deleted %v, want %v", got, expiredAll)
	}
	for _, p := range expiredAll {
		if e.exists(p) {
			t.Fatalf("%s survived apply", p)
		}
	}
	e.wantNeverRemoved(rep)
	if rep = e.vacuum(durp(0), false); rep.Removable != 0 {
		t.Fatalf("after apply: %d removable", rep.Removable)
	}
	tb, err := Open(e.ctx, storage.Local(e.dir), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if n, sum := scanCountSum(t, tb, e.mem, "v"); n != n0 || sum != sum0 {
		t.Fatalf("after vacuum: %d rows, sum %d; want %d, %d", n, sum, n0, sum0)
	}
	// Appends go on, and their overlap check still sees the old rows.
	appendTo(t, tb, e.mem, true, row{30, "h1", 5})
	rdr := readerOf(t, inSchema(), inBatch(e.mem, row{0, "h1", 9}))
	defer rdr.Release()
	o := DefaultAppendOptions()
	o.Alloc = e.mem
	if _, err := tb.Append(e.ctx, rdr, o); !errors.Is(err, ErrOverlap) {
		t.Fatalf("append over vacuumed-then-compacted rows: %v", err)
	}
}

// TestRetentionVacuumKeepsReaddedPaths: a segment a commit removed and a
// later commit added again is live, so kept however old its removal; the
// segment the re-adding commit removed expires in its turn.
func TestRetentionVacuumKeepsReaddedPaths(t *testing.T) {
	e := newRetentionEnv(t, false)
	a := e.append(row{0, "h1", 1})  // v2
	b := e.append(row{10, "h1", 2}) // v3
	n0, sum0 := scanCountSum(t, e.tb, e.mem, "v")
	m := e.merged(row{0, "h1", 1}, row{10, "h1", 2})
	e.replace([]SegmentMeta{a, b}, m) // v4
	e.clock.advance(10 * 24 * time.Hour)
	if got := byReason(e.vacuum(nil, false), VacuumExpired); !slices.Equal(got, segFiles(a, b)) {
		t.Fatalf("before the undo: expired %v", got)
	}
	e.replace([]SegmentMeta{m}, a, b) // v5: the compaction undone
	if n, sum := scanCountSum(t, e.tb, e.mem, "v"); n != n0 || sum != sum0 {
		t.Fatalf("after the undo: %d rows, sum %d", n, sum)
	}
	e.clock.advance(time.Second) // version 4 superseded a second ago
	rep := e.vacuum(durp(0), false)
	e.wantNeverRemoved(rep)
	for _, p := range segFiles(a, b) {
		if x := artifact(t, rep, p); x.Reason != VacuumReferenced {
			t.Fatalf("re-added %s: %+v", p, x)
		}
	}
	if got := byReason(rep, VacuumExpired); !slices.Equal(got, segFiles(m)) {
		t.Fatalf("override 0s after the undo: expired %v, want %v", got, segFiles(m))
	}
	if rep := e.vacuum(nil, true); rep.Deleted != 0 {
		t.Fatalf("inside the window after the undo: deleted %d", rep.Deleted)
	}
	e.clock.advance(DefaultKeepSnapshots + time.Minute)
	rep = e.vacuum(nil, true)
	if got := byDisposition(rep, VacuumDeleted); !slices.Equal(got, segFiles(m)) {
		t.Fatalf("past the window: deleted %v, want %v", got, segFiles(m))
	}
	if n, sum := scanCountSum(t, e.tb, e.mem, "v"); n != n0 || sum != sum0 {
		t.Fatalf("after vacuum: %d rows, sum %d", n, sum)
	}
}

// TestRetentionVacuumKeepsMarkerAndNeverLived: the segment-union marker is
// never expired (appends point at it again), nor is a path named only by
// a RemoveSegment of a path that was not live, nor are files added and
// removed by one commit.
func TestRetentionVacuumKeepsMarkerAndNeverLived(t *testing.T) {
	e := newRetentionEnv(t, false)
	e.append(row{0, "h1", 1}) // v2 points at the marker
	e.snapshots = true
	e.append(row{10, "h1", 2}) // v3 points at a snapshot
	if e.tb.State().Coverage.Path == unionCoveragePath {
		t.Fatal("the pointer did not move off the marker")
	}
	// Files named only by a no-op removal, or added and removed at once.
	stray := "data/_managed/append/0e8d2b4c-6a1f-4c9e-9d3b-2f1e5a7c8b90.parquet"
	flash := e.merged(row{20, "h9", 1})
	for _, p := range []string{stray} {
		if err := os.WriteFile(filepath.Join(e.dir, filepath.FromSlash(p)), []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.tb.Commit(e.ctx, 3, []Action{RemoveSegment{Path: stray}, AddSegment{Segment: flash}, RemoveSegment{Path: flash.Path}}); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(DefaultKeepSnapshots * 2)
	rep := e.vacuum(durp(0), false)
	for _, p := range append([]string{unionCoveragePath, stray}, segFiles(flash)...) {
		if x := artifact(t, rep, p); x.Disposition != VacuumRetained || x.Reason != VacuumReferenced {
			t.Fatalf("%s: %+v", p, x)
		}
	}
	e.wantNeverRemoved(rep)
	if rep.Removable != 0 {
		t.Fatalf("removable %v", byDisposition(rep, VacuumRemovable))
	}
}

// TestRetentionVacuumRefusesNegativeWindow: a negative override is
// ErrInvalidInput and nothing is read or removed.
func TestRetentionVacuumRefusesNegativeWindow(t *testing.T) {
	e := newRetentionEnv(t, false)
	_, err := e.tb.Vacuum(e.ctx, &VacuumOptions{KeepSnapshots: durp(-time.Second), Apply: true})
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "keep_snapshots") || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("negative keep: %v", err)
	}
}

// TestRetentionVacuumApplyRechecks: between planning and deleting, a
// commit that adds an expired segment again keeps it, and one that widens
// the keep window keeps what the wider window needs.
func TestRetentionVacuumApplyRechecks(t *testing.T) {
	for _, change := range []string{"re-add", "widen"} {
		t.Run(change, func(t *testing.T) {
			e := newRetentionEnv(t, false)
			a := e.append(row{0, "h1", 1})
			b := e.append(row{10, "h1", 2})
			m := e.merged(row{0, "h1", 1}, row{10, "h1", 2})
			e.replace([]SegmentMeta{a, b}, m) // v4
			e.clock.advance(8 * 24 * time.Hour)
			ffs := storage.NewFaultFS(storage.Local(e.dir))
			tb, err := Open(e.ctx, ffs, e.opts)
			if err != nil {
				t.Fatal(err)
			}
			reads := 0
			ffs.Inject(storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool {
				if n == currentPath {
					if reads++; reads == 2 { // the apply's refresh
						var err error
						if change == "re-add" {
							_, err = e.tb.Commit(e.ctx, 4, []Action{RemoveSegment{Path: m.Path}, AddSegment{Segment: a}, AddSegment{Segment: b}})
						} else {
							_, err = e.tb.SetProperties(e.ctx, 4, map[string]string{PropertyKeepSnapshots: "720h"})
						}
						if err != nil {
							t.Errorf("staged commit: %v", err)
						}
					}
				}
				return false
			}})
			rep, err := tb.Vacuum(e.ctx, &VacuumOptions{Apply: true})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Version != 5 || rep.Deleted != 0 {
				t.Fatalf("apply after a %s: version %d, deleted %v", change, rep.Version, byDisposition(rep, VacuumDeleted))
			}
			for _, p := range segFiles(a, b) {
				if x := artifact(t, rep, p); x.Disposition != VacuumRetained || x.Reason != VacuumReferenced || !e.exists(p) {
					t.Fatalf("%s: %+v", p, x)
				}
			}
			if change == "widen" && rep.KeepSnapshots != 720*time.Hour {
				t.Fatalf("the report's window after widening: %s", rep.KeepSnapshots)
			}
		})
	}
}

// TestRetentionInterop: the 0.9.0 package opens, counts and appends to a
// table whose replaced segments and superseded snapshots vacuum deleted
// (it replays from commit 1 and reads only the newest version's files).
func TestRetentionInterop(t *testing.T) {
	requireReference(t)
	e := newRetentionEnv(t, true)
	a := e.append(row{0, "h1", 1}, row{10, "h1", 2})
	b := e.append(row{20, "h1", 3}, row{0, "h2", 4})
	m := e.merged(row{0, "h1", 1}, row{10, "h1", 2}, row{20, "h1", 3}, row{0, "h2", 4})
	e.replace([]SegmentMeta{a, b}, m)
	if _, err := e.tb.SetProperties(e.ctx, 4, map[string]string{PropertyKeepSnapshots: "1h"}); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(2 * time.Hour)
	if rep := e.vacuum(nil, true); rep.Deleted != 5 {
		t.Fatalf("deleted %v", byDisposition(rep, VacuumDeleted))
	}
	var q struct {
		Rows [][]any `json:"rows"`
	}
	interop(t, &q, "query", e.dir, "SELECT count(*) AS n, sum(v) AS s FROM t")
	if got := fmt.Sprint(q.Rows); got != "[[4 10]]" {
		t.Fatalf("0.9.0 after vacuum: %s", got)
	}
	if rep := refAppendRows(t, e.dir, inBatch(e.mem, row{30, "h1", 5})); len(rep.Appends) != 1 || rep.Appends[0].Version != 6 {
		t.Fatalf("0.9.0 append: %+v", rep)
	}
	interop(t, &q, "query", e.dir, "SELECT count(*) AS n, sum(v) AS s FROM t")
	if got := fmt.Sprint(q.Rows); got != "[[5 15]]" {
		t.Fatalf("0.9.0 after its append: %s", got)
	}
	st, err := e.tb.Refresh(e.ctx)
	if err != nil || st.Version != 6 || st.KeepSnapshots() != time.Hour {
		t.Fatalf("tsflight after the package's append: %v, %v", st, err)
	}
	if n, sum := scanCountSum(t, e.tb, e.mem, "v"); n != 5 || sum != 15 {
		t.Fatalf("tsflight reads %d rows, sum %d", n, sum)
	}
}

// TestRetentionVacuumKeepsWhatUnknownActionsName: a file an action this
// build does not know names is never expired, even when the actions it
// knows say only expired versions held it.
func TestRetentionVacuumKeepsWhatUnknownActionsName(t *testing.T) {
	seg := "data/_managed/append/0e8d2b4c-6a1f-4c9e-9d3b-2f1e5a7c8b90.parquet"
	side := "_coverage/segments/a.roar" // segJSON's sidecar
	for _, unknown := range []bool{false, true} {
		t.Run(fmt.Sprint("unknown=", unknown), func(t *testing.T) {
			dir := t.TempDir()
			remove := `{"RemoveSegment":{"path":"` + seg + `"}}`
			if unknown {
				remove += `,{"FutureAction":{"keep":["` + seg + `"]}}`
			}
			writeLog(t, dir, "3\n", createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), segJSON(seg)), commitJSON(3, remove))
			for _, p := range []string{seg, side} {
				writeTableFile(t, dir, p, []byte("PAR1"))
			}
			opts := DefaultOptions()
			opts.Now = func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) }
			tb := mustOpen(t, storage.Local(dir), opts)
			rep, err := tb.Vacuum(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if x := artifact(t, rep, side); x.Reason != VacuumExpired {
				t.Fatalf("sidecar: %+v", x)
			}
			want := VacuumExpired
			if unknown {
				want = VacuumReferenced
			}
			if x := artifact(t, rep, seg); x.Reason != want {
				t.Fatalf("segment: %+v, want %s", x, want)
			}
		})
	}
}
