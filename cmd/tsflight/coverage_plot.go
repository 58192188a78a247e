package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// plotMaxRequest bounds --plot-rows and --plot-columns (the server's
// limit for a coverage grid).
const plotMaxRequest = 4096

// runCoveragePlot asks the server for a coverage grid that fits the
// picture (or --plot-rows × --plot-columns) and draws it to path.
func runCoveragePlot(ctx context.Context, e *env, rf *rangeFlags, table, path string, rows, cols, width, height int) error {
	switch ext := strings.ToLower(filepath.Ext(path)); {
	case ext != ".svg" && ext != ".png":
		return usagef("--plot %q: the file must end in .svg or .png", path)
	case len(rf.entities) > 0:
		return usagef("--plot draws every entity; --entity does not apply to it")
	case rows < 0 || rows > plotMaxRequest:
		return usagef("--plot-rows must be from 0 to %d, got %d", plotMaxRequest, rows)
	case cols < 0 || cols > plotMaxRequest:
		return usagef("--plot-columns must be from 0 to %d, got %d", plotMaxRequest, cols)
	case width < 0 || height < 0:
		return usagef("--plot-width and --plot-height must not be negative")
	}
	fitRows, fitCols := plotRowsColumns(width, height)
	if rows == 0 {
		rows = fitRows
	}
	if cols == 0 {
		cols = fitCols
	}
	req := rf.request(table)
	req["rows"] = rows
	req["columns"] = cols
	return withClient(ctx, rf.server, func(ctx context.Context, c *client) error {
		var g coverageGrid
		if _, err := c.action(ctx, "coverage-grid", req, &g); err != nil {
			return err
		}
		if err := writeCoveragePlotSized(&g, path, "", width, height); err != nil {
			return err
		}
		_, err := fmt.Fprintf(e.stdout, "wrote %s: %s, %d entities in %d rows × %d intervals in %d columns\n",
			path, table, g.Identities, len(g.Rows), g.Intervals, len(g.ColumnIntervals))
		return err
	})
}
