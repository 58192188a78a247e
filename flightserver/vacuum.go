// The vacuum action: orphan-file cleanup and expiry of one table
// (tableformat's Vacuum) over DoAction, a dry run unless "apply" is true.

package flightserver

import (
	"context"
	"time"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// ActionVacuum names the vacuum action.
const ActionVacuum = "vacuum"

type vacuumRequest struct {
	Table string `json:"table"`
	// OlderThan is an RFC 3339 cutoff; nil means now minus
	// tableformat.DefaultVacuumRetention.
	OlderThan *string `json:"older_than,omitempty"`
	// Retention is a Go duration ("2h", "30m"): the cutoff is the
	// server's now minus it. At most one of OlderThan and Retention.
	Retention *string `json:"retention,omitempty"`
	// KeepSnapshots is a Go duration: the keep window of this run instead
	// of the table's tsflight.keep-snapshots property.
	KeepSnapshots *string `json:"keep_snapshots,omitempty"`
	Apply         bool    `json:"apply,omitempty"`
}

// VacuumArtifact is one file of a vacuum answer.
type VacuumArtifact struct {
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	Modified    string `json:"modified"`
	Kind        string `json:"kind"`
	Disposition string `json:"disposition"`
	Reason      string `json:"reason"`
	Error       string `json:"error,omitempty"`
}

// VacuumTotals counts a vacuum answer's files by disposition.
type VacuumTotals struct {
	Files          int   `json:"files"`
	Referenced     int   `json:"referenced"`
	Retained       int   `json:"retained"`
	Removable      int   `json:"removable"`
	Deleted        int   `json:"deleted"`
	AlreadyAbsent  int   `json:"already_absent"`
	Expired        int   `json:"expired"`
	RemovableBytes int64 `json:"removable_bytes"`
	DeletedBytes   int64 `json:"deleted_bytes"`
}

// VacuumResult is the answer of the vacuum action.
type VacuumResult struct {
	Table     string `json:"table"`
	Version   uint64 `json:"version"`
	OlderThan string `json:"older_than"`
	// KeepSnapshots is the keep window used (a Go duration) and
	// SupersededBefore the cutoff it gave: versions superseded before it
	// are expired.
	KeepSnapshots    string           `json:"keep_snapshots"`
	SupersededBefore string           `json:"superseded_before"`
	Applied          bool             `json:"applied"`
	Artifacts        []VacuumArtifact `json:"artifacts"`
	Totals           VacuumTotals     `json:"totals"`
}

func (s *Service) vacuum(ctx context.Context, body []byte) (any, error) {
	var req vacuumRequest
	if err := decodeJSON(ActionVacuum, body, &req); err != nil {
		return nil, err
	}
	opts := tableformat.DefaultVacuumOptions()
	opts.Apply = req.Apply
	if req.OlderThan != nil {
		t, err := time.Parse(time.RFC3339Nano, *req.OlderThan)
		if err != nil {
			return nil, invalidf("vacuum: older_than %q is not an RFC 3339 time (for example 2024-06-01T00:00:00Z)", *req.OlderThan)
		}
		opts.OlderThan = t
	}
	if req.Retention != nil {
		d, err := time.ParseDuration(*req.Retention)
		switch {
		case req.OlderThan != nil:
			return nil, invalidf("vacuum: give older_than or retention, not both")
		case err != nil:
			return nil, invalidf("vacuum: retention %q is not a duration (for example 2h or 30m)", *req.Retention)
		case d < 0:
			return nil, invalidf("vacuum: retention %q is negative: the cutoff would be in the future", *req.Retention)
		}
		opts.OlderThan = time.Now().Add(-d)
	}
	if req.KeepSnapshots != nil {
		d, err := time.ParseDuration(*req.KeepSnapshots)
		switch {
		case err != nil:
			return nil, invalidf("vacuum: keep_snapshots %q is not a duration (for example 168h, 30m or 0s)", *req.KeepSnapshots)
		case d < 0:
			return nil, invalidf("vacuum: keep_snapshots %q is negative", *req.KeepSnapshots)
		}
		opts.KeepSnapshots = &d
	}
	tb, err := s.Table(ctx, req.Table)
	if err != nil {
		return nil, err
	}
	rep, err := tb.Vacuum(ctx, opts)
	if err != nil {
		// A partial Apply comes back with a report too; the error (which
		// names every failed file) is what the client gets.
		return nil, &catalog.TableError{Name: req.Table, Err: err}
	}
	if rep.Applied {
		s.log.Info("vacuum applied", "table", req.Table, "deleted", rep.Deleted, "expired", rep.Expired, "deleted_bytes", rep.DeletedBytes, "by", guard.CallerName(ctx))
	}
	out := VacuumResult{
		Table: req.Table, Version: rep.Version, OlderThan: rep.OlderThan.UTC().Format(time.RFC3339Nano), Applied: rep.Applied,
		KeepSnapshots: rep.KeepSnapshots.String(), SupersededBefore: rep.SupersededBefore.UTC().Format(time.RFC3339Nano),
		Artifacts: make([]VacuumArtifact, len(rep.Artifacts)),
		Totals: VacuumTotals{Files: rep.Files, Referenced: rep.Referenced, Retained: rep.Retained, Removable: rep.Removable,
			Deleted: rep.Deleted, AlreadyAbsent: rep.AlreadyAbsent, Expired: rep.Expired, RemovableBytes: rep.RemovableBytes, DeletedBytes: rep.DeletedBytes},
	}
	for i, a := range rep.Artifacts {
		out.Artifacts[i] = VacuumArtifact{Path: a.Path, Size: a.Size, Modified: a.ModTime.UTC().Format(time.RFC3339Nano), Kind: a.Kind,
			Disposition: string(a.Disposition), Reason: string(a.Reason), Error: a.Error}
	}
	return out, nil
}
