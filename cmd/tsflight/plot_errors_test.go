package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tests of what writeCoveragePlot refuses: malformed grids, unknown
// extensions, unwritable paths and write errors.

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
