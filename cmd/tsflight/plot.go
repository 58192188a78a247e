package main

// The coverage heat map: a coverageGrid (the coverage-grid action's answer)
// drawn as a picture, entities down and time across, to SVG (plot_svg.go) or
// PNG (plot_png.go). Both renderers draw the same plotPicture, which
// plotPrepare computes once: the checked grid, the layout (where every cell,
// label and tick goes), the cells' colour levels and the texts.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// plotLevels is the number of colours on the coverage ramp: level 0 is a gap
// (nothing covered), level plotLevels-1 full coverage, and every other
// coverage one of the levels in between (never 0 or the top unless it is
// exactly nothing or everything).
const plotLevels = 201

// plotNoData is the level of a cell with no (entity, interval) pairs at all
// (a row of zero identities or a bin of zero intervals).
const plotNoData = 255

// Colours.
var (
	plotBackground = color.RGBA{0xff, 0xff, 0xff, 0xff}
	plotInk        = color.RGBA{0x1f, 0x1f, 0x1f, 0xff}
	plotSubInk     = color.RGBA{0x55, 0x55, 0x55, 0xff}
	plotAxisInk    = color.RGBA{0x88, 0x88, 0x88, 0xff}
	plotNoDataInk  = color.RGBA{0xd4, 0xd4, 0xd4, 0xff}
)

// plotRampStops is the coverage colour scale, evenly spaced from 0 (gap, a
// strong red) to 1 (full, a dark blue), through orange, yellow (half) and
// light blue: ColorBrewer's RdYlBu without its near-white middle, so no
// level looks like the background, and readable with the common
// colour-vision deficiencies (red and blue stay apart).
var plotRampStops = []color.RGBA{
	{0xd7, 0x30, 0x27, 0xff},
	{0xf4, 0x6d, 0x43, 0xff},
	{0xfd, 0xae, 0x61, 0xff},
	{0xfe, 0xe0, 0x90, 0xff}, // 50 %
	{0x91, 0xbf, 0xdb, 0xff},
	{0x45, 0x75, 0xb4, 0xff},
	{0x23, 0x2a, 0x7d, 0xff},
}

// plotRampColor is the colour of a coverage ratio in [0, 1] on the scale.
func plotRampColor(ratio float64) color.RGBA {
	if !(ratio > 0) {
		return plotRampStops[0]
	}
	if ratio >= 1 {
		return plotRampStops[len(plotRampStops)-1]
	}
	pos := ratio * float64(len(plotRampStops)-1)
	i := int(pos)
	f := pos - float64(i)
	a, b := plotRampStops[i], plotRampStops[i+1]
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + f*(float64(y)-float64(x)))) }
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 0xff}
}

// plotLevelColor is the colour of a cell level (plotNoData included).
func plotLevelColor(level uint8) color.RGBA {
	if level == plotNoData {
		return plotNoDataInk
	}
	return plotRampColor(float64(level) / (plotLevels - 1))
}

// plotLevel maps a cell's pooled coverage to a level: covered of total
// pairs, gap when nothing is covered, full when everything is.
func plotLevel(covered, total float64, gap, full bool) uint8 {
	switch {
	case total == 0:
		return plotNoData
	case gap:
		return 0
	case full:
		return plotLevels - 1
	}
	l := int(math.Round(covered / total * (plotLevels - 1)))
	return uint8(min(max(l, 1), plotLevels-2))
}

// plotHex is a colour as SVG writes it.
func plotHex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

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
// the partial file is removed.
func writeCoveragePlotSized(g *coverageGrid, path string, title string, width, height int) error {
	render, err := plotRenderer(path)
	if err != nil {
		return err
	}
	p, err := plotPrepare(g, title, width, height)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	err = render(p, w)
	if err == nil {
		err = w.Flush()
	}
	st, serr := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// Remove what was written, but never a device or pipe named
		// as the output.
		if serr == nil && st.Mode().IsRegular() {
			os.Remove(path)
		}
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

// plotAxis is the grid's index axis: the edges as int64 (Unix nanoseconds
// for a timestamp index, values for an integer one).
type plotAxis struct {
	times bool
	edges []int64
	start int64 // the range asked for (the edges' ends if not given)
	end   int64
}

// plotPool is the pooled coverage of some cells: covered of total pairs
// (floats: they may exceed an int64), gap if no cell with pairs has any
// covered, full if every one has all.
type plotPool struct {
	covered, total float64
	gap, full      bool
}

var (
	plotMinTime = time.Unix(0, math.MinInt64).UTC()
	plotMaxTime = time.Unix(0, math.MaxInt64).UTC()
)

// plotIndexValue reads an edge, start or end: an RFC3339 string (time) or
// an integer (float64 or json.Number from encoding/json, or a Go integer).
func plotIndexValue(v any) (n int64, isTime bool, err error) {
	switch v := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return 0, false, fmt.Errorf("%q is not an RFC 3339 time", v)
		}
		if t.Before(plotMinTime) || t.After(plotMaxTime) {
			return 0, false, fmt.Errorf("time %s is out of range", v)
		}
		return t.UnixNano(), true, nil
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return 0, false, fmt.Errorf("%s is not an integer", v)
		}
		return n, false, nil
	case float64:
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, false, fmt.Errorf("%v is not an integer", v)
		}
		return int64(v), false, nil
	case int:
		return int64(v), false, nil
	case int64:
		return v, false, nil
	case int32:
		return int64(v), false, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, false, fmt.Errorf("%d is out of range", v)
		}
		return int64(v), false, nil
	case nil:
		return 0, false, errors.New("missing")
	}
	return 0, false, fmt.Errorf("%v (%T) is neither a time nor an integer", v, v)
}

// plotCellTotal is the number of (entity, interval) pairs of a cell, and
// whether it fits an int64 (if not, no count can reach it).
func plotCellTotal(identities, intervals int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(identities), uint64(intervals))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

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

// ---- the picture ----

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

// plotText is a line of text: its baseline starts (anchor "start"), is
// centred on (middle) or ends (end) at x, y.
type plotText struct {
	x, y   int
	s      string
	anchor string
	ink    color.RGBA
	bold   bool
}

// plotPicture is everything both renderers draw.
type plotPicture struct {
	layout plotLayout
	levels []uint8 // drawRows × drawCols, row-major
	noData bool    // some cell has no pairs (the legend shows its colour)
	texts  []plotText
	ticks  []image.Rectangle // tick marks (thin filled rectangles)
}

// plotPrepare checks g and computes the picture.
func plotPrepare(g *coverageGrid, title string, width, height int) (*plotPicture, error) {
	ax, err := plotCheck(g)
	if err != nil {
		return nil, err
	}
	rows, cols := len(g.Rows), len(g.ColumnIntervals)

	// The y labels first: their width decides the left margin. Label every
	// k-th row so labels are a text line apart.
	header := plotTruncate(strings.Join(g.EntityColumns, ", "), plotLabelChars)
	l0 := plotNewLayout(rows, cols, plotLabelChars, width, height)
	every := l0.rowGroup * ((plotLineH + l0.cellH - 1) / l0.cellH)
	type yLabel struct {
		row int
		s   string
	}
	var ylabels []yLabel
	labelChars := max(plotTextLen(header), 4)
	for r := 0; r < rows; r += every {
		s := plotRowLabel(g, r)
		ylabels = append(ylabels, yLabel{r, s})
		labelChars = max(labelChars, plotTextLen(s))
	}
	l := plotNewLayout(rows, cols, labelChars, width, height)
	p := &plotPicture{layout: l}
	p.levels = make([]uint8, l.drawRows*l.drawCols)
	all, noData, err := plotFillLevels(g, &l, p.levels)
	if err != nil {
		return nil, err
	}
	p.noData = noData

	// The title and subtitle, which may widen the picture.
	if title == "" {
		title = "coverage of " + g.Table
	}
	title = plotTruncate(title, (plotMaxSide-2*plotPad)/plotCharW)
	var sub strings.Builder
	if g.Table != "" {
		fmt.Fprintf(&sub, "table %s  ", g.Table)
	}
	fmt.Fprintf(&sub, "version %d  %s  ", g.Version, plotRangeText(ax))
	if all.total == 0 {
		sub.WriteString("no (entity, interval) pairs")
	} else {
		fmt.Fprintf(&sub, "%s covered", plotPercent(all.covered, all.total, all.gap, all.full))
	}
	if g.Identities > 0 && g.Intervals > 0 {
		fmt.Fprintf(&sub, " (%d identities × %d intervals)", g.Identities, g.Intervals)
	}
	subtitle := plotTruncate(sub.String(), (plotMaxSide-2*plotPad)/plotCharW)
	titleChars := max(plotTextLen(title), plotTextLen(subtitle))
	l.width = min(max(l.width, 2*plotPad+titleChars*plotCharW), plotMaxSide)
	p.layout = l

	// The texts: title and subtitle first.
	p.texts = append(p.texts,
		plotText{x: plotPad, y: plotPad + 11, s: title, anchor: "start", ink: plotInk, bold: true},
		plotText{x: plotPad, y: plotPad + 11 + plotLineH, s: subtitle, anchor: "start", ink: plotSubInk})
	// The y axis: the entity columns over the labels, a label (and a tick)
	// for every k-th row.
	labelX := l.plotX - plotTickLen - 3
	if header != "" {
		p.texts = append(p.texts, plotText{x: labelX, y: l.plotY - 6, s: header, anchor: "end", ink: plotSubInk})
	}
	for _, yl := range ylabels {
		rc := l.cellRect(yl.row, 0)
		mid := (rc.Min.Y + rc.Max.Y) / 2
		if l.separators {
			mid = (rc.Min.Y + rc.Max.Y - 1) / 2
		}
		p.texts = append(p.texts, plotText{x: labelX, y: mid + 4, s: yl.s, anchor: "end", ink: plotInk})
		p.ticks = append(p.ticks, image.Rect(l.plotX-plotTickLen, mid, l.plotX, mid+1))
	}
	// The x axis.
	bottom := l.plotY + l.plotH
	maxLabel := 5
	if !ax.times {
		maxLabel = max(len(strconv.FormatInt(ax.edges[0], 10)), len(strconv.FormatInt(ax.edges[cols], 10)))
	}
	ticks, axisTitle := plotTicks(ax, max(l.plotW/((maxLabel+2)*plotCharW), 1))
	for _, t := range ticks {
		x := p.xOf(ax, t.v)
		p.ticks = append(p.ticks, image.Rect(x, bottom, x+1, bottom+plotTickLen))
		p.texts = append(p.texts, plotText{x: x, y: bottom + plotTickLen + 2 + 11, s: t.label, anchor: "middle", ink: plotInk})
		if t.date != "" {
			p.texts = append(p.texts, plotText{x: x, y: bottom + plotTickLen + 2 + 11 + plotLineH, s: t.date, anchor: "middle", ink: plotSubInk})
		}
	}
	p.texts = append(p.texts, plotText{x: l.plotX + l.plotW/2, y: bottom + 52, s: axisTitle, anchor: "middle", ink: plotSubInk})
	// The legend: "coverage", the colour bar with 0/50/100 % ticks and a
	// "no data" swatch when needed.
	lx, ly := p.legendBar()
	p.texts = append(p.texts, plotText{x: l.plotX, y: ly + plotLegendH - 2, s: "coverage", anchor: "start", ink: plotInk})
	for i, s := range []string{"0% (gap)", "50%", "100% (full)"} {
		x := lx + i*(plotLegendW-1)/2
		anchor := []string{"start", "middle", "end"}[i]
		p.ticks = append(p.ticks, image.Rect(x, ly+plotLegendH, x+1, ly+plotLegendH+3))
		p.texts = append(p.texts, plotText{x: x, y: ly + plotLegendH + 3 + 11, s: s, anchor: anchor, ink: plotInk})
	}
	if p.noData {
		p.texts = append(p.texts, plotText{x: lx + plotLegendW + 24 + plotLegendH + 4, y: ly + plotLegendH - 2, s: "no data", anchor: "start", ink: plotInk})
	}
	return p, nil
}

// legendBar is the colour bar's top-left corner.
func (p *plotPicture) legendBar() (x, y int) {
	l := &p.layout
	return l.plotX + 9*plotCharW, l.plotY + l.plotH + 60
}

// noDataSwatch is the "no data" legend square.
func (p *plotPicture) noDataSwatch() image.Rectangle {
	x, y := p.legendBar()
	x += plotLegendW + 24
	return image.Rect(x, y, x+plotLegendH, y+plotLegendH)
}

// xOf is the pixel column of index value v: within the bin holding it, in
// proportion (bins may differ in length).
func (p *plotPicture) xOf(ax *plotAxis, v int64) int {
	l := &p.layout
	e := ax.edges
	c := sort.Search(len(e), func(i int) bool { return e[i] > v }) - 1
	c = min(max(c, 0), l.cols-1)
	f := float64(uint64(v)-uint64(e[c])) / float64(uint64(e[c+1])-uint64(e[c]))
	if v < e[c] {
		f = 0
	}
	f = min(max(f, 0), 1)
	d := c / l.colGroup
	n := min((d+1)*l.colGroup, l.cols) - d*l.colGroup
	x := float64(l.plotX+d*l.cellW) + (float64(c-d*l.colGroup)+f)/float64(n)*float64(l.cellW)
	return min(int(x), l.plotX+l.plotW-1)
}

// plotFillLevels checks g's counts and fills levels (drawRows × drawCols)
// with the level of each drawn cell, pooling the grid cells it holds. It
// returns the whole grid's coverage and whether some cell has no data.
// Every count is read once (a 4096² grid is 16 M of them).
func plotFillLevels(g *coverageGrid, l *plotLayout, levels []uint8) (all plotPool, noData bool, err error) {
	all = plotPool{gap: true, full: true}
	cis := g.ColumnIntervals[:l.cols]
	for b := range l.drawRows {
		lo, hi := l.bandRange(b)
		out := levels[b*l.drawCols : (b+1)*l.drawCols]
		for d := range out {
			c0, c1 := d*l.colGroup, min((d+1)*l.colGroup, l.cols)
			cell := plotPool{gap: true, full: true}
			for r := lo; r < hi; r++ {
				id := g.Rows[r].Identities
				fid := float64(id)
				row := g.Covered[r][c0:c1]
				for i, n := range row {
					ci := cis[c0+i]
					t, fits := plotCellTotal(id, ci)
					if n < 0 || (fits && n > t) {
						return all, false, fmt.Errorf("coverage grid: cell (%d, %d) covers %d of %d×%d pairs", r, c0+i, n, id, ci)
					}
					cell.covered += float64(n)
					cell.total += fid * float64(ci)
					cell.gap = cell.gap && n == 0
					cell.full = cell.full && fits && n == t
				}
			}
			all.add(cell)
			out[d] = plotLevel(cell.covered, cell.total, cell.gap, cell.full)
			noData = noData || out[d] == plotNoData
		}
	}
	return all, noData, nil
}

func (p *plotPool) add(q plotPool) {
	p.covered += q.covered
	p.total += q.total
	p.gap = p.gap && q.gap
	p.full = p.full && q.full
}

// plotPercent formats a coverage percentage that reads 0 % or 100 % only
// when it is exactly that.
func plotPercent(covered, total float64, gap, full bool) string {
	switch {
	case total == 0:
		return "-"
	case gap:
		return "0%"
	case full:
		return "100%"
	}
	pct := 100 * covered / total
	s := strconv.FormatFloat(pct, 'f', 1, 64)
	switch s {
	case "0.0":
		return "<0.1%"
	case "100.0":
		return ">99.9%"
	}
	return s + "%"
}

// plotRowLabel is row r's y label: the entity, "first … last (n)" for a row
// of several identities, the table's name for a table without entity
// columns.
func plotRowLabel(g *coverageGrid, r int) string {
	row := g.Rows[r]
	if row.Identities > 1 {
		// Within plotLabelChars as the PNG spells it (" ... ").
		count := fmt.Sprintf(" (%d)", row.Identities)
		half := max((plotLabelChars-len(count)-5)/2, 3)
		return plotTruncate(plotQuoteEmpty(row.First), half) + " … " + plotTruncate(plotQuoteEmpty(row.Last), half) + count
	}
	if row.First == "" && len(g.EntityColumns) == 0 {
		if g.Table == "" {
			return "(all)"
		}
		return plotTruncate(g.Table, plotLabelChars)
	}
	return plotTruncate(plotQuoteEmpty(row.First), plotLabelChars)
}

func plotQuoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// plotTruncate cuts s to at most n characters as drawn (plotTextLen),
// ending in "…" if cut.
func plotTruncate(s string, n int) string {
	if plotTextLen(s) <= n {
		return s
	}
	var b strings.Builder
	w := 0
	for _, r := range s {
		rw := plotTextLen(string(r))
		if w+rw > n-3 {
			break
		}
		b.WriteRune(r)
		w += rw
	}
	return b.String() + "…"
}

// plotASCII is s as the PNG font can draw it: the punctuation the labels
// use spelled in ASCII, control characters dropped, anything else left for
// the font's replacement glyph.
func plotASCII(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '…':
			b.WriteString("...")
		case r == '×':
			b.WriteByte('x')
		case r == '–' || r == '—' || r == '−':
			b.WriteByte('-')
		case r == '→':
			b.WriteString("->")
		case r == '·':
			b.WriteByte('.')
		case r < 0x20 || r == 0x7f:
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// plotTextLen is s's width in characters as drawn.
func plotTextLen(s string) int { return utf8.RuneCountInString(plotASCII(s)) }

// ---- the index axis ----

// plotTick is an x tick: its value, its label and, for times, the date
// under it where the day changes.
type plotTick struct {
	v     int64
	label string
	date  string
}

// plotRangeText is the grid's range for the subtitle.
func plotRangeText(ax *plotAxis) string {
	if !ax.times {
		return fmt.Sprintf("index %d to %d", ax.start, ax.end)
	}
	layout := plotTimeLayout(append([]int64{ax.start, ax.end}, ax.edges...))
	return time.Unix(0, ax.start).UTC().Format(layout) + " to " + time.Unix(0, ax.end).UTC().Format(layout) + " UTC"
}

// plotTimeLayout is the shortest date-time layout that shows all of ts
// exactly (to the millisecond).
func plotTimeLayout(ts []int64) string {
	var unit int64 = 24 * int64(time.Hour)
	for _, t := range ts {
		for unit > int64(time.Millisecond) && t%unit != 0 {
			switch unit {
			case 24 * int64(time.Hour):
				unit = int64(time.Minute)
			case int64(time.Minute):
				unit = int64(time.Second)
			default:
				unit = int64(time.Millisecond)
			}
		}
	}
	switch unit {
	case 24 * int64(time.Hour):
		return "2006-01-02"
	case int64(time.Minute):
		return "2006-01-02 15:04"
	case int64(time.Second):
		return "2006-01-02 15:04:05"
	}
	return "2006-01-02 15:04:05.000"
}

// plotTimeStep is a candidate spacing of time ticks: a duration, or a
// number of months.
type plotTimeStep struct {
	d      time.Duration
	months int
}

var plotTimeSteps = func() []plotTimeStep {
	var s []plotTimeStep
	for _, d := range []time.Duration{
		time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
		10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
		24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour,
	} {
		s = append(s, plotTimeStep{d: d})
	}
	for _, m := range []int{1, 2, 3, 6, 12, 24, 60, 120, 240, 600, 1200, 2400, 6000} {
		s = append(s, plotTimeStep{months: m})
	}
	return s
}()

// plotTicks picks at most maxTicks nice ticks in the axis's edges, and the
// axis title.
func plotTicks(ax *plotAxis, maxTicks int) ([]plotTick, string) {
	lo, hi := ax.edges[0], ax.edges[len(ax.edges)-1]
	if !ax.times {
		return plotIntTicks(lo, hi, maxTicks), "index"
	}
	span := float64(uint64(hi) - uint64(lo))
	step := plotTimeSteps[len(plotTimeSteps)-1]
	for _, s := range plotTimeSteps {
		length := float64(s.d)
		if s.months > 0 {
			length = float64(s.months) * 31 * 24 * float64(time.Hour)
		}
		if span/length <= float64(maxTicks) {
			step = s
			break
		}
	}
	var layout string
	switch {
	case step.months >= 12:
		layout = "2006"
	case step.months > 0:
		layout = "2006-01"
	case step.d >= 24*time.Hour:
		layout = "2006-01-02"
	case step.d >= time.Minute:
		layout = "15:04"
	case step.d >= time.Second:
		layout = "15:04:05"
	default:
		layout = "15:04:05.000"
	}
	subDay := step.months == 0 && step.d < 24*time.Hour
	startT := time.Unix(0, lo).UTC()
	var vals []int64
	if step.months > 0 {
		y, m, _ := startT.Date()
		t := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		if t.UnixNano() < lo {
			t = t.AddDate(0, 1, 0)
		}
		for ; len(vals) <= maxTicks+1 && !t.After(plotMaxTime) && t.UnixNano() <= hi; t = t.AddDate(0, 1, 0) {
			if (t.Year()*12+int(t.Month())-1)%step.months == 0 {
				vals = append(vals, t.UnixNano())
			}
		}
	} else {
		d := int64(step.d)
		var off int64
		if step.d == 7*24*time.Hour || step.d == 14*24*time.Hour {
			off = 4 * 24 * int64(time.Hour) // Mondays (1970-01-05 was one)
		}
		for v := plotCeilTo(lo-off, d) + off; v <= hi && len(vals) <= maxTicks+1; v += d {
			vals = append(vals, v)
			if v > math.MaxInt64-d {
				break
			}
		}
	}
	day := func(v int64) string { return time.Unix(0, v).UTC().Format("2006-01-02") }
	var ticks []plotTick
	prev := day(lo)
	for _, v := range vals {
		t := plotTick{v: v, label: time.Unix(0, v).UTC().Format(layout)}
		if subDay && day(v) != prev {
			t.date = day(v)
			prev = t.date
		}
		ticks = append(ticks, t)
	}
	if len(ticks) == 0 {
		ticks = []plotTick{{v: lo, label: time.Unix(0, lo).UTC().Format(plotTimeLayout([]int64{lo}))}}
	}
	title := "time (UTC)"
	if subDay {
		if day(lo) == day(hi-1) {
			title = "time (UTC) on " + day(lo)
		} else {
			title = "time (UTC) from " + day(lo)
		}
	}
	return ticks, title
}

// plotCeilTo rounds v up to a multiple of step (> 0).
func plotCeilTo(v, step int64) int64 {
	q := v / step
	if v%step != 0 && v > 0 {
		q++
	}
	if q > math.MaxInt64/step {
		return math.MaxInt64
	}
	return q * step
}

// plotIntTicks picks ticks at multiples of 1, 2 or 5 × 10^k in [lo, hi].
func plotIntTicks(lo, hi int64, maxTicks int) []plotTick {
	span := float64(uint64(hi) - uint64(lo))
	raw := span / float64(maxTicks)
	var step int64 = 1
	for p := 1.0; p <= 1e18; p *= 10 {
		found := false
		for _, m := range []float64{1, 2, 5} {
			if m*p >= raw {
				step, found = int64(m*p), true
				break
			}
		}
		if found {
			break
		}
	}
	var ticks []plotTick
	if step <= 0 {
		step = math.MaxInt64
	}
	for v := plotCeilTo(lo, step); v <= hi && len(ticks) <= maxTicks+1; v += step {
		ticks = append(ticks, plotTick{v: v, label: strconv.FormatInt(v, 10)})
		if v > math.MaxInt64-step {
			break
		}
	}
	if len(ticks) == 0 {
		ticks = []plotTick{{v: lo, label: strconv.FormatInt(lo, 10)}}
	}
	return ticks
}
