// The rollback command: gives a table back an older version's content
// through the server's rollback action, or with --dry-run says what it
// would remove and add.

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/tsflight/tsflight/flightserver"
)

var rollbackCmd = &command{
	Name:    "rollback",
	Group:   "client",
	Summary: "give a table back an older version's content (--dry-run: only say what)",
	Usage:   "tsflight rollback [--server URI] [--dry-run] [--format table|csv|json] TABLE VERSION",
	Help: `Makes the content of a table (its rows and coverage) what it was at VERSION,
in one new commit on top of the newest version: the segments VERSION did not
have are removed from the table, and those it had are added back. Nothing is
rewritten and no history is lost: the versions in between stay readable for
the keep window (table property tsflight.keep-snapshots, 7 days by default),
so a rollback is undone by a rollback to the version before it.

It is refused, and nothing is written, when VERSION is the newest or does not
exist, when it is older than the keep window, when a file it needs is gone
(vacuum deleted it), when columns were added since (a table cannot lose a
column), or when another writer commits while it runs (check the table and
run it again: it never drops an append it did not see).

--dry-run lists what would be removed and added and changes nothing. The
table format summarizes; csv lists one line per segment; json is the
server's answer.

Example:
  tsflight rollback --dry-run cpu 41
  tsflight rollback cpu 41`,
}

func init() { register(rollbackCmd, runRollback) }

func runRollback(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(rollbackCmd)
	server := serverFlag(fs)
	var dryRun bool
	fs.BoolVar(&dryRun, "dry-run", false, "only list what would be removed and added; change nothing")
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON)
	rest, err := fs.parse(e, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 0:
		return usagef("missing the table name and the version")
	case rest[0] == "":
		return usagef("the table name is empty")
	case len(rest) == 1:
		return usagef("missing the version to roll back to (describe shows the newest)")
	case len(rest) > 2:
		return usagef("unexpected argument %q after the version (flags go before the table: tsflight rollback [flags] TABLE VERSION)", rest[2])
	}
	table := rest[0]
	version, err := strconv.ParseUint(rest[1], 10, 64)
	if err != nil || version == 0 {
		return usagef("VERSION must be a positive integer (a table version), got %q", rest[1])
	}
	if err := out.check(e); err != nil {
		return err
	}
	req := map[string]any{"table": table, "version": version}
	if dryRun {
		req["dry_run"] = true
	}
	return actionCommand(ctx, e, server, out, flightserver.ActionRollback, req, rollbackGrid, printRollback)
}

// rollbackGrid has one row per segment the rollback removes or adds.
func rollbackGrid(res flightserver.RollbackResult) *grid {
	g := &grid{header: []string{"change", "segment"}}
	for _, p := range res.Removed {
		g.rows = append(g.rows, []string{"removed", p})
	}
	for _, p := range res.Added {
		g.rows = append(g.rows, []string{"added", p})
	}
	return g
}

func printRollback(w io.Writer, res flightserver.RollbackResult) error {
	version := fmt.Sprintf("version %d", res.StartingVersion)
	if res.CommittedVersion != 0 {
		version = fmt.Sprintf("version %d → %d", res.StartingVersion, res.CommittedVersion)
	}
	segs := func(n int) string { return plural(int64(n), "segment", "segments") }
	change := fmt.Sprintf("remove %s, add %s; %s → %s", segs(len(res.Removed)), segs(len(res.Added)),
		plural(int64(res.RowsBefore), "row", "rows"), plural(int64(res.RowsAfter), "row", "rows"))
	var summary string
	switch {
	case res.NoOp:
		summary = fmt.Sprintf("nothing to roll back: the table already holds the segments of version %d", res.TargetVersion)
	case res.DryRun:
		summary = fmt.Sprintf("dry run: rolling back to version %d would %s; run again without --dry-run to roll back", res.TargetVersion, change)
	default:
		summary = fmt.Sprintf("rolled back to the content of version %d: removed %s, added %s; %s → %s (undo: tsflight rollback %s %d)",
			res.TargetVersion, segs(len(res.Removed)), segs(len(res.Added)), plural(int64(res.RowsBefore), "row", "rows"),
			plural(int64(res.RowsAfter), "row", "rows"), res.Table, res.StartingVersion)
	}
	_, err := fmt.Fprintf(w, "table  %s (%s)\n\n%s\n", res.Table, version, summary)
	return err
}
