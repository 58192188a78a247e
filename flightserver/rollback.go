// The rollback action: one commit that gives a table back an older
// version's content (tableformat's Rollback) over DoAction; "dry_run":
// true only reports what it would remove and add.

package flightserver

import (
	"context"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
)

// ActionRollback names the rollback action.
const ActionRollback = "rollback"

type rollbackRequest struct {
	Table   string  `json:"table"`
	Version *uint64 `json:"version"`
	DryRun  bool    `json:"dry_run,omitempty"`
}

// RollbackResult is the answer of the rollback action: the table's name
// and tableformat's report (starting_version, target_version,
// committed_version, dry_run, no_op, removed, added, rows_before,
// rows_after, coverage).
type RollbackResult struct {
	Table string `json:"table"`
	tableformat.RollbackReport
}

func (s *Service) rollback(ctx context.Context, body []byte) (any, error) {
	var req rollbackRequest
	tb, err := s.openRequested(ctx, ActionRollback, body, &req, &req.Table, func() error {
		if err := ValidateTableName(req.Table); err != nil {
			return err
		}
		if req.Version == nil {
			return invalidf("rollback: version is required: the version whose content the table gets back (describe-table shows the newest)")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep, err := tb.Rollback(ctx, *req.Version, &tableformat.RollbackOptions{DryRun: req.DryRun})
	if err != nil {
		// An unknown outcome comes with a report too; the error is what
		// the client gets.
		return nil, tableFailed(req.Table, err)
	}
	if !rep.DryRun && !rep.NoOp {
		s.log.Info("table rolled back", "table", req.Table, "to", rep.TargetVersion, "from", rep.StartingVersion, "version", rep.CommittedVersion,
			"removed", len(rep.Removed), "added", len(rep.Added), "rows_before", rep.RowsBefore, "rows_after", rep.RowsAfter, "by", guard.CallerName(ctx))
	}
	return RollbackResult{Table: req.Table, RollbackReport: *rep}, nil
}
