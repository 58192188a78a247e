package main

import (
	"fmt"
	"image"
	"image/color"
	"sort"
	"strconv"
	"strings"
)

// The picture both renderers draw: plotPrepare computes the layout, the
// cells' levels, the texts and the tick marks once.

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
