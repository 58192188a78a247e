package main

// The coverage heat map: a coverageGrid (the coverage-grid action's answer)
// drawn as a picture, entities down and time across, to SVG (plot_svg.go) or
// PNG (plot_png.go). Both renderers draw the same plotPicture, which
// plotPrepare computes once: the checked grid, the layout (where every cell,
// label and tick goes), the cells' colour levels and the texts.
//
// This file holds the grid type, the entry points and the choice of
// renderer, and checks the grid; the rest is in plot_layout.go (sizes and
// where cells go), plot_axis.go (the index axis and its ticks),
// plot_colors.go (the colours and the coverage ramp), plot_cells.go
// (pooling the grid into drawn cells), plot_text.go (labels and
// percentages) and plot_picture.go (the picture both renderers draw).

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// coverageGrid is the JSON answer of the coverage-grid action: the range
// [Start, End) cut into len(ColumnIntervals) bins (columns) and the
// identities cut into len(Rows) groups (rows); Covered counts the covered
// (entity, interval) pairs of each cell.
type coverageGrid struct {
	Table           string   `json:"table"`
	Version         int64    `json:"version"`
	Start           any      `json:"start"` // RFC3339 string for timestamp indexes, integer (json.Number/float64) for integer indexes
	End             any      `json:"end"`
	Intervals       int64    `json:"intervals"`
	Identities      int64    `json:"identities"`
	EntityColumns   []string `json:"entity_columns"`
	Edges           []any    `json:"edges"`            // bins+1 boundaries, strings (RFC3339) or integers
	ColumnIntervals []int64  `json:"column_intervals"` // intervals per bin
	Rows            []struct {
		First      string `json:"first"`
		Last       string `json:"last"`
		Identities int64  `json:"identities"`
	} `json:"rows"`
	Covered [][]int64 `json:"covered"` // row-major: covered (entity, interval) pairs per cell
}

// plotRowsColumns returns how many rows (entity groups) and columns (time
// bins) to ask the coverage-grid action for so that the heat map of a
// width × height picture (pixels; 0 or less means the default size) has
// cells of one pixel: the room left for cells once the margins for the
// title, the widest entity labels, the time axis and the legend are taken,
// at most plotMaxGrid each and at least 1. A grid of that size drawn with
// writeCoveragePlotSized(g, path, title, width, height) fits in width ×
// height (the picture is never narrower than plotMinWidth); fewer rows (a table with fewer entities) or columns give larger
// cells. Ask for fewer when legible bands matter more than detail (a row
// is labelled only when its band, or every k-th band, has room for text).
func plotRowsColumns(width, height int) (rows, cols int) {
	width, height = plotTarget(width, height)
	cols = width - plotLeftMargin(plotLabelChars) - plotRightSpace
	rows = height - plotTopMargin - plotBottomArea
	return min(max(rows, 1), plotMaxGrid), min(max(cols, 1), plotMaxGrid)
}

// writeCoveragePlot draws g as a heat map to path, an .svg or .png file
// (the extension picks the format), aiming for the default size (see
// writeCoveragePlotSized). title heads the picture; empty means
// "coverage of TABLE".
func writeCoveragePlot(g *coverageGrid, path string, title string) error {
	return writeCoveragePlotSized(g, path, title, 0, 0)
}

// writeCoveragePlotSized is writeCoveragePlot aiming for a width × height
// picture (0 for the default): cells are whole pixels, at least one and at
// most plotMaxCellW × plotMaxCellH, so a small grid gives a smaller picture
// and a large one a larger picture, bounded by plotMaxSide (see
// plotRowsColumns for the grid size that fits). A malformed grid or an
// unknown extension is an error before path is touched; if writing fails,
// an existing file at path is left as it was (see createOutput).
func writeCoveragePlotSized(g *coverageGrid, path string, title string, width, height int) error {
	render, err := plotRenderer(path)
	if err != nil {
		return err
	}
	p, err := plotPrepare(g, title, width, height)
	if err != nil {
		return err
	}
	if err := writeOutputFile(path, func(w io.Writer) error { return render(p, w) }); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// plotRenderer picks the renderer from path's extension.
func plotRenderer(path string) (func(*plotPicture, io.Writer) error, error) {
	ext := filepath.Ext(path)
	switch strings.ToLower(ext) {
	case ".svg":
		return plotWriteSVG, nil
	case ".png":
		return plotWritePNG, nil
	case "":
		return nil, fmt.Errorf("plot file %q has no extension: use .svg or .png", path)
	}
	return nil, fmt.Errorf("cannot draw a plot as %q (%s): use .svg or .png", ext, path)
}

// ---- the grid, checked ----

// plotCheck validates g's shape and reads its axis (plotFillLevels checks
// the counts).
func plotCheck(g *coverageGrid) (*plotAxis, error) {
	if g == nil {
		return nil, errors.New("coverage grid: none")
	}
	rows, cols := len(g.Rows), len(g.ColumnIntervals)
	if rows == 0 {
		return nil, errors.New("coverage grid: no rows")
	}
	if cols == 0 {
		return nil, errors.New("coverage grid: no columns")
	}
	if len(g.Edges) != cols+1 {
		return nil, fmt.Errorf("coverage grid: %d edges for %d columns (want %d)", len(g.Edges), cols, cols+1)
	}
	if len(g.Covered) != rows {
		return nil, fmt.Errorf("coverage grid: %d rows of counts for %d rows", len(g.Covered), rows)
	}
	ax := &plotAxis{edges: make([]int64, len(g.Edges))}
	for c, n := range g.ColumnIntervals {
		if n < 0 {
			return nil, fmt.Errorf("coverage grid: column %d has %d intervals", c, n)
		}
	}
	for r, row := range g.Rows {
		if row.Identities < 0 {
			return nil, fmt.Errorf("coverage grid: row %d has %d identities", r, row.Identities)
		}
		if len(g.Covered[r]) != cols {
			return nil, fmt.Errorf("coverage grid: row %d has %d counts for %d columns", r, len(g.Covered[r]), cols)
		}
	}
	for i, e := range g.Edges {
		v, isTime, err := plotIndexValue(e)
		if err != nil {
			return nil, fmt.Errorf("coverage grid: edge %d: %v", i, err)
		}
		if i == 0 {
			ax.times = isTime
		} else if isTime != ax.times {
			return nil, fmt.Errorf("coverage grid: edge %d: times and integers mixed", i)
		} else if v <= ax.edges[i-1] {
			return nil, fmt.Errorf("coverage grid: edge %d (%v) does not follow edge %d (%v)", i, e, i-1, g.Edges[i-1])
		}
		ax.edges[i] = v
	}
	ax.start, ax.end = ax.edges[0], ax.edges[cols]
	// The range asked for, when it reads as the same kind of index.
	if v, isTime, err := plotIndexValue(g.Start); err == nil && isTime == ax.times {
		ax.start = v
	}
	if v, isTime, err := plotIndexValue(g.End); err == nil && isTime == ax.times {
		ax.end = v
	}
	return ax, nil
}
