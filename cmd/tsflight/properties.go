// The set-properties command: sets or removes table properties through the
// server's set-properties action.

package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/tsflight/tsflight/flightserver"
)

var setPropertiesCmd = &command{
	Name:    "set-properties",
	Group:   "client",
	Summary: "set or remove table properties (tsflight.keep-snapshots)",
	Usage:   "tsflight set-properties [--server URI] [--format table|json] TABLE NAME=VALUE...",
	Help: `Sets table properties in one commit; NAME= (an empty value) removes one.
Names starting with tsflight. are tsflight's own; the one there is today:

  tsflight.keep-snapshots  how long a version stays readable after the
                           commit that replaced it, a duration (168h, 30m,
                           0s; default 168h). Scans of older versions are
                           refused, and vacuum deletes the files only they
                           used (segments replaced by compaction).

Other names take any value. The table must have a schema (one load first).
Prints the properties after the commit.

Example:
  tsflight set-properties cpu tsflight.keep-snapshots=720h
  tsflight set-properties cpu owner=ops tsflight.keep-snapshots=`,
}

func init() { register(setPropertiesCmd, runSetProperties) }

func runSetProperties(ctx context.Context, e *env, args []string) error {
	server, format, table, specs, err := parseTableItems(setPropertiesCmd, e, args, "the properties to set (NAME=VALUE …; NAME= removes one)")
	if err != nil {
		return err
	}
	props := map[string]string{}
	for _, spec := range specs {
		name, value, ok := strings.Cut(spec, "=")
		if !ok || name == "" {
			return usagef("property %q is not NAME=VALUE (e.g. tsflight.keep-snapshots=168h; NAME= removes it)", spec)
		}
		if _, dup := props[name]; dup {
			return usagef("property %q is given twice", name)
		}
		props[name] = value
	}
	return tableOrJSONAction(ctx, e, server, format, flightserver.ActionSetProperties,
		map[string]any{"table": table, "properties": props}, printProperties)
}

func printProperties(w io.Writer, res flightserver.SetPropertiesResult) error {
	if _, err := fmt.Fprintf(w, "set the properties of %s (version %d)\n", res.Table, res.Version); err != nil {
		return err
	}
	if len(res.Properties) == 0 {
		_, err := fmt.Fprintln(w, "the table has no properties")
		return err
	}
	g := &grid{header: []string{"property", "value"}}
	for _, k := range slices.Sorted(maps.Keys(res.Properties)) {
		g.rows = append(g.rows, []string{k, res.Properties[k]})
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	return g.print(w)
}
