package main

import (
	"image"
	"image/color"
	"image/png"
	"io"

	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The PNG heat map: a paletted image (one byte a pixel, so a picture of
// plotMaxSide² pixels stays cheap to fill and encode) with the text in
// basicfont's 7×13 face.

// Palette indexes: the fixed colours, then the ramp's levels.
const (
	plotPalBackground = iota
	plotPalInk
	plotPalSubInk
	plotPalAxis
	plotPalNoData
	plotPalRamp // + level
)

// plotPalette is the PNG's palette.
var plotPalette = func() color.Palette {
	p := color.Palette{plotBackground, plotInk, plotSubInk, plotAxisInk, plotNoDataInk}
	for l := range plotLevels {
		p = append(p, plotLevelColor(uint8(l)))
	}
	return p
}()

// plotPalIndex is a level's palette index.
func plotPalIndex(level uint8) uint8 {
	if level == plotNoData {
		return plotPalNoData
	}
	return plotPalRamp + level
}

// plotWritePNG draws p as a PNG to w.
func plotWritePNG(p *plotPicture, w io.Writer) error {
	l := &p.layout
	img := image.NewPaletted(image.Rect(0, 0, l.width, l.height), plotPalette)
	fill := func(r image.Rectangle, idx uint8) {
		r = r.Intersect(img.Rect)
		for y := r.Min.Y; y < r.Max.Y; y++ {
			row := img.Pix[y*img.Stride+r.Min.X : y*img.Stride+r.Max.X]
			for i := range row {
				row[i] = idx
			}
		}
	}
	// A frame around the cells, then the cells a band at a time.
	fill(l.plotRect().Inset(-1), plotPalAxis)
	line := make([]uint8, l.plotW)
	cellW := l.cellW
	for r := range l.drawRows {
		for c, lv := range p.levels[r*l.drawCols : (r+1)*l.drawCols] {
			idx := plotPalIndex(lv)
			if cellW == 1 {
				line[c] = idx
				continue
			}
			seg := line[c*cellW : (c+1)*cellW]
			for i := range seg {
				seg[i] = idx
			}
		}
		y0 := l.plotY + r*l.cellH
		y1 := y0 + l.cellH
		if l.separators && r < l.drawRows-1 {
			y1--
			fill(image.Rect(l.plotX, y1, l.plotX+l.plotW, y1+1), plotPalBackground)
		}
		for y := y0; y < y1; y++ {
			copy(img.Pix[y*img.Stride+l.plotX:], line)
		}
	}
	for _, t := range p.ticks {
		fill(t, plotPalAxis)
	}
	// The legend's colour bar and "no data" swatch.
	lx, ly := p.legendBar()
	for i := range plotLegendW {
		level := uint8((i*(plotLevels-1) + (plotLegendW-1)/2) / (plotLegendW - 1))
		fill(image.Rect(lx+i, ly, lx+i+1, ly+plotLegendH), plotPalIndex(level))
	}
	if p.noData {
		sw := p.noDataSwatch()
		fill(sw.Inset(-1), plotPalAxis)
		fill(sw, plotPalNoData)
	}
	for _, t := range p.texts {
		idx := uint8(plotPalInk)
		switch t.ink {
		case plotSubInk:
			idx = plotPalSubInk
		case plotAxisInk:
			idx = plotPalAxis
		}
		plotDrawText(img, t, idx)
	}
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	return enc.Encode(w, img)
}

// plotDrawText draws a line of text in palette colour idx (no
// anti-aliasing: the face is a bitmap), clipped to the image.
func plotDrawText(img *image.Paletted, t plotText, idx uint8) {
	face := basicfont.Face7x13
	s := plotASCII(t.s)
	x := t.x
	switch w := plotTextLen(t.s) * plotCharW; t.anchor {
	case "middle":
		x -= w / 2
	case "end":
		x -= w
	}
	passes := 1
	if t.bold {
		passes = 2
	}
	for pass := range passes {
		dot := fixed.P(x+pass, t.y)
		for _, r := range s {
			dr, mask, mp, adv, _ := face.Glyph(dot, r)
			dot.X += adv
			alpha, ok := mask.(*image.Alpha)
			if !ok {
				continue
			}
			for y := dr.Min.Y; y < dr.Max.Y; y++ {
				for x := dr.Min.X; x < dr.Max.X; x++ {
					if !(image.Point{x, y}).In(img.Rect) {
						continue
					}
					if alpha.AlphaAt(mp.X+x-dr.Min.X, mp.Y+y-dr.Min.Y).A >= 0x80 {
						img.Pix[y*img.Stride+x] = idx
					}
				}
			}
		}
	}
}
