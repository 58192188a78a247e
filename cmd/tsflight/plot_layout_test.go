package main

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Tests of the heat map's size: large grids pooled into a bounded picture,
// the grid size that fits a picture, and sample pictures to look at.

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
