// Check: a consistency check of a whole table (log, CURRENT, segments,
// coverage sidecars, table coverage snapshot) and, when asked, the repair
// of what is safely repairable.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// CheckOptions tune one [Check].
type CheckOptions struct {
	// Repair fixes what is safely repairable: CURRENT is republished when
	// it lags the newest valid commit, is missing or unreadable while the
	// commits are intact; the table coverage snapshot is rebuilt from the
	// segment sidecars (and committed as an ordinary UpdateTableCoverage
	// commit) when it is missing, unreadable or disagrees with them. No
	// file is ever deleted and no commit file rewritten.
	Repair bool
	// Options are those of the table (logger, clock) used for the repair
	// commit; nil means DefaultOptions.
	Options *Options
}

// CheckSeverity grades a finding. NB: clients see these strings.
type CheckSeverity string

const (
	// CheckError: the table is damaged; reads, appends or coverage
	// answers fail or are wrong until it is dealt with.
	CheckError CheckSeverity = "error"
	// CheckWarning: readers work around it (CURRENT lagging, a table
	// coverage snapshot that is rebuilt on read, a torn commit above
	// CURRENT), but it should be fixed.
	CheckWarning CheckSeverity = "warning"
)

// Finding codes. NB: clients see these strings.
const (
	CheckCommitMissing          = "commit_missing"
	CheckCommitMalformed        = "commit_malformed"
	CheckCommitUnreadable       = "commit_unreadable"
	CheckCommitUnsupported      = "commit_unsupported"
	CheckCommitTorn             = "commit_torn"
	CheckCurrentMissing         = "current_missing"
	CheckCurrentInvalid         = "current_invalid"
	CheckCurrentLagging         = "current_lagging"
	CheckSegmentMissing         = "segment_missing"
	CheckSegmentDamaged         = "segment_damaged"
	CheckSegmentNoSidecar       = "segment_no_sidecar"
	CheckSidecarMissing         = "sidecar_missing"
	CheckSidecarCorrupt         = "sidecar_corrupt"
	CheckSidecarMismatch        = "sidecar_mismatch"
	CheckTableCoverageNoPointer = "table_coverage_pointer_missing"
	CheckTableCoverageMissing   = "table_coverage_missing"
	CheckTableCoverageCorrupt   = "table_coverage_corrupt"
	CheckTableCoverageMismatch  = "table_coverage_mismatch"
)

// CheckFinding is one problem Check found.
type CheckFinding struct {
	Severity CheckSeverity
	// Code is a stable name of the kind of problem (the Check* constants).
	Code string
	// Path is the table-relative file at fault.
	Path string
	// Version is the commit concerned (the one that is bad, or the one
	// that recorded the file), 0 when none.
	Version uint64
	// Problem says what is wrong: what the log records and what is there.
	Problem string
	// Action says what to do about it.
	Action string
	// Repairable: CheckOptions.Repair can fix it.
	Repairable bool
	// Repaired: the repair was made and a second check no longer finds
	// the problem.
	Repaired bool
	// Repair says what the repair did, or why it failed.
	Repair string
}

// CheckReport is what Check found (and repaired).
type CheckReport struct {
	// Version is the newest commit that replayed; Current what CURRENT
	// holds (0 when missing or unreadable).
	Version, Current uint64
	// Segments is the number of live segments at Version; Rows their rows.
	Segments int
	Rows     uint64
	// Repair is true when repairs were asked for.
	Repair bool
	// Findings, in the order: log, CURRENT, segments, sidecars, table
	// coverage.
	Findings []CheckFinding
}

// OK reports whether nothing is wrong: no findings, or (after a repair)
// every finding repaired.
func (r *CheckReport) OK() bool {
	for _, f := range r.Findings {
		if !f.Repaired {
			return false
		}
	}
	return true
}

// Check verifies the table: see [Check].
func (t *Table) Check(ctx context.Context, opts CheckOptions) (*CheckReport, error) {
	if opts.Options == nil {
		opts.Options = t.opts
	}
	return Check(ctx, t.fs, opts)
}

// Check verifies the table in fsys without opening it, so that a table
// whose log does not replay can be checked too:
//
//   - the log: every commit from 1 on decodes and applies in turn; the
//     first one that does not (missing below CURRENT, malformed, from a
//     newer writer) is reported with its file, and the rest is checked
//     at the last version that replayed;
//   - CURRENT: present, parseable, and not behind the newest valid commit;
//   - every live segment: present, with the size, row count and Parquet
//     footer the log records;
//   - every live segment's coverage sidecar: present, decodable and equal
//     to the coverage of the segment's rows (when the segment cannot be
//     read: its ids within the segment's index bounds);
//   - the table coverage snapshot of the state: present, decodable and
//     equal to the union of the segment sidecars.
//
// Each problem is a finding; the error is only for a directory that holds
// no table (ErrNotFound), a cancelled ctx or a log directory that cannot be
// listed. With opts.Repair the repairable findings are fixed (see
// CheckOptions.Repair), the table is checked again, and the findings that
// second check no longer shows are marked Repaired; any new one is added.
func Check(ctx context.Context, fsys storage.FS, opts CheckOptions) (*CheckReport, error) {
	if opts.Options == nil {
		opts.Options = DefaultOptions()
	}
	r, err := runCheck(ctx, fsys, opts.Options)
	if err != nil || !opts.Repair {
		return r.report(), err
	}
	done := r.repair(ctx)
	again, err := runCheck(ctx, fsys, opts.Options)
	if err != nil {
		return nil, err
	}
	rep := r.report()
	rep.Repair = true
	remaining := map[string]bool{}
	for _, f := range again.rep.Findings {
		remaining[checkFamily(f.Code)+"\x00"+checkPathKey(f)] = true
	}
	seen := map[string]bool{}
	for i := range rep.Findings {
		f := &rep.Findings[i]
		key := checkFamily(f.Code) + "\x00" + checkPathKey(*f)
		seen[key] = true
		if d, ok := done[f.Code+"\x00"+f.Path]; ok {
			f.Repair = d.what
			f.Repaired = d.ok && !remaining[key]
		}
	}
	for _, f := range again.rep.Findings {
		if !seen[checkFamily(f.Code)+"\x00"+checkPathKey(f)] {
			rep.Findings = append(rep.Findings, f)
		}
	}
	rep.Version, rep.Current, rep.Segments, rep.Rows = again.rep.Version, again.rep.Current, again.rep.Segments, again.rep.Rows
	return rep, nil
}

// checkFamily groups codes whose repair is the same, so that a second
// check showing another member of the family counts as not repaired.
func checkFamily(code string) string {
	switch code {
	case CheckCurrentMissing, CheckCurrentInvalid, CheckCurrentLagging:
		return "current"
	case CheckTableCoverageNoPointer, CheckTableCoverageMissing, CheckTableCoverageCorrupt, CheckTableCoverageMismatch:
		return "table_coverage"
	}
	return code
}

// checkPathKey is the path part of a finding's identity: table coverage
// findings name the snapshot, which a repair replaces by a new one.
func checkPathKey(f CheckFinding) string {
	if checkFamily(f.Code) == "table_coverage" || checkFamily(f.Code) == "current" {
		return ""
	}
	return f.Path
}

// checkRun is one pass of Check.
type checkRun struct {
	fsys storage.FS
	opts *Options
	log  logStore
	rep  CheckReport

	st         *State
	addedAt    map[string]uint64 // live segment path -> commit that added it
	logIntact  bool              // every commit up to the newest file replayed (a torn newest one aside)
	currentBad bool              // CURRENT missing or unreadable
	// sidecars of the live segments that decoded, by segment path; bad
	// when any sidecar is absent, undecodable or disagrees with its rows.
	sidecars    map[string]*coverage.Set
	sidecarsBad bool
}

func (r *checkRun) report() *CheckReport {
	if r == nil {
		return nil
	}
	rep := r.rep
	rep.Findings = append([]CheckFinding(nil), r.rep.Findings...)
	return &rep
}

func (r *checkRun) add(f CheckFinding) { r.rep.Findings = append(r.rep.Findings, f) }

func runCheck(ctx context.Context, fsys storage.FS, opts *Options) (*checkRun, error) {
	r := &checkRun{fsys: fsys, opts: opts, log: logStore{fs: fsys, opts: opts}, addedAt: map[string]uint64{}, sidecars: map[string]*coverage.Set{}}
	versions, err := r.listCommits()
	if err != nil {
		return nil, err
	}
	cur, curErr := r.log.readCurrent()
	_, statErr := fsys.Stat(currentPath)
	if len(versions) == 0 && storage.IsNotExist(statErr) {
		return nil, fmt.Errorf("%w: no table here (the log has no commits and no CURRENT)", ErrNotFound)
	}
	if curErr == nil {
		r.rep.Current = cur
	}
	if err := r.replay(ctx, versions, cur, curErr == nil); err != nil {
		return nil, err
	}
	if newest := r.st.versionOrZero(); curErr == nil && cur < newest {
		cur, statErr = r.awaitCurrent(ctx, cur, newest)
		r.rep.Current = cur
	}
	r.checkCurrent(cur, curErr, statErr)
	if r.st == nil {
		return r, nil
	}
	r.rep.Version, r.rep.Segments, r.rep.Rows = r.st.Version, len(r.st.Segments), r.st.RowCount()
	if err := r.checkSegments(ctx); err != nil {
		return nil, err
	}
	r.checkTableCoverage()
	return r, nil
}

// checkPublishWait is how long Check waits for CURRENT to catch up with a
// young commit before calling it behind: a writer publishes CURRENT just
// after its commit file appears (temporary file, fsync, rename, directory
// fsync), so a check running alongside appends sees CURRENT behind for a
// moment. A commit older than checkPublishAge is not waited for.
var (
	checkPublishWait = time.Second
	checkPublishAge  = time.Minute
)

// awaitCurrent re-reads CURRENT (which said cur) until it reaches newest,
// for up to checkPublishWait while commit newest is young, and returns
// what it last read and the error of a stat of CURRENT.
func (r *checkRun) awaitCurrent(ctx context.Context, cur, newest uint64) (uint64, error) {
	deadline := time.Now().Add(checkPublishWait)
	for {
		if v, err := r.log.readCurrent(); err == nil && v > cur {
			cur = v
		}
		_, statErr := r.fsys.Stat(currentPath)
		if cur >= newest || time.Now().After(deadline) || ctx.Err() != nil {
			return cur, statErr
		}
		info, err := r.fsys.Stat(CommitPath(newest))
		if err != nil || r.opts.now().Sub(info.ModTime) > checkPublishAge {
			return cur, statErr
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// listCommits returns the versions of the commit files in the log
// directory, sorted.
func (r *checkRun) listCommits() ([]uint64, error) {
	names, err := r.fsys.List(LogDir)
	if storage.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, storageErr("check: list "+LogDir, err)
	}
	var out []uint64
	for _, n := range names {
		if !reCommitFile.MatchString(LogDir + "/" + n) {
			continue
		}
		if v, err := strconv.ParseUint(strings.TrimSuffix(n, ".json"), 10, 64); err == nil && v > 0 && CommitPath(v) == LogDir+"/"+n {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// problemOf renders an error for a finding, without the "corrupt table"
// prefix a CorruptionError carries.
func problemOf(err error) string {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		if ce.Err != nil {
			return ce.Reason + ": " + ce.Err.Error()
		}
		return ce.Reason
	}
	return err.Error()
}

// replay applies commits 1, 2, … until one is missing or bad.
func (r *checkRun) replay(ctx context.Context, versions []uint64, cur uint64, curOK bool) error {
	newest := uint64(0)
	if len(versions) > 0 {
		newest = versions[len(versions)-1]
	}
	r.logIntact = true
	var st *State // owned by the replay: applyOwned extends it in place
	for v := uint64(1); ; v++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := r.log.readCommit(v)
		if storage.IsNotExist(err) {
			switch {
			case curOK && v <= cur:
				r.logIntact = false
				r.add(CheckFinding{Severity: CheckError, Code: CheckCommitMissing, Path: CommitPath(v), Version: v,
					Problem: fmt.Sprintf("CURRENT says %d but commit %d is missing; the table does not open (every commit up to CURRENT is needed)", cur, v),
					Action:  fmt.Sprintf("restore %s from a backup; never write a commit file by hand (the table is checked at version %d)", CommitPath(v), v-1)})
			case v <= newest:
				r.logIntact = false
				r.add(CheckFinding{Severity: CheckError, Code: CheckCommitMissing, Path: CommitPath(v), Version: v,
					Problem: fmt.Sprintf("commit %d is missing but commit files up to %s exist; readers stop at version %d and never see the later commits", v, CommitPath(newest), v-1),
					Action:  fmt.Sprintf("restore %s from a backup; writers cannot commit past the gap", CommitPath(v))})
			}
			break
		}
		if err != nil {
			r.commitFinding(v, err, cur, curOK, newest) // st is untouched
			break
		}
		next, err := st.applyOwned(c, CommitPath(v))
		if err != nil {
			// applyOwned consumed st: rebuild it from the commits that
			// did replay.
			st = nil
			if v > 1 {
				var err2 error
				if st, err2 = r.log.replayTo(ctx, nil, v-1); err2 != nil {
					return err2
				}
			}
			r.commitFinding(v, err, cur, curOK, newest)
			break
		}
		for _, a := range c.Actions {
			if add, ok := a.(AddSegment); ok {
				r.addedAt[add.Segment.Path] = v
			}
		}
		st = next
	}
	r.st = st
	return nil
}

// commitFinding reports a commit file that exists but does not replay.
func (r *checkRun) commitFinding(v uint64, err error, cur uint64, curOK bool, newest uint64) {
	p := CommitPath(v)
	var pe *ProtocolError
	switch {
	case errors.Is(err, ErrStorage):
		r.logIntact = false
		r.add(CheckFinding{Severity: CheckError, Code: CheckCommitUnreadable, Path: p, Version: v,
			Problem: fmt.Sprintf("commit %d cannot be read: %v", v, err),
			Action:  "fix the storage error (permissions, disk) and check again"})
	case errors.As(err, &pe), errors.Is(err, ErrNeedsUpgrade), errors.Is(err, ErrUnsupported):
		r.logIntact = false
		r.add(CheckFinding{Severity: CheckError, Code: CheckCommitUnsupported, Path: p, Version: v,
			Problem: fmt.Sprintf("commit %d needs a newer reader: %s", v, problemOf(err)),
			Action:  "check the table with a tsflight build that supports its protocol and features"})
	case (curOK && v <= cur) || v < newest:
		r.logIntact = false
		why := fmt.Sprintf("CURRENT says %d", cur)
		if !curOK || v > cur {
			why = fmt.Sprintf("commit files up to %s follow it", CommitPath(newest))
		}
		r.add(CheckFinding{Severity: CheckError, Code: CheckCommitMalformed, Path: p, Version: v,
			Problem: fmt.Sprintf("commit %d does not replay (%s): %s", v, why, problemOf(err)),
			Action:  fmt.Sprintf("restore %s from a backup; commit files are never rewritten by tsflight (the table is checked at version %d)", p, v-1)})
	default:
		r.add(CheckFinding{Severity: CheckWarning, Code: CheckCommitTorn, Path: p, Version: v,
			Problem: fmt.Sprintf("the newest commit file, above CURRENT, does not replay (a writer that died mid-commit?): %s; readers ignore it", problemOf(err)),
			Action:  "nothing is lost: the next writer sets it aside into " + orphanDir + "/ once it is older than the orphan grace period"})
	}
}

// checkCurrent compares CURRENT with the newest valid commit.
func (r *checkRun) checkCurrent(cur uint64, curErr, statErr error) {
	newest := r.st.versionOrZero()
	switch {
	case storage.IsNotExist(statErr) && curErr == nil:
		if newest == 0 {
			return
		}
		r.currentBad = true
		r.add(CheckFinding{Severity: CheckWarning, Code: CheckCurrentMissing, Path: currentPath, Version: newest,
			Problem:    fmt.Sprintf("CURRENT is missing; the newest valid commit is %d (tsflight rolls forward over the commits, other readers of the format may see no table)", newest),
			Action:     fmt.Sprintf("tsflight check --repair republishes CURRENT as %d", newest),
			Repairable: r.logIntact})
	case curErr != nil:
		r.currentBad = true
		r.add(CheckFinding{Severity: CheckError, Code: CheckCurrentInvalid, Path: currentPath, Version: newest,
			Problem:    fmt.Sprintf("CURRENT cannot be used (%s); the table does not open; the newest valid commit is %d", problemOf(curErr), newest),
			Action:     fmt.Sprintf("tsflight check --repair republishes CURRENT as %d", newest),
			Repairable: r.logIntact && newest > 0})
	case cur < newest:
		r.add(CheckFinding{Severity: CheckWarning, Code: CheckCurrentLagging, Path: currentPath, Version: newest,
			Problem:    fmt.Sprintf("CURRENT says %d but commits up to %d are valid (a writer died between its commit and publishing CURRENT); tsflight rolls forward, other readers of the format read version %d", cur, newest, cur),
			Action:     fmt.Sprintf("tsflight check --repair republishes CURRENT as %d (opening the table for writing does too)", newest),
			Repairable: r.logIntact})
	}
}

// checkSegments checks every live segment and its sidecar.
func (r *checkRun) checkSegments(ctx context.Context) error {
	entity := len(r.st.Index().EntityColumns) > 0
	for i := range r.st.Segments {
		if err := ctx.Err(); err != nil {
			return err
		}
		seg := &r.st.Segments[i]
		added := r.addedAt[seg.Path]
		segOK := true
		if err := checkSegmentFile(r.fsys, *seg); err != nil {
			segOK = false
			if storage.IsNotExist(err) {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentMissing, Path: seg.Path, Version: added,
					Problem: fmt.Sprintf("commit %d added this segment (%d rows%s) but the file is missing; scans fail", added, seg.RowCount, sizeNote(seg)),
					Action:  "restore the file from a backup; its rows are not anywhere else"})
			} else {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentDamaged, Path: seg.Path, Version: added,
					Problem: fmt.Sprintf("the file is not the segment commit %d recorded: %s", added, problemOf(err)),
					Action:  "restore the file from a backup (a file swapped or truncated by hand cannot be told from damage)"})
			}
		}
		var rows *segmentRows
		if segOK {
			var err error
			if rows, err = segmentRowsCoverage(ctx, r.fsys, r.st, seg); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				segOK = false
				r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentDamaged, Path: seg.Path, Version: added,
					Problem: fmt.Sprintf("the index and entity columns of the segment commit %d recorded cannot be read: %s", added, problemOf(err)),
					Action:  "restore the file from a backup"})
			} else if rows.rows > 0 && (rows.lo.Compare(seg.IndexMin) != 0 || rows.hi.Compare(seg.IndexMax) != 0) {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentDamaged, Path: seg.Path, Version: added,
					Problem: fmt.Sprintf("the file is not the segment commit %d recorded: the log records index %s..%s, the rows hold %s..%s", added, seg.IndexMin, seg.IndexMax, rows.lo, rows.hi),
					Action:  "restore the file from a backup (a file swapped by hand cannot be told from damage)"})
				segOK, rows = false, nil
			}
		}
		if seg.CoveragePath == "" {
			r.sidecarsBad = true
			r.add(CheckFinding{Severity: CheckError, Code: CheckSegmentNoSidecar, Path: seg.Path, Version: added,
				Problem: fmt.Sprintf("commit %d added this segment without a coverage sidecar; appends refuse the table", added),
				Action:  "the segment was written by a writer that does not record coverage; rewrite the table with a current writer"})
			continue
		}
		set, err := readCheckCoverage(r.fsys, seg.CoveragePath, entity)
		if err != nil {
			r.sidecarsBad = true
			if storage.IsNotExist(err) {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSidecarMissing, Path: seg.CoveragePath, Version: added,
					Problem: fmt.Sprintf("commit %d recorded this coverage sidecar of %s but the file is missing; appends and coverage rebuilds fail", added, seg.Path),
					Action:  "restore the file from a backup"})
			} else {
				r.add(CheckFinding{Severity: CheckError, Code: CheckSidecarCorrupt, Path: seg.CoveragePath, Version: added,
					Problem: fmt.Sprintf("the coverage sidecar of %s (commit %d) cannot be decoded: %s", seg.Path, added, problemOf(err)),
					Action:  "restore the file from a backup"})
			}
			continue
		}
		if msg := r.compareSidecar(seg, set, rows); msg != "" {
			r.sidecarsBad = true
			r.add(CheckFinding{Severity: CheckError, Code: CheckSidecarMismatch, Path: seg.CoveragePath, Version: added,
				Problem: fmt.Sprintf("the coverage sidecar of %s (commit %d) disagrees with the segment: %s", seg.Path, added, msg),
				Action:  "restore the file from a backup; until then appends may accept duplicates or refuse valid rows, and coverage answers are wrong"})
			continue
		}
		r.sidecars[seg.Path] = set
	}
	return nil
}

func sizeNote(seg *SegmentMeta) string {
	if seg.FileSize == nil {
		return ""
	}
	return fmt.Sprintf(", %d bytes", *seg.FileSize)
}

func readCheckCoverage(fsys storage.FS, p string, entity bool) (*coverage.Set, error) {
	data, err := fsys.ReadFile(p)
	if err != nil {
		if storage.IsNotExist(err) {
			return nil, err
		}
		return nil, storageErr("read "+p, err)
	}
	set, err := coverage.Decode(data, entity)
	if err != nil {
		return nil, fmt.Errorf("%d bytes: %w", len(data), err)
	}
	return set, nil
}

// compareSidecar returns "" when set is the coverage of seg's rows (when
// they could be read) or lies within its index bounds (when not).
func (r *checkRun) compareSidecar(seg *SegmentMeta, set *coverage.Set, rows *segmentRows) string {
	spec := r.st.Index()
	if rows != nil {
		if set.Equal(rows.cov) {
			return ""
		}
		return describeSetDiff(spec, set, rows.cov)
	}
	d := indexDomain(spec)
	lo, err1 := intervalID(d, seg.IndexMin, false)
	hi, err2 := intervalID(d, seg.IndexMax, false)
	if err1 != nil || err2 != nil {
		return ""
	}
	check := func(who string, bm interface {
		IsEmpty() bool
		Minimum() uint64
		Maximum() uint64
	}) string {
		if bm == nil || bm.IsEmpty() {
			return ""
		}
		if bm.Minimum() < lo || bm.Maximum() > hi {
			return fmt.Sprintf("%sits intervals run from %s to %s, outside the segment's index range %s..%s", who,
				describeInterval(spec, d, bm.Minimum()), describeInterval(spec, d, bm.Maximum()), seg.IndexMin, seg.IndexMax)
		}
		return ""
	}
	if !set.IsEntity() {
		return check("", set.Bitmap(nil))
	}
	for _, id := range set.Identities() {
		if msg := check(describeIdentity(spec, id)+": ", set.Bitmap(id)); msg != "" {
			return msg
		}
	}
	return ""
}

func describeIdentity(spec *IndexSpec, id coverage.Identity) string {
	parts := make([]string, len(id))
	for i, c := range id {
		name := "?"
		if i < len(spec.EntityColumns) {
			name = spec.EntityColumns[i]
		}
		parts[i] = name + "=" + c.String()
	}
	return strings.Join(parts, ", ")
}

// describeSetDiff says how got (a file) differs from want (what it should
// hold), with one example pair each way.
func describeSetDiff(spec *IndexSpec, got, want *coverage.Set) string {
	d := indexDomain(spec)
	msg := fmt.Sprintf("the file holds %d (identity, interval) pairs, the expected coverage %d", got.Cardinality(), want.Cardinality())
	if ex := firstMissing(spec, d, got, want); ex != "" {
		msg += "; e.g. " + ex + " is in the file only"
	}
	if ex := firstMissing(spec, d, want, got); ex != "" {
		msg += "; e.g. " + ex + " is missing from the file"
	}
	return msg
}

// firstMissing returns a pair of a that b lacks, described, or "".
func firstMissing(spec *IndexSpec, d coverage.Domain, a, b *coverage.Set) string {
	idents := []coverage.Identity{nil}
	if a.IsEntity() {
		idents = a.Identities()
	}
	for _, id := range idents {
		abm := a.Bitmap(id)
		bbm := b.Bitmap(id)
		who := ""
		if id != nil {
			who = describeIdentity(spec, id) + " "
		}
		if bbm == nil {
			if abm == nil || abm.IsEmpty() {
				return "identity " + strings.TrimSpace(who)
			}
			return who + describeInterval(spec, d, abm.Minimum())
		}
		if abm == nil {
			continue
		}
		diff := abm.Clone()
		diff.AndNot(bbm)
		if !diff.IsEmpty() {
			return who + describeInterval(spec, d, diff.Minimum())
		}
	}
	return ""
}

// segmentRows is what the rows of a segment hold: their coverage and the
// bounds of their (non-null) index values.
type segmentRows struct {
	cov    *coverage.Set
	rows   uint64
	lo, hi IndexValue
}

// segmentRowsCoverage reads the index and entity columns of seg and
// returns the coverage and index bounds of its rows.
func segmentRowsCoverage(ctx context.Context, fsys storage.FS, st *State, seg *SegmentMeta) (out *segmentRows, err error) {
	f, err := fsys.Open(seg.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("decoding the segment failed: %v", v)
		}
	}()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	mem := memory.DefaultAllocator
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, mem)
	if err != nil {
		return nil, err
	}
	ix := st.Index()
	names := append([]string{ix.Column}, ix.EntityColumns...)
	leaves := make([]int, len(names))
	for k, name := range names {
		leaves[k] = -1
		for i := range fr.Manifest.Fields {
			if fr.Manifest.Fields[i].Field.Name == name && fr.Manifest.Fields[i].IsLeaf() {
				leaves[k] = fr.Manifest.Fields[i].ColIndex
			}
		}
		if leaves[k] < 0 {
			return nil, fmt.Errorf("the segment has no column %q", name)
		}
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	entity := len(ix.EntityColumns) > 0
	out = &segmentRows{cov: coverage.NewGlobal()}
	cov := newSegmentCoverage(ix, entity)
	for rr.Next() {
		rec := rr.RecordBatch()
		// Columns come back in schema order; find them by name.
		cols := make([]arrow.Array, len(names))
		for k, name := range names {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				return nil, fmt.Errorf("column %q not read", name)
			}
			cols[k] = rec.Column(idx[0])
		}
		if err := addRowsCoverage(cov, out, cols); err != nil {
			return nil, err
		}
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	out.cov = cov.set
	return out, nil
}

// addRowsCoverage adds (identity, interval) of each row whose index is not
// null: cols[0] is the index, the rest the entity columns.
func addRowsCoverage(cov *segmentCoverage, out *segmentRows, cols []arrow.Array) error {
	idx := cols[0]
	ident := make(coverage.Identity, len(cols)-1)
	for row := 0; row < idx.Len(); row++ {
		if idx.IsNull(row) {
			continue
		}
		var id uint64
		var v IndexValue
		var err error
		switch a := idx.(type) {
		case *array.Timestamp:
			ups := map[arrow.TimeUnit]int64{arrow.Second: 1, arrow.Millisecond: 1e3, arrow.Microsecond: 1e6, arrow.Nanosecond: 1e9}[a.DataType().(*arrow.TimestampType).Unit]
			raw := int64(a.Value(row))
			id, err = cov.domain.TimestampID(raw, ups)
			sec, frac := floorDiv(raw, ups)
			v = TimeValue(time.Unix(sec, frac*(1e9/ups)))
		case *array.Int64:
			id, err = cov.domain.Int64ID(a.Value(row))
			v = Int64Value(a.Value(row))
		case *array.Uint64:
			id, err = cov.domain.UInt64ID(a.Value(row))
			v = Uint64Value(a.Value(row))
		default:
			return fmt.Errorf("index column has type %s", idx.DataType())
		}
		if err != nil {
			return err
		}
		if out.rows == 0 || v.Compare(out.lo) < 0 {
			out.lo = v
		}
		if out.rows == 0 || v.Compare(out.hi) > 0 {
			out.hi = v
		}
		out.rows++
		if len(ident) == 0 {
			_, _ = cov.set.Add(nil, id)
			continue
		}
		for k, col := range cols[1:] {
			if col.IsNull(row) {
				return fmt.Errorf("entity column is null at a row")
			}
			switch c := col.(type) {
			case *array.String:
				ident[k] = coverage.Utf8(c.Value(row))
			case *array.LargeString:
				ident[k] = coverage.Utf8(c.Value(row))
			case *array.Int32:
				ident[k] = coverage.Int32(c.Value(row))
			case *array.Int64:
				ident[k] = coverage.Int64(c.Value(row))
			case *array.Uint64:
				ident[k] = coverage.UInt64(c.Value(row))
			default:
				return fmt.Errorf("entity column has type %s", col.DataType())
			}
		}
		if _, err := cov.set.Add(ident, id); err != nil {
			return err
		}
	}
	return nil
}

// checkTableCoverage compares the table coverage snapshot with the union
// of the sidecars.
func (r *checkRun) checkTableCoverage() {
	st := r.st
	ptr := st.Coverage
	repairable := r.logIntact && !r.sidecarsBad
	how := "tsflight check --repair rebuilds it from the segment sidecars (the next append would too)"
	if !repairable {
		how = "fix the findings above first; then tsflight check --repair rebuilds it from the segment sidecars"
	}
	if ptr == nil {
		if len(st.Segments) == 0 {
			return
		}
		r.add(CheckFinding{Severity: CheckWarning, Code: CheckTableCoverageNoPointer, Path: tableCoverageDir, Version: st.Version,
			Problem:    fmt.Sprintf("the table has %d segments but no commit records a table coverage snapshot; readers rebuild it from the sidecars on every load", len(st.Segments)),
			Action:     how,
			Repairable: repairable})
		return
	}
	set, err := readCheckCoverage(r.fsys, ptr.Path, len(st.Index().EntityColumns) > 0)
	if err != nil {
		code, what := CheckTableCoverageCorrupt, "cannot be decoded: "+problemOf(err)
		if storage.IsNotExist(err) {
			code, what = CheckTableCoverageMissing, "is missing"
		}
		r.add(CheckFinding{Severity: CheckWarning, Code: code, Path: ptr.Path, Version: st.CoverageVersion,
			Problem:    fmt.Sprintf("commit %d recorded this table coverage snapshot but the file %s; readers rebuild it from the sidecars on every load", st.CoverageVersion, what),
			Action:     how,
			Repairable: repairable})
		return
	}
	if r.sidecarsBad {
		return // the union is not known
	}
	union := r.sidecarUnion()
	if !set.Equal(union) {
		r.add(CheckFinding{Severity: CheckError, Code: CheckTableCoverageMismatch, Path: ptr.Path, Version: st.CoverageVersion,
			Problem:    "the table coverage snapshot is not the union of the live segments' sidecars (" + describeSetDiff(st.Index(), set, union) + "); appends check overlap and coverage queries answer from it",
			Action:     how,
			Repairable: repairable})
	}
}

func (r *checkRun) sidecarUnion() *coverage.Set {
	out := newSegmentCoverage(r.st.Index(), len(r.st.Index().EntityColumns) > 0).set
	for i := range r.st.Segments {
		if s := r.sidecars[r.st.Segments[i].Path]; s != nil {
			_ = out.Union(s)
		}
	}
	return out
}

// checkRepair is what a repair did.
type checkRepair struct {
	what string
	ok   bool
}

// repair fixes the repairable findings and returns what it did, by code
// and path of the finding.
func (r *checkRun) repair(ctx context.Context) map[string]checkRepair {
	done := map[string]checkRepair{}
	var current, table *CheckFinding
	for i := range r.rep.Findings {
		f := &r.rep.Findings[i]
		if !f.Repairable {
			continue
		}
		switch checkFamily(f.Code) {
		case "current":
			current = f
		case "table_coverage":
			table = f
		}
	}
	if current != nil {
		key := current.Code + "\x00" + current.Path
		if err := r.log.publishCurrent(r.st.Version); err != nil {
			done[key] = checkRepair{what: "could not republish CURRENT: " + err.Error()}
		} else {
			done[key] = checkRepair{what: fmt.Sprintf("republished CURRENT as %d", r.st.Version), ok: true}
			r.opts.logger().Info("check: republished CURRENT", "version", r.st.Version)
		}
	}
	if table != nil {
		key := table.Code + "\x00" + table.Path
		if what, err := r.rebuildTableCoverage(ctx); err != nil {
			done[key] = checkRepair{what: "could not rebuild the table coverage snapshot: " + err.Error()}
		} else {
			done[key] = checkRepair{what: what, ok: true}
		}
	}
	return done
}

// rebuildTableCoverage writes the union of the live segments' sidecars as
// the table coverage snapshot of the next version and commits an
// UpdateTableCoverage for it, under optimistic concurrency: when another
// writer commits first, the table is reloaded and the snapshot re-judged.
func (r *checkRun) rebuildTableCoverage(ctx context.Context) (string, error) {
	tb, err := Open(ctx, r.fsys, r.opts)
	if err != nil {
		return "", err
	}
	for attempt := 0; ; attempt++ {
		st, err := tb.Refresh(ctx)
		if err != nil {
			return "", err
		}
		if err := st.Meta.CheckWrite(); err != nil {
			return "", err
		}
		entity := len(st.Index().EntityColumns) > 0
		union := newSegmentCoverage(st.Index(), entity)
		for i := range st.Segments {
			seg := &st.Segments[i]
			if seg.CoveragePath == "" {
				return "", corruptf(seg.Path, st.Version, nil, "segment has no coverage sidecar")
			}
			set, err := readCheckCoverage(r.fsys, seg.CoveragePath, entity)
			if err != nil {
				return "", corruptf(seg.CoveragePath, st.Version, err, "segment sidecar unreadable")
			}
			if err := union.set.Union(set); err != nil {
				return "", corruptf(seg.CoveragePath, st.Version, err, "segment sidecar of the wrong kind")
			}
		}
		if st.Coverage != nil {
			if cur, err := readCheckCoverage(r.fsys, st.Coverage.Path, entity); err == nil && cur.Equal(union.set) {
				return fmt.Sprintf("the table coverage snapshot %s (version %d) already agrees with the sidecars", st.Coverage.Path, st.CoverageVersion), nil
			}
		}
		name, data := union.encodeTable(uuid.New())
		p := path.Join(tableCoverageDir, fmt.Sprintf("%d-%s.roar", st.Version+1, name))
		if err := r.log.writeDurable(p, data); err != nil {
			return "", err
		}
		if err := r.fsys.SyncDir(tableCoverageDir); err != nil {
			r.log.removeQuietly(p)
			return "", storageErr("sync "+tableCoverageDir, err)
		}
		v, err := tb.Commit(ctx, st.Version, []Action{UpdateTableCoverage{Coverage: CoveragePointer{IndexKind: st.Index().Kind, Path: p}}})
		if err == nil {
			r.opts.logger().Info("check: rebuilt the table coverage snapshot", "path", p, "version", v)
			return fmt.Sprintf("wrote %s from the %d segment sidecars and committed it as version %d", p, len(st.Segments), v), nil
		}
		if errors.Is(err, ErrAmbiguousOutcome) {
			return "", fmt.Errorf("%w (snapshot %s was kept; check again to see whether the commit landed)", err, p)
		}
		r.log.removeQuietly(p) // ours, never committed
		if !errors.Is(err, ErrConflict) || attempt >= 16 {
			return "", err
		}
		if err := retryBackoff(ctx, attempt); err != nil {
			return "", err
		}
	}
}

// checkSegmentFile returns nil when the file at seg.Path is the segment the
// log records: present (an error satisfying storage.IsNotExist when not),
// of the recorded size, with a readable Parquet footer giving the recorded
// row count.
func checkSegmentFile(fsys storage.FS, seg SegmentMeta) error {
	return checkSegmentFooter(fsys, seg)
}

func checkSegmentFooter(fsys storage.FS, seg SegmentMeta) (err error) {
	info, err := fsys.Stat(seg.Path)
	if err != nil {
		if storage.IsNotExist(err) {
			return err
		}
		return storageErr("stat "+seg.Path, err)
	}
	if info.IsDir {
		return fmt.Errorf("the log records a segment file but %s is a directory", seg.Path)
	}
	if seg.FileSize != nil && uint64(info.Size) != *seg.FileSize {
		return fmt.Errorf("the log records %d bytes, the file has %d", *seg.FileSize, info.Size)
	}
	f, err := fsys.Open(seg.Path)
	if err != nil {
		return storageErr("open "+seg.Path, err)
	}
	defer f.Close()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the Parquet footer cannot be decoded: %v", v)
		}
	}()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return fmt.Errorf("the Parquet footer cannot be read (%d bytes): %w", info.Size, err)
	}
	defer pf.Close()
	if n := pf.NumRows(); n < 0 || uint64(n) != seg.RowCount {
		return fmt.Errorf("the log records %d rows, the file's footer says %d", seg.RowCount, n)
	}
	return nil
}
