// Vacuum: orphan-file cleanup. It finds the files an append (or another
// writer of the format) created but never committed, typically because the
// process died mid-append, and removes them when asked to.

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
	// OlderThan is the cutoff used.
	OlderThan time.Time
	// Applied is true when deletions were made (VacuumOptions.Apply).
	Applied   bool
	Artifacts []VacuumArtifact
	// Totals.
	Files, Referenced, Retained, Removable, Deleted, AlreadyAbsent int
	RemovableBytes, DeletedBytes                                   int64
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

// Vacuum lists the files of the table that no commit references and, with
// opts.Apply, deletes those that are safe to delete. It is orphan-file
// cleanup only, as in the reference implementation: history is never
// expired, so a file any commit of the log ever named (a live segment, a
// removed one, an old coverage snapshot) is kept.
//
// The whole log is replayed to collect every path named by AddSegment
// (segment and coverage sidecar), RemoveSegment and UpdateTableCoverage
// (and, for commits holding actions this build does not know, every string
// in them). The regular files under data/ and _coverage/, and the commit
// and CURRENT temporary files in _timeseries_log/, are then classified: a
// file is removable only when no commit references it, it has a shape a
// writer creates (an append's data/_managed/append/<uuid>.parquet, a
// staged entity-rewrite segment, a .roar file in _coverage/segments/ or
// _coverage/table/, a .<version>.json.tmp-<hex> or CURRENT.tmp-<hex>), and
// it was modified strictly before opts.OlderThan. Commit files, CURRENT
// and _timeseries_log/_orphaned/ are never touched, nor are directories.
//
// A dry run (the default) changes nothing. Apply re-reads the log (a commit
// made meanwhile may now reference a planned file), re-stats each file and
// skips one whose size or time changed, deletes, and syncs the directories
// it deleted from. A deletion that fails leaves the file as removable with
// reason delete_failed; the report is then returned with an ErrStorage
// error naming the failures.
//
// Running writers are protected by the cutoff only: their uncommitted
// files are young. A cutoff of now must only be used when no writer runs.
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
	// List first, then replay: a file created and committed before the
	// replay ends is seen as referenced.
	files, err := t.vacuumFiles(ctx)
	if err != nil {
		return nil, err
	}
	version, refs, err := t.vacuumReferences(ctx, 0, nil)
	if err != nil {
		return nil, err
	}
	// Commit files the replay did not reach (above the newest valid one)
	// and set-aside ones may name files too: a file whose path appears in
	// their bytes is kept.
	unreplayed, err := t.unreplayedLogBytes(version)
	if err != nil {
		return nil, err
	}
	rep := &VacuumReport{Version: version, OlderThan: cutoff, Applied: opts.Apply}
	for _, f := range files {
		a := VacuumArtifact{Path: f.path, Size: f.info.Size, ModTime: f.info.ModTime, Kind: vacuumKind(f.path), Disposition: VacuumRetained}
		if !refs[f.path] && bytes.Contains(unreplayed, []byte(f.path)) {
			refs[f.path] = true
		}
		switch {
		case refs[f.path]:
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
		applyErr = t.vacuumApply(ctx, rep, refs)
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

// vacuumReferences refreshes the handle and adds to refs (nil: a new set)
// every path named by commits from+1 up to the newest. It returns the
// newest version and the set.
func (t *Table) vacuumReferences(ctx context.Context, from uint64, refs map[string]bool) (uint64, map[string]bool, error) {
	st, err := t.Refresh(ctx)
	if err != nil {
		return 0, nil, err
	}
	// Deleting files of a table whose writer features this build does not
	// know could remove what a newer writer relies on.
	if err := st.Meta.CheckWrite(); err != nil {
		return 0, nil, err
	}
	if refs == nil {
		refs = map[string]bool{}
	}
	for v := from + 1; v <= st.Version; v++ {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		c, err := t.log.readCommit(v)
		if storage.IsNotExist(err) {
			return 0, nil, corruptf(CommitPath(v), v, nil, "commit %d is missing", v)
		}
		if err != nil {
			return 0, nil, err
		}
		for _, a := range c.Actions {
			switch a := a.(type) {
			case AddSegment:
				refs[a.Segment.Path] = true
				if a.Segment.CoveragePath != "" {
					refs[a.Segment.CoveragePath] = true
				}
			case RemoveSegment:
				refs[a.Path] = true
			case UpdateTableCoverage:
				refs[a.Coverage.Path] = true
			}
		}
		if len(c.Skipped) > 0 {
			// Actions this build does not know may name files: keep every
			// string the commit holds.
			if err := t.referencedStrings(v, refs); err != nil {
				return 0, nil, err
			}
		}
	}
	return st.Version, refs, nil
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

// referencedStrings adds every JSON string of commit v to refs.
func (t *Table) referencedStrings(v uint64, refs map[string]bool) error {
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
			refs[x] = true
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

// vacuumApply deletes the removable artifacts of rep.
func (t *Table) vacuumApply(ctx context.Context, rep *VacuumReport, refs map[string]bool) error {
	// A commit made since planning may reference a planned file.
	version, refs, err := t.vacuumReferences(ctx, rep.Version, refs)
	if err != nil {
		return err
	}
	rep.Version = version
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
		if refs[a.Path] {
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
