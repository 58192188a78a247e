// Check, the repair: what is safely repairable, as ordinary commits.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/google/uuid"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// checkRepair is what a repair did.
type checkRepair struct {
	what string
	ok   bool
}

// repair fixes the repairable findings and returns what it did, by code
// and path of the finding.
func (r *checkRun) repair(ctx context.Context) map[string]checkRepair {
	done := map[string]checkRepair{}
	if r.st != nil && r.st.Meta != nil && r.st.Meta.NeedsUpgrade() {
		// A format-6 table is read-only: not even CURRENT is written.
		for _, f := range r.rep.Findings {
			if f.Repairable {
				done[f.Code+"\x00"+f.Path] = checkRepair{what: "not repaired: " + r.st.Meta.CheckWrite().Error()}
			}
		}
		return done
	}
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
	if table != nil && table.Path == unionCoveragePath {
		key := table.Code + "\x00" + table.Path
		if err := r.restoreUnionMarker(); err != nil {
			done[key] = checkRepair{what: "could not write the segment-union marker: " + err.Error()}
		} else {
			done[key] = checkRepair{what: "wrote the segment-union marker " + unionCoveragePath, ok: true}
			r.opts.logger().Info("check: wrote the segment-union marker", "path", unionCoveragePath)
		}
	} else if table != nil {
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

// restoreUnionMarker replaces a missing or damaged segment-union marker.
// The damaged file is removed first (never renamed over: the marker is
// created by a hard link, like a commit); in between, readers find no
// marker, which they handle as they handle the marker itself.
func (r *checkRun) restoreUnionMarker() error {
	tb := newTable(r.fsys, r.opts)
	if err := tb.union.check(tb); err == nil {
		return nil
	} else if !storage.IsNotExist(err) {
		if rerr := r.fsys.Remove(unionCoveragePath); rerr != nil && !storage.IsNotExist(rerr) {
			return storageErr("remove "+unionCoveragePath, rerr)
		}
	}
	return tb.union.ensure(tb)
}
