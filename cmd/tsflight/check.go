// The check command: a consistency check of tables (and with --repair the
// safe repairs) through the server's check action.

package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/tsflight/tsflight/flightserver"
)

var checkCmd = &command{
	Name:    "check",
	Group:   "client",
	Summary: "check tables for damage (and with --repair fix what is safely repairable)",
	Usage:   "tsflight check [--server URI] [--repair] [--format table|json] [TABLE…]",
	Help: `Checks each named table (every table without names) for damage: every
commit of the log replays, CURRENT is present and not behind the newest
commit, every live segment is there with the size, row count and Parquet
footer the log records, every coverage sidecar decodes and matches its
segment's rows, and the table coverage snapshot is the union of the
sidecars. Each problem is printed with its file and what to do.

--repair fixes only what is safely repairable: it republishes CURRENT when
it lags or is unreadable while the commits are intact, and rebuilds the
table coverage snapshot from the segment sidecars (as a new commit) when it
is missing, unreadable or wrong. It never deletes a file or rewrites a
commit; anything else (a lost segment, a damaged commit or sidecar) needs
the file restored from a backup. --repair needs a token with write scope.

The exit status is 0 when every table is sound (after --repair: when
nothing remains wrong), 1 when a problem was found or remains.

Example:
  tsflight check
  tsflight check --repair cpu mem`,
}

func init() { register(checkCmd, runCheck) }

func runCheck(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(checkCmd)
	server := serverFlag(fs)
	var repair bool
	fs.BoolVar(&repair, "repair", false, "fix what is safely repairable (CURRENT, the table coverage snapshot); needs write scope")
	out := addOutputFlags(fs, formatTable, formatJSON)
	tables, err := fs.parse(e, args)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if t == "" {
			return usagef("a table name is empty")
		}
	}
	if err := out.check(e); err != nil {
		return err
	}
	req := map[string]any{}
	if len(tables) > 0 {
		req["tables"] = tables
	}
	if repair {
		req["repair"] = true
	}
	return withClient(ctx, server, func(ctx context.Context, c *client) error {
		var res flightserver.CheckResult
		raw, err := c.action(ctx, flightserver.ActionCheck, req, &res)
		if err != nil {
			return err
		}
		if err := out.emit(e, func(w io.Writer) error {
			if out.format.value == formatJSON {
				return writeRawJSON(w, raw)
			}
			return printCheck(w, res, out.maxRows)
		}); err != nil {
			return err
		}
		if res.OK {
			return nil
		}
		bad := 0
		for _, t := range res.Tables {
			if !t.OK {
				bad++
			}
		}
		what := "found"
		if res.Repair {
			what = "remain"
		}
		return fmt.Errorf("problems %s in %d of %s", what, bad, plural(int64(len(res.Tables)), "table", "tables"))
	})
}

// printCheck prints each table's findings: severity, code, file, what is
// wrong and what to do (or what the repair did).
func printCheck(w io.Writer, res flightserver.CheckResult, maxRows int) error {
	var b strings.Builder
	if len(res.Tables) == 0 {
		b.WriteString("(no tables)\n")
	}
	bad := 0
	for i, t := range res.Tables {
		if i > 0 {
			b.WriteString("\n")
		}
		open := 0
		for _, f := range t.Findings {
			if !f.Repaired {
				open++
			}
		}
		state := "ok"
		switch {
		case open > 0:
			bad++
			state = plural(int64(open), "problem", "problems")
		case len(t.Findings) > 0:
			state = "ok after repair"
		}
		fmt.Fprintf(&b, "table %s (version %d, %s, %s): %s\n", t.Table, t.Version,
			plural(int64(t.Segments), "segment", "segments"), plural(int64(t.Rows), "row", "rows"), state)
		for k, f := range t.Findings {
			if maxRows > 0 && k == maxRows {
				fmt.Fprintf(&b, "  … %d more (--max-rows 0 shows all)\n", len(t.Findings)-k)
				break
			}
			label := f.Severity
			if f.Repaired {
				label = "repaired"
			}
			fmt.Fprintf(&b, "  %-8s %s %s", label, f.Code, f.Path)
			if f.Version != 0 {
				fmt.Fprintf(&b, " (commit %d)", f.Version)
			}
			b.WriteString("\n")
			fmt.Fprintf(&b, "           problem: %s\n", f.Problem)
			if f.Repair != "" {
				fmt.Fprintf(&b, "           repair:  %s\n", f.Repair)
			}
			if !f.Repaired {
				fmt.Fprintf(&b, "           to do:   %s\n", f.Action)
			}
		}
	}
	if len(res.Tables) > 0 {
		switch {
		case bad > 0:
			fmt.Fprintf(&b, "\n%d of %s with problems\n", bad, plural(int64(len(res.Tables)), "table", "tables"))
		default:
			fmt.Fprintf(&b, "\n%s checked, no problems\n", plural(int64(len(res.Tables)), "table", "tables"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
