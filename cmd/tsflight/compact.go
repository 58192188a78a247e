// The compact command: merges a table's small segments into large ones
// through the server's compact action, or with --dry-run says what it would
// merge.

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/tsflight/tsflight/flightserver"
)

var compactCmd = &command{
	Name:    "compact",
	Group:   "client",
	Summary: "merge a table's small segments into large ones (--dry-run: only say what)",
	Usage:   "tsflight compact [--server URI] [--dry-run] [--format table|csv|json] TABLE",
	Help: `Merges the small segments of a table (the files many small appends leave,
which slow scans and SQL) into large ones, in one commit: runs of segments
contiguous in time are read, sorted by entity and time, and written as
segments of up to 128 MiB, in row groups of 65,536 rows. The rows and the
coverage stay exactly the same, which is verified before the commit, and
appends go on meanwhile. The replaced files stay on disk (older versions
still name them). One call merges at most 1 GiB; run it again while it
reports segments left.

--dry-run lists the groups it would merge and changes nothing. The table
format lists one line per group; csv the same; json is the server's answer
with every source and output path.

Example:
  tsflight compact --dry-run cpu
  tsflight compact cpu`,
}

func init() { register(compactCmd, runCompact) }

func runCompact(ctx context.Context, e *env, args []string) error {
	return runDryRunAction(ctx, e, args, compactCmd, flightserver.ActionCompact, "only list what would be merged; change nothing",
		func(res flightserver.CompactResult) *grid { return compactGrid(res, false, true) }, printCompact)
}

// compactGrid has one row per group; human writes sizes for people, and
// without outputs the output columns are left out (a dry run has none).
func compactGrid(res flightserver.CompactResult, human, outputs bool) *grid {
	g := &grid{header: []string{"group", "index_min", "index_max", "sources", "source_bytes", "rows"},
		right: []bool{true, false, false, true, true, true, true, true}}
	if outputs {
		g.header = append(g.header, "outputs", "output_bytes")
	}
	size := func(n uint64) string {
		if human {
			return humanBytes(int64(n))
		}
		return strconv.FormatUint(n, 10)
	}
	for i, gr := range res.Groups {
		r := []string{strconv.Itoa(i + 1), gr.IndexMin, gr.IndexMax, strconv.Itoa(len(gr.Sources)), size(gr.SourceBytes), strconv.FormatUint(gr.Rows, 10)}
		if outputs {
			r = append(r, strconv.Itoa(len(gr.Outputs)), size(gr.OutputBytes))
		}
		g.rows = append(g.rows, r)
	}
	return g
}

func printCompact(w io.Writer, res flightserver.CompactResult, maxRows int) error {
	version := fmt.Sprintf("version %d", res.StartingVersion)
	if res.CommittedVersion != 0 {
		version = fmt.Sprintf("version %d → %d", res.StartingVersion, res.CommittedVersion)
	}
	if _, err := fmt.Fprintf(w, "table  %s (%s)\n", res.Table, version); err != nil {
		return err
	}
	if g := compactGrid(res, true, !res.DryRun); len(g.rows) > 0 {
		if err := printCapped(w, g, maxRows); err != nil {
			return err
		}
	}
	groups := plural(int64(len(res.Groups)), "group", "groups")
	var summary string
	switch {
	case res.NoOp && res.DroppedGroups > 0:
		summary = fmt.Sprintf("nothing compacted: another compaction merged the segments first (%s dropped)", plural(int64(res.DroppedGroups), "group", "groups"))
	case res.NoOp:
		summary = "nothing to compact: no run of at least 2 small segments"
	case res.DryRun:
		summary = fmt.Sprintf("dry run: would merge %s (%s, %s) in %s; run again without --dry-run to compact",
			plural(int64(res.SourceSegments), "segment", "segments"), humanBytes(int64(res.BytesBefore)),
			plural(int64(groupRows(res)), "row", "rows"), groups)
	default:
		summary = fmt.Sprintf("merged %s (%s) into %d (%s), %s, in %s",
			plural(int64(res.SourceSegments), "segment", "segments"), humanBytes(int64(res.BytesBefore)),
			res.OutputSegments, humanBytes(int64(res.BytesAfter)), plural(int64(res.RowsWritten), "row", "rows"), groups)
		if res.DroppedGroups > 0 {
			summary += fmt.Sprintf("; %s dropped (another compaction merged their segments first)", plural(int64(res.DroppedGroups), "group", "groups"))
		}
	}
	if _, err := fmt.Fprintf(w, "\n%s\n", summary); err != nil {
		return err
	}
	if res.Remaining > 0 {
		if _, err := fmt.Fprintf(w, "%s left for another run (one run merges at most 1 GiB)\n", plural(int64(res.Remaining), "small segment", "small segments")); err != nil {
			return err
		}
	}
	return nil
}

// groupRows sums the groups' rows.
func groupRows(res flightserver.CompactResult) uint64 {
	var n uint64
	for _, g := range res.Groups {
		n += g.Rows
	}
	return n
}
