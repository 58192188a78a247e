package tableformat

import (
	"context"
	"sync"

	"github.com/tsflight/tsflight/coverage"
)

// Latest rows per entity. The newest row of an entity lies in the newest
// index interval its coverage holds, and the uniqueness rule puts each
// (identity, interval) pair in exactly one segment; so the segments holding
// some identity's newest interval are the only ones a "latest row per
// entity" query needs. Their sidecars say which those are.

// segmentNewest is, for one segment sidecar, each identity's newest
// interval id (absent for an identity whose rows all have a null index).
type segmentNewest struct {
	newest  map[string]uint64
	present map[string]bool
	idents  map[string]coverage.Identity
}

// newestCache remembers segmentNewest by sidecar path: sidecars never
// change once written.
type newestCache struct {
	mu sync.Mutex
	m  map[string]*segmentNewest
}

const newestCacheMax = 1 << 16

func (c *newestCache) get(p string) *segmentNewest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[p]
}

func (c *newestCache) put(p string, n *segmentNewest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= newestCacheMax {
		c.m = map[string]*segmentNewest{}
	}
	c.m[p] = n
}

// LatestSegments returns the segments of st, in log order, that can hold
// the newest row of some entity of a table with entity columns: for each
// identity, the segment holding its newest covered interval (and, for an
// identity with no non-null index value anywhere, every segment it
// appears in). A segment without a coverage sidecar is always included.
// A query for the newest row per entity (or per group of entity columns)
// with no other filter reads only these.
func (t *Table) LatestSegments(ctx context.Context, st *State) ([]SegmentMeta, error) {
	if len(st.Index().EntityColumns) == 0 {
		return nil, invalidf("latest segments: the table has no entity columns")
	}
	type best struct {
		id  uint64
		seg int
	}
	newest := map[string]best{}
	unknown := map[int]bool{}      // segments without a sidecar
	nullOnly := map[string][]int{} // identity → segments it appears in
	for i := range st.Segments {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		seg := &st.Segments[i]
		if seg.CoveragePath == "" {
			unknown[i] = true
			continue
		}
		n, err := t.segmentNewestOf(st, seg)
		if err != nil {
			return nil, err
		}
		for k := range n.present {
			id, ok := n.newest[k]
			if !ok {
				nullOnly[k] = append(nullOnly[k], i)
				continue
			}
			if b, seen := newest[k]; !seen || id > b.id {
				newest[k] = best{id, i}
			}
		}
	}
	keep := unknown
	for _, b := range newest {
		keep[b.seg] = true
	}
	for k, segs := range nullOnly {
		if _, ok := newest[k]; !ok {
			for _, i := range segs {
				keep[i] = true
			}
		}
	}
	out := make([]SegmentMeta, 0, len(keep))
	for i := range st.Segments {
		if keep[i] {
			out = append(out, st.Segments[i])
		}
	}
	return out, nil
}
