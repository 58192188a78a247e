package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"io"
)

// The SVG heat map: the same picture as the PNG, in user units equal to the
// PNG's pixels. The cells are rects in <g id="cells">, one per horizontal
// run of equal colour in a band, and one for a run of identical bands, so a
// mostly covered table is a few rects whatever the grid's size.

// plotWriteSVG draws p as an SVG document to w.
func plotWriteSVG(p *plotPicture, w io.Writer) error {
	l := &p.layout
	sw := &plotSVGWriter{w: w}
	sw.printf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" `+
		`font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="12" xml:space="preserve">`+"\n",
		l.width, l.height, l.width, l.height)
	if len(p.texts) > 0 {
		sw.printf("<title>%s</title>\n", plotXMLText(p.texts[0].s))
	}
	sw.printf(`<defs><linearGradient id="plot-ramp" x1="0" y1="0" x2="1" y2="0">`)
	for i, c := range plotRampStops {
		sw.printf(`<stop offset="%.4f" stop-color="%s"/>`, float64(i)/float64(len(plotRampStops)-1), plotHex(c))
	}
	sw.printf("</linearGradient></defs>\n")
	sw.printf(`<rect width="%d" height="%d" fill="%s"/>`+"\n", l.width, l.height, plotHex(plotBackground))
	pr := l.plotRect().Inset(-1)
	sw.printf(`<rect id="frame" x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", pr.Min.X, pr.Min.Y, pr.Dx(), pr.Dy(), plotHex(plotAxisInk))

	// The cells: runs of equal level along a band; consecutive identical
	// bands share their rects.
	sw.printf(`<g id="cells" shape-rendering="crispEdges">` + "\n")
	fills := make([]string, 256)
	for lv := range fills {
		fills[lv] = plotHex(plotLevelColor(uint8(lv)))
	}
	band := func(r int) []uint8 { return p.levels[r*l.drawCols : (r+1)*l.drawCols] }
	for r := 0; r < l.drawRows; {
		n := 1
		for r+n < l.drawRows && bytes.Equal(band(r), band(r+n)) {
			n++
		}
		levels := band(r)
		y := l.plotY + r*l.cellH
		for c := 0; c < l.drawCols; {
			e := c + 1
			for e < l.drawCols && levels[e] == levels[c] {
				e++
			}
			sw.printf(`<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n",
				l.plotX+c*l.cellW, y, (e-c)*l.cellW, n*l.cellH, fills[levels[c]])
			c = e
		}
		r += n
	}
	sw.printf("</g>\n")
	if l.separators {
		sw.printf(`<g id="separators" fill="%s" shape-rendering="crispEdges">`+"\n", plotHex(plotBackground))
		for r := 1; r < l.drawRows; r++ {
			sw.printf(`<rect x="%d" y="%d" width="%d" height="1"/>`+"\n", l.plotX, l.plotY+r*l.cellH-1, l.plotW)
		}
		sw.printf("</g>\n")
	}
	sw.printf(`<g id="ticks" fill="%s" shape-rendering="crispEdges">`+"\n", plotHex(plotAxisInk))
	for _, t := range p.ticks {
		sw.rect(t)
	}
	sw.printf("</g>\n")

	// The legend.
	lx, ly := p.legendBar()
	sw.printf(`<g id="legend">`+"\n"+`<rect x="%d" y="%d" width="%d" height="%d" fill="url(#plot-ramp)"/>`+"\n",
		lx, ly, plotLegendW, plotLegendH)
	if p.noData {
		s := p.noDataSwatch()
		sw.printf(`<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="%s"/>`+"\n",
			s.Min.X, s.Min.Y, s.Dx(), s.Dy(), plotHex(plotNoDataInk), plotHex(plotAxisInk))
	}
	sw.printf("</g>\n")

	sw.printf(`<g id="texts">` + "\n")
	for _, t := range p.texts {
		sw.printf(`<text x="%d" y="%d"`, t.x, t.y)
		if t.anchor != "start" {
			sw.printf(` text-anchor="%s"`, t.anchor)
		}
		if t.bold {
			sw.printf(` font-weight="bold"`)
		}
		sw.printf(` fill="%s">%s</text>`+"\n", plotHex(t.ink), plotXMLText(t.s))
	}
	sw.printf("</g>\n</svg>\n")
	return sw.err
}

// plotSVGWriter writes until the first error and keeps it.
type plotSVGWriter struct {
	w   io.Writer
	err error
}

func (s *plotSVGWriter) printf(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

func (s *plotSVGWriter) rect(r image.Rectangle) {
	s.printf(`<rect x="%d" y="%d" width="%d" height="%d"/>`+"\n", r.Min.X, r.Min.Y, r.Dx(), r.Dy())
}

// plotXMLText escapes s for XML text (characters XML cannot hold become
// U+FFFD).
func plotXMLText(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
