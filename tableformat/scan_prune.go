package tableformat

import (
	"fmt"
	"math"
	"math/big"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// This file validates scan options, prunes segments (State.Plan) and row
// groups (by Parquet column statistics), and converts the requested range to
// the integer domain of the index column.

const (
	defaultScanBatchRows   = 65536
	defaultScanParallelism = 4
)

// scanPlan is a validated scan: what to read, how to filter it and what to
// return.
type scanPlan struct {
	// slots is the shared decode semaphore of ScanOptions.Slots.
	slots chan struct{}
	// pacer is ScanOptions.Pacer.
	pacer ScanPacer
	// cache is ScanOptions.Cache.
	cache *ScanCache
	// segments are the segments to read, in plan order (see State.Plan).
	segments []SegmentMeta
	// canonical is the Arrow schema of the whole logical schema (nil when
	// the table has no schema yet); output is its projection.
	canonical *arrow.Schema
	output    *arrow.Schema
	// read are the columns decoded from each segment, in canonical order:
	// the output columns plus the columns the filters need.
	read []scanColumn
	// outRead[i] is the position in read of output column i.
	outRead []int
	// indexRead is the position in read of the index column, or -1 when
	// it is not read.
	indexRead int
	// rng is the range filter (nil: both bounds open).
	rng *scanRange
	// ents are the entity equality filters, in entity-column order.
	ents []scanEntityFilter

	batchRows   int
	parallelism int
	alloc       memory.Allocator
}

// scanColumn is one column a scan decodes.
type scanColumn struct {
	name    string
	field   arrow.Field // canonical
	isIndex bool
}

// scanEntityFilter keeps rows whose column read[pos] equals value.
type scanEntityFilter struct {
	name  string
	pos   int
	value EntityValue
}

// scanRange is the range filter in the integer domain of the index column
// (timestamps in the column's unit): lo <= v <= hi, inclusive, compared as
// signed integers, or as unsigned ones (ulo, uhi) for a uint64 index.
// empty means no value can match.
type scanRange struct {
	unsigned bool
	lo, hi   int64
	ulo, uhi uint64
	empty    bool
}

func (r *scanRange) String() string {
	switch {
	case r.empty:
		return "empty"
	case r.unsigned:
		return fmt.Sprintf("[%d, %d]", r.ulo, r.uhi)
	}
	return fmt.Sprintf("[%d, %d]", r.lo, r.hi)
}

// planScan validates opts and computes everything a scan needs except the
// per-segment decisions.
func (s *State) planScan(opts ScanOptions) (*scanPlan, error) {
	scanPlansMade.Add(1)
	if s == nil || s.Meta == nil || s.Meta.Index == nil {
		return nil, invalidf("scan: no table state")
	}
	ix := s.Meta.Index
	p := &scanPlan{indexRead: -1, batchRows: opts.BatchRows, parallelism: opts.Parallelism, alloc: opts.Alloc, slots: opts.Slots, pacer: opts.Pacer, cache: opts.Cache}
	if p.batchRows < 0 {
		return nil, invalidf("scan: batch_rows %d is negative", opts.BatchRows)
	}
	if p.batchRows == 0 {
		p.batchRows = defaultScanBatchRows
	}
	if p.parallelism < 0 {
		return nil, invalidf("scan: parallelism %d is negative", opts.Parallelism)
	}
	if p.parallelism == 0 {
		p.parallelism = min(defaultScanParallelism, runtime.GOMAXPROCS(0))
	}
	if p.alloc == nil {
		p.alloc = scanPool
	}

	// Bounds.
	for _, b := range []struct {
		name string
		v    *IndexValue
	}{{"start", opts.Start}, {"end", opts.End}} {
		if b.v != nil && b.v.Type != ix.Kind.Type {
			return nil, invalidf("scan: %s %s is a %s value but the table's index %q is %s", b.name, b.v, b.v.Type, ix.Column, ix.Kind.Type)
		}
	}
	if opts.Start != nil && opts.End != nil && opts.Start.Compare(*opts.End) >= 0 {
		return nil, invalidf("scan: start %s is not before end %s (the range is half-open [start, end))", opts.Start, opts.End)
	}

	sch := s.Meta.Schema

	// Columns.
	if sch != nil {
		seen := make(map[string]bool, len(opts.Columns))
		for _, c := range opts.Columns {
			if _, ok := sch.Column(c); !ok {
				return nil, invalidf("scan: columns: unknown column %q (the table has %s)", c, scanColumnList(sch))
			}
			if seen[c] {
				return nil, invalidf("scan: columns: column %q is listed twice", c)
			}
			seen[c] = true
		}
	} else if len(opts.Columns) > 0 {
		return nil, invalidf("scan: columns: unknown column %q (the table has no schema yet)", opts.Columns[0])
	}

	// Entities, in entity-column order for determinism.
	names := make([]string, 0, len(opts.Entities))
	for name := range opts.Entities {
		names = append(names, name)
	}
	slices.Sort(names)
	type entReq struct {
		name  string
		k     int
		value EntityValue
	}
	var ents []entReq
	for _, name := range names {
		v := opts.Entities[name]
		k := slices.Index(ix.EntityColumns, name)
		if k < 0 {
			if len(ix.EntityColumns) == 0 {
				return nil, invalidf("scan: entities: %q is not an entity column (the table has none)", name)
			}
			return nil, invalidf("scan: entities: %q is not an entity column (entity columns: %s)", name, strings.Join(ix.EntityColumns, ", "))
		}
		if _, ok := entityTags[v.Type]; !ok {
			return nil, invalidf("scan: entities: %q: invalid entity value type %d", name, uint8(v.Type))
		}
		if sch != nil {
			col, _ := sch.Column(name)
			if want := scanEntityType(col.Type.Kind); v.Type != want {
				return nil, invalidf("scan: entities: %q is a %s column but the value %q is a %s entity value (want %s)", name, col.Type.Kind, v.String(), v.Type, want)
			}
		}
		ents = append(ents, entReq{name, k, v})
	}
	slices.SortFunc(ents, func(a, b entReq) int { return a.k - b.k })

	// Segments.
	for _, seg := range s.Segments {
		if opts.Start != nil && seg.IndexMax.Compare(*opts.Start) < 0 {
			continue
		}
		if opts.End != nil && seg.IndexMin.Compare(*opts.End) >= 0 {
			continue
		}
		if seg.Layout.Kind == LayoutSingle {
			keep := true
			for _, e := range ents {
				if e.k < len(seg.Layout.Identity) && seg.Layout.Identity[e.k].Compare(e.value) != 0 {
					keep = false
					break
				}
			}
			if !keep {
				continue
			}
		}
		p.segments = append(p.segments, seg)
	}
	slices.SortFunc(p.segments, func(a, b SegmentMeta) int {
		if c := a.IndexMin.Compare(b.IndexMin); c != 0 {
			return c
		}
		if c := a.IndexMax.Compare(b.IndexMax); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})

	if sch == nil {
		// No schema, no segments: the scan is empty and has no columns.
		p.segments = nil
		p.output = arrow.NewSchema(nil, nil)
		return p, nil
	}

	canonical, err := ArrowSchema(sch)
	if err != nil {
		return nil, err
	}
	p.canonical = canonical
	idxCol, _ := sch.Column(ix.Column)

	// The range filter in the index column's integer domain.
	if opts.Start != nil || opts.End != nil {
		p.rng = makeScanRange(ix.Kind.Type, idxCol.Type.Unit, opts.Start, opts.End)
	}

	// Output and read sets.
	outNames := opts.Columns
	if outNames == nil {
		outNames = make([]string, len(sch.Columns))
		for i := range sch.Columns {
			outNames[i] = sch.Columns[i].Name
		}
	}
	need := make(map[string]bool, len(outNames)+len(ents)+1)
	for _, n := range outNames {
		need[n] = true
	}
	if p.rng != nil {
		need[ix.Column] = true
	}
	for _, e := range ents {
		need[e.name] = true
	}
	pos := map[string]int{}
	for _, f := range canonical.Fields() {
		if !need[f.Name] {
			continue
		}
		pos[f.Name] = len(p.read)
		p.read = append(p.read, scanColumn{name: f.Name, field: f, isIndex: f.Name == ix.Column})
	}
	if i, ok := pos[ix.Column]; ok {
		p.indexRead = i
	}
	outFields := make([]arrow.Field, len(outNames))
	p.outRead = make([]int, len(outNames))
	for i, n := range outNames {
		p.outRead[i] = pos[n]
		outFields[i] = p.read[pos[n]].field
	}
	var md *arrow.Metadata
	if m := canonical.Metadata(); m.Len() > 0 {
		md = &m
	}
	p.output = arrow.NewSchema(outFields, md)
	for _, e := range ents {
		p.ents = append(p.ents, scanEntityFilter{name: e.name, pos: pos[e.name], value: e.value})
	}
	return p, nil
}

func scanEntityType(k TypeKind) EntityType {
	switch k {
	case TypeUtf8:
		return EntityUtf8
	case TypeInt32:
		return EntityInt32
	case TypeInt64:
		return EntityInt64
	case TypeUInt64:
		return EntityUInt64
	}
	return 0
}

func scanColumnList(s *Schema) string {
	names := make([]string, len(s.Columns))
	for i := range s.Columns {
		names[i] = fmt.Sprintf("%q", s.Columns[i].Name)
	}
	return strings.Join(names, ", ")
}

// makeScanRange converts [start, end) to an inclusive integer range. A
// timestamp bound is converted to the column's unit by flooring, as the
// reference does (chrono's timestamp_millis/micros/nanos), so a row v is
// kept iff floor(start) <= v < floor(end). Bounds outside the int64 range of
// the unit saturate (the reference fails with an overflow error there).
func makeScanRange(t IndexType, unit TimeUnit, start, end *IndexValue) *scanRange {
	r := &scanRange{lo: math.MinInt64, hi: math.MaxInt64, ulo: 0, uhi: math.MaxUint64}
	switch t {
	case IndexUInt64:
		r.unsigned = true
		if start != nil {
			r.ulo = start.Uint
		}
		if end != nil {
			if end.Uint == 0 {
				r.empty = true
			} else {
				r.uhi = end.Uint - 1
			}
		}
		r.empty = r.empty || r.ulo > r.uhi
		return r
	case IndexInt64:
		if start != nil {
			r.lo = start.Int
		}
		if end != nil {
			if end.Int == math.MinInt64 {
				r.empty = true
			} else {
				r.hi = end.Int - 1
			}
		}
	default:
		if start != nil {
			v, c := scanFloorToUnit(start.Time, unit)
			switch {
			case c > 0:
				r.empty = true
			case c == 0:
				r.lo = v
			}
		}
		if end != nil {
			v, c := scanFloorToUnit(end.Time, unit)
			switch {
			case c < 0:
				r.empty = true
			case c == 0:
				if v == math.MinInt64 {
					r.empty = true
				} else {
					r.hi = v - 1
				}
			}
		}
	}
	r.empty = r.empty || r.lo > r.hi
	return r
}

var scanUnitsPerSecond = map[TimeUnit]int64{Millis: 1e3, Micros: 1e6, Nanos: 1e9}

// scanFloorToUnit returns floor(t / unit) as an int64 and 0, or -1/+1 when that
// is below/above the int64 range.
func scanFloorToUnit(t time.Time, unit TimeUnit) (int64, int) {
	per := scanUnitsPerSecond[unit]
	if per == 0 {
		per = 1e9
	}
	v := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(per))
	v.Add(v, big.NewInt(int64(t.Nanosecond())/(1e9/per)))
	switch {
	case !v.IsInt64() && v.Sign() < 0:
		return 0, -1
	case !v.IsInt64():
		return 0, 1
	}
	return v.Int64(), 0
}

// ---- row-group pruning ----

// scanStatsKind says how a column's Parquet statistics are interpreted.
type scanStatsKind int

const (
	scanStatsNone   scanStatsKind = iota // not usable
	scanStatsInt64                       // INT64, signed order
	scanStatsUint64                      // INT64, unsigned order
	scanStatsInt32                       // INT32, signed order
	scanStatsBytes                       // BYTE_ARRAY, unsigned lexicographic order
)

// scanStatsColumn is a filter column's leaf in one segment file.
type scanStatsColumn struct {
	leaf int
	kind scanStatsKind
}

// scanIndexStatsKind decides whether the statistics of the index column's leaf
// can be compared with the plan's range: the physical and logical Parquet
// types must store exactly the integers the range is expressed in.
func scanIndexStatsKind(col *schema.Column, it IndexType, unit TimeUnit) scanStatsKind {
	if col.PhysicalType() != parquet.Types.Int64 {
		return scanStatsNone
	}
	switch it {
	case IndexTimestamp:
		var ts schema.TimestampLogicalType
		switch lt := col.LogicalType().(type) {
		case schema.TimestampLogicalType:
			ts = lt
		case *schema.TimestampLogicalType:
			ts = *lt
		default:
			return scanStatsNone
		}
		want := map[TimeUnit]schema.TimeUnitType{Millis: schema.TimeUnitMillis, Micros: schema.TimeUnitMicros, Nanos: schema.TimeUnitNanos}[unit]
		if ts.TimeUnit() != want {
			return scanStatsNone
		}
		return scanStatsInt64
	case IndexInt64:
		return scanSignedStats(col, 64, scanStatsInt64)
	case IndexUInt64:
		return scanUnsignedStats(col, 64)
	}
	return scanStatsNone
}

// scanEntityStatsKind is scanIndexStatsKind for an entity column.
func scanEntityStatsKind(col *schema.Column, et EntityType) scanStatsKind {
	switch et {
	case EntityUtf8:
		if col.PhysicalType() != parquet.Types.ByteArray || col.ColumnOrder() != parquet.ColumnOrders.TypeDefinedOrder {
			return scanStatsNone
		}
		switch col.LogicalType().(type) {
		case schema.StringLogicalType, *schema.StringLogicalType, schema.NoLogicalType, *schema.NoLogicalType:
			return scanStatsBytes
		}
		return scanStatsNone
	case EntityInt32:
		if col.PhysicalType() != parquet.Types.Int32 {
			return scanStatsNone
		}
		return scanSignedStats(col, 32, scanStatsInt32)
	case EntityInt64:
		if col.PhysicalType() != parquet.Types.Int64 {
			return scanStatsNone
		}
		return scanSignedStats(col, 64, scanStatsInt64)
	case EntityUInt64:
		if col.PhysicalType() != parquet.Types.Int64 {
			return scanStatsNone
		}
		return scanUnsignedStats(col, 64)
	}
	return scanStatsNone
}

func scanSignedStats(col *schema.Column, bits int8, k scanStatsKind) scanStatsKind {
	switch lt := col.LogicalType().(type) {
	case schema.NoLogicalType, *schema.NoLogicalType:
		return k
	case *schema.IntLogicalType:
		if lt.IsSigned() && lt.BitWidth() == bits {
			return k
		}
	case schema.IntLogicalType:
		if lt.IsSigned() && lt.BitWidth() == bits {
			return k
		}
	}
	return scanStatsNone
}

func scanUnsignedStats(col *schema.Column, bits int8) scanStatsKind {
	// Legacy (pre column-order) statistics of unsigned columns were
	// computed with signed comparisons; only trust type-defined order.
	if col.ColumnOrder() != parquet.ColumnOrders.TypeDefinedOrder {
		return scanStatsNone
	}
	switch lt := col.LogicalType().(type) {
	case *schema.IntLogicalType:
		if !lt.IsSigned() && lt.BitWidth() == bits {
			return scanStatsUint64
		}
	case schema.IntLogicalType:
		if !lt.IsSigned() && lt.BitWidth() == bits {
			return scanStatsUint64
		}
	}
	return scanStatsNone
}

// scanChunkStats returns the usable statistics of one column chunk, or nil.
func scanChunkStats(rg *metadata.RowGroupMetaData, leaf int) metadata.TypedStatistics {
	cc, err := rg.ColumnChunk(leaf)
	if err != nil {
		return nil
	}
	st, err := cc.Statistics()
	if err != nil {
		return nil
	}
	return st
}

// scanAllNull reports whether statistics prove every value of the chunk null.
func scanAllNull(st metadata.TypedStatistics, rows int64) bool {
	return st.HasNullCount() && rows > 0 && st.NullCount() >= rows
}

// scanRangeMatch tells from the statistics st of an index column chunk
// whether a value in r may occur in it (may) and whether every value in it
// is in r (all). Null index values never match a range.
func scanRangeMatch(st metadata.TypedStatistics, k scanStatsKind, r *scanRange, rows int64) (may, all bool) {
	if st == nil {
		return true, false
	}
	if scanAllNull(st, rows) {
		return false, false
	}
	if !st.HasMinMax() {
		return true, false
	}
	s, ok := st.(*metadata.Int64Statistics)
	if !ok {
		return true, false
	}
	switch k {
	case scanStatsInt64:
		return s.Max() >= r.lo && s.Min() <= r.hi, s.Min() >= r.lo && s.Max() <= r.hi
	case scanStatsUint64:
		mn, mx := uint64(s.Min()), uint64(s.Max())
		return mx >= r.ulo && mn <= r.uhi, mn >= r.ulo && mx <= r.uhi
	}
	return true, false
}

// scanEntityMayMatch reports whether a chunk of an entity column with
// statistics st can hold value v. Nulls never equal a value.
func scanEntityMayMatch(st metadata.TypedStatistics, k scanStatsKind, v EntityValue, rows int64) bool {
	if st == nil {
		return true
	}
	if scanAllNull(st, rows) {
		return false
	}
	if !st.HasMinMax() {
		return true
	}
	switch s := st.(type) {
	case *metadata.Int64Statistics:
		switch k {
		case scanStatsInt64:
			return s.Min() <= v.Int && v.Int <= s.Max()
		case scanStatsUint64:
			return uint64(s.Min()) <= v.Uint && v.Uint <= uint64(s.Max())
		}
	case *metadata.Int32Statistics:
		if k == scanStatsInt32 {
			return int64(s.Min()) <= v.Int && v.Int <= int64(s.Max())
		}
	case *metadata.ByteArrayStatistics:
		if k == scanStatsBytes {
			// Truncated statistics (min a prefix, max rounded up) still
			// bound the values, so the comparison stays safe.
			return strings.Compare(string(s.Min()), v.Str) <= 0 && strings.Compare(v.Str, string(s.Max())) <= 0
		}
	}
	return true
}
