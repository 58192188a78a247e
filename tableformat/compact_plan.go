package tableformat

import (
	"context"
	"slices"
	"strings"
)

// compactGroup is one planned merge and, once written, its outputs.
type compactGroup struct {
	sources []SegmentMeta
	// cov is the union of the sources' sidecars.
	cov         *segmentCoverage
	sourceBytes uint64
	rows        uint64 // recorded row counts of the sources
	lo, hi      IndexValue

	// Filled in by writeGroup.
	outputs     []SegmentMeta
	outputBytes uint64
	rowsRead    uint64
	rowsWritten uint64
}

func (g *compactGroup) paths() []string {
	out := make([]string, len(g.sources))
	for i := range g.sources {
		out[i] = g.sources[i].Path
	}
	return out
}

// allLive reports whether every source is still a live segment of st.
func (g *compactGroup) allLive(st *State) bool {
	for i := range g.sources {
		if _, ok := st.Segment(g.sources[i].Path); !ok {
			return false
		}
	}
	return true
}

func (g *compactGroup) report() CompactGroup {
	r := CompactGroup{Sources: g.paths(), SourceBytes: g.sourceBytes, Rows: g.rows, IndexMin: g.lo.String(), IndexMax: g.hi.String(),
		Outputs: []string{}, OutputBytes: g.outputBytes}
	if g.outputs != nil {
		r.Rows = g.rowsWritten
	}
	for i := range g.outputs {
		r.Outputs = append(r.Outputs, g.outputs[i].Path)
	}
	return r
}

// compactPlan is the groups one call merges.
type compactPlan struct {
	groups []*compactGroup
	// remaining counts the candidates not considered (work bound).
	remaining int
}

// planCompaction picks the groups of st to merge (see Table.Compact):
// candidates sorted by (index_min, index_max, path), packed greedily up to
// TargetBytes, each group of at least MinSegments sources, until MaxGroups
// or MaxBytes. A candidate's sidecar is read when the packing reaches it;
// one whose pairs do not number its rows is skipped.
func (t *Table) planCompaction(ctx context.Context, st *State, o *CompactOptions) (*compactPlan, error) {
	var cands []SegmentMeta
	for _, seg := range st.Segments {
		if seg.FileSize == nil || int64(*seg.FileSize) >= o.SmallBytes || seg.CoveragePath == "" || seg.RowCount == 0 {
			continue
		}
		cands = append(cands, seg)
	}
	slices.SortFunc(cands, func(a, b SegmentMeta) int {
		if c := a.IndexMin.Compare(b.IndexMin); c != 0 {
			return c
		}
		if c := a.IndexMax.Compare(b.IndexMax); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	entity := len(st.Index().EntityColumns) > 0
	plan := &compactPlan{}
	var planned uint64 // source bytes in plan.groups
	var cur *compactGroup
	full := func() bool {
		return (o.MaxGroups > 0 && len(plan.groups) >= o.MaxGroups) ||
			(o.MaxBytes > 0 && planned >= uint64(o.MaxBytes))
	}
	// closeGroup ends cur; it reports false when the plan is full.
	closeGroup := func() bool {
		g := cur
		cur = nil
		if g == nil || len(g.sources) < o.MinSegments {
			return true
		}
		if len(plan.groups) > 0 && o.MaxBytes > 0 && planned+g.sourceBytes > uint64(o.MaxBytes) {
			plan.remaining += len(g.sources)
			return false
		}
		plan.groups = append(plan.groups, g)
		planned += g.sourceBytes
		return !full()
	}
	for i := range cands {
		seg := &cands[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if cur != nil && cur.sourceBytes+*seg.FileSize > uint64(o.TargetBytes) {
			if !closeGroup() {
				plan.remaining += len(cands) - i
				return plan, nil
			}
		}
		c, err := t.readCoverageFile(st, seg.CoveragePath, entity)
		if err != nil {
			return nil, err
		}
		if c.set.Cardinality() != seg.RowCount {
			// Rows without an index value (stored without coverage by
			// the 0.9.0 package) or a sidecar that disagrees with the
			// log: leave the segment as it is.
			t.opts.logger().Debug("compaction skips a segment whose coverage does not count its rows", "segment", seg.Path, "rows", seg.RowCount, "pairs", c.set.Cardinality())
			continue
		}
		if cur == nil {
			cur = &compactGroup{cov: newSegmentCoverage(st.Index(), entity), lo: seg.IndexMin, hi: seg.IndexMax}
		}
		if err := cur.cov.set.Union(c.set); err != nil {
			return nil, corruptf(seg.CoveragePath, st.Version, err, "segment coverage does not match the table's entity columns")
		}
		cur.sources = append(cur.sources, *seg)
		cur.sourceBytes += *seg.FileSize
		cur.rows += seg.RowCount
		if seg.IndexMin.Compare(cur.lo) < 0 {
			cur.lo = seg.IndexMin
		}
		if seg.IndexMax.Compare(cur.hi) > 0 {
			cur.hi = seg.IndexMax
		}
	}
	closeGroup()
	return plan, nil
}
