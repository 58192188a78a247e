// The compact action: merges a table's small segments into large ones
// (tableformat's Compact) over DoAction; "dry_run": true only reports.

package flightserver

import (
	"context"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
)

// ActionCompact names the compact action.
const ActionCompact = "compact"

// dryRunRequest is the body of the compact and upgrade actions.
type dryRunRequest struct {
	Table  string `json:"table"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// CompactResult is the answer of the compact action: the table's name and
// tableformat's report (starting_version, committed_version, dry_run,
// no_op, retries, groups, dropped_groups, remaining and the totals).
type CompactResult struct {
	Table string `json:"table"`
	tableformat.CompactReport
}

func (s *Service) compact(ctx context.Context, body []byte) (any, error) {
	var req dryRunRequest
	tb, err := s.openRequested(ctx, ActionCompact, body, &req, &req.Table, nil)
	if err != nil {
		return nil, err
	}
	opts := s.compactOptions()
	opts.DryRun = req.DryRun
	opts.MemoryBytes = s.opts.CompactMemory
	rep, err := tb.Compact(ctx, opts)
	if err != nil {
		// An unknown outcome comes with a report too; the error (which
		// says the new segments were kept) is what the client gets.
		return nil, tableFailed(req.Table, err)
	}
	if !rep.DryRun && !rep.NoOp {
		s.log.Info("table compacted", "table", req.Table, "version", rep.CommittedVersion, "sources", rep.SourceSegments,
			"outputs", rep.OutputSegments, "rows", rep.RowsWritten, "bytes_before", rep.BytesBefore, "bytes_after", rep.BytesAfter,
			"retries", rep.Retries, "memory_peak", rep.MemoryPeak, "spilled_runs", rep.SpilledRuns, "spill_bytes", rep.SpillBytes, "by", guard.CallerName(ctx))
	}
	return CompactResult{Table: req.Table, CompactReport: *rep}, nil
}

// compactOptions are tableformat's default compact options with the
// service's retries and allocator (the recycling pool, or what tests
// count).
func (s *Service) compactOptions() *tableformat.CompactOptions {
	opts := tableformat.DefaultCompactOptions()
	opts.MaxRetries = s.opts.AppendRetries
	opts.Alloc = s.scanAlloc()
	return opts
}
