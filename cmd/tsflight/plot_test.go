package main

import (
	"bytes"
	"encoding/json"
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

func plotRenderPNG(t *testing.T, g *coverageGrid, title string) (image.Image, *plotPicture) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plot.png")
	if err := writeCoveragePlot(g, path, title); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plotPrepare(g, title, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != p.layout.width || b.Dy() != p.layout.height {
		t.Fatalf("PNG is %v, layout %dx%d", b, p.layout.width, p.layout.height)
	}
	return img, p
}

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
	path := filepath.Join(t.TempDir(), "plot.svg")
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

// An integer index, as the action's JSON has it: numbers in start, end and
// the edges, decoded into the grid.
func TestPlotIntegerIndex(t *testing.T) {
	doc := `{"table":"ticks","version":3,"start":0,"end":1000,"intervals":1000,"identities":2,
		"entity_columns":["host","cpu"],
		"edges":[0,250,500,750,1000],"column_intervals":[250,250,250,250],
		"rows":[{"first":"a/0","last":"a/0","identities":1},{"first":"b/1","last":"b/1","identities":1}],
		"covered":[[250,250,0,250],[250,125,250,250]]}`
	var g coverageGrid
	if err := json.Unmarshal([]byte(doc), &g); err != nil {
		t.Fatal(err)
	}
	svg, p, _ := plotRenderSVG(t, &g, "")
	texts := svg.texts["texts"]
	joined := strings.Join(texts, "\n")
	for _, want := range []string{"index 0 to 1000", "host, cpu", "a/0", "b/1", "index"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q in %q", want, texts)
		}
	}
	// The x tick labels are integers, rising, ending at 1000.
	var ticks []int64
	for _, tx := range p.texts {
		if tx.y == p.layout.plotY+p.layout.plotH+plotTickLen+2+11 {
			n, err := strconv.ParseInt(tx.s, 10, 64)
			if err != nil {
				t.Fatalf("x tick %q: %v", tx.s, err)
			}
			ticks = append(ticks, n)
		}
	}
	if len(ticks) < 3 || ticks[len(ticks)-1] != 1000 {
		t.Errorf("x ticks %v", ticks)
	}
	for i := 1; i < len(ticks); i++ {
		if ticks[i] <= ticks[i-1] {
			t.Errorf("x ticks %v", ticks)
		}
	}
	img, _ := plotRenderPNG(t, &g, "")
	at := func(r, c int) color.RGBA {
		rc := p.layout.cellRect(r, c)
		return color.RGBAModel.Convert(img.At(rc.Min.X+1, rc.Min.Y+1)).(color.RGBA)
	}
	if at(0, 0) != plotRampColor(1) || at(0, 2) != plotRampColor(0) || at(1, 1) != plotRampColor(0.5) {
		t.Errorf("cells %v %v %v", at(0, 0), at(0, 2), at(1, 1))
	}
	// json.Number edges (a decoder with UseNumber) read the same.
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var gn coverageGrid
	if err := d.Decode(&gn); err != nil {
		t.Fatal(err)
	}
	if _, err := plotPrepare(&gn, "", 0, 0); err != nil {
		t.Error(err)
	}
}

func TestPlotTimeTicks(t *testing.T) {
	base := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, tc := range []struct {
		span     time.Duration
		maxTicks int
		want     []string // some labels
		title    string
	}{
		{2 * time.Hour, 10, []string{"00:00", "00:15", "02:00"}, "time (UTC) on 2024-06-01"},
		{90 * time.Second, 10, []string{"00:00:00", "00:00:10", "00:01:30"}, "time (UTC) on 2024-06-01"},
		{48 * time.Hour, 10, []string{"00:00", "06:00", "18:00"}, "time (UTC) from 2024-06-01"},
		{30 * 24 * time.Hour, 10, []string{"2024-06-03", "2024-06-10", "2024-07-01"}, "time (UTC)"}, // Mondays
		{10 * 24 * time.Hour, 10, []string{"2024-06-01", "2024-06-02", "2024-06-11"}, "time (UTC)"},
		{800 * 24 * time.Hour, 10, []string{"2024-07", "2025-01"}, "time (UTC)"},
	} {
		ax := &plotAxis{times: true, edges: []int64{base, base + int64(tc.span)}}
		ticks, title := plotTicks(ax, tc.maxTicks)
		var labels []string
		for _, tk := range ticks {
			labels = append(labels, tk.label)
		}
		if len(ticks) > tc.maxTicks+1 || len(ticks) < 2 {
			t.Errorf("%v: %d ticks %q", tc.span, len(ticks), labels)
		}
		for _, w := range tc.want {
			if !strings.Contains(" "+strings.Join(labels, " ")+" ", " "+w+" ") {
				t.Errorf("%v: no tick %q in %q", tc.span, w, labels)
			}
		}
		if title != tc.title {
			t.Errorf("%v: axis title %q, want %q", tc.span, title, tc.title)
		}
	}
	// Across midnight the new day's date is under its first tick.
	ax := &plotAxis{times: true, edges: []int64{base - int64(3*time.Hour), base + int64(3*time.Hour)}}
	ticks, _ := plotTicks(ax, 8)
	dates := 0
	for _, tk := range ticks {
		if tk.date != "" {
			dates++
			if tk.date != "2024-06-01" || tk.label != "00:00" {
				t.Errorf("date %q under %q", tk.date, tk.label)
			}
		}
	}
	if dates != 1 {
		t.Errorf("%d dates in %+v", dates, ticks)
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

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file string
		edit       func(g *coverageGrid)
		want       []string
	}{
		{"jpg", "x.jpg", nil, []string{`".jpg"`, ".svg", ".png"}},
		{"no extension", "x", nil, []string{"no extension", ".svg", ".png"}},
		{"no rows", "x.png", func(g *coverageGrid) { g.Rows, g.Covered = nil, nil }, []string{"no rows"}},
		{"no columns", "x.png", func(g *coverageGrid) {
			g.ColumnIntervals, g.Edges = nil, g.Edges[:1]
			for r := range g.Covered {
				g.Covered[r] = nil
			}
		}, []string{"no columns"}},
		{"edges", "x.svg", func(g *coverageGrid) { g.Edges = g.Edges[:10] }, []string{"10 edges for 48 columns"}},
		{"count rows", "x.png", func(g *coverageGrid) { g.Covered = g.Covered[:5] }, []string{"5 rows of counts for 6 rows"}},
		{"row length", "x.png", func(g *coverageGrid) { g.Covered[3] = g.Covered[3][:47] }, []string{"row 3 has 47 counts for 48 columns"}},
		{"too many", "x.png", func(g *coverageGrid) { g.Covered[1][2] = 61 }, []string{"cell (1, 2) covers 61"}},
		{"negative", "x.png", func(g *coverageGrid) { g.Covered[1][2] = -1 }, []string{"cell (1, 2) covers -1"}},
		{"negative identities", "x.png", func(g *coverageGrid) { g.Rows[0].Identities = -1 }, []string{"row 0 has -1 identities"}},
		{"negative intervals", "x.png", func(g *coverageGrid) { g.ColumnIntervals[0] = -1 }, []string{"column 0 has -1 intervals"}},
		{"edge order", "x.png", func(g *coverageGrid) { g.Edges[3] = g.Edges[2] }, []string{"edge 3"}},
		{"bad time", "x.png", func(g *coverageGrid) { g.Edges[3] = "yesterday" }, []string{"edge 3", "yesterday"}},
		{"mixed", "x.png", func(g *coverageGrid) { g.Edges[3] = 12.0 }, []string{"edge 3", "mixed"}},
		{"fraction", "x.png", func(g *coverageGrid) {
			for i := range g.Edges {
				g.Edges[i] = float64(i)
			}
			g.Edges[3] = 2.5
		}, []string{"edge 3", "2.5"}},
		{"nil edge", "x.png", func(g *coverageGrid) { g.Edges[0] = nil }, []string{"edge 0"}},
		{"directory", "missing/x.png", nil, []string{"missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := plotTestGrid()
			if tc.edit != nil {
				tc.edit(g)
			}
			path := filepath.Join(dir, tc.file)
			err := writeCoveragePlot(g, path, "")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("%s was left behind (%v)", path, serr)
			}
		})
	}
	if err := writeCoveragePlot(nil, filepath.Join(dir, "nil.svg"), ""); err == nil {
		t.Error("nil grid: no error")
	}
	// The renderers report write errors.
	p, err := plotPrepare(plotTestGrid(), "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := plotWriteSVG(p, plotFailWriter{}); err == nil {
		t.Error("SVG: write error lost")
	}
	if err := plotWritePNG(p, plotFailWriter{}); err == nil {
		t.Error("PNG: write error lost")
	}
}

type plotFailWriter struct{}

func (plotFailWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// plotBigGrid is rows × cols with a few distinct row patterns (shared
// slices, to keep it small in memory).
func plotBigGrid(rows, cols int) *coverageGrid {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	g := &coverageGrid{Table: "big", Version: 1, EntityColumns: []string{"id"}}
	for c := 0; c <= cols; c++ {
		g.Edges = append(g.Edges, start.Add(time.Duration(c)*time.Minute).Format(time.RFC3339))
		if c < cols {
			g.ColumnIntervals = append(g.ColumnIntervals, 6)
		}
	}
	patterns := make([][]int64, 8)
	for i := range patterns {
		patterns[i] = make([]int64, cols)
		for c := range patterns[i] {
			if (c/(64*(i+1)))%4 != 3 {
				patterns[i][c] = int64(6 - (c / (16 + i) % (i + 2) % 3))
			}
		}
	}
	for r := range rows {
		name := fmt.Sprintf("entity-%05d", r)
		g.Rows = append(g.Rows, plotTestRow{First: name, Last: name, Identities: 1})
		g.Covered = append(g.Covered, patterns[r/37%8])
	}
	return g
}

func TestPlotLarge(t *testing.T) {
	g := plotBigGrid(4096, 4096)
	begin := time.Now()
	p, err := plotPrepare(g, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := p.layout
	if l.cellW < 1 || l.cellH < 1 || l.width > plotMaxSide || l.height > plotMaxSide {
		t.Errorf("layout %+v", l)
	}
	// Every grid cell maps inside the cells' area.
	for _, rc := range [][2]int{{0, 0}, {4095, 4095}, {4095, 0}, {0, 4095}} {
		if r := l.cellRect(rc[0], rc[1]); !r.In(l.plotRect()) || r.Empty() {
			t.Errorf("cell %v at %v, outside %v", rc, r, l.plotRect())
		}
	}
	var buf bytes.Buffer
	if err := plotWritePNG(p, &buf); err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width != l.width || cfg.Height != l.height || cfg.Width > plotMaxSide || cfg.Height > plotMaxSide {
		t.Errorf("PNG is %dx%d (layout %dx%d, bound %d)", cfg.Width, cfg.Height, l.width, l.height, plotMaxSide)
	}
	t.Logf("PNG %dx%d, %d bytes", cfg.Width, cfg.Height, buf.Len())
	buf.Reset()
	if err := plotWriteSVG(p, &buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("SVG %d bytes, %d rects, %d texts; %v in all", buf.Len(), bytes.Count(buf.Bytes(), []byte("<rect")),
		bytes.Count(buf.Bytes(), []byte("<text")), time.Since(begin))
	if n := bytes.Count(buf.Bytes(), []byte("<text")); n > 400 {
		t.Errorf("%d texts: labels are not thinned", n)
	}
	if took := time.Since(begin); took > 30*time.Second {
		t.Errorf("took %v", took)
	}
}

func TestPlotRowsColumns(t *testing.T) {
	for _, size := range [][2]int{{0, 0}, {800, 600}, {1400, 900}, {2000, 1200}} {
		rows, cols := plotRowsColumns(size[0], size[1])
		if rows < 1 || cols < 1 || rows > plotMaxGrid || cols > plotMaxGrid {
			t.Fatalf("%v: %d rows, %d columns", size, rows, cols)
		}
		g := plotBigGrid(rows, cols)
		p, err := plotPrepare(g, "", size[0], size[1])
		if err != nil {
			t.Fatal(err)
		}
		l := p.layout
		w, h := plotTarget(size[0], size[1])
		if l.cellW != 1 || l.cellH != 1 || l.rowGroup != 1 || l.colGroup != 1 || l.width > w || l.height > h {
			t.Errorf("%v: %d×%d grid laid out as %+v", size, rows, cols, l)
		}
	}
	if rows, cols := plotRowsColumns(10, 10); rows != 1 || cols != 1 {
		t.Errorf("tiny: %d, %d", rows, cols)
	}
	if rows, cols := plotRowsColumns(100000, 100000); rows > plotMaxGrid || cols > plotMaxGrid {
		t.Errorf("huge: %d, %d", rows, cols)
	}
}

// TestPlotSample writes sample pictures to $TSFLIGHT_PLOT_SAMPLES, to look
// at.
func TestPlotSample(t *testing.T) {
	dir := os.Getenv("TSFLIGHT_PLOT_SAMPLES")
	if dir == "" {
		t.Skip("TSFLIGHT_PLOT_SAMPLES is not set")
	}
	g := plotTestGrid()
	g.Rows[5] = plotTestRow{First: "sensor-5", Last: "sensor-9", Identities: 5}
	for c := range g.Covered[5] {
		g.Covered[5][c] = g.Covered[5][c] * 5
		if c > 20 && c < 36 {
			g.Covered[5][c] = int64(60 * (c - 20) / 3)
		}
	}
	for _, name := range []string{"plot_sample.png", "plot_sample.svg"} {
		if err := writeCoveragePlot(g, filepath.Join(dir, name), ""); err != nil {
			t.Fatal(err)
		}
	}
	big := plotBigGrid(300, 1000)
	for _, name := range []string{"plot_big.png", "plot_big.svg"} {
		if err := writeCoveragePlot(big, filepath.Join(dir, name), ""); err != nil {
			t.Fatal(err)
		}
	}
}
