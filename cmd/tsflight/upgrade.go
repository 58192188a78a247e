// The upgrade command: makes a format-6 table (timeseries-table-format 0.5
// and older) a protocol-7 one through the server's upgrade action, or with
// --dry-run lists the steps.

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tsflight/tsflight/flightserver"
)

var upgradeCmd = &command{
	Name:    "upgrade",
	Group:   "client",
	Summary: "upgrade a format-6 table to protocol 7 and compact it (--dry-run: only list the steps)",
	Usage:   "tsflight upgrade [--server URI] [--dry-run] [--format table|csv|json] TABLE",
	Help: `Upgrades a table written by timeseries-table-format 0.5 or older ("format
6"), which tsflight serves read-only, to protocol 7, which tsflight writes
and timeseries-table-format 0.9.0 reads and writes.

Every commit of the log is converted (the metadata's "format_version": 6
becomes "protocol_version": 7 with empty feature lists; the index kind's
bucket spelling becomes index_granularity) into a new log that replaces the
old one in one atomic step. The old log is kept beside it as
_timeseries_log.format6-<time>; data files and coverage sidecars are not
touched. Small segments are then compacted, as tsflight compact does, in
one more commit. A table that is protocol 7 already is only compacted.

Stop every other writer of the table (older Python clients) first.
--dry-run lists the steps and changes nothing. The table format prints one
line per step; csv the same; json is the server's answer.

Example:
  tsflight upgrade --dry-run prices
  tsflight upgrade prices`,
}

func init() { register(upgradeCmd, runUpgrade) }

func runUpgrade(ctx context.Context, e *env, args []string) error {
	return runDryRunAction(ctx, e, args, upgradeCmd, flightserver.ActionUpgrade, "only list the steps; change nothing", upgradeGrid,
		func(w io.Writer, res flightserver.UpgradeResult, _ int) error { return printUpgrade(w, res) })
}

func upgradeGrid(res flightserver.UpgradeResult) *grid {
	g := &grid{header: []string{"step", "state", "detail"}}
	for _, s := range res.Steps {
		g.rows = append(g.rows, []string{s.Step, s.State, s.Detail})
	}
	return g
}

func printUpgrade(w io.Writer, res flightserver.UpgradeResult) error {
	version := fmt.Sprintf("version %d", res.StartingVersion)
	if res.CommittedVersion != res.StartingVersion {
		version = fmt.Sprintf("version %d → %d", res.StartingVersion, res.CommittedVersion)
	}
	if _, err := fmt.Fprintf(w, "table  %s (%s)\n\n", res.Table, version); err != nil {
		return err
	}
	if err := upgradeGrid(res).print(w); err != nil {
		return err
	}
	var notes []string
	for _, l := range res.Leftovers {
		notes = append(notes, fmt.Sprintf("removed %s (left by an interrupted upgrade)", l))
	}
	for _, l := range res.LeftoverBackups {
		notes = append(notes, fmt.Sprintf("kept %s as a backup (the format-6 log of an interrupted upgrade)", l))
	}
	switch {
	case res.DryRun && res.LegacyFormat != 0:
		notes = append(notes, "dry run: nothing changed; run again without --dry-run to upgrade")
	case res.DryRun:
		notes = append(notes, "dry run: nothing changed; the table is protocol 7 already")
	case res.Backup != "":
		notes = append(notes, fmt.Sprintf("upgraded: the format-6 log is kept as %s (see docs/design.md, Upgrade, to restore it)", res.Backup))
	default:
		notes = append(notes, "the table is protocol 7 already: nothing converted")
	}
	for _, n := range notes {
		if _, err := fmt.Fprintf(w, "\n%s", n); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\n")
	return err
}
