// Crash trials of vacuum after expiry with real processes: a worker process
// appends small batches, compacts (so that replaced segments exist) and
// vacuums with a keep window of zero, so that every file only superseded
// versions hold is expired and deleted, round after round, and is killed
// with SIGKILL at random moments: a third of the trials anywhere, a third
// inside a vacuum, a third once the vacuum's deletions have begun. After
// every kill the table must open and read, hold every acknowledged batch
// exactly once and no partial batch, its coverage must be exactly that of
// its rows, every file its newest version names must be on disk, and a
// vacuum must find and delete exactly the files the test computes on its
// own from the commit files (the orphans no commit names, and the files no
// retained version holds), leaving the rows as they were; then a
// compaction, another vacuum and an append must succeed, and every tenth
// trial the 0.9.0 package opens the table, counts its rows and appends a
// batch, which tsflight then reads.
//
// TSFLIGHT_CRASH_TRIALS sets the number of kills (default 50; the long
// mode is 500), TSFLIGHT_CRASH_SEED the seed of the random delays
// (printed; the scaffolding is crashtrial_test.go's).

package tableformat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// crashVacuumAppends is the number of appends of each worker round before
// it compacts and vacuums.
const crashVacuumAppends = 4

// crashVacuumTrials is the number of vacuum trials when
// TSFLIGHT_CRASH_TRIALS is unset (CI).
const crashVacuumTrials = 50

// announceFS prints "rm <path>" on stdout before each Remove (unless
// quiet), so that the parent sees a vacuum's deletions begin, and
// remembers when the first one began. (Commits remove their temporary
// files too; the worker prints no Remove between "vacuuming" and
// "vacuumed" but the vacuum's.)
type announceFS struct {
	storage.FS
	quiet bool
	mu    sync.Mutex
	first time.Time
}

func (a *announceFS) Remove(name string) error {
	a.mu.Lock()
	if a.first.IsZero() {
		a.first = time.Now()
	}
	a.mu.Unlock()
	if !a.quiet {
		fmt.Printf("rm %s\n", name)
	}
	return a.FS.Remove(name)
}

// sinceFirst returns the time since the first Remove after the last call
// (0 when there was none) and starts over.
func (a *announceFS) sinceFirst() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var d time.Duration
	if !a.first.IsZero() {
		d = time.Since(a.first)
	}
	a.first = time.Time{}
	return d
}

// TestVacuumCrashWorkerProcess is the worker of TestCrashTrialsVacuum:
// rounds of crashVacuumAppends appends ("acked <batch> <version>" logged
// and fsynced after each), one Compact ("compacting" … "compacted") and
// one applied Vacuum with the cutoff at now and a keep window of zero
// ("vacuuming" … "vacuumed …"; each deletion announced with "rm <path>"),
// until it is killed. TSFLIGHT_VACCRASH_WINDOW says where the window
// comes from: "table" (the table's tsflight.keep-snapshots, which the
// parent set to 0s) or "0s" (VacuumOptions.KeepSnapshots).
func TestVacuumCrashWorkerProcess(t *testing.T) {
	env := crashChildStart(t, "TestVacuumCrashWorkerProcess", "TestCrashTrialsVacuum")
	var keep *time.Duration
	switch w := os.Getenv("TSFLIGHT_VACCRASH_WINDOW"); w {
	case "table":
	case "0s":
		keep = new(time.Duration)
	default:
		t.Fatalf("TSFLIGHT_VACCRASH_WINDOW=%q", w)
	}
	ctx := context.Background()
	fsys := &announceFS{FS: storage.Local(env.dir)}
	tb := env.openReady(t, fsys, nil)
	id := env.first
	for round := 0; round < 10000; round++ {
		start := time.Now()
		for range crashVacuumAppends {
			env.appendAcked(t, ctx, tb, id)
			id++
		}
		fmt.Println("compacting")
		if _, err := tb.Compact(ctx, nil); err != nil {
			t.Fatalf("compaction: %v", err)
		}
		fmt.Println("compacted")
		fsys.sinceFirst()
		fmt.Println("vacuuming")
		vstart := time.Now()
		rep, err := tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true, KeepSnapshots: keep})
		if err != nil {
			t.Fatalf("vacuum: %v", err)
		}
		took, rmTook := time.Since(vstart), fsys.sinceFirst()
		if rep.KeepSnapshots != 0 {
			t.Fatalf("vacuum kept %s of versions, want 0", rep.KeepSnapshots)
		}
		fmt.Printf("vacuumed deleted=%d expired=%d took=%d rm_took=%d\n", rep.Deleted, rep.Expired, took, rmTook)
		fmt.Printf("round took=%d\n", time.Since(start))
	}
	t.Fatal("the worker was never killed")
}

// fileRuns follows the commit files, read with encoding/json rather than
// the table's decoder, and records for every path the runs of versions
// whose state holds it — a segment and its coverage sidecar from its
// AddSegment to its RemoveSegment, a table coverage snapshot from the
// UpdateTableCoverage naming it to the next one (docs/design.md,
// "Retention") — and every commit's timestamp. From them it says which
// files the newest version holds and which a vacuum must delete.
type fileRuns struct {
	dir     string
	version uint64
	stamps  []time.Time // stamps[v-1] is commit v's timestamp
	named   map[string]bool
	segCov  map[string]string // live segment -> its sidecar
	cov     string            // the coverage pointer
	open    map[string]int    // references in the newest state
	since   map[string]uint64 // first version of the open run
	runs    map[string][][2]uint64
}

func newFileRuns(dir string) *fileRuns {
	return &fileRuns{dir: dir, named: map[string]bool{}, segCov: map[string]string{}, open: map[string]int{},
		since: map[string]uint64{}, runs: map[string][][2]uint64{}}
}

func (f *fileRuns) enter(p string, v uint64) {
	f.named[p] = true
	if f.open[p] == 0 {
		f.since[p] = v
	}
	f.open[p]++
}

func (f *fileRuns) leave(p string, v uint64) {
	if f.open[p] == 0 {
		return
	}
	if f.open[p]--; f.open[p] == 0 {
		delete(f.open, p)
		if v > f.since[p] { // held by versions since..v-1
			f.runs[p] = append(f.runs[p], [2]uint64{f.since[p], v - 1})
		}
	}
}

// advance follows the commits up to version to.
func (f *fileRuns) advance(t *testing.T, to uint64) {
	t.Helper()
	for v := f.version + 1; v <= to; v++ {
		data, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(CommitPath(v))))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Version   uint64    `json:"version"`
			Timestamp time.Time `json:"timestamp"`
			Actions   []struct {
				AddSegment *struct {
					Path         string `json:"path"`
					CoveragePath string `json:"coverage_path"`
				}
				RemoveSegment *struct {
					Path string `json:"path"`
				}
				UpdateTableCoverage *struct {
					CoveragePath string `json:"coverage_path"`
				}
			} `json:"actions"`
		}
		if err := json.Unmarshal(data, &c); err != nil || c.Version != v {
			t.Fatalf("commit %d: version %d, %v", v, c.Version, err)
		}
		f.stamps = append(f.stamps, c.Timestamp)
		for _, a := range c.Actions {
			switch {
			case a.AddSegment != nil:
				f.enter(a.AddSegment.Path, v)
				if p := a.AddSegment.CoveragePath; p != "" {
					f.enter(p, v)
				}
				f.segCov[a.AddSegment.Path] = a.AddSegment.CoveragePath
			case a.RemoveSegment != nil:
				f.named[a.RemoveSegment.Path] = true
				cov, live := f.segCov[a.RemoveSegment.Path]
				if !live {
					continue
				}
				delete(f.segCov, a.RemoveSegment.Path)
				f.leave(a.RemoveSegment.Path, v)
				if cov != "" {
					f.leave(cov, v)
				}
			case a.UpdateTableCoverage != nil:
				if f.cov != "" {
					f.leave(f.cov, v)
				}
				f.cov = a.UpdateTableCoverage.CoveragePath
				f.enter(f.cov, v)
			}
		}
		f.version = v
	}
}

// held lists the files the newest version's state names.
func (f *fileRuns) held() []string {
	var out []string
	for p := range f.open {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// stateFiles lists the files st names.
func stateFiles(st *State) []string {
	seen := map[string]bool{}
	for _, s := range st.Segments {
		seen[s.Path] = true
		if s.CoveragePath != "" {
			seen[s.CoveragePath] = true
		}
	}
	if st.Coverage != nil {
		seen[st.Coverage.Path] = true
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// removable is what a vacuum with the cutoff at now must delete when
// versions superseded before superseded are expired, "path reason" per
// file, sorted: among candidates (strayCandidates: the files on disk a
// writer may leave), those no commit names (unreferenced) and those only
// expired versions held (expired). The newest version's files, the files
// a retained version holds, paths no version ever held and the
// segment-union marker (a fixed name appends point at again) stay.
func (f *fileRuns) removable(candidates []string, superseded time.Time) []string {
	// Version v < f.version is retained when commit v+1 is not older than
	// superseded.
	var retained []uint64
	for v := uint64(1); v < f.version; v++ {
		if !f.stamps[v].Before(superseded) {
			retained = append(retained, v)
		}
	}
	var out []string
	for _, p := range candidates {
		switch {
		case !f.named[p]:
			out = append(out, p+" "+string(VacuumUnreferenced))
		case f.open[p] > 0, p == unionCoveragePath, len(f.runs[p]) == 0:
		default:
			needed := false
			for _, r := range f.runs[p] {
				i, _ := slices.BinarySearch(retained, r[0])
				if i < len(retained) && retained[i] <= r[1] {
					needed = true
				}
			}
			if !needed {
				out = append(out, p+" "+string(VacuumExpired))
			}
		}
	}
	sort.Strings(out)
	return out
}

// vacuumed lists the artifacts of rep with disposition d, "path reason"
// each, sorted.
func vacuumed(rep *VacuumReport, d VacuumDisposition) []string {
	var out []string
	for _, a := range rep.Artifacts {
		if a.Disposition == d {
			out = append(out, a.Path+" "+string(a.Reason))
		}
	}
	sort.Strings(out)
	return out
}

// vacCrashTally counts what the vacuum trials saw.
type vacCrashTally struct {
	crashTally
	killsInVacuum, killsInDeletions, halfVacuumed, killsInCompact int
	compactions, expiredDeleted, childVacuums, childDeletions     int
	missingFiles, wrongFiles, covMismatches, compactFailed        int
	expiredServed                                                 int
}

func (c *vacCrashTally) failures() int {
	return c.crashTally.failures() + c.missingFiles + c.wrongFiles + c.covMismatches + c.compactFailed + c.expiredServed
}

func (c *vacCrashTally) line(seed uint64) string {
	return fmt.Sprintf("vacuum crash trials: trials=%d kills_in_vacuum=%d kills_in_deletions=%d half_vacuumed_seen=%d expired_deleted=%d acked=%d unacked_committed=%d stray_files_removed=%d"+
		" unreadable=%d lost=%d duplicates=%d missing_files=%d coverage_mismatches=%d vacuum_mismatches=%d"+
		" (kills_in_compact=%d kills_in_commit=%d compactions_committed=%d child_vacuums_done=%d child_deletions=%d partial=%d wrong_files=%d append_failed=%d compact_failed=%d expired_versions_served=%d python_checks=%d python_appends=%d seed=%d)",
		c.trials, c.killsInVacuum, c.killsInDeletions, c.halfVacuumed, c.expiredDeleted, c.acked, c.unackedCommitted, c.strayRemoved,
		c.unreadable, c.lost, c.dups, c.missingFiles, c.covMismatches, c.vacuumMismatches,
		c.killsInCompact, c.killsInCommit, c.compactions, c.childVacuums, c.childDeletions, c.partial, c.wrongFiles, c.appendFailed, c.compactFailed, c.expiredServed,
		c.pythonChecks, c.pythonAppends, seed)
}

// vacuumRoundTimes are the durations the kills are drawn from: a worker
// round, its vacuum, and its vacuum's deletions (first Remove to return).
type vacuumRoundTimes struct{ round, vacuum, deletions time.Duration }

var (
	reVacuumed = regexp.MustCompile(`(?m)^vacuumed deleted=(\d+) expired=(\d+) took=(\d+) rm_took=(\d+)$`)
	reRound    = regexp.MustCompile(`(?m)^round took=(\d+)$`)
)

// update takes the times of the worker's last whole round and vacuum, if
// it finished one (the log grows, and with it a vacuum's replay).
func (v *vacuumRoundTimes) update(out string) {
	if m := reVacuumed.FindAllStringSubmatch(out, -1); len(m) > 0 {
		last := m[len(m)-1]
		took, _ := strconv.ParseInt(last[3], 10, 64)
		rm, _ := strconv.ParseInt(last[4], 10, 64)
		v.vacuum = time.Duration(took)
		if rm > 0 {
			v.deletions = time.Duration(rm)
		}
	}
	if m := reRound.FindAllStringSubmatch(out, -1); len(m) > 0 {
		took, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
		v.round = time.Duration(took)
	}
}

// measureVacuumRound measures a worker round on a scratch table in this
// process: the median round, vacuum and deletion times.
func measureVacuumRound(t *testing.T, mem memory.Allocator) vacuumRoundTimes {
	t.Helper()
	ctx := context.Background()
	fsys := &announceFS{FS: storage.Local(t.TempDir()), quiet: true}
	tb, err := Create(ctx, fsys, CreateOptions{Index: crashIndex()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rounds, vacs, rms []time.Duration
	id := int64(0)
	zero := time.Duration(0)
	for range 5 {
		start := time.Now()
		appendScratch(t, tb, mem, &id, crashVacuumAppends)
		compactScratch(t, tb, mem)
		fsys.sinceFirst()
		vstart := time.Now()
		if _, err := tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true, KeepSnapshots: &zero}); err != nil {
			t.Fatal(err)
		}
		vacs, rms = append(vacs, time.Since(vstart)), append(rms, fsys.sinceFirst())
		rounds = append(rounds, time.Since(start))
	}
	med := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	return vacuumRoundTimes{round: med(rounds), vacuum: med(vacs), deletions: med(rms)}
}

// vacuumLifeCounts reads a worker's output: the vacuums it finished, the
// deletions it announced inside vacuums, and, for the vacuum the kill
// interrupted (inside is false when none was), the deletions it
// announced.
func vacuumLifeCounts(out string) (done, deletions int, inside bool, lastDeletions int) {
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "vacuuming":
			inside, lastDeletions = true, 0
		case strings.HasPrefix(l, "vacuumed "):
			inside = false
			done++
		case inside && strings.HasPrefix(l, "rm "):
			deletions++
			lastDeletions++
		}
	}
	return done, deletions, inside, lastDeletions
}

// TestCrashTrialsVacuum runs the vacuum-after-expiry crash trials.
func TestCrashTrialsVacuum(t *testing.T) {
	tally := &vacCrashTally{crashTally: crashTally{mode: "vacuum"}}
	r := newCrashRun(t, crashRunSpec{title: "vacuum crash trials:", child: "TestVacuumCrashWorkerProcess", role: "worker",
		defaultTrials: crashVacuumTrials, salt: 0x2545f4914f6cdd1d, tally: tally})
	ctx, dir, mem := r.ctx, r.dir, r.mem
	times := measureVacuumRound(t, mem)
	t.Logf("one round (%d appends, a compaction, a vacuum) takes about %s here, its vacuum %s, the vacuum's deletions %s; "+
		"kills are drawn in [0, 3×) of a round after the worker is ready, in [0, 1.5×) of a vacuum once one starts, or in [0, 1.5×) of the deletions once they start (times updated from the worker's)",
		crashVacuumAppends, times.round, times.vacuum, times.deletions)

	// The table's keep window is 0s: set after the first append, since a
	// table without a schema takes no properties.
	{
		tb, err := Open(ctx, storage.Local(dir), nil)
		if err != nil {
			t.Fatal(err)
		}
		r.appendNext(0, tb, nil)
		if _, err := tb.SetProperties(ctx, tb.State().Version, map[string]string{PropertyKeepSnapshots: "0s"}); err != nil {
			t.Fatal(err)
		}
	}
	files := newFileRuns(dir)
	zero := time.Duration(0)

	// checkFiles: the newest version's files (by the test's own replay)
	// are the state's, and all on disk.
	checkFiles := func(trial int, when string, st *State) {
		t.Helper()
		files.advance(t, st.Version)
		held := files.held()
		if got := stateFiles(st); !slices.Equal(got, held) {
			tally.wrongFiles++
			t.Errorf("trial %d, %s: version %d names %v, the commit files %v", trial, when, st.Version, got, held)
		}
		for _, p := range held {
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
				tally.missingFiles++
				t.Errorf("trial %d, %s: version %d's file %s: %v", trial, when, st.Version, p, err)
			}
		}
	}
	// expire vacuums with a keep window of zero (the table's, or the
	// option): a dry run must list exactly the files the test expects,
	// with their reasons, the apply must delete exactly those, a second
	// dry run find nothing, the rows must read as before and the newest
	// version's files must all be there. It returns the expired files
	// deleted.
	expire := func(trial int, when string, tb *Table, counts map[int64]int) int {
		t.Helper()
		var keep *time.Duration
		if trial%2 == 1 {
			keep = &zero
		}
		candidates := testkit.StrayCandidates(t, dir, LogDir)
		rep, err := tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), KeepSnapshots: keep})
		if err != nil {
			t.Fatalf("trial %d, %s: vacuum dry run: %v", trial, when, err)
		}
		files.advance(t, rep.Version)
		if want, got := files.removable(candidates, rep.SupersededBefore), vacuumed(rep, VacuumRemovable); rep.KeepSnapshots != 0 || !slices.Equal(got, want) {
			tally.vacuumMismatches++
			t.Errorf("trial %d, %s: vacuum (keeping %s) lists as removable\n%v\nwant\n%v", trial, when, rep.KeepSnapshots, got, want)
		}
		candidates = testkit.StrayCandidates(t, dir, LogDir)
		rep, err = tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), Apply: true, KeepSnapshots: keep})
		if err != nil {
			t.Fatalf("trial %d, %s: vacuum: %v", trial, when, err)
		}
		files.advance(t, rep.Version)
		if want, got := files.removable(candidates, rep.SupersededBefore), vacuumed(rep, VacuumDeleted); rep.KeepSnapshots != 0 || !slices.Equal(got, want) {
			tally.vacuumMismatches++
			t.Errorf("trial %d, %s: vacuum (keeping %s) deleted\n%v\nwant\n%v", trial, when, rep.KeepSnapshots, got, want)
		}
		if left := files.removable(testkit.StrayCandidates(t, dir, LogDir), rep.SupersededBefore); len(left) != 0 {
			tally.vacuumMismatches++
			t.Errorf("trial %d, %s: after the vacuum these should be gone: %v", trial, when, left)
		}
		expired := 0
		for _, a := range rep.Artifacts {
			switch {
			case a.Disposition == VacuumDeleted && a.Reason == VacuumExpired:
				expired++
			case a.Disposition == VacuumDeleted:
				tally.strayRemoved++
			}
		}
		tally.expiredDeleted += expired
		if rep, err := tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), KeepSnapshots: keep}); err != nil {
			tally.vacuumMismatches++
			t.Errorf("trial %d, %s: second dry run: %v", trial, when, err)
		} else if rep.Removable != 0 {
			tally.vacuumMismatches++
			t.Errorf("trial %d, %s: second dry run: %v removable", trial, when, vacuumed(rep, VacuumRemovable))
		}
		if after, err := batchCounts(t, ctx, tb, mem); err != nil || !maps.Equal(after, counts) {
			tally.unreadable++
			t.Errorf("trial %d, %s: the table reads differently after vacuum (%v)", trial, when, err)
		}
		checkFiles(trial, when+", after vacuum", tb.State())
		return expired
	}

	for trial := 1; trial <= r.trials; trial++ {
		tally.trials = trial
		window := "table"
		if trial%2 == 0 {
			window = "0s"
		}
		c := r.start(trial, 30*time.Second, "TSFLIGHT_VACCRASH_WINDOW="+window)
		switch trial % 3 {
		case 1: // anywhere
			c.killAfter(time.Duration(r.rng.Int64N(int64(3*times.round) + 1)))
		case 2: // inside a vacuum
			c.waitUntil("vacuum", 50*time.Microsecond, func(out string) bool { return strings.Contains(out, "\nvacuuming\n") })
			c.killAfter(time.Duration(r.rng.Int64N(int64(3*times.vacuum/2) + 1)))
		case 0: // inside a vacuum's deletions
			c.waitUntil("deletion", 20*time.Microsecond, func(out string) bool {
				_, deletions, _, _ := vacuumLifeCounts(out)
				return deletions > 0
			})
			c.killAfter(time.Duration(r.rng.Int64N(int64(3*times.deletions/2) + 1)))
		}
		out := c.output()
		times.update(out)
		done, deletions, inVacuum, lastDeletions := vacuumLifeCounts(out)
		tally.childVacuums += done
		tally.childDeletions += deletions
		if inVacuum {
			tally.killsInVacuum++
			if lastDeletions > 0 {
				tally.killsInDeletions++
			}
		}
		if killedInside(out, "compacting\n", "compacted\n") {
			tally.killsInCompact++
		}

		cur, _ := os.ReadFile(filepath.Join(dir, LogDir, "CURRENT"))
		r.absorbAcked()

		// The table opens, names only files that are there, and holds
		// every acknowledged batch once.
		tb := r.open(trial, nil)
		st := tb.State()
		from := files.version
		checkFiles(trial, "after the kill", st)
		tally.compactions += compactionCommits(t, tb, from, st.Version)
		counts, unacked := r.checkRows(trial, tb)
		rows := rowTotal(counts)
		if err := checkCrashCoverage(t, ctx, tb, rows); err != nil {
			tally.covMismatches++
			t.Errorf("trial %d: coverage after the kill: %v", trial, err)
		}
		if len(unacked) > 0 || strings.TrimSpace(string(cur)) != strconv.FormatUint(st.Version, 10) {
			tally.killsInCommit++
		}
		// Every version before the newest is expired (the window is 0s):
		// StateAt refuses the one before, whose files vacuum deletes.
		if v := st.Version - 1; v >= 1 && files.stamps[v].Before(time.Now()) {
			if _, err := tb.StateAt(ctx, v); !errors.Is(err, ErrNotFound) {
				tally.expiredServed++
				t.Errorf("trial %d: StateAt(%d) of a table keeping 0s: %v, want not found", trial, v, err)
			}
		}

		// What the kill left: the killed vacuum's remaining expired files,
		// a killed compaction's or append's orphans.
		if n := expire(trial, "after the kill", tb, counts); inVacuum && lastDeletions > 0 && n > 0 {
			tally.halfVacuumed++ // some expired files deleted, some left
		}

		// A compaction replaces every small segment; the next vacuum
		// deletes them.
		crep := r.compactAfterKill(trial, tb, &tally.compactFailed, &tally.compactions)
		r.sameRows(trial, tb, counts, "compacting")
		expire(trial, "after compacting", tb, counts)
		for _, g := range crep.Groups {
			for _, src := range g.Sources {
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(src))); !os.IsNotExist(err) {
					tally.vacuumMismatches++
					t.Errorf("trial %d: segment %s, replaced by the compaction, is still there (%v)", trial, src, err)
				}
			}
		}

		// The next append succeeds.
		res := r.appendNext(trial, tb, counts)
		files.advance(t, res.Version)
		checkFiles(trial, "after the next append", tb.State())
		if err := checkCrashCoverage(t, ctx, tb, rows+crashRows); err != nil {
			tally.covMismatches++
			t.Errorf("trial %d: coverage after the next append: %v", trial, err)
		}

		// The 0.9.0 package reads the table and appends to it; tsflight
		// reads what it appended, and vacuums after it.
		if r.pythonDue(trial, 10) {
			r.pythonCheck(trial)
			v := r.pythonAppend(trial)
			tb := r.open(trial, nil)
			if st := tb.State(); st.Version != v {
				tally.unreadable++
				t.Errorf("trial %d: tsflight opens version %d after the package's append of version %d", trial, st.Version, v)
			}
			checkFiles(trial, "after the package's append", tb.State())
			counts, err := batchCounts(t, ctx, tb, mem)
			if err != nil {
				tally.unreadable++
				t.Fatalf("trial %d: scan after the package's append: %v", trial, err)
			}
			if extra := checkBatches(t, &tally.crashTally, counts, r.acked); len(extra) > 0 {
				tally.dups++
				t.Errorf("trial %d: batches nobody appended after the package's append: %v", trial, extra)
			}
			if err := checkCrashCoverage(t, ctx, tb, rowTotal(counts)); err != nil {
				tally.covMismatches++
				t.Errorf("trial %d: coverage after the package's append: %v", trial, err)
			}
			expire(trial, "after the package's append", tb, counts)
		}
		r.endTrial(trial)
	}
	if r.trials >= 10 && tally.killsInVacuum == 0 {
		t.Errorf("no kill landed inside a vacuum in %d trials", r.trials)
	}
	if r.trials >= 30 && tally.killsInDeletions == 0 {
		t.Errorf("no kill landed inside a vacuum's deletions in %d trials", r.trials)
	}
}
