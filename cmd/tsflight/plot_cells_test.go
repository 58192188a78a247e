package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"strings"
	"testing"
)

// Tests of the heat map's cells: their colours as PNG and SVG draw them,
// coverage percentages and levels, and cells with no data.

func TestPlotPNGCells(t *testing.T) {
	img, p := plotRenderPNG(t, plotTestGrid(), "")
	l := p.layout
	if l.rowGroup != 1 || l.colGroup != 1 || l.cellW < 8 || l.cellH < 8 {
		t.Errorf("layout %+v: want whole, large cells for 6 × 48", l)
	}
	plotCheckCells(t, l, func(x, y int) color.RGBA {
		return color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
	})
	// The background around the cells is white, and the separators too.
	if c := color.RGBAModel.Convert(img.At(1, l.height-1)); c != plotBackground {
		t.Errorf("corner is %v", c)
	}
	if l.separators {
		rc := l.cellRect(0, 5)
		if c := color.RGBAModel.Convert(img.At(rc.Min.X, rc.Max.Y-1)); c != plotBackground {
			t.Errorf("separator under row 0 is %v", c)
		}
	}
}

func TestPlotSVGCells(t *testing.T) {
	g := plotTestGrid()
	svg, p, _ := plotRenderSVG(t, g, "CPU sensors")
	plotCheckCells(t, p.layout, func(x, y int) color.RGBA {
		pt := image.Pt(x, y)
		var found []plotSVGRect
		for _, r := range svg.cells {
			if pt.In(r.r) {
				found = append(found, r)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d cell rects hold %v", len(found), pt)
		}
		return plotParseHex(t, found[0].fill)
	})
	// Runs are merged: sensor-0 and sensor-1 are one rect per run, sensor-2
	// five (covered, gap, covered, gap, covered) …
	if n := len(svg.cells); n > 30 {
		t.Errorf("%d cell rects for %d cells: runs are not merged", n, 6*48)
	}
	texts := strings.Join(svg.texts["texts"], "\n")
	for _, want := range []string{"CPU sensors", "table cpu", "version 7", "2024-06-01 00:00 to 2024-06-03 00:00 UTC", "sensor-0", "sensor-5", "sensor", "0% (gap)", "50%", "100% (full)"} {
		if !strings.Contains(texts, want) {
			t.Errorf("no text %q in\n%s", want, texts)
		}
	}
	// 5 sensors of 48 full hours, one of 38, one half hour: 278.5 of 288.
	if want := fmt.Sprintf("%.1f%% covered", 100*(6*47*60-10*60-30)/float64(6*48*60)); !strings.Contains(texts, want) {
		t.Errorf("no %q in\n%s", want, texts)
	}
	// Hours along the axis, the date where the day changes.
	for _, want := range []string{"06:00", "12:00", "2024-06-02", "time (UTC) from 2024-06-01"} {
		if !strings.Contains(texts, want) {
			t.Errorf("no tick text %q in\n%s", want, texts)
		}
	}
}

func TestPlotPercent(t *testing.T) {
	for _, tc := range []struct {
		cov, tot  float64
		gap, full bool
		want      string
	}{
		{0, 100, true, false, "0%"},
		{100, 100, false, true, "100%"},
		{50, 100, false, false, "50.0%"},
		{99999, 100000, false, false, ">99.9%"},
		{1, 100000, false, false, "<0.1%"},
	} {
		if got := plotPercent(tc.cov, tc.tot, tc.gap, tc.full); got != tc.want {
			t.Errorf("%v/%v: %q, want %q", tc.cov, tc.tot, got, tc.want)
		}
	}
	// Nearly full or nearly empty cells are never drawn as full or gaps.
	if plotLevel(999999, 1000000, false, false) != plotLevels-2 || plotLevel(1, 1000000, false, false) != 1 {
		t.Error("a partial cell took an end colour")
	}
}

func TestPlotNoData(t *testing.T) {
	g := plotTestGrid()
	g.ColumnIntervals[5] = 0
	for r := range g.Covered {
		g.Covered[r][5] = 0
	}
	svg, p, data := plotRenderSVG(t, g, "")
	if !p.noData || !strings.Contains(strings.Join(svg.texts["texts"], "\n"), "no data") {
		t.Error("no \"no data\" legend")
	}
	if !bytes.Contains(data, []byte(plotHex(plotNoDataInk))) {
		t.Error("no no-data cells")
	}
}
