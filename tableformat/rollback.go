// Rollback: one ordinary commit, on top of the newest version, that makes
// the table's content what an older version's was. Nothing is rewritten
// and no history is lost: the commit removes the segments the older
// version did not have, adds back (with the exact SegmentMeta it recorded)
// those it had and that are no longer live, and points the table coverage
// where that version's pointed. Every version before the rollback stays
// readable (within the keep window), so a rollback is undone by another
// rollback to the version before it.
//
// A rollback refuses, writing nothing, when it could not make the content
// equal: the version is expired (StateAt's keep window), a file it needs is
// gone (vacuumed), or the metadata changed since (protocol 7 cannot remove
// columns). It never retries over a concurrent commit: the plan removes
// every segment the older version lacked as of the planned-on version, and
// a retry on a newer one would silently drop what that commit added.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// RollbackOptions tune one [Table.Rollback]. The zero value (also
// [DefaultRollbackOptions]) commits the rollback.
type RollbackOptions struct {
	// DryRun plans and reports what would be removed and added, reading
	// only the log and checking that the files the version needs exist;
	// it writes and commits nothing.
	DryRun bool
}

// DefaultRollbackOptions returns the defaults: not a dry run.
func DefaultRollbackOptions() *RollbackOptions { return &RollbackOptions{} }

// RollbackReport says what a [Table.Rollback] did, or would do.
type RollbackReport struct {
	// StartingVersion is the newest version the rollback was planned on.
	StartingVersion uint64 `json:"starting_version"`
	// TargetVersion is the version whose content the table gets back.
	TargetVersion uint64 `json:"target_version"`
	// CommittedVersion is the rollback commit (0 when nothing was
	// committed: a dry run, a no-op, an unknown outcome).
	CommittedVersion uint64 `json:"committed_version"`
	DryRun           bool   `json:"dry_run"`
	// NoOp is true when the live segments already are the target's (the
	// versions in between changed only properties or metadata-free
	// markers): nothing to commit.
	NoOp bool `json:"no_op"`
	// Removed are the live segments the target did not have, Added the
	// target's segments that were no longer live, in log order.
	Removed []string `json:"removed"`
	Added   []string `json:"added"`
	// RowsBefore is the row count of the starting version, RowsAfter that
	// of the target (and of the rollback commit).
	RowsBefore uint64 `json:"rows_before"`
	RowsAfter  uint64 `json:"rows_after"`
	// Coverage is the table coverage pointer the rollback commit sets
	// (the target's, or the segment-union marker).
	Coverage string `json:"coverage"`
}

// testHookRollbackBeforeCommit, when set by a test, runs after the plan,
// just before the rollback commits (to stage a concurrent writer).
var testHookRollbackBeforeCommit func()

// Rollback makes the table's content equal to version's, in one new
// commit on top of the newest version, and reports what it changed.
//
// Errors (nothing is written on any of them): ErrInvalidInput when version
// is 0 or the newest version itself; ErrNotFound when version is newer
// than the newest, expired under the keep window (StateAt's error, which
// names the window), or when a segment, sidecar or coverage snapshot it
// needs is missing (the error names the file); ErrUnsupported when the
// table's columns or protocol features changed since version
// (protocol 7 cannot remove a column; the error names the columns added);
// ErrConflict when another writer committed after the rollback was planned
// (the error names the new version; plan again on it). An ambiguous
// commit outcome (ErrAmbiguousOutcome) comes with the report.
func (t *Table) Rollback(ctx context.Context, version uint64, opts *RollbackOptions) (*RollbackReport, error) {
	if opts == nil {
		opts = DefaultRollbackOptions()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cur, err := t.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if err := cur.Meta.CheckWrite(); err != nil {
		return nil, err
	}
	switch {
	case version == 0:
		return nil, invalidf("rollback: version must be at least 1")
	case version == cur.Version:
		return nil, invalidf("rollback: version %d is the table's newest version; there is nothing to roll back", version)
	case version > cur.Version:
		return nil, fmt.Errorf("%w: rollback: version %d does not exist (the table's newest version is %d)", ErrNotFound, version, cur.Version)
	}
	target, err := t.StateAt(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("cannot roll back to version %d: %w", version, err)
	}
	if err := sameMetaForRollback(target, cur); err != nil {
		return nil, err
	}
	plan := planRollback(cur, target)
	rep := &RollbackReport{StartingVersion: cur.Version, TargetVersion: version, DryRun: opts.DryRun,
		Removed: plan.removed, Added: plan.addedPaths(), RowsBefore: cur.RowCount(), RowsAfter: target.RowCount()}
	if len(plan.removed) == 0 && len(plan.added) == 0 {
		rep.NoOp = true
		return rep, nil
	}
	pointer, err := t.rollbackCoverage(target, plan)
	if err != nil {
		return nil, err
	}
	rep.Coverage = pointer.Path
	if opts.DryRun {
		return rep, nil
	}
	if pointer.Path == unionCoveragePath {
		// The marker must exist before a commit names it.
		if err := t.union.ensure(t); err != nil {
			return nil, err
		}
	}
	if h := testHookRollbackBeforeCommit; h != nil {
		h()
	}
	// Vacuum may have run since the plan: the last look before the commit.
	if err := t.checkRollbackFiles(version, plan, pointer); err != nil {
		return nil, err
	}
	next, err := t.commitState(ctx, cur.Version, plan.actions(pointer))
	if err == nil {
		rep.CommittedVersion = next.Version
		if c := t.covCache.get(target.Version); c != nil {
			t.covCache.put(next, c) // the same segments' union
		}
		return rep, nil
	}
	if errors.Is(err, ErrAmbiguousOutcome) {
		return rep, fmt.Errorf("%w (the rollback to version %d; reopen the table to see whether it was committed)", err, version)
	}
	if errors.Is(err, ErrConflict) {
		return nil, t.rollbackConflict(ctx, cur.Version, version, err)
	}
	return nil, err
}

// rollbackConflict is the error of a rollback whose planned-on version is
// no longer the newest: it names the version the table moved to.
func (t *Table) rollbackConflict(ctx context.Context, planned, version uint64, cause error) error {
	newest := planned + 1 // a lost race means at least this one exists
	var ce *ConflictError
	if errors.As(cause, &ce) && ce.Found > newest {
		newest = ce.Found
	}
	if st, err := t.Refresh(context.WithoutCancel(ctx)); err == nil && st.Version > newest {
		newest = st.Version
	}
	return fmt.Errorf("%w: the table changed since the rollback to version %d was planned on version %d: version %d was committed meanwhile; "+
		"nothing was committed (a rollback never retries, so that it cannot drop that commit's data unseen): check the table and run the rollback again",
		ErrConflict, version, planned, newest)
}

// rollbackPlan is the segment exchange of a rollback.
type rollbackPlan struct {
	removed []string      // live now, not in the target
	added   []SegmentMeta // in the target, not live now
}

// planRollback compares the live segments of cur with target's.
func planRollback(cur, target *State) *rollbackPlan {
	p := &rollbackPlan{removed: []string{}, added: []SegmentMeta{}}
	for i := range cur.Segments {
		if _, ok := target.byPath[cur.Segments[i].Path]; !ok {
			p.removed = append(p.removed, cur.Segments[i].Path)
		}
	}
	for i := range target.Segments {
		if _, ok := cur.byPath[target.Segments[i].Path]; !ok {
			p.added = append(p.added, target.Segments[i])
		}
	}
	return p
}

func (p *rollbackPlan) addedPaths() []string {
	out := make([]string, len(p.added))
	for i := range p.added {
		out[i] = p.added[i].Path
	}
	return out
}

// actions is the rollback commit: the removals, the additions, and the
// coverage pointer. The pointer is always set, even when it does not
// change: a commit that sets it tells coverage loads not to extend the
// union of a version before it (coverage shrank here; see loadCoverage).
func (p *rollbackPlan) actions(pointer CoveragePointer) []Action {
	out := make([]Action, 0, len(p.removed)+len(p.added)+1)
	for _, path := range p.removed {
		out = append(out, RemoveSegment{Path: path})
	}
	for _, seg := range p.added {
		out = append(out, AddSegment{Segment: seg})
	}
	return append(out, UpdateTableCoverage{Coverage: pointer})
}

// rollbackCoverage chooses the coverage pointer of the rollback commit:
// the target's table coverage snapshot when it had one and the file is
// still there (its content is the target's coverage), else the
// segment-union marker (the union of the target's sidecars, which are
// checked to exist). It also checks the added segments' files.
func (t *Table) rollbackCoverage(target *State, plan *rollbackPlan) (CoveragePointer, error) {
	pointer := unionPointer(target.Index().Kind)
	if target.Coverage != nil && !target.coverageIsUnion() {
		if _, err := t.fs.Stat(target.Coverage.Path); err == nil {
			pointer = *target.Coverage
		} else if !storage.IsNotExist(err) {
			return CoveragePointer{}, storageErr("stat "+target.Coverage.Path, err)
		}
	}
	if pointer.Path == unionCoveragePath {
		// The union is built from the sidecars of every target segment,
		// the ones still live included.
		for i := range target.Segments {
			if target.Segments[i].CoveragePath == "" {
				return CoveragePointer{}, fmt.Errorf("%w: cannot roll back to version %d: its segment %s has no coverage sidecar, and no table coverage snapshot of that version is on disk to take its coverage from; nothing was committed",
					ErrNotFound, target.Version, target.Segments[i].Path)
			}
		}
	}
	if err := t.checkRollbackFiles(target.Version, plan, pointer); err != nil {
		return CoveragePointer{}, err
	}
	return pointer, nil
}

// checkRollbackFiles checks that every file the rollback commit names is
// on disk: the added segments (with their recorded size) and sidecars,
// and the coverage snapshot. A missing one is ErrNotFound naming it.
func (t *Table) checkRollbackFiles(version uint64, plan *rollbackPlan, pointer CoveragePointer) error {
	missing := func(what, p string) error {
		return fmt.Errorf("%w: cannot roll back to version %d: its %s %s is missing (deleted by vacuum, or by hand); nothing was committed",
			ErrNotFound, version, what, p)
	}
	for i := range plan.added {
		seg := &plan.added[i]
		info, err := t.fs.Stat(seg.Path)
		if storage.IsNotExist(err) {
			return missing("segment", seg.Path)
		}
		if err != nil {
			return storageErr("stat "+seg.Path, err)
		}
		if seg.FileSize != nil && info.Size != int64(*seg.FileSize) {
			return corruptf(seg.Path, version, nil, "cannot roll back to version %d: the segment holds %d bytes, its commit recorded %d", version, info.Size, *seg.FileSize)
		}
		if seg.CoveragePath == "" {
			continue
		}
		if _, err := t.fs.Stat(seg.CoveragePath); storage.IsNotExist(err) {
			return missing("coverage sidecar", seg.CoveragePath)
		} else if err != nil {
			return storageErr("stat "+seg.CoveragePath, err)
		}
	}
	if pointer.Path != unionCoveragePath {
		if _, err := t.fs.Stat(pointer.Path); storage.IsNotExist(err) {
			return missing("table coverage snapshot", pointer.Path)
		} else if err != nil {
			return storageErr("stat "+pointer.Path, err)
		}
	}
	return nil
}

// sameMetaForRollback refuses a rollback across a metadata change: the
// commit keeps the newest metadata (protocol 7 cannot remove a column,
// and protocol and features only move forward), so the target's must be
// the same. A target before the table had a schema (no segments then) is
// fine: its content, no rows, is the same under any schema. The index
// never changes (checkTransition), and a schema only by columns added at
// the end.
func sameMetaForRollback(target, cur *State) error {
	v := target.Version
	ts, cs := target.Schema(), cur.Schema()
	if ts == nil {
		return nil // no segments then: nothing to read under other metadata
	}
	if !ts.Equal(cs) {
		var added []string
		for _, f := range cs.Columns {
			if _, ok := ts.Column(f.Name); !ok {
				added = append(added, f.Name)
			}
		}
		return fmt.Errorf("%w: cannot roll back to version %d: columns were added since (%s) and protocol 7 cannot remove a column; nothing was committed",
			ErrUnsupported, v, strings.Join(added, ", "))
	}
	tm, cm := target.Meta, cur.Meta
	if tm.Protocol != cm.Protocol || !slices.Equal(tm.ReaderFeatures, cm.ReaderFeatures) || !slices.Equal(tm.WriterFeatures, cm.WriterFeatures) {
		return fmt.Errorf("%w: cannot roll back to version %d: the table's protocol or features changed since (protocol %d reader %v writer %v at version %d; protocol %d reader %v writer %v now) and they only move forward; nothing was committed",
			ErrUnsupported, v, tm.Protocol, tm.ReaderFeatures, tm.WriterFeatures, v, cm.Protocol, cm.ReaderFeatures, cm.WriterFeatures)
	}
	return nil
}
