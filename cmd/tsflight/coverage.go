package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tsflight/tsflight/flightserver"
)

// This file holds the coverage and gaps commands.

var coverageCmd = &command{
	Name:    "coverage",
	Group:   "client",
	Summary: "how much of a time range holds data (and a picture of it)",
	Usage:   "tsflight coverage [--start T] [--end T] [--entity COL=VALUE]... [--plot FILE.svg|FILE.png] TABLE",
	Help: `Reports how many of the index intervals in [--start, --end) hold data:
for one entity (--entity for every entity column) or for the whole table
(the mean over its entities). It is answered from the table's coverage
bitmaps without reading data.

--plot FILE.svg or FILE.png draws the coverage as a heat map instead:
entities down, time across, gaps in red. Without --start/--end it spans
all the table's data. Thousands of entities or intervals are aggregated
into at most --plot-rows rows and --plot-columns columns.

Example:
  tsflight coverage --start 2016-01-01T00:00:00Z --end 2016-01-02T00:00:00Z cpu
  tsflight coverage --entity hostname=host_7 --start 2016-01-01T00:00:00Z --end 2016-01-02T00:00:00Z cpu
  tsflight coverage --plot cpu-coverage.svg cpu`,
}

var gapsCmd = &command{
	Name:    "gaps",
	Group:   "client",
	Summary: "list the missing runs of a time range",
	Usage:   "tsflight gaps --start T --end T [--entity COL=VALUE]... [--limit N] [--min-window N] TABLE",
	Help: `Lists the maximal runs of index intervals in [--start, --end) that hold no
data: for one entity (--entity for every entity column), or for the whole
table, where an interval counts as covered only when every entity has it.
Also reports the longest gap and the latest fully covered run of at least
--min-window intervals. Spans are half-open [start, end) and cover whole
intervals.

Example:
  tsflight gaps --start 2016-01-01T00:00:00Z --end 2016-01-02T00:00:00Z cpu
  tsflight gaps --entity hostname=host_7 --start 2016-01-01T00:00:00Z --end 2016-01-02T00:00:00Z --format csv cpu`,
}

func init() {
	register(coverageCmd, runCoverage)
	register(gapsCmd, runGaps)
}

// rangeFlags are the flags coverage and gaps share.
type rangeFlags struct {
	server     *serverFlags
	start, end string
	entities   entityFlag
	version    optionalVersion
}

func addRangeFlags(fs *flagSet) *rangeFlags {
	r := &rangeFlags{server: serverFlag(fs), entities: entityFlag{}}
	fs.StringVar(&r.start, "start", "", "first index value, inclusive (`time`: RFC 3339, or an integer)")
	fs.StringVar(&r.end, "end", "", "last index value, exclusive (`time`)")
	fs.Var(r.entities, "entity", "one entity: `column=value` for each entity column (repeatable)")
	fs.Var(&r.version, "version", "read this table `version` instead of the newest")
	return r
}

func (r *rangeFlags) request(table string) map[string]any {
	req := map[string]any{"table": table}
	if r.start != "" {
		req["start"] = r.start
	}
	if r.end != "" {
		req["end"] = r.end
	}
	if m := r.entities.request(); m != nil {
		req["entity"] = m
	}
	if r.version.v != nil {
		req["version"] = *r.version.v
	}
	return req
}

func runCoverage(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(coverageCmd)
	rf := addRangeFlags(fs)
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON)
	var plot string
	var plotRows, plotCols, plotWidth, plotHeight int
	fs.StringVar(&plot, "plot", "", "draw a heat map to this `file` (.svg or .png)")
	fs.IntVar(&plotWidth, "plot-width", 0, "picture width in `pixels` (0 = 1400)")
	fs.IntVar(&plotHeight, "plot-height", 0, "picture height in `pixels` (0 = 900)")
	fs.IntVar(&plotRows, "plot-rows", 0, "most entity rows in the picture (`n`; 0 = as many as fit)")
	fs.IntVar(&plotCols, "plot-columns", 0, "most time columns in the picture (`n`; 0 = as many as fit)")
	table, err := parseTable(fs, e, args, out)
	if err != nil {
		return err
	}
	if plot != "" {
		return runCoveragePlot(ctx, e, rf, table, plot, plotRows, plotCols, plotWidth, plotHeight)
	}
	if rf.start == "" || rf.end == "" {
		return usagef("--start and --end are required (or draw all the data with --plot FILE)")
	}
	return actionCommand(ctx, e, rf.server, out, "coverage", rf.request(table), coverageCSV,
		func(w io.Writer, a flightserver.CoverageAnswer) error { return printCoverage(w, a, rf.entities) })
}

// coverageCSV is the coverage answer as one CSV row.
func coverageCSV(a flightserver.CoverageAnswer) *grid {
	g := &grid{header: []string{"table", "version", "start", "end", "intervals", "identities", "expected", "covered", "ratio"}}
	g.rows = [][]string{{a.Table, utoa(a.Version), flightserver.IndexText(a.Start), flightserver.IndexText(a.End), utoa(a.Intervals),
		utoa(a.Identities), utoa(a.Expected), utoa(a.Covered), strconv.FormatFloat(a.Ratio, 'g', -1, 64)}}
	return g
}

// printCoverage writes the coverage answer for a person; entities are
// the --entity flags the request carried.
func printCoverage(w io.Writer, a flightserver.CoverageAnswer, entities entityFlag) error {
	who := "all entities"
	if len(entities) > 0 {
		who = entities.String()
	} else if a.Identities == 1 {
		who = "the table"
	}
	_, err := fmt.Fprintf(w, "table     %s (version %d)\nrange     [%s, %s)\nentities  %s\ncoverage  %s  (%d of %d entity-intervals: %s × %s)\n",
		a.Table, a.Version, flightserver.IndexText(a.Start), flightserver.IndexText(a.End), who, percent(a.Ratio), a.Covered, a.Expected,
		plural(int64(a.Identities), "entity", "entities"), plural(int64(a.Intervals), "interval", "intervals"))
	return err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func utoa(n uint64) string { return strconv.FormatUint(n, 10) }

// plural is "1 entity", "2 entities".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return itoa(n) + " " + many
}

// percent prints a ratio as a percentage that never rounds a partial
// coverage up to 100 % or down to 0 %.
func percent(r float64) string {
	p := r * 100
	s := strconv.FormatFloat(p, 'f', 2, 64)
	switch {
	case r < 1 && s == "100.00":
		s = "99.99"
	case r > 0 && s == "0.00":
		s = "0.01"
	}
	return s + " %"
}

// spanText is a gap as a person reads it.
func spanText(s *flightserver.Span) string {
	closing := ")"
	if s.EndInclusive {
		closing = "]"
	}
	return fmt.Sprintf("[%s, %s%s (%d intervals)", flightserver.IndexText(s.Start), flightserver.IndexText(s.End), closing, s.Intervals)
}

func runGaps(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(gapsCmd)
	rf := addRangeFlags(fs)
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON)
	var limit, minWindow int
	fs.IntVar(&limit, "limit", 0, "list at most `n` gaps (0 = the server's default)")
	fs.IntVar(&minWindow, "min-window", 0, "shortest covered run, in `intervals`, that counts as last covered (0 = 1)")
	table, err := parseTable(fs, e, args, nil)
	if err != nil {
		return err
	}
	switch {
	case rf.start == "" || rf.end == "":
		return usagef("--start and --end are required")
	case limit < 0:
		return usagef("--limit must not be negative, got %d", limit)
	case minWindow < 0:
		return usagef("--min-window must not be negative, got %d", minWindow)
	}
	if err := out.check(e); err != nil {
		return err
	}
	req := rf.request(table)
	if limit > 0 {
		req["limit"] = limit
	}
	if minWindow > 0 {
		req["min_window"] = minWindow
	}
	return withClient(ctx, rf.server, func(ctx context.Context, c *client) error {
		var a flightserver.GapsAnswer
		raw, err := c.action(ctx, "gaps", req, &a)
		if err != nil {
			return err
		}
		g := grid{header: []string{"start", "end", "intervals"}, right: []bool{false, false, true}}
		for _, s := range a.Gaps {
			end := flightserver.IndexText(s.End)
			if s.EndInclusive && out.format.value != formatCSV {
				end += " (inclusive)"
			}
			g.rows = append(g.rows, []string{flightserver.IndexText(s.Start), end, utoa(s.Intervals)})
		}
		return out.emit(e, func(w io.Writer) error {
			switch out.format.value {
			case formatJSON:
				return writeRawJSON(w, raw)
			case formatCSV:
				return g.writeCSV(w)
			}
			return printGaps(w, &a, &g)
		})
	})
}

func printGaps(w io.Writer, a *flightserver.GapsAnswer, g *grid) error {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s (version %d), range [%s, %s): ", a.Table, a.Version, flightserver.IndexText(a.Start), flightserver.IndexText(a.End))
	if len(a.Gaps) == 0 {
		b.WriteString("no gaps\n")
	} else {
		fmt.Fprintf(&b, "%d intervals missing in %d gap(s)", a.MissingIntervals, len(a.Gaps))
		if a.Truncated {
			b.WriteString(" (more than listed: raise --limit)")
		}
		b.WriteString("\n\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(a.Gaps) > 0 {
		if err := g.print(w); err != nil {
			return err
		}
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
	}
	span := func(s *flightserver.Span) string {
		if s == nil {
			return "none"
		}
		return spanText(s)
	}
	_, err := fmt.Fprintf(w, "longest gap   %s\nlast covered  %s\n", span(a.Longest), span(a.LastCovered))
	return err
}
