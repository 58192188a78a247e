package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The plot tests' shared helpers: the test grid (6 sensors × 48 hours),
// the check of its cells' colours, and rendering a grid to PNG or SVG and
// reading it back. The tests are in plot_*_test.go.

// plotTestRow is one element of coverageGrid.Rows.
type plotTestRow = struct {
	First      string `json:"first"`
	Last       string `json:"last"`
	Identities int64  `json:"identities"`
}

// plotTestGrid is 6 sensors × 48 hourly bins of 60 one-minute intervals
// from 2024-06-01: sensor-2 misses bins 10–19, sensor-4 half of bin 30,
// every sensor bin 40.
func plotTestGrid() *coverageGrid {
	const rows, cols, per = 6, 48, 60
	start := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	g := &coverageGrid{
		Table:         "cpu",
		Version:       7,
		Start:         start.Format(time.RFC3339),
		End:           start.Add(cols * time.Hour).Format(time.RFC3339),
		Intervals:     cols * per,
		Identities:    rows,
		EntityColumns: []string{"sensor"},
	}
	for c := 0; c <= cols; c++ {
		g.Edges = append(g.Edges, start.Add(time.Duration(c)*time.Hour).Format(time.RFC3339))
	}
	for range cols {
		g.ColumnIntervals = append(g.ColumnIntervals, per)
	}
	for r := range rows {
		name := fmt.Sprintf("sensor-%d", r)
		g.Rows = append(g.Rows, plotTestRow{First: name, Last: name, Identities: 1})
		counts := make([]int64, cols)
		for c := range counts {
			switch {
			case c == 40, r == 2 && c >= 10 && c < 20:
			case r == 4 && c == 30:
				counts[c] = per / 2
			default:
				counts[c] = per
			}
		}
		g.Covered = append(g.Covered, counts)
	}
	return g
}

type plotCellKind int

const (
	plotFull plotCellKind = iota
	plotGap
	plotHalf
)

func plotTestKind(r, c int) plotCellKind {
	switch {
	case c == 40, r == 2 && c >= 10 && c < 20:
		return plotGap
	case r == 4 && c == 30:
		return plotHalf
	}
	return plotFull
}

// plotCheckCells asserts the colours of plotTestGrid's cells, as colourAt
// reads them at the cells' layout rectangles: one colour for every full
// cell, another for every gap, the half-covered cell's in between.
func plotCheckCells(t *testing.T, l plotLayout, colourAt func(x, y int) color.RGBA) {
	t.Helper()
	seen := map[plotCellKind]map[color.RGBA]int{plotFull: {}, plotGap: {}, plotHalf: {}}
	for r := range 6 {
		for c := range 48 {
			rc := l.cellRect(r, c)
			if rc.Dx() < 1 || rc.Dy() < 1 {
				t.Fatalf("cell (%d, %d) is %v", r, c, rc)
			}
			k := plotTestKind(r, c)
			// The centre and the corners (the bottom line may be a
			// separator).
			bottom := rc.Max.Y - 1
			if l.separators {
				bottom--
			}
			for _, pt := range []image.Point{
				{(rc.Min.X + rc.Max.X) / 2, (rc.Min.Y + bottom) / 2},
				rc.Min, {rc.Max.X - 1, rc.Min.Y}, {rc.Min.X, bottom}, {rc.Max.X - 1, bottom},
			} {
				seen[k][colourAt(pt.X, pt.Y)]++
			}
		}
	}
	if len(seen[plotFull]) != 1 || len(seen[plotGap]) != 1 || len(seen[plotHalf]) != 1 {
		t.Fatalf("cell colours by kind (full, gap, half): %v", seen)
	}
	var full, gap, half color.RGBA
	for c := range seen[plotFull] {
		full = c
	}
	for c := range seen[plotGap] {
		gap = c
	}
	for c := range seen[plotHalf] {
		half = c
	}
	if full == gap || half == full || half == gap {
		t.Fatalf("full %v, gap %v, half %v are not three colours", full, gap, half)
	}
	if full != plotRampColor(1) || gap != plotRampColor(0) || half != plotRampColor(0.5) {
		t.Errorf("full %v, gap %v, half %v; want the scale's %v, %v, %v", full, gap, half, plotRampColor(1), plotRampColor(0), plotRampColor(0.5))
	}
	// Gaps and full cells are plainly apart; the half cell lies between
	// them on the scale.
	if d := plotColourDist(full, gap); d < 150 {
		t.Errorf("full %v and gap %v are only %.0f apart", full, gap, d)
	}
	for _, far := range []color.RGBA{full, gap} {
		if plotColourDist(half, far) < 60 {
			t.Errorf("half %v is close to %v", half, far)
		}
	}
	if pos := plotRampPosition(half); pos < 0.45 || pos > 0.55 {
		t.Errorf("half-covered cell's colour %v is at %.2f of the scale", half, pos)
	}
}

func plotColourDist(a, b color.RGBA) float64 {
	dr, dg, db := float64(a.R)-float64(b.R), float64(a.G)-float64(b.G), float64(a.B)-float64(b.B)
	return math.Sqrt(dr*dr + dg*dg + db*db)
}

// plotRampPosition is where on the scale c sits (the nearest level).
func plotRampPosition(c color.RGBA) float64 {
	best, pos := -1.0, 0.0
	for l := range plotLevels {
		d := plotColourDist(plotLevelColor(uint8(l)), c)
		if best < 0 || d < best {
			best, pos = d, float64(l)/(plotLevels-1)
		}
	}
	return pos
}

// plotWrite writes g's plot with title to a fresh file named name (its
// extension picks the format) and returns the file's bytes and the
// picture's layout.
func plotWrite(t *testing.T, g *coverageGrid, title, name string) ([]byte, *plotPicture) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := writeCoveragePlot(g, path, title); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plotPrepare(g, title, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return data, p
}

func plotRenderPNG(t *testing.T, g *coverageGrid, title string) (image.Image, *plotPicture) {
	t.Helper()
	data, p := plotWrite(t, g, title, "plot.png")
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != p.layout.width || b.Dy() != p.layout.height {
		t.Fatalf("PNG is %v, layout %dx%d", b, p.layout.width, p.layout.height)
	}
	return img, p
}

// plotSVG is an SVG document's cell rects and texts.
type plotSVG struct {
	width, height int
	cells         []plotSVGRect
	texts         map[string][]string // by group id
}

type plotSVGRect struct {
	r    image.Rectangle
	fill string
}

func plotParseSVG(t *testing.T, data []byte) plotSVG {
	t.Helper()
	out := plotSVG{texts: map[string][]string{}}
	d := xml.NewDecoder(bytes.NewReader(data))
	var groups []string
	var text *strings.Builder
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return n
	}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch tok.Name.Local {
			case "svg":
				out.width, out.height = atoi(attr["width"]), atoi(attr["height"])
			case "g":
				groups = append(groups, attr["id"])
			case "rect":
				if len(groups) > 0 && groups[len(groups)-1] == "cells" {
					x, y := atoi(attr["x"]), atoi(attr["y"])
					out.cells = append(out.cells, plotSVGRect{
						r:    image.Rect(x, y, x+atoi(attr["width"]), y+atoi(attr["height"])),
						fill: attr["fill"],
					})
				}
			case "text":
				text = &strings.Builder{}
			}
		case xml.CharData:
			if text != nil {
				text.Write(tok)
			}
		case xml.EndElement:
			switch tok.Name.Local {
			case "g":
				groups = groups[:len(groups)-1]
			case "text":
				g := ""
				if len(groups) > 0 {
					g = groups[len(groups)-1]
				}
				out.texts[g] = append(out.texts[g], text.String())
				text = nil
			}
		}
	}
	return out
}

func plotRenderSVG(t *testing.T, g *coverageGrid, title string) (plotSVG, *plotPicture, []byte) {
	t.Helper()
	data, p := plotWrite(t, g, title, "plot.svg")
	svg := plotParseSVG(t, data)
	if svg.width != p.layout.width || svg.height != p.layout.height {
		t.Fatalf("SVG is %dx%d, layout %dx%d", svg.width, svg.height, p.layout.width, p.layout.height)
	}
	return svg, p, data
}

func plotParseHex(t *testing.T, s string) color.RGBA {
	t.Helper()
	var c color.RGBA
	if _, err := fmt.Sscanf(s, "#%02x%02x%02x", &c.R, &c.G, &c.B); err != nil {
		t.Fatalf("fill %q: %v", s, err)
	}
	c.A = 0xff
	return c
}
