// Vacuum: orphan-file cleanup and expiry. It finds the files an append (or
// another writer of the format) created but never committed, typically
// because the process died mid-append, and the files only expired versions
// need (segments a compaction replaced, superseded table coverage
// snapshots; see retention.go), and removes them when asked to.

package tableformat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// DefaultVacuumRetention is how old an unreferenced file must be before
// Vacuum removes it when no cutoff is given: 7 days, as Delta Lake's
// default. A running writer creates its segment and sidecars before it
// commits them, and a file's time is that of its last write, so a younger
// unreferenced file may belong to an append still in progress, in this
// process or another: the retention must exceed the longest append,
// pauses included (a tsflight server ends a call after --request-timeout,
// 1 hour by default; library writers have no such bound). As a last guard
// an append checks that its files still exist just before it commits.
const DefaultVacuumRetention = 7 * 24 * time.Hour

// VacuumOptions tune one [Table.Vacuum]. Use [DefaultVacuumOptions].
type VacuumOptions struct {
	// OlderThan is the cutoff: only files modified strictly before it can
	// be removed. The zero time means now minus DefaultVacuumRetention. A
	// cutoff in the future is refused (ErrInvalidInput). A cutoff of now is
	// only safe when no writer is running on the table.
	OlderThan time.Time
	// Apply deletes the removable files. False (the default) is a dry run
	// that only reports.
	Apply bool
	// KeepSnapshots, when set, is the keep window of this run instead of
	// the table's (the tsflight.keep-snapshots property, by default
	// DefaultKeepSnapshots), as Delta Lake's VACUUM RETAIN: files that
	// only versions superseded longer ago than it hold are removable. It
	// must not be negative. A window shorter than the table's deletes
	// files of versions StateAt still serves (their scans then fail).
	KeepSnapshots *time.Duration
}

// DefaultVacuumOptions returns a dry run with the default retention.
func DefaultVacuumOptions() *VacuumOptions { return &VacuumOptions{} }

// VacuumDisposition says what Vacuum did, or would do, with a file.
type VacuumDisposition string

// Dispositions. NB: clients see these strings.
const (
	// VacuumRetained: the file stays.
	VacuumRetained VacuumDisposition = "retained"
	// VacuumRemovable: a dry run would delete the file (or Apply tried
	// and failed; see VacuumDeleteFailed).
	VacuumRemovable VacuumDisposition = "removable"
	// VacuumDeleted: Apply deleted the file.
	VacuumDeleted VacuumDisposition = "deleted"
	// VacuumAlreadyAbsent: the file was gone when Apply came to it.
	VacuumAlreadyAbsent VacuumDisposition = "already_absent"
)

// VacuumReason says why a file has its disposition.
type VacuumReason string

// Reasons. NB: clients see these strings.
const (
	// VacuumReferenced: a commit of the log names the file.
	VacuumReferenced VacuumReason = "referenced_by_commit"
	// VacuumWithinRetention: unreferenced, but not older than the cutoff.
	VacuumWithinRetention VacuumReason = "within_retention"
	// VacuumUnrecognized: not a file shape a writer of the format creates
	// (and not referenced), so it is left alone.
	VacuumUnrecognized VacuumReason = "unrecognized_artifact"
	// VacuumUnreferenced: a managed file no commit names, older than the
	// cutoff.
	VacuumUnreferenced VacuumReason = "unreferenced"
	// VacuumExpired: a managed file that commits name but only expired
	// versions hold (whatever its time).
	VacuumExpired VacuumReason = "expired"
	// VacuumChanged: the file's size or time changed between planning and
	// deleting, so Apply left it.
	VacuumChanged VacuumReason = "changed_since_planning"
	// VacuumDeleteFailed: Apply could not delete the file (see Error).
	VacuumDeleteFailed VacuumReason = "delete_failed"
)

// VacuumArtifact is one file Vacuum looked at.
type VacuumArtifact struct {
	// Path is table-relative, slash-separated.
	Path        string
	Size        int64
	ModTime     time.Time
	Disposition VacuumDisposition
	Reason      VacuumReason
	// Kind names the file's shape: "segment", "segment_coverage",
	// "table_coverage", "commit_temp", "current_temp", "staged_segment",
	// or "" for an unrecognized file.
	Kind string
	// Error is the deletion error, for VacuumDeleteFailed.
	Error string
}

// VacuumReport is what Vacuum found and did, artifacts sorted by path.
type VacuumReport struct {
	// Version is the newest commit whose log was replayed.
	Version uint64
	// OlderThan is the cutoff used for unreferenced files.
	OlderThan time.Time
	// KeepSnapshots is the keep window used, and SupersededBefore the
	// expiry cutoff it gave: versions superseded before it are expired.
	KeepSnapshots    time.Duration
	SupersededBefore time.Time
	// Applied is true when deletions were made (VacuumOptions.Apply).
	Applied   bool
	Artifacts []VacuumArtifact
	// Totals. Expired counts the artifacts with reason expired (removable,
	// deleted or already absent).
	Files, Referenced, Retained, Removable, Deleted, AlreadyAbsent, Expired int
	RemovableBytes, DeletedBytes                                            int64
}

// The shapes of the files writers create. NB: on-disk names.
var (
	reUUID          = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	reAppendSegment = regexp.MustCompile(`^` + appendDir + `/` + reUUID + `\.parquet$`)
	reStagedSegment = regexp.MustCompile(`^data/_staged/entity-rewrite/` + reUUID + `/[0-9]{10}\.parquet$`)
	reCommitTemp    = regexp.MustCompile(`^` + LogDir + `/\.[0-9]{10,}\.json\.tmp-[0-9a-f]{16}$`)
	reCurrentTemp   = regexp.MustCompile(`^` + LogDir + `/CURRENT\.tmp-[0-9a-f]{16}$`)
	reCommitFile    = regexp.MustCompile(`^` + LogDir + `/[0-9]{10,}\.json$`)
)

// vacuumKind returns the managed shape of p, "" when it has none.
func vacuumKind(p string) string {
	switch {
	case reAppendSegment.MatchString(p):
		return "segment"
	case reStagedSegment.MatchString(p):
		return "staged_segment"
	case path.Dir(p) == segmentCoverageDir && strings.HasSuffix(p, ".roar"):
		return "segment_coverage"
	case path.Dir(p) == tableCoverageDir && strings.HasSuffix(p, ".roar"):
		return "table_coverage"
	case reCommitTemp.MatchString(p):
		return "commit_temp"
	case reCurrentTemp.MatchString(p):
		return "current_temp"
	}
	return ""
}

// Vacuum lists the files of the table that no commit references, and those
// only expired versions hold, and with opts.Apply deletes those that are
// safe to delete.
//
// The whole log is replayed to collect every path named by AddSegment
// (segment and coverage sidecar), RemoveSegment and UpdateTableCoverage
// (and, for commits holding actions this build does not know, every string
// in them), with the versions whose state holds each. The regular files
// under data/ and _coverage/, and the commit and CURRENT temporary files
// in _timeseries_log/, are then classified. Only files of a shape a writer
// creates (an append's data/_managed/append/<uuid>.parquet, a staged
// entity-rewrite segment, a .roar file in _coverage/segments/ or
// _coverage/table/, a .<version>.json.tmp-<hex> or CURRENT.tmp-<hex>) are
// ever removable, for one of two reasons:
//
//   - unreferenced: no commit names the file, and it was modified strictly
//     before opts.OlderThan (orphan cleanup, as in the reference);
//   - expired: commits name the file, but only expired versions held it
//     (see retention.go): a segment, and its sidecar, removed by commit r
//     when version r-1 is expired; a table coverage snapshot replaced by
//     the next pointer at commit c when version c-1 is expired. The keep
//     window is opts.KeepSnapshots or the table's. Files of the newest
//     version, files a later commit added again, files named by actions
//     this build does not know and the segment-union marker never expire.
//
// Commit files, CURRENT and _timeseries_log/_orphaned/ are never touched
// (the 0.9.0 package replays the log from commit 1), nor are directories.
//
// A dry run (the default) changes nothing. Apply re-reads the log (a commit
// made meanwhile may now reference a planned file, add an expired one
// again or widen the keep window, which then applies), re-stats each file and
// skips one whose size or time changed, deletes, and syncs the directories
// it deleted from. A deletion that fails leaves the file as removable with
// reason delete_failed; the report is then returned with an ErrStorage
// error naming the failures.
//
// Running writers are protected by the cutoff only: their uncommitted
// files are young. A cutoff of now must only be used when no writer runs.
// Readers of older versions are protected by the keep window: StateAt
// refuses the versions whose files an expiry may have deleted.
func (t *Table) Vacuum(ctx context.Context, opts *VacuumOptions) (*VacuumReport, error) {
	if opts == nil {
		opts = DefaultVacuumOptions()
	}
	now := t.opts.now()
	cutoff := opts.OlderThan
	if cutoff.IsZero() {
		cutoff = now.Add(-DefaultVacuumRetention)
	}
	if cutoff.After(now) {
		return nil, invalidf("vacuum: older_than %s is in the future (now %s); files younger than the cutoff may belong to a running writer",
			cutoff.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	if opts.KeepSnapshots != nil && *opts.KeepSnapshots < 0 {
		return nil, invalidf("vacuum: keep_snapshots %s is negative", *opts.KeepSnapshots)
	}
	// List first, then replay: a file created and committed before the
	// replay ends is seen as referenced.
	files, err := t.vacuumFiles(ctx)
	if err != nil {
		return nil, err
	}
	lives := newFileLives()
	version, err := t.vacuumWalk(ctx, lives)
	if err != nil {
		return nil, err
	}
	keep := lives.keep()
	if opts.KeepSnapshots != nil {
		keep = *opts.KeepSnapshots
	}
	superseded := now.Add(-keep)
	// Commit files the replay did not reach (above the newest valid one)
	// and set-aside ones may name files too: a file whose path appears in
	// their bytes is kept.
	unreplayed, err := t.unreplayedLogBytes(version)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if bytes.Contains(unreplayed, []byte(f.path)) {
			lives.named[f.path], lives.pinned[f.path] = true, true
		}
	}
	expired := lives.expired(superseded)
	rep := &VacuumReport{Version: version, OlderThan: cutoff, Applied: opts.Apply, KeepSnapshots: keep, SupersededBefore: superseded}
	for _, f := range files {
		a := VacuumArtifact{Path: f.path, Size: f.info.Size, ModTime: f.info.ModTime, Kind: vacuumKind(f.path), Disposition: VacuumRetained}
		switch {
		case expired[f.path] && a.Kind != "":
			a.Disposition, a.Reason = VacuumRemovable, VacuumExpired
		case lives.named[f.path]:
			a.Reason = VacuumReferenced
		case a.Kind == "":
			a.Reason = VacuumUnrecognized
		case !f.info.ModTime.Before(cutoff):
			a.Reason = VacuumWithinRetention
		default:
			a.Disposition, a.Reason = VacuumRemovable, VacuumUnreferenced
		}
		rep.Artifacts = append(rep.Artifacts, a)
	}
	var applyErr error
	if opts.Apply {
		applyErr = t.vacuumApply(ctx, rep, lives, opts.KeepSnapshots != nil)
	}
	rep.total()
	return rep, applyErr
}

type vacuumFile struct {
	path string
	info storage.FileInfo
}

// vacuumFiles lists the regular files under data/ and _coverage/ and the
// temporary files in _timeseries_log/ (commit files, CURRENT and the
// _orphaned directory are left out), sorted by path.
func (t *Table) vacuumFiles(ctx context.Context) ([]vacuumFile, error) {
	var out []vacuumFile
	var walk func(dir string) error
	walk = func(dir string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		names, err := t.fs.List(dir)
		if storage.IsNotExist(err) {
			return nil // a table without appends has no data/ yet
		}
		if err != nil {
			return storageErr("vacuum: list "+dir, err)
		}
		for _, n := range names {
			p := path.Join(dir, n)
			info, err := t.fs.Stat(p)
			if storage.IsNotExist(err) {
				continue // removed while listing
			}
			if err != nil {
				return storageErr("vacuum: stat "+p, err)
			}
			if info.Symlink {
				continue // never follow or delete a link: it may lead out of the table
			}
			if info.IsDir {
				if dir == LogDir {
					continue // _orphaned holds set-aside commit files
				}
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			if dir == LogDir && (p == currentPath || reCommitFile.MatchString(p)) {
				continue // the log itself is never vacuumed
			}
			out = append(out, vacuumFile{path: p, info: info})
		}
		return nil
	}
	for _, d := range []string{"data", "_coverage", LogDir} {
		if err := walk(d); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

// vacuumWalk refreshes the handle and follows in lives every commit after
// lives.version up to the newest, whose version it returns. The newest
// state's files are pinned.
func (t *Table) vacuumWalk(ctx context.Context, lives *fileLives) (uint64, error) {
	st, err := t.Refresh(ctx)
	if err != nil {
		return 0, err
	}
	// Deleting files of a table whose writer features this build does not
	// know could remove what a newer writer relies on.
	if err := st.Meta.CheckWrite(); err != nil {
		return 0, err
	}
	for v := lives.version + 1; v <= st.Version; v++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		c, err := t.log.readCommit(v)
		if storage.IsNotExist(err) {
			return 0, corruptf(CommitPath(v), v, nil, "commit %d is missing", v)
		}
		if err != nil {
			return 0, err
		}
		if err := lives.add(c); err != nil {
			return 0, err
		}
		if len(c.Skipped) > 0 {
			// Actions this build does not know may name files: keep every
			// string the commit holds.
			if err := t.referencedStrings(v, lives.named, lives.pinned); err != nil {
				return 0, err
			}
		}
	}
	lives.pinState(st)
	return st.Version, nil
}

// unreplayedLogBytes returns the contents of the commit files above
// version (which a replay could not apply: torn, or from a newer writer)
// and of the files set aside in _timeseries_log/_orphaned, concatenated.
func (t *Table) unreplayedLogBytes(version uint64) ([]byte, error) {
	var out []byte
	for _, dir := range []string{LogDir, orphanDir} {
		names, err := t.fs.List(dir)
		if storage.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, storageErr("vacuum: list "+dir, err)
		}
		for _, n := range names {
			p := path.Join(dir, n)
			if dir == LogDir {
				m := reCommitFile.FindString(p)
				if m == "" {
					continue
				}
				v, err := strconv.ParseUint(strings.TrimSuffix(path.Base(p), ".json"), 10, 64)
				if err != nil || v <= version {
					continue
				}
			}
			data, err := t.fs.ReadFile(p)
			if storage.IsNotExist(err) {
				continue
			}
			if err != nil {
				if info, serr := t.fs.Stat(p); serr == nil && info.IsDir {
					continue
				}
				return nil, storageErr("vacuum: read "+p, err)
			}
			out = append(append(out, data...), '\n')
		}
	}
	return out, nil
}

// referencedStrings adds every JSON string of commit v to each of sets.
func (t *Table) referencedStrings(v uint64, sets ...map[string]bool) error {
	data, err := t.fs.ReadFile(CommitPath(v))
	if err != nil {
		return storageErr("read "+CommitPath(v), err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return corruptf(CommitPath(v), v, err, "malformed commit")
	}
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case string:
			for _, refs := range sets {
				refs[x] = true
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	return nil
}

// vacuumApply deletes the removable artifacts of rep. lives is the walk
// that planned them; override says the keep window was the caller's.
func (t *Table) vacuumApply(ctx context.Context, rep *VacuumReport, lives *fileLives, override bool) error {
	// A commit made since planning may reference a planned file, add a
	// removed one again, or widen the keep window.
	version, err := t.vacuumWalk(ctx, lives)
	if err != nil {
		return err
	}
	rep.Version = version
	if keep := lives.keep(); !override && keep > rep.KeepSnapshots {
		rep.SupersededBefore = rep.SupersededBefore.Add(rep.KeepSnapshots - keep)
		rep.KeepSnapshots = keep
	}
	expired := lives.expired(rep.SupersededBefore)
	dirs := map[string]bool{}
	var failed []string
	for i := range rep.Artifacts {
		a := &rep.Artifacts[i]
		if a.Disposition != VacuumRemovable {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if a.Reason == VacuumExpired && !expired[a.Path] || a.Reason != VacuumExpired && lives.named[a.Path] {
			a.Disposition, a.Reason = VacuumRetained, VacuumReferenced
			continue
		}
		info, err := t.fs.Stat(a.Path)
		switch {
		case storage.IsNotExist(err):
			a.Disposition = VacuumAlreadyAbsent
			continue
		case err != nil:
			a.Reason, a.Error = VacuumDeleteFailed, err.Error()
			failed = append(failed, a.Path+": "+err.Error())
			continue
		case info.Size != a.Size || !info.ModTime.Equal(a.ModTime) || info.IsDir:
			a.Disposition, a.Reason = VacuumRetained, VacuumChanged
			continue
		}
		err = t.fs.Remove(a.Path)
		switch {
		case err == nil:
			a.Disposition = VacuumDeleted
			dirs[path.Dir(a.Path)] = true
		case storage.IsNotExist(err):
			a.Disposition = VacuumAlreadyAbsent
		default:
			a.Reason, a.Error = VacuumDeleteFailed, err.Error()
			failed = append(failed, a.Path+": "+err.Error())
		}
	}
	var syncErrs []error
	for _, d := range sortedKeys(dirs) {
		if err := t.fs.SyncDir(d); err != nil {
			syncErrs = append(syncErrs, storageErr("vacuum: sync "+d, err))
		}
	}
	if len(failed) > 0 {
		syncErrs = append(syncErrs, fmt.Errorf("%w: vacuum could not delete %d file(s): %s", ErrStorage, len(failed), strings.Join(failed, "; ")))
	}
	return errors.Join(syncErrs...)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// total fills the report's totals.
func (r *VacuumReport) total() {
	r.Files = len(r.Artifacts)
	for _, a := range r.Artifacts {
		if a.Reason == VacuumExpired {
			r.Expired++
		}
		switch a.Disposition {
		case VacuumRetained:
			r.Retained++
			if a.Reason == VacuumReferenced {
				r.Referenced++
			}
		case VacuumRemovable:
			r.Removable++
			r.RemovableBytes += a.Size
		case VacuumDeleted:
			r.Deleted++
			r.DeletedBytes += a.Size
		case VacuumAlreadyAbsent:
			r.AlreadyAbsent++
		}
	}
}
