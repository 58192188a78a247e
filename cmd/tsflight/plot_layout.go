package main

import (
	"image"
)

// The heat map's layout: its sizes in pixels, and where the cells go
// (how many grid rows and columns share a drawn cell when the grid is
// larger than the picture).

// Sizes, in pixels (SVG user units are the same).
const (
	// plotMaxSide bounds the picture's width and height. A grid with more
	// rows or columns than fit at one pixel per cell is drawn with several
	// grid rows or columns merged into one pixel (their coverage pooled).
	plotMaxSide = 4000
	// plotDefaultWidth and plotDefaultHeight are the size writeCoveragePlot
	// aims for: a small grid gets large cells up to this size (cells are
	// at most plotMaxCellW × plotMaxCellH), a larger one one-pixel cells
	// and a picture beyond it (up to plotMaxSide).
	plotDefaultWidth  = 1400
	plotDefaultHeight = 900
	plotMaxCellW      = 96
	plotMaxCellH      = 36
	// plotMaxGrid is the most rows or columns plotRowsColumns suggests.
	plotMaxGrid = 4096

	plotCharW      = 7  // text: basicfont.Face7x13's advance (SVG: 12px monospace)
	plotLineH      = 15 // distance between text lines
	plotPad        = 10 // blank border around the picture
	plotTopMargin  = 64 // title, subtitle and the entity columns above the labels
	plotRightSpace = 50 // room for the last x tick label
	plotBottomArea = 100
	plotMinWidth   = 640
	plotLabelChars = 40 // longest y label, in characters
	plotTickLen    = 4
	plotLegendW    = 240 // the colour bar
	plotLegendH    = 12
)

// plotTarget applies the defaults and the bound to a requested size.
func plotTarget(width, height int) (int, int) {
	if width <= 0 {
		width = plotDefaultWidth
	}
	if height <= 0 {
		height = plotDefaultHeight
	}
	return min(width, plotMaxSide), min(height, plotMaxSide)
}

// plotLeftMargin is the cells' left edge for y labels of labelChars
// characters.
func plotLeftMargin(labelChars int) int {
	return plotPad + labelChars*plotCharW + 6 + plotTickLen
}

// plotLayout places the cells: the grid's rows are bands down from plotY,
// its columns cells across from plotX. Drawn cells are cellW × cellH
// pixels; rowGroup grid rows (colGroup columns) share one drawn cell when
// the grid has more than fit in plotMaxSide (1 otherwise).
type plotLayout struct {
	width, height      int // the picture
	plotX, plotY       int // the cells' top-left corner
	plotW, plotH       int // the cells' extent
	cellW, cellH       int // one drawn cell
	rowGroup, colGroup int // grid rows / columns per drawn cell
	drawRows, drawCols int // drawn cells down / across
	rows, cols         int // the grid's
	labelChars         int // the y labels' room, in characters
	separators         bool
}

// plotNewLayout sizes the picture for a rows × cols grid and y labels of
// up to labelChars characters, aiming for a width × height picture (0: the
// default).
func plotNewLayout(rows, cols, labelChars, width, height int) plotLayout {
	width, height = plotTarget(width, height)
	l := plotLayout{rows: rows, cols: cols, labelChars: labelChars}
	l.plotX = plotLeftMargin(labelChars)
	l.plotY = plotTopMargin
	fit := func(n, want, limit, maxCell int) (cell, group int) {
		if n <= want {
			return min(want/n, maxCell), 1
		}
		if n <= limit {
			return 1, 1
		}
		return 1, (n + limit - 1) / limit
	}
	l.cellW, l.colGroup = fit(cols, max(width-l.plotX-plotRightSpace, 1), plotMaxSide-l.plotX-plotRightSpace, plotMaxCellW)
	l.cellH, l.rowGroup = fit(rows, max(height-plotTopMargin-plotBottomArea, 1), plotMaxSide-plotTopMargin-plotBottomArea, plotMaxCellH)
	l.drawCols = (cols + l.colGroup - 1) / l.colGroup
	l.drawRows = (rows + l.rowGroup - 1) / l.rowGroup
	l.plotW, l.plotH = l.drawCols*l.cellW, l.drawRows*l.cellH
	l.width = min(max(l.plotX+l.plotW+plotRightSpace, plotMinWidth, l.plotX+plotLegendExtent), plotMaxSide)
	l.height = l.plotY + l.plotH + plotBottomArea
	// A white line between bands when they are tall enough to spare it.
	l.separators = l.cellH >= 8 && l.drawRows > 1
	return l
}

// plotLegendExtent is the legend's width from plotX: "coverage", the bar,
// and a "no data" swatch.
const plotLegendExtent = 9*plotCharW + plotLegendW + 24 + 8*plotCharW + plotPad

// cellRect is the pixel rectangle of grid cell (row, col): the drawn cell
// holding it (shared with neighbours when rows or columns are merged).
func (l *plotLayout) cellRect(row, col int) image.Rectangle {
	x := l.plotX + col/l.colGroup*l.cellW
	y := l.plotY + row/l.rowGroup*l.cellH
	return image.Rect(x, y, x+l.cellW, y+l.cellH)
}

// plotRect is the cells' area.
func (l *plotLayout) plotRect() image.Rectangle {
	return image.Rect(l.plotX, l.plotY, l.plotX+l.plotW, l.plotY+l.plotH)
}

// bandRange is the grid rows [lo, hi) of drawn band r.
func (l *plotLayout) bandRange(r int) (lo, hi int) {
	return r * l.rowGroup, min((r+1)*l.rowGroup, l.rows)
}
