package tableformat

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Checkpoint finding codes. NB: clients see these strings.
const (
	// CheckCheckpointCorrupt: a checkpoint that cannot be read or decoded
	// (torn, damaged, another format). Readers ignore it.
	CheckCheckpointCorrupt = "checkpoint_corrupt"
	// CheckCheckpointStale: a checkpoint whose commits are not the ones on
	// disk (the table was replaced or rewound). Readers ignore it.
	CheckCheckpointStale = "checkpoint_stale"
	// CheckCheckpointUnverified: a checkpoint beyond the last commit that
	// replays from commit 1; tsflight readers open the table through it.
	CheckCheckpointUnverified = "checkpoint_unverified"
	// CheckCheckpointMismatch: a checkpoint that is valid by itself and
	// names the commits on disk, but whose state is not the one replaying
	// those commits gives. Readers would use it.
	CheckCheckpointMismatch = "checkpoint_mismatch"
)

// checkCheckpoints verifies every checkpoint in _timeseries_log/_checkpoints/:
// it must decode, name the commits on disk, and hold exactly the state a
// replay of the log from commit 1 gives at its version. It runs after the
// log check (r.st is the newest state that replayed). Nothing is
// repairable: a bad checkpoint is deleted by hand (readers fall back to an
// older one or to the log), and writers prune old ones.
func (r *checkRun) checkCheckpoints(ctx context.Context) {
	versions, _, err := r.log.listCheckpoints()
	if err != nil {
		r.add(CheckFinding{Severity: CheckWarning, Code: CheckCheckpointCorrupt, Path: checkpointDir,
			Problem: fmt.Sprintf("the checkpoint directory cannot be listed: %v; readers replay the whole log", err),
			Action:  "check the permissions of " + checkpointDir})
		return
	}
	newest := r.st.versionOrZero()
	var full *State // the full replay, advanced from checkpoint to checkpoint
	var cache logDigests
	slices.Sort(versions)
	for _, v := range versions {
		if ctx.Err() != nil {
			return
		}
		p := checkpointPath(v)
		st, stale, err := r.readCheckpointForCheck(v, &cache)
		switch {
		case err != nil:
			r.add(CheckFinding{Severity: CheckWarning, Code: CheckCheckpointCorrupt, Path: p, Version: v,
				Problem: fmt.Sprintf("the checkpoint cannot be used: %v; readers ignore it", err),
				Action:  "delete it; the next checkpoint a writer writes replaces it"})
		case stale != nil:
			r.add(CheckFinding{Severity: CheckWarning, Code: CheckCheckpointStale, Path: p, Version: v,
				Problem: fmt.Sprintf("%v; readers ignore it", stale),
				Action:  "delete it (it belongs to another table or history)"})
		case v > newest:
			r.add(CheckFinding{Severity: CheckWarning, Code: CheckCheckpointUnverified, Path: p, Version: v,
				Problem: fmt.Sprintf("the log replays from commit 1 only up to version %d, so the checkpoint of version %d cannot be verified; tsflight readers open the table through it, while timeseries-table-format 0.9.0 replays the log", newest, v),
				Action:  "repair the log first (see the commit findings)"})
		default:
			base := full
			if base == nil {
				base = &State{} // from commit 1 (see replayLogTo)
			}
			if full, err = r.log.replayTo(ctx, base, v); err != nil {
				return // the log check has reported it
			}
			if !sameCheckpointState(st, full) {
				r.add(CheckFinding{Severity: CheckError, Code: CheckCheckpointMismatch, Path: p, Version: v,
					Problem: fmt.Sprintf("the checkpoint holds another state than replaying commits 1 to %d gives (%d live segments against %d); tsflight readers open the table with it", v, len(st.Segments), len(full.Segments)),
					Action:  "delete " + p + " now; readers then use an older checkpoint or the log"})
			}
		}
	}
}

// readCheckpointForCheck reads and decodes checkpoint v: err when it cannot
// be used at all, stale when it does not name the commits on disk.
func (r *checkRun) readCheckpointForCheck(v uint64, cache *logDigests) (st *State, stale, err error) {
	data, err := r.fsys.ReadFile(checkpointPath(v))
	if err != nil {
		return nil, nil, storageErr("read "+checkpointPath(v), err)
	}
	if st, _, err = decodeCheckpoint(data); err != nil {
		return nil, nil, err
	}
	if st.Version != v {
		return nil, nil, fmt.Errorf("the file holds version %d", st.Version)
	}
	h, _ := parseCheckpointHeader(data)
	if err := r.log.matchesLog(&h, cache); errors.Is(err, ErrStorage) {
		return nil, nil, err
	} else if err != nil {
		return nil, err, nil
	}
	return st, nil, nil
}
