package main

import (
	"fmt"
	"image/color"
	"math"
)

// The heat map's colours: the fixed inks, the coverage ramp and a cell's
// level on it.

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
