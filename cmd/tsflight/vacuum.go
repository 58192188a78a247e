// The vacuum command: lists (and with --apply deletes) the files of a
// table that no commit references, and those only expired versions hold,
// through the server's vacuum action.

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tsflight/tsflight/flightserver"
)

var vacuumCmd = &command{
	Name:    "vacuum",
	Group:   "client",
	Summary: "find (and with --apply delete) files of failed appends and of expired versions",
	Usage:   "tsflight vacuum [--server URI] [--older-than TIME|DURATION] [--keep-snapshots DURATION] [--apply] [--format table|csv|json] TABLE",
	Help: `Lists the files of a table that no commit references (the segment and
coverage files of appends that died before committing: a killed process, a
crash), removable when modified before --older-than, and the files only
expired versions hold (segments a compaction replaced, superseded coverage
snapshots), removable with reason expired. Only files of the shapes writers
create are ever removable, never the files of the newest version. It is a
dry run unless --apply is given.

A version expires when the commit that replaced it is older than the
table's keep window, the property tsflight.keep-snapshots (see
set-properties; default 168h, 7 days); --keep-snapshots uses another window
for this run (0s expires every older version; scans of versions the table
still keeps fail once their files are gone).

--older-than is an RFC 3339 time or a duration back from now (2h, 30m);
the default is 7 days ago, which keeps the files of appends still in
progress safe (an append may run as long as the server's --request-timeout,
and a library writer longer). Use a shorter one (even 0s) only when nothing
writes to the table. The table format lists the files that are not referenced by
commits; csv and json list them all.

Example:
  tsflight vacuum cpu
  tsflight vacuum --older-than 10m --apply cpu
  tsflight vacuum --keep-snapshots 24h --apply cpu`,
}

func init() { register(vacuumCmd, runVacuum) }

// olderThan turns --older-than into the request's cutoff: an RFC 3339
// time as "older_than", or a duration as "retention", which the server
// subtracts from its own clock (a client's clock may be off).
func olderThan(s string, req map[string]any) error {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		req["older_than"] = t.Format(time.RFC3339Nano)
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return usagef("--older-than %q is neither an RFC 3339 time nor a duration (such as 2h or 30m)", s)
	}
	if d < 0 {
		return usagef("--older-than %q is a negative duration: the cutoff would be in the future", s)
	}
	req["retention"] = d.String()
	return nil
}

func runVacuum(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(vacuumCmd)
	server := serverFlag(fs)
	var older, keep string
	var apply bool
	fs.StringVar(&older, "older-than", "", "only files modified before this `time` (RFC 3339, or a duration back from the server's now such as 2h; default 7 days)")
	fs.StringVar(&keep, "keep-snapshots", "", "keep window of this run: files only versions replaced longer ago than this `duration` used are removable (default: the table's tsflight.keep-snapshots, 168h)")
	fs.BoolVar(&apply, "apply", false, "delete the removable files (default: a dry run)")
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON)
	table, err := parseTable(fs, e, args, out)
	if err != nil {
		return err
	}
	req := map[string]any{"table": table}
	if older != "" {
		if err := olderThan(older, req); err != nil {
			return err
		}
	}
	if keep != "" {
		d, err := time.ParseDuration(keep)
		if err != nil {
			return usagef("--keep-snapshots %q is not a duration (such as 168h, 30m or 0s)", keep)
		}
		if d < 0 {
			return usagef("--keep-snapshots %q is negative", keep)
		}
		req["keep_snapshots"] = d.String()
	}
	if apply {
		req["apply"] = true
	}
	return actionCommand(ctx, e, server, out, flightserver.ActionVacuum, req,
		func(res flightserver.VacuumResult) *grid { return vacuumGrid(res, true) },
		func(w io.Writer, res flightserver.VacuumResult) error { return printVacuum(w, res, out.maxRows) })
}

// vacuumGrid has one row per artifact (all, or those no commit
// references).
func vacuumGrid(res flightserver.VacuumResult, all bool) *grid {
	g := &grid{header: []string{"path", "kind", "size", "modified", "disposition", "reason"}, right: []bool{false, false, true}}
	for _, a := range res.Artifacts {
		if !all && a.Reason == "referenced_by_commit" {
			continue
		}
		reason := a.Reason
		if a.Error != "" {
			reason += ": " + a.Error
		}
		g.rows = append(g.rows, []string{a.Path, a.Kind, strconv.FormatInt(a.Size, 10), a.Modified, a.Disposition, reason})
	}
	return g
}

func printVacuum(w io.Writer, res flightserver.VacuumResult, maxRows int) error {
	t := res.Totals
	if _, err := fmt.Fprintf(w, "table   %s (version %d)\ncutoff  files modified before %s\nexpiry  versions replaced before %s (keep %s)\n",
		res.Table, res.Version, res.OlderThan, res.SupersededBefore, res.KeepSnapshots); err != nil {
		return err
	}
	if g := vacuumGrid(res, false); len(g.rows) > 0 {
		for _, r := range g.rows {
			n, _ := strconv.ParseInt(r[2], 10, 64)
			r[2] = humanBytes(n)
		}
		if err := printCapped(w, g, maxRows); err != nil {
			return err
		}
	}
	var summary string
	switch {
	case res.Applied:
		summary = fmt.Sprintf("deleted %s (%s%s)", plural(int64(t.Deleted), "file", "files"), humanBytes(t.DeletedBytes), expiredNote(t))
		if t.AlreadyAbsent > 0 {
			summary += fmt.Sprintf(", %d already gone", t.AlreadyAbsent)
		}
	case t.Removable > 0:
		summary = fmt.Sprintf("dry run: %s removable (%s%s); run again with --apply to delete them",
			plural(int64(t.Removable), "file", "files"), humanBytes(t.RemovableBytes), expiredNote(t))
	default:
		summary = "dry run: nothing to remove"
	}
	_, err := fmt.Fprintf(w, "\n%s\n%s kept: %d referenced by commits, %d other\n", summary,
		plural(int64(t.Retained), "file", "files"), t.Referenced, t.Retained-t.Referenced)
	return err
}

// expiredNote says how many of the removed or removable files expired.
func expiredNote(t flightserver.VacuumTotals) string {
	if t.Expired == 0 {
		return ""
	}
	return fmt.Sprintf("; %d of expired versions", t.Expired)
}
