package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/tsflight/tsflight/flightserver"
)

var describeCmd = &command{
	Name:    "describe",
	Group:   "client",
	Summary: "show a table's index, schema and size",
	Usage:   "tsflight describe [--server URI] [--format table|csv|json] TABLE",
	Help: `Shows a table's index (column, type, granularity, entity columns, time
zone), its columns, and how much data it holds. --format json prints the
server's describe-table answer as is; --format csv prints the columns.

Example:
  tsflight describe cpu
  tsflight describe --format json cpu`,
}

func init() { register(describeCmd, runDescribe) }

func runDescribe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(describeCmd)
	server := serverFlag(fs)
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON)
	table, err := parseTable(fs, e, args, out)
	if err != nil {
		return err
	}
	return actionCommand(ctx, e, server, out, "describe-table", map[string]any{"table": table},
		describeColumns, printDescription)
}

// describeColumns is the table of d's columns and their roles.
func describeColumns(d *flightserver.TableDescription) *grid {
	g := &grid{header: []string{"column", "type", "nullable", "role"}}
	for _, c := range d.Schema {
		role := ""
		switch {
		case c.Name == d.Index.Column:
			role = "index"
		case slices.Contains(d.Index.EntityColumns, c.Name):
			role = "entity"
		}
		g.rows = append(g.rows, []string{c.Name, c.Type, strconv.FormatBool(c.Nullable), role})
	}
	return g
}

// printDescription prints d for a person: the table, then its columns.
func printDescription(w io.Writer, d *flightserver.TableDescription) error {
	gran := strings.Trim(string(d.Index.Granularity), `"`)
	entities := "none"
	if len(d.Index.EntityColumns) > 0 {
		entities = strings.Join(d.Index.EntityColumns, ", ")
	}
	tz := "none (UTC)"
	if d.Index.Timezone != nil {
		tz = *d.Index.Timezone
	}
	features := func(f []string) string {
		if len(f) == 0 {
			return "none"
		}
		return strings.Join(f, ", ")
	}
	lines := [][2]string{
		{"table", d.Table},
		{"version", strconv.FormatUint(d.Version, 10)},
		{"index", fmt.Sprintf("%s (%s, granularity %s)", d.Index.Column, d.Index.Type, gran)},
		{"entities", entities},
	}
	if d.Index.Type == "timestamp" {
		lines = append(lines, [2]string{"timezone", tz})
	}
	lines = append(lines,
		[2]string{"data", fmt.Sprintf("%d rows in %d segments, %s", d.Rows, d.Segments, humanBytes(int64(d.Bytes)))},
		[2]string{"created", d.CreatedAt},
		[2]string{"protocol", fmt.Sprintf("%d (reader features: %s; writer features: %s)", d.ProtocolVersion, features(d.ReaderFeatures), features(d.WriterFeatures))},
	)
	if d.Format.NeedsUpgrade {
		lines = append(lines, [2]string{"format", fmt.Sprintf("%d, read-only until upgraded: tsflight upgrade %s", d.Format.LegacyFormat, d.Table)})
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%-9s %s\n", l[0], l[1])
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(d.Schema) == 0 {
		_, err := fmt.Fprintf(w, "no columns yet: the first load (or DoPut) sets the schema\n")
		return err
	}
	return describeColumns(d).print(w)
}

// humanBytes is n in B, KiB, MiB, GiB, TiB or PiB with one decimal: 1.5
// MiB. describe and load print sizes with it.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	// Stop at the unit whose one-decimal rounding stays below 1024.
	for v >= unit-0.05 && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

// writeRawJSON pretty-prints a JSON document.
func writeRawJSON(w io.Writer, raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return writeJSON(w, v)
}
