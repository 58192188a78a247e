// The upgrade action: makes a format-6 table (timeseries-table-format 0.5
// and older) a protocol-7 one, then compacts (tableformat's Upgrade) over
// DoAction; "dry_run": true only reports the steps.

package flightserver

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
)

// ActionUpgrade names the upgrade action.
const ActionUpgrade = "upgrade"

// upgradeActionType is the upgrade action's entry in ListActions.
var upgradeActionType = &flight.ActionType{Type: ActionUpgrade, Description: `Upgrade a format-6 table (timeseries-table-format 0.5 and older) to protocol 7: every commit is converted into a new log that replaces the old one atomically (kept as _timeseries_log.format6-<time>; data files are not touched), then small segments are compacted. A protocol-7 table is only compacted. Body: {"table", "dry_run"?: false}. Result: table, dry_run, starting_version, committed_version, legacy_format, converted_commits, backup, swap, leftovers, leftover_backups, steps [{step, state, detail}], compact (as the compact action).`}

// UpgradeResult is the answer of the upgrade action: the table's name and
// tableformat's report.
type UpgradeResult struct {
	Table string `json:"table"`
	tableformat.UpgradeReport
}

func (s *Service) upgrade(ctx context.Context, body []byte) (any, error) {
	var req dryRunRequest
	tb, err := s.openRequested(ctx, ActionUpgrade, body, &req, &req.Table, nil)
	if err != nil {
		return nil, err
	}
	rep, err := tb.Upgrade(ctx, &tableformat.UpgradeOptions{DryRun: req.DryRun, Compact: s.compactOptions()})
	if err != nil {
		return nil, tableFailed(req.Table, err)
	}
	if !rep.DryRun {
		s.log.Info("table upgraded", "table", req.Table, "converted_commits", rep.ConvertedCommits, "backup", rep.Backup,
			"version", rep.CommittedVersion, "by", guard.CallerName(ctx))
	}
	return UpgradeResult{Table: req.Table, UpgradeReport: *rep}, nil
}
