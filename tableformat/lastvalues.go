package tableformat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/coverage"
)

// The last-value index ("the head" of seed 002): for every identity of a
// table with entity columns, its newest row by index. It is a function of
// the table state alone. The coverage sidecars say, for each identity,
// which interval is its newest and (by the uniqueness rule) the one
// segment holding it; the newest row of the identity is the row with the
// greatest index in that segment. Segments never change once written, so a
// row read from segment S for identity X stays X's newest row for as long
// as S holds X's newest interval: a new version reuses every row whose
// segment is still the chosen one, and reads only the segments newly
// chosen (for just their newest rows). Appends, compactions, rollbacks,
// retention and commits of other writers are all the same case.
// docs/format/last-values.md has the persisted form (lastvalues_store.go).

// LastOptions selects what [Table.LastValues] returns.
type LastOptions struct {
	// Entities keeps the identities whose entity columns equal these
	// values (a partial identity is allowed), with the rules of
	// ScanOptions.Entities.
	Entities map[string]EntityValue
	// Columns are the output columns, in this order; nil means every
	// column of the logical schema.
	Columns []string
	// Alloc allocates the returned batch; nil means the Go allocator.
	Alloc memory.Allocator
}

// lastIndex is the last-value index at one version: one row per identity,
// sorted by identity. Immutable once built.
type lastIndex struct {
	version        uint64
	digest, origin commitDigest
	// rec has the canonical Arrow schema of the state's logical schema
	// (nil when the table has no schema yet).
	rec arrow.RecordBatch
	// ids, src and iv are per row: the identity, the segment the row was
	// read from and the interval of its index value.
	ids []coverage.Identity
	src []string
	iv  []uint64
	pos map[string]int // identity key → row
	// entities are the entity column names, the identities' order.
	entities []string
	// persisted is set once the index is durable in _timeseries_log/_last
	// (set by whoever wrote or found the file, read by everyone).
	persisted atomic.Bool
}

func (x *lastIndex) release() {
	if x != nil && x.rec != nil {
		x.rec.Release()
	}
}

// lastCache is a handle's newest last-value index.
type lastCache struct {
	mu  sync.Mutex // held while building: one build at a time
	cur *lastIndex
}

func (c *lastCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.release()
	c.cur = nil
}

// LastValues returns the newest row (by index) of every identity of st (nil
// means the handle's current state) that matches opts.Entities, projected
// to opts.Columns: one batch, sorted by identity. The table must have
// entity columns. Rows whose index is null never count as newest; ties in
// the index inside a segment are broken by file order (the later row).
//
// The answer comes from the table's last-value index: kept in memory per
// handle, persisted under _timeseries_log/_last by [Table.PersistLastValues]
// and the committer, and caught up from any older version by reading only
// the segments that newly hold some identity's newest interval. Option
// errors are ErrInvalidInput naming the field and value; a segment without
// a coverage sidecar is ErrUnsupported (the index is built from sidecars).
func (t *Table) LastValues(ctx context.Context, st *State, opts LastOptions) (arrow.RecordBatch, error) {
	if st == nil {
		st = t.State()
	}
	if st == nil {
		return nil, invalidf("last: the table has no state")
	}
	if len(st.Index().EntityColumns) == 0 {
		return nil, invalidf("last: the table has no entity columns; the last-value index keeps the newest row per entity")
	}
	p, err := st.planScan(ScanOptions{Columns: opts.Columns, Entities: opts.Entities})
	if err != nil {
		if errors.Is(err, ErrInvalidInput) {
			msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), ErrInvalidInput.Error()+": "), "scan: ")
			return nil, invalidf("last: %s", msg)
		}
		return nil, err
	}
	x, err := t.lastIndexAt(ctx, st)
	if err != nil {
		return nil, err
	}
	defer x.release()
	mem := opts.Alloc
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return x.project(p, mem)
}

// project returns the rows of x that match p's entity filters, with p's
// output columns, copied into mem.
func (x *lastIndex) project(p *scanPlan, mem memory.Allocator) (arrow.RecordBatch, error) {
	if x.rec == nil { // no rows yet (a schema, maybe, but no segment)
		return emptyBatch(p.output, mem)
	}
	var keep []int
	for i, id := range x.ids {
		ok := true
		for _, f := range p.ents {
			k := slices.Index(x.entities, f.name)
			if k < 0 || k >= len(id) || !componentEquals(id[k], f.value) {
				ok = false
				break
			}
		}
		if ok {
			keep = append(keep, i)
		}
	}
	parts := make([]arrow.RecordBatch, 0, 8)
	defer func() {
		for _, r := range parts {
			r.Release()
		}
	}()
	cols := make([]int, p.output.NumFields())
	for i, f := range p.output.Fields() {
		cols[i] = x.rec.Schema().FieldIndices(f.Name)[0]
	}
	for i := 0; i < len(keep); {
		j := i + 1
		for j < len(keep) && keep[j] == keep[j-1]+1 {
			j++
		}
		sl := x.rec.NewSlice(int64(keep[i]), int64(keep[j-1]+1))
		arrs := make([]arrow.Array, len(cols))
		for k, c := range cols {
			arrs[k] = sl.Column(c)
		}
		parts = append(parts, array.NewRecordBatch(p.output, arrs, sl.NumRows()))
		sl.Release()
		i = j
	}
	if len(parts) == 0 {
		return emptyBatch(p.output, mem)
	}
	return ConcatBatches(parts, mem)
}

// componentEquals compares an identity component with an entity value.
func componentEquals(c coverage.Component, v EntityValue) bool {
	return coverage.Tag(v.Type) == c.Tag && c.Str == v.Str && c.Int == v.Int && c.Uint == v.Uint
}

// emptyBatch is a batch of schema with no rows, allocated from mem.
func emptyBatch(schema *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		b := array.NewBuilder(mem, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	rec := array.NewRecordBatch(schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// lastIndexAt returns the last-value index of st, retained (the caller
// releases it): the cached one when it is st's, else one built from the
// cached (or persisted) one, which becomes the cached one when st is
// newer.
func (t *Table) lastIndexAt(ctx context.Context, st *State) (*lastIndex, error) {
	t.last.mu.Lock()
	defer t.last.mu.Unlock()
	base := t.last.cur
	if base != nil && (base.origin != st.origin && st.origin != (commitDigest{})) {
		base.release()
		t.last.cur, base = nil, nil
	}
	if base != nil && base.version == st.Version && base.digest == st.digest {
		base.retain()
		return base, nil
	}
	if base == nil {
		base = t.loadLastIndex(ctx, st) // nil when none is usable
		if base != nil {
			t.last.cur = base
		}
	}
	x, err := t.buildLastIndex(ctx, st, base)
	if err != nil {
		return nil, err
	}
	if base == nil || st.Version >= base.version {
		if t.last.cur != nil && t.last.cur != x {
			t.last.cur.release()
		}
		t.last.cur = x
		x.retain()
	}
	return x, nil
}

func (x *lastIndex) retain() {
	if x.rec != nil {
		x.rec.Retain()
	}
}

// lastChoice is the segment holding an identity's newest interval.
type lastChoice struct {
	ident    coverage.Identity
	seg      int
	interval uint64
}

// lastChoose returns, for every identity of st, the segment holding its
// newest interval, from the segments' coverage sidecars (cached per
// sidecar).
func (t *Table) lastChoose(ctx context.Context, st *State) (map[string]lastChoice, error) {
	out := map[string]lastChoice{}
	nullOnly := map[string]string{}
	for i := range st.Segments {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		seg := &st.Segments[i]
		if seg.CoveragePath == "" {
			return nil, fmt.Errorf("%w: last-value index: segment %s has no coverage sidecar, and the index is built from them (compact the table to give every segment one)", ErrUnsupported, seg.Path)
		}
		n, err := t.segmentNewestOf(st, seg)
		if err != nil {
			return nil, err
		}
		for k, ident := range n.idents {
			id, ok := n.newest[k]
			if !ok {
				nullOnly[k] = ident.String()
				continue
			}
			if c, seen := out[k]; !seen || id > c.interval {
				out[k] = lastChoice{ident: ident, seg: i, interval: id}
			}
		}
	}
	for k, who := range nullOnly {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("%w: last-value index: identity %s has rows with a null index only", ErrUnsupported, who)
		}
	}
	return out, nil
}

// segmentNewestOf reads (or recalls) a segment sidecar's newest interval
// per identity.
func (t *Table) segmentNewestOf(st *State, seg *SegmentMeta) (*segmentNewest, error) {
	if n := t.newest.get(seg.CoveragePath); n != nil {
		return n, nil
	}
	c, err := t.readCoverageFile(st, seg.CoveragePath, true)
	if err != nil {
		return nil, err
	}
	n := newestOf(c.set)
	t.newest.put(seg.CoveragePath, n)
	return n, nil
}

// newestOf is each identity's newest interval in a segment's coverage.
func newestOf(set *coverage.Set) *segmentNewest {
	n := &segmentNewest{newest: map[string]uint64{}, present: map[string]bool{}, idents: map[string]coverage.Identity{}}
	for _, ident := range set.Identities() {
		k := ident.Key()
		n.present[k] = true
		n.idents[k] = ident
		if bm := set.Bitmap(ident); bm != nil && !bm.IsEmpty() {
			n.newest[k] = bm.Maximum()
		}
	}
	return n
}

// buildLastIndex returns the index of st, reusing base's rows wherever
// their segment still holds the identity's newest interval.
func (t *Table) buildLastIndex(ctx context.Context, st *State, base *lastIndex) (*lastIndex, error) {
	x := &lastIndex{version: st.Version, digest: st.digest, origin: st.origin, pos: map[string]int{}}
	x.entities = st.Index().EntityColumns
	if st.Schema() == nil || len(st.Segments) == 0 {
		return x, nil
	}
	canonical, err := ArrowSchema(st.Schema())
	if err != nil {
		return nil, err
	}
	choose, err := t.lastChoose(ctx, st)
	if err != nil {
		return nil, err
	}
	// Which rows base still has, and which segments must be read.
	reuse := map[string]int{}
	need := map[string]lastChoice{}
	var bound uint64
	first := true
	needSegs := map[string]bool{}
	for k, c := range choose {
		if base != nil && base.rec != nil {
			if r, ok := base.pos[k]; ok && base.src[r] == st.Segments[c.seg].Path && base.iv[r] == c.interval {
				reuse[k] = r
				continue
			}
		}
		need[k] = c
		needSegs[st.Segments[c.seg].Path] = true
		if first || c.interval < bound {
			bound, first = c.interval, false
		}
	}
	var baseRec arrow.RecordBatch
	if len(reuse) > 0 {
		if baseRec, err = conformBatch(base.rec, canonical); err != nil {
			// The base's columns do not fit the schema (a persisted index
			// of a table whose column changed type): build from nothing.
			t.opts.logger().Warn("the last-value index is rebuilt from the segments", "version", st.Version, "error", err)
			return t.buildLastIndex(ctx, st, nil)
		}
		defer baseRec.Release()
	}
	wins := map[string]*lastWinner{}
	defer func() {
		for _, w := range wins {
			w.rec.drop()
		}
	}()
	if len(need) > 0 {
		if err := t.lastRead(ctx, st, needSegs, bound, need, wins); err != nil {
			return nil, err
		}
		for k, c := range need {
			if _, ok := wins[k]; !ok {
				seg := st.Segments[c.seg].Path
				return nil, corruptf(seg, 0, nil, "its coverage sidecar holds %s in %s, but the segment has no row of it there",
					describeIdentity(st.Index(), c.ident), describeInterval(st.Index(), indexDomain(st.Index()), c.interval))
			}
		}
	}
	// Assemble, sorted by identity.
	keys := make([]string, 0, len(choose))
	for k := range choose {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return choose[a].ident.Compare(choose[b].ident) })
	parts := make([]arrow.RecordBatch, 0, 16)
	defer func() {
		for _, r := range parts {
			r.Release()
		}
	}()
	var runRec arrow.RecordBatch
	runStart, runEnd := 0, 0
	flush := func() {
		if runRec != nil && runEnd > runStart {
			parts = append(parts, runRec.NewSlice(int64(runStart), int64(runEnd)))
		}
		runRec = nil
	}
	x.ids = make([]coverage.Identity, len(keys))
	x.src = make([]string, len(keys))
	x.iv = make([]uint64, len(keys))
	for i, k := range keys {
		c := choose[k]
		x.ids[i], x.src[i], x.iv[i], x.pos[k] = c.ident, st.Segments[c.seg].Path, c.interval, i
		var rec arrow.RecordBatch
		var row int
		if r, ok := reuse[k]; ok {
			rec, row = baseRec, r
		} else {
			w := wins[k]
			rec, row = w.rec.rec, w.row
		}
		if rec == runRec && row == runEnd {
			runEnd++
			continue
		}
		flush()
		runRec, runStart, runEnd = rec, row, row+1
	}
	flush()
	if len(parts) == 0 {
		if x.rec, err = emptyBatch(canonical, memory.DefaultAllocator); err != nil {
			return nil, err
		}
		return x, nil
	}
	if x.rec, err = ConcatBatches(parts, memory.DefaultAllocator); err != nil {
		return nil, err
	}
	return x, nil
}
