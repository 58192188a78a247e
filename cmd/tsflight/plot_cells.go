package main

import (
	"fmt"
	"math"
	"math/bits"
)

// The heat map's cells: the grid's counts checked and pooled into the
// drawn cells' levels.

// plotPool is the pooled coverage of some cells: covered of total pairs
// (floats: they may exceed an int64), gap if no cell with pairs has any
// covered, full if every one has all.
type plotPool struct {
	covered, total float64
	gap, full      bool
}

// plotCellTotal is the number of (entity, interval) pairs of a cell, and
// whether it fits an int64 (if not, no count can reach it).
func plotCellTotal(identities, intervals int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(identities), uint64(intervals))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// plotFillLevels checks g's counts and fills levels (drawRows × drawCols)
// with the level of each drawn cell, pooling the grid cells it holds. It
// returns the whole grid's coverage and whether some cell has no data.
// Every count is read once (a 4096² grid is 16 M of them).
func plotFillLevels(g *coverageGrid, l *plotLayout, levels []uint8) (all plotPool, noData bool, err error) {
	all = plotPool{gap: true, full: true}
	cis := g.ColumnIntervals[:l.cols]
	for b := range l.drawRows {
		lo, hi := l.bandRange(b)
		out := levels[b*l.drawCols : (b+1)*l.drawCols]
		for d := range out {
			c0, c1 := d*l.colGroup, min((d+1)*l.colGroup, l.cols)
			cell := plotPool{gap: true, full: true}
			for r := lo; r < hi; r++ {
				id := g.Rows[r].Identities
				fid := float64(id)
				row := g.Covered[r][c0:c1]
				for i, n := range row {
					ci := cis[c0+i]
					t, fits := plotCellTotal(id, ci)
					if n < 0 || (fits && n > t) {
						return all, false, fmt.Errorf("coverage grid: cell (%d, %d) covers %d of %d×%d pairs", r, c0+i, n, id, ci)
					}
					cell.covered += float64(n)
					cell.total += fid * float64(ci)
					cell.gap = cell.gap && n == 0
					cell.full = cell.full && fits && n == t
				}
			}
			all.add(cell)
			out[d] = plotLevel(cell.covered, cell.total, cell.gap, cell.full)
			noData = noData || out[d] == plotNoData
		}
	}
	return all, noData, nil
}

func (p *plotPool) add(q plotPool) {
	p.covered += q.covered
	p.total += q.total
	p.gap = p.gap && q.gap
	p.full = p.full && q.full
}
