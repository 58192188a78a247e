package tableformat

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// Last-value index finding codes. NB: clients see these strings.
const (
	// CheckLastValuesCorrupt: a persisted last-value index that cannot be
	// used (torn, damaged, another format, another log, beyond the log).
	// Readers ignore it.
	CheckLastValuesCorrupt = "last_values_corrupt"
	// CheckLastValuesMismatch: a persisted last-value index that is valid
	// by itself and names the commits on disk, but whose rows are not the
	// newest rows of the table at its version. Readers would use it.
	CheckLastValuesMismatch = "last_values_mismatch"
)

// checkLastValues verifies every persisted last-value index in
// _timeseries_log/_last/ (docs/format/last-values.md): it must read, name
// the commits on disk, and hold exactly the rows an index built from
// nothing at its version holds. It runs after the segment check (r.st is
// the newest state that replayed; a table whose segments cannot be read
// has those findings, and the comparison is skipped). Nothing is
// repairable: a bad index is deleted by hand, and readers rebuild it.
func (r *checkRun) checkLastValues(ctx context.Context) {
	tb := newTable(r.fsys, r.opts)
	versions, _, err := tb.listLastFiles()
	if err != nil {
		r.add(CheckFinding{Severity: CheckWarning, Code: CheckLastValuesCorrupt, Path: lastDir,
			Problem: fmt.Sprintf("the last-value index directory cannot be listed: %v; readers rebuild the index", err),
			Action:  "check the permissions of " + lastDir})
		return
	}
	newest := r.st.versionOrZero()
	var cache logDigests
	for _, v := range versions {
		if ctx.Err() != nil {
			return
		}
		p := LastValuesPath(v)
		corrupt := func(why string, args ...any) {
			r.add(CheckFinding{Severity: CheckWarning, Code: CheckLastValuesCorrupt, Path: p, Version: v,
				Problem: fmt.Sprintf(why, args...) + "; readers ignore it",
				Action:  "delete it; the index is rebuilt when next asked for"})
		}
		if v > newest {
			corrupt("the index is of version %d, beyond the newest version %d the log replays", v, newest)
			continue
		}
		st := r.st
		if v != newest {
			if st, err = r.log.replayTo(ctx, &State{}, v); err != nil {
				return // the log check has reported it
			}
		}
		x, err := tb.readLastIndex(ctx, st, v, &cache)
		if err != nil {
			if errors.Is(err, errLastStale) {
				corrupt("%v (another table or history)", err)
			} else {
				corrupt("the index cannot be used: %v", err)
			}
			continue
		}
		fresh, err := tb.buildLastIndex(ctx, st, nil)
		if err != nil {
			x.release()
			continue // the segment and sidecar findings say why
		}
		same, why := sameLastIndex(x, fresh)
		x.release()
		fresh.release()
		if !same {
			r.add(CheckFinding{Severity: CheckError, Code: CheckLastValuesMismatch, Path: p, Version: v,
				Problem: "the index does not hold the newest rows of the table at its version (" + why + "); tsflight readers answer last and lastpoint queries from it",
				Action:  "delete " + p + " now; readers then rebuild the index"})
		}
	}
}

// sameLastIndex compares a read index with a freshly built one.
func sameLastIndex(x, fresh *lastIndex) (bool, string) {
	if len(x.ids) != len(fresh.ids) {
		return false, fmt.Sprintf("%d rows, the table has %d entities", len(x.ids), len(fresh.ids))
	}
	for i := range x.ids {
		if !x.ids[i].Equal(fresh.ids[i]) || x.src[i] != fresh.src[i] || x.iv[i] != fresh.iv[i] {
			return false, fmt.Sprintf("row %d is %s from %s, want %s from %s", i, x.ids[i], x.src[i], fresh.ids[i], fresh.src[i])
		}
	}
	if fresh.rec == nil || x.rec == nil {
		return x.rec == nil && fresh.rec == nil, "rows missing"
	}
	rec, err := conformBatch(x.rec, fresh.rec.Schema())
	if err != nil {
		return false, err.Error()
	}
	defer rec.Release()
	if !array.RecordEqual(rec, fresh.rec) {
		return false, "the row values differ"
	}
	return true, ""
}
