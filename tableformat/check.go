// Check: a consistency check of a whole table (log, CURRENT, segments,
// coverage sidecars, table coverage snapshot) and, when asked, the repair
// of what is safely repairable.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

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
	r.checkCheckpoints(ctx)
	r.checkLastValues(ctx)
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
