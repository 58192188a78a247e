package main

import (
	"image/color"
	"strings"
	"testing"
)

// Tests of the heat map's texts: the title, row labels of one or several
// entities, names that need escaping, a table without entity columns.

func TestPlotTitleDefault(t *testing.T) {
	svg, _, _ := plotRenderSVG(t, plotTestGrid(), "")
	if got := svg.texts["texts"][0]; got != "coverage of cpu" {
		t.Errorf("title %q", got)
	}
}

func TestPlotAggregatedRows(t *testing.T) {
	g := plotTestGrid()
	g.Rows[1] = plotTestRow{First: "a03", Last: "a05", Identities: 3}
	for c := range g.Covered[1] {
		g.Covered[1][c] *= 3
	}
	g.Covered[1][7] = 60 // one of three
	svg, p, _ := plotRenderSVG(t, g, "")
	texts := svg.texts["texts"]
	want := "a03 … a05 (3)"
	if !strings.Contains(strings.Join(texts, "\n"), want) {
		t.Errorf("no label %q in %q", want, texts)
	}
	if got := plotASCII(plotRowLabel(g, 1)); got != "a03 ... a05 (3)" {
		t.Errorf("PNG label %q", got)
	}
	// The aggregated row's full cells are full; its cell of one in three
	// is a third.
	img, _ := plotRenderPNG(t, g, "")
	at := func(r, c int) color.RGBA {
		rc := p.layout.cellRect(r, c)
		return color.RGBAModel.Convert(img.At(rc.Min.X, rc.Min.Y)).(color.RGBA)
	}
	if at(1, 0) != plotRampColor(1) {
		t.Errorf("aggregated full cell is %v", at(1, 0))
	}
	if got, want := at(1, 7), plotLevelColor(plotLevel(60, 180, false, false)); got != want {
		t.Errorf("aggregated third cell is %v, want %v", got, want)
	}
	// A long aggregated label is cut, both ends kept.
	g.Rows[1] = plotTestRow{First: strings.Repeat("x", 50), Last: strings.Repeat("y", 50) + "z", Identities: 3}
	if l := plotRowLabel(g, 1); plotTextLen(l) > plotLabelChars || !strings.HasPrefix(l, "xxx") || !strings.Contains(l, "… yyy") || !strings.HasSuffix(l, "… (3)") {
		t.Errorf("long label %q", l)
	}
}

// Entity names are text, whatever they hold.
func TestPlotStrangeNames(t *testing.T) {
	g := plotTestGrid()
	names := []string{`<b>&"x"'`, "München", "tab\there", ""}
	for i, n := range names {
		g.Rows[i] = plotTestRow{First: n, Last: n, Identities: 1}
	}
	svg, _, _ := plotRenderSVG(t, g, "a <title> & more")
	joined := "\n" + strings.Join(svg.texts["texts"], "\n") + "\n"
	for _, want := range []string{`<b>&"x"'`, "München", `""`, "a <title> & more"} {
		if !strings.Contains(joined, "\n"+want+"\n") {
			t.Errorf("no text %q in %q", want, svg.texts["texts"])
		}
	}
	plotRenderPNG(t, g, "a <title> & more")
}

func TestPlotNoEntityColumns(t *testing.T) {
	g := plotTestGrid()
	g.EntityColumns = nil
	g.Rows = g.Rows[:1]
	g.Rows[0] = plotTestRow{Identities: 1}
	g.Covered = g.Covered[:1]
	svg, p, _ := plotRenderSVG(t, g, "")
	if p.layout.drawRows != 1 {
		t.Fatalf("layout %+v", p.layout)
	}
	found := false
	for _, s := range svg.texts["texts"] {
		found = found || s == "cpu"
	}
	if !found {
		t.Errorf("the one row is not labelled with the table: %q", svg.texts["texts"])
	}
	plotRenderPNG(t, g, "")
}
