package tableformat

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ScanPlan is a scan planned on one snapshot: the segments to read, in the
// order they are read, the schema of the result and the options it was
// planned with. [State.Plan] makes it; [ScanPlan.Split] cuts it into parts
// that streams can read side by side; [Table.ReadPlan] reads a plan or a
// part without planning again. A plan does not change once made: it can be
// read any number of times, by several goroutines at once.
type ScanPlan struct {
	state *State
	opts  ScanOptions
	scan  *scanPlan
}

// Plan validates opts and plans the scan of s they describe, once. The plan
// reads the live segments whose bounds intersect [Start, End) (index_max >=
// Start && index_min < End) and, for Single-layout segments, whose identity
// agrees with every entity value in opts.Entities (Mixed segments are never
// pruned by entity), ordered by (index_min, index_max, path).
//
// An unknown or repeated column, a bound of the wrong type, Start >= End, an
// entity filter on a column that is not an entity column or with a value of
// the wrong type, and negative BatchRows or Parallelism are ErrInvalidInput
// errors naming the offending field and value; [Table.Scan] refuses the
// same options with the same errors.
func (s *State) Plan(opts ScanOptions) (*ScanPlan, error) {
	p, err := s.planScan(opts)
	if err != nil {
		return nil, err
	}
	return &ScanPlan{state: s, opts: opts, scan: p}, nil
}

// State is the snapshot the plan reads.
func (p *ScanPlan) State() *State { return p.state }

// Options are the options the plan was made with.
func (p *ScanPlan) Options() ScanOptions { return p.opts }

// Segments are the segments the plan reads, in the order it reads them (a
// copy: the plan keeps its own).
func (p *ScanPlan) Segments() []SegmentMeta { return slices.Clone(p.scan.segments) }

// Schema is the Arrow schema of the rows the plan returns: the canonical
// schema ([ArrowSchema]) projected to Options().Columns, or a schema of no
// fields when the table has no schema yet.
func (p *ScanPlan) Schema() *arrow.Schema { return p.scan.output }

// Split cuts the plan into at most n parts (n < 1 counts as 1) that
// together read exactly its segments, each once. Each part is a run of
// consecutive segments of the plan, and the parts, in order, hold about
// equal shares of its rows: a part ends at the first segment that takes
// the rows read so far to its share of the total, or where each part still
// to come can keep one segment. There are never more parts than segments,
// and a plan without segments is one part that reads nothing.
//
// The split depends only on the plan's segments and n, so a plan made again
// on the same snapshot with the same options splits the same way: a Flight
// ticket names its part by number.
func (p *ScanPlan) Split(n int) []*ScanPlan {
	segs := p.scan.segments
	if len(segs) == 0 {
		return []*ScanPlan{p.part(nil)}
	}
	n = max(1, min(n, len(segs)))
	var total uint64
	for i := range segs {
		total += segs[i].RowCount
	}
	parts := make([]*ScanPlan, 0, n)
	var acc uint64
	start := 0
	for i := range segs {
		acc += segs[i].RowCount
		left := len(segs) - i - 1  // segments after this one
		need := n - len(parts) - 1 // parts still to start after this one
		boundary := total * uint64(len(parts)+1) / uint64(n)
		if need > 0 && (acc >= boundary || left == need) {
			parts = append(parts, p.part(segs[start:i+1:i+1]))
			start = i + 1
		}
	}
	return append(parts, p.part(segs[start:]))
}

// part is the plan restricted to segs, a run of its segments.
func (p *ScanPlan) part(segs []SegmentMeta) *ScanPlan {
	sp := *p.scan
	sp.segments = segs
	return &ScanPlan{state: p.state, opts: p.opts, scan: &sp}
}

// scanPlansMade counts the scans this process planned (State.Plan,
// Table.Scan and the projection of Table.LastValues all
// plan once per call).
var scanPlansMade atomic.Uint64

// ScanPlansMade returns how many times this process has planned a scan:
// each [State.Plan] and [Table.Scan] plans once, and so
// does [Table.LastValues] for its columns and entities. It is a figure for
// tests and diagnostics (a request that should plan once can be checked to
// plan once).
func ScanPlansMade() uint64 { return scanPlansMade.Load() }

// scanOnly plans the scan of st that opts describe and reads only the
// segments named by paths, in that order (a path named twice is read
// once). The callers (compaction, the last-value index) name segments they
// know the plan selects; a path it does not select is ErrInvalidInput.
func (t *Table) scanOnly(ctx context.Context, st *State, paths []string, opts ScanOptions) (array.RecordReader, error) {
	plan, err := st.Plan(opts)
	if err != nil {
		return nil, err
	}
	planned := make(map[string]int, len(plan.scan.segments))
	for i := range plan.scan.segments {
		planned[plan.scan.segments[i].Path] = i
	}
	only := make([]SegmentMeta, 0, len(paths))
	seen := make(map[string]bool, len(paths))
	for _, path := range paths {
		i, ok := planned[path]
		if !ok {
			return nil, invalidf("scan: segment %q is not one this scan selects at version %d", path, st.Version)
		}
		if !seen[path] {
			seen[path] = true
			only = append(only, plan.scan.segments[i])
		}
	}
	return t.ReadPlan(ctx, plan.part(only))
}
