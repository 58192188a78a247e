package tableformat

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// This file reads one segment: it opens the Parquet file, checks its
// columns against the canonical schema, picks the row groups whose
// statistics can match, decodes only the needed columns, aligns them to the
// canonical types, filters the rows and hands them to a scanCoalescer.

// scanReadBuffer is the read-ahead of one column chunk stream. Column
// chunks are streamed, not loaded whole, so that memory does not grow with
// the row-group size.
const scanReadBuffer = 64 << 10

// scanFile wraps a segment file and remembers the first I/O error, so
// that a failed read is reported as a storage error and not as corruption.
type scanFile struct {
	r    storage.Reader
	mu   sync.Mutex
	fail error
}

func (rr *scanFile) note(err error) {
	if err != nil && !errors.Is(err, io.EOF) {
		rr.mu.Lock()
		if rr.fail == nil {
			rr.fail = err
		}
		rr.mu.Unlock()
	}
}

func (rr *scanFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := rr.r.ReadAt(p, off)
	rr.note(err)
	return n, err
}

func (rr *scanFile) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	rr.note(err)
	return n, err
}

func (rr *scanFile) Seek(off int64, whence int) (int64, error) {
	n, err := rr.r.Seek(off, whence)
	rr.note(err)
	return n, err
}

func (rr *scanFile) ioErr() error {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.fail
}

// scanSegmentError classifies a failure while reading seg: an I/O failure of
// the underlying file is a storage error, anything else corruption.
func scanSegmentError(seg *SegmentMeta, src *scanFile, what string, err error) error {
	if src != nil {
		if ioe := src.ioErr(); ioe != nil {
			return storageErr("read segment "+seg.Path, ioe)
		}
	}
	return &CorruptionError{Path: seg.Path, Reason: what, Err: err}
}

// scanSegmentColumn is where a read column comes from in one segment file.
type scanSegmentColumn struct {
	field  int // top-level field in the file, -1 when the file lacks it
	stored arrow.DataType
	// rewrap says the stored type differs from the canonical one only in
	// names, nullability, metadata or timezone, so arrays get the
	// canonical type over the same buffers.
	rewrap bool
	// dict says the column is read as a dictionary array and expanded
	// (see scanDictLeaves).
	dict bool
}

// readSegment streams the matching rows of seg into acc.
func (r *scanRun) readSegment(seg *SegmentMeta, acc *scanCoalescer) (err error) {
	p := r.plan
	f, err := r.fs.Open(seg.Path)
	if err != nil {
		if storage.IsNotExist(err) {
			return &CorruptionError{Path: seg.Path, Reason: "segment file is missing", Err: err}
		}
		return storageErr("open segment "+seg.Path, err)
	}
	defer f.Close()
	src := &scanFile{r: f}
	defer func() {
		if v := recover(); v != nil {
			err = scanSegmentError(seg, src, "cannot decode the Parquet segment", fmt.Errorf("panic: %v", v))
		}
	}()

	// Page and decompression buffers: recycled too when the scan uses the
	// pool; otherwise plain Go memory (they are dropped, not released,
	// when a file is done, so they must not count against opts.Alloc).
	var pageAlloc memory.Allocator = memory.DefaultAllocator
	if p.alloc == memory.Allocator(scanPool) {
		pageAlloc = scanPool
	}
	props := parquet.NewReaderProperties(pageAlloc)
	props.BufferedStreamEnabled = true
	props.BufferSize = scanReadBuffer
	pf, err := file.NewParquetReader(src, file.WithReadProps(props))
	if err != nil {
		return scanSegmentError(seg, src, "cannot read the Parquet footer", err)
	}
	arrProps := pqarrow.ArrowReadProperties{BatchSize: int64(p.batchRows)}
	for _, leaf := range scanDictLeaves(pf) {
		arrProps.SetReadDict(leaf, true)
	}
	fr, err := pqarrow.NewFileReader(pf, arrProps, p.alloc)
	if err != nil {
		return scanSegmentError(seg, src, "cannot map the Parquet schema to Arrow", err)
	}
	r.stats.segments.Add(1)

	// Locate and check the columns.
	byName := make(map[string]int, len(fr.Manifest.Fields))
	for i := range fr.Manifest.Fields {
		f := fr.Manifest.Fields[i].Field
		if _, dup := byName[f.Name]; dup {
			return &CorruptionError{Path: seg.Path, Reason: fmt.Sprintf("column %q appears twice in the segment", f.Name)}
		}
		byName[f.Name] = i
	}
	if _, ok := byName[r.indexName]; !ok {
		return &CorruptionError{Path: seg.Path, Reason: fmt.Sprintf("the segment has no index column %q", r.indexName)}
	}
	cols := make([]scanSegmentColumn, len(p.read))
	var leaves []int
	flat := true // every decoded column is a primitive (no nesting)
	for i, c := range p.read {
		fi, ok := byName[c.name]
		if !ok {
			if c.isIndex || !c.field.Nullable {
				return &CorruptionError{Path: seg.Path, Reason: fmt.Sprintf("the segment has no column %q", c.name)}
			}
			cols[i] = scanSegmentColumn{field: -1}
			continue
		}
		stored := fr.Manifest.Fields[fi].Field.Type
		isDict := false
		if d, ok := stored.(*arrow.DictionaryType); ok {
			stored, isDict = d.ValueType, true
		}
		exact, compatible := scanCompareTypes(stored, c.field.Type)
		if !compatible {
			return &CorruptionError{Path: seg.Path, Reason: fmt.Sprintf("column %q has type %s in the segment but %s in the table schema", c.name, stored, c.field.Type)}
		}
		cols[i] = scanSegmentColumn{field: fi, stored: stored, rewrap: !exact, dict: isDict}
		flat = flat && fr.Manifest.Fields[fi].IsLeaf()
		leaves = scanLeaves(leaves, &fr.Manifest.Fields[fi])
	}
	if len(leaves) == 0 {
		// Nothing to decode (only columns this segment lacks): read the
		// index column just to learn the row counts.
		leaves = scanLeaves(leaves, &fr.Manifest.Fields[byName[r.indexName]])
	}

	// Row groups.
	rgs := r.pickRowGroups(fr, cols)
	if len(rgs.groups) == 0 {
		return nil
	}
	// When the range may cut into the row groups and there are other
	// columns to decode, find the rows in range from the index column
	// alone, then decode the rest only from there.
	skip, limit := int64(0), int64(-1)
	if rgs.partial && rgs.indexLeaf >= 0 && len(leaves) > 1 {
		first, end, found, err := r.locateRange(fr, rgs)
		if err != nil {
			if ctxErr := r.ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return scanSegmentError(seg, src, "cannot decode the Parquet segment", err)
		}
		if !found {
			return nil
		}
		skip, limit = first, end-first
		if !flat {
			// SeekToRow of arrow-go misplaces the values of repeated
			// (list, map) columns: read from the start, stop at the end.
			skip, limit = 0, end
		}
	}

	if limit > 0 && limit < fr.Props.BatchSize {
		fr.Props.BatchSize = limit // decode just the span
	}
	rr, err := fr.GetRecordReader(r.ctx, leaves, rgs.groups)
	if err != nil {
		return scanSegmentError(seg, src, "cannot read the Parquet segment", err)
	}
	defer rr.Release()
	if skip > 0 {
		if err := rr.SeekToRow(skip); err != nil {
			return scanSegmentError(seg, src, "cannot seek in the Parquet segment", err)
		}
	}

	// Map the reader's columns to the read set.
	from := make([]int, len(p.read))
	rs := rr.Schema()
	for i := range p.read {
		from[i] = -1
		if cols[i].field >= 0 {
			idx := rs.FieldIndices(p.read[i].name)
			if len(idx) != 1 {
				return &CorruptionError{Path: seg.Path, Reason: fmt.Sprintf("cannot locate column %q in the decoded batches", p.read[i].name)}
			}
			from[i] = idx[0]
		}
	}

	aligned := make([]arrow.Array, len(p.read))
	outCols := make([]arrow.Array, len(p.outRead))
	var sel scanSelection
	release := func() {
		for i, a := range aligned {
			if a != nil {
				a.Release()
				aligned[i] = nil
			}
		}
	}
	defer release()
	var consumed int64
	for (limit < 0 || consumed < limit) && rr.Next() {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		rec := rr.RecordBatch()
		n := int(rec.NumRows())
		consumed += int64(n)
		r.stats.rowsDecoded.Add(int64(n))
		if n == 0 {
			continue
		}
		for i := range p.read {
			switch {
			case from[i] < 0:
				aligned[i] = array.MakeArrayOfNull(p.alloc, p.read[i].field.Type, n)
			case cols[i].dict:
				aligned[i] = scanExpandDict(p.alloc, rec.Column(from[i]).(*array.Dictionary), p.read[i].field.Type)
			case cols[i].rewrap:
				aligned[i] = scanRetype(rec.Column(from[i]), p.read[i].field.Type)
			default:
				a := rec.Column(from[i])
				a.Retain()
				aligned[i] = a
			}
		}
		p.selectRows(aligned, n, &sel)
		if sel.count > 0 {
			for i, k := range p.outRead {
				outCols[i] = aligned[k]
			}
			if sel.count == n && n >= acc.passThroughMin {
				// Every row matches: hand the decoded arrays on as they are.
				out := array.NewRecordBatch(p.output, outCols, int64(n))
				r.stats.passThrough.Add(1)
				if err := r.emit(out); err != nil {
					release()
					return err
				}
			} else if err := acc.add(outCols, sel.runs, r.emit); err != nil {
				release()
				return err
			}
		}
		release()
	}
	if err := rr.Err(); err != nil {
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return scanSegmentError(seg, src, "cannot decode the Parquet segment", err)
	}
	return nil
}

// scanRowGroups is the row-group plan of one segment.
type scanRowGroups struct {
	// groups are the row groups whose statistics allow a match.
	groups []int
	// partial says the range filter may reject rows of some of them (the
	// statistics do not put every index value inside the range).
	partial bool
	// indexLeaf is the Parquet leaf of the index column (-1 if unknown).
	indexLeaf int
}

// pickRowGroups chooses the row groups of the file whose statistics allow a
// match, counting what it prunes.
func (r *scanRun) pickRowGroups(fr *pqarrow.FileReader, cols []scanSegmentColumn) scanRowGroups {
	p := r.plan
	md := fr.ParquetReader().MetaData()
	nrg := md.NumRowGroups()
	r.stats.rowGroups.Add(int64(nrg))
	out := scanRowGroups{indexLeaf: -1}
	if p.rng != nil && p.rng.empty {
		return out
	}
	// Resolve the statistics of the filter columns.
	var idxStats scanStatsColumn
	if p.rng != nil && p.indexRead >= 0 {
		if c := cols[p.indexRead]; c.field >= 0 && fr.Manifest.Fields[c.field].IsLeaf() {
			leaf := fr.Manifest.Fields[c.field].ColIndex
			out.indexLeaf = leaf
			idxStats = scanStatsColumn{leaf: leaf, kind: scanIndexStatsKind(md.Schema.Column(leaf), r.indexType, r.indexUnit)}
		}
	}
	entStats := make([]scanStatsColumn, len(p.ents))
	for i, e := range p.ents {
		c := cols[e.pos]
		if c.field < 0 {
			// The column is missing: every value is null, nothing matches.
			return out
		}
		if fr.Manifest.Fields[c.field].IsLeaf() {
			leaf := fr.Manifest.Fields[c.field].ColIndex
			entStats[i] = scanStatsColumn{leaf: leaf, kind: scanEntityStatsKind(md.Schema.Column(leaf), e.value.Type)}
		}
	}
	out.groups = make([]int, 0, nrg)
	for g := 0; g < nrg; g++ {
		rg := md.RowGroup(g)
		rows := rg.NumRows()
		if rows == 0 {
			continue
		}
		keep, all := true, p.rng == nil
		if idxStats.kind != scanStatsNone {
			keep, all = scanRangeMatch(scanChunkStats(rg, idxStats.leaf), idxStats.kind, p.rng, rows)
		}
		for i := 0; keep && i < len(p.ents); i++ {
			if entStats[i].kind != scanStatsNone {
				keep = scanEntityMayMatch(scanChunkStats(rg, entStats[i].leaf), entStats[i].kind, p.ents[i].value, rows)
			}
		}
		if keep {
			out.groups = append(out.groups, g)
			out.partial = out.partial || !all
		}
	}
	r.stats.rowGroupsRead.Add(int64(len(out.groups)))
	return out
}

// locateRange reads only the index column of the chosen row groups and
// returns the span [first, end) of rows (numbered across those row groups)
// that holds every row in the range, or found=false when none is. In a
// segment sorted by index (the usual case) the span is exactly the matching
// rows, so the other columns are decoded only there.
func (r *scanRun) locateRange(fr *pqarrow.FileReader, rgs scanRowGroups) (first, end int64, found bool, err error) {
	rr, err := fr.GetRecordReader(r.ctx, []int{rgs.indexLeaf}, rgs.groups)
	if err != nil {
		return 0, 0, false, err
	}
	defer rr.Release()
	var sel scanSelection
	var pos int64
	rng := r.plan.rng
	for rr.Next() {
		if err := r.ctx.Err(); err != nil {
			return 0, 0, false, err
		}
		d := rr.RecordBatch().Column(0).Data()
		r.stats.rowsLocated.Add(int64(d.Len()))
		sel.reset()
		if rng.unsigned {
			scanSelectRange(scanUint64s(d), scanValidity(d), d.Offset(), rng.ulo, rng.uhi, &sel)
		} else {
			scanSelectRange(scanInt64s(d), scanValidity(d), d.Offset(), rng.lo, rng.hi, &sel)
		}
		if sel.count > 0 {
			if !found {
				first, found = pos+int64(sel.runs[0].start), true
			}
			end = pos + int64(sel.runs[len(sel.runs)-1].end)
		}
		pos += int64(d.Len())
	}
	return first, end, found, rr.Err()
}

func scanLeaves(dst []int, f *pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(dst, f.ColIndex)
	}
	for i := range f.Children {
		dst = scanLeaves(dst, &f.Children[i])
	}
	return dst
}

// ---- schema alignment ----

// scanCompareTypes compares a segment's stored Arrow type with the canonical
// one. exact means the arrays can be used as they are; compatible means
// they have the same physical layout and differ at most in the names,
// nullability or metadata of nested fields (a map's entries struct named
// after its column, as the reference's Rust writer does, for example), in
// a map's keys_sorted flag or in a timestamp's timezone, so that the
// canonical type can be put on the same buffers.
func scanCompareTypes(stored, canon arrow.DataType) (exact, compatible bool) {
	if !scanSameLayout(stored, canon) {
		return false, false
	}
	if arrow.TypeEqual(stored, canon, arrow.CheckMetadata()) && !scanIsNested(canon) {
		return true, true
	}
	return false, true
}

func scanIsNested(t arrow.DataType) bool {
	_, ok := t.(arrow.NestedType)
	return ok
}

// scanSameLayout reports whether two types describe the same physical data.
func scanSameLayout(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch a := a.(type) {
	case *arrow.TimestampType:
		return a.Unit == b.(*arrow.TimestampType).Unit
	case *arrow.FixedSizeBinaryType:
		return a.ByteWidth == b.(*arrow.FixedSizeBinaryType).ByteWidth
	case *arrow.Decimal128Type:
		bb := b.(*arrow.Decimal128Type)
		return a.Precision == bb.Precision && a.Scale == bb.Scale
	case *arrow.Decimal256Type:
		bb := b.(*arrow.Decimal256Type)
		return a.Precision == bb.Precision && a.Scale == bb.Scale
	case *arrow.StructType:
		bb := b.(*arrow.StructType)
		if a.NumFields() != bb.NumFields() {
			return false
		}
		for i := 0; i < a.NumFields(); i++ {
			if !scanSameLayout(a.Field(i).Type, bb.Field(i).Type) {
				return false
			}
		}
		return true
	case *arrow.MapType:
		bb := b.(*arrow.MapType)
		return scanSameLayout(a.KeyType(), bb.KeyType()) && scanSameLayout(a.ItemType(), bb.ItemType())
	case *arrow.ListType:
		return scanSameLayout(a.Elem(), b.(*arrow.ListType).Elem())
	case *arrow.LargeListType, *arrow.FixedSizeListType, *arrow.DictionaryType, *arrow.ExtensionBase,
		*arrow.ListViewType, *arrow.LargeListViewType, *arrow.RunEndEncodedType, *arrow.DenseUnionType, *arrow.SparseUnionType:
		return arrow.TypeEqual(a, b)
	}
	return arrow.TypeEqual(a, b)
}

// scanRetype returns arr with type dt over the same buffers (dt has the same
// layout, see scanCompareTypes).
func scanRetype(arr arrow.Array, dt arrow.DataType) arrow.Array {
	d := scanRetypeData(arr.Data(), dt)
	defer d.Release()
	return array.MakeFromData(d)
}

func scanRetypeData(d arrow.ArrayData, dt arrow.DataType) arrow.ArrayData {
	var childTypes []arrow.DataType
	switch t := dt.(type) {
	case *arrow.StructType:
		for _, f := range t.Fields() {
			childTypes = append(childTypes, f.Type)
		}
	case *arrow.MapType:
		childTypes = []arrow.DataType{t.Elem()}
	case *arrow.ListType:
		childTypes = []arrow.DataType{t.Elem()}
	}
	children := d.Children()
	var kids []arrow.ArrayData
	if len(children) > 0 {
		kids = make([]arrow.ArrayData, len(children))
		for i, c := range children {
			if i < len(childTypes) {
				kids[i] = scanRetypeData(c, childTypes[i])
			} else {
				c.Retain()
				kids[i] = c
			}
		}
	}
	out := array.NewData(dt, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
	for _, k := range kids {
		k.Release()
	}
	return out
}

// ---- row scanSelection ----

// scanSpan is a half-open range of rows [start, end).
type scanSpan struct{ start, end int }

// scanSelection is a set of rows as sorted, disjoint runs.
type scanSelection struct {
	runs  []scanSpan
	count int
	tmp   []scanSpan
}

func (s *scanSelection) reset() { s.runs, s.count = s.runs[:0], 0 }

func (s *scanSelection) add(i, j int) {
	if i >= j {
		return
	}
	if n := len(s.runs); n > 0 && s.runs[n-1].end == i {
		s.runs[n-1].end = j
	} else {
		s.runs = append(s.runs, scanSpan{i, j})
	}
	s.count += j - i
}

// selectRows computes the rows of an aligned batch of n rows that pass the
// plan's filters.
func (p *scanPlan) selectRows(cols []arrow.Array, n int, sel *scanSelection) {
	sel.reset()
	if p.rng != nil {
		if p.rng.empty {
			return
		}
		d := cols[p.indexRead].Data()
		valid := scanValidity(d)
		if p.rng.unsigned {
			scanSelectRange(scanUint64s(d), valid, d.Offset(), p.rng.ulo, p.rng.uhi, sel)
		} else {
			scanSelectRange(scanInt64s(d), valid, d.Offset(), p.rng.lo, p.rng.hi, sel)
		}
	} else {
		sel.add(0, n)
	}
	for _, e := range p.ents {
		if sel.count == 0 {
			return
		}
		d := cols[e.pos].Data()
		valid := scanValidity(d)
		in := sel.runs
		sel.tmp, sel.runs = sel.runs, sel.tmp[:0]
		sel.count = 0
		switch e.value.Type {
		case EntityUtf8:
			scanRefineString(d, valid, e.value.Str, in, sel)
		case EntityInt32:
			if e.value.Int < math.MinInt32 || e.value.Int > math.MaxInt32 {
				continue // out of range: nothing matches
			}
			scanRefineEqual(scanInt32s(d), valid, d.Offset(), int32(e.value.Int), in, sel)
		case EntityInt64:
			scanRefineEqual(scanInt64s(d), valid, d.Offset(), e.value.Int, in, sel)
		case EntityUInt64:
			scanRefineEqual(scanUint64s(d), valid, d.Offset(), e.value.Uint, in, sel)
		}
	}
}

// scanValidity returns the scanValidity bitmap of d, or nil when it has no nulls.
func scanValidity(d arrow.ArrayData) []byte {
	if d.NullN() == 0 || d.Buffers()[0] == nil {
		return nil
	}
	return d.Buffers()[0].Bytes()
}

func scanInt64s(d arrow.ArrayData) []int64 {
	if d.Len() == 0 || d.Buffers()[1] == nil {
		return nil
	}
	return arrow.Int64Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()]
}

func scanUint64s(d arrow.ArrayData) []uint64 {
	if d.Len() == 0 || d.Buffers()[1] == nil {
		return nil
	}
	return arrow.Uint64Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()]
}

func scanInt32s(d arrow.ArrayData) []int32 {
	if d.Len() == 0 || d.Buffers()[1] == nil {
		return nil
	}
	return arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()]
}

// scanSelectRange adds the rows whose value is in [lo, hi] and not null.
func scanSelectRange[T int64 | uint64](vals []T, valid []byte, off int, lo, hi T, sel *scanSelection) {
	start := -1
	for i, v := range vals {
		ok := v >= lo && v <= hi && (valid == nil || bitutil.BitIsSet(valid, off+i))
		if ok {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			sel.add(start, i)
			start = -1
		}
	}
	if start >= 0 {
		sel.add(start, len(vals))
	}
}

// scanRefineEqual keeps, of the rows in runs, those equal to want.
func scanRefineEqual[T comparable](vals []T, valid []byte, off int, want T, runs []scanSpan, sel *scanSelection) {
	for _, rn := range runs {
		start := -1
		for i := rn.start; i < rn.end; i++ {
			if vals[i] == want && (valid == nil || bitutil.BitIsSet(valid, off+i)) {
				if start < 0 {
					start = i
				}
			} else if start >= 0 {
				sel.add(start, i)
				start = -1
			}
		}
		if start >= 0 {
			sel.add(start, rn.end)
		}
	}
}

// scanRefineString is scanRefineEqual for a utf8 column.
func scanRefineString(d arrow.ArrayData, valid []byte, want string, runs []scanSpan, sel *scanSelection) {
	off := d.Offset()
	offsets := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[off : off+d.Len()+1]
	var data []byte
	if b := d.Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	for _, rn := range runs {
		start := -1
		for i := rn.start; i < rn.end; i++ {
			if string(data[offsets[i]:offsets[i+1]]) == want && (valid == nil || bitutil.BitIsSet(valid, off+i)) {
				if start < 0 {
					start = i
				}
			} else if start >= 0 {
				sel.add(start, i)
				start = -1
			}
		}
		if start >= 0 {
			sel.add(start, rn.end)
		}
	}
}

// ---- coalescing output ----

// scanMaxBinaryBytes bounds the value bytes of one binary/utf8 column in
// an output batch (int32 offsets must not overflow).
const scanMaxBinaryBytes = 1 << 30

// scanCoalescer gathers selected rows of many input batches into output
// batches of exactly limit rows (the last one may be shorter).
type scanCoalescer struct {
	schema *arrow.Schema
	cols   []scanColBuilder
	rows   int
	limit  int
	// passThroughMin is the smallest fully matching input batch handed on
	// without copying; smaller ones are coalesced.
	passThroughMin int
	split          []scanSpan
}

func newScanCoalescer(schema *arrow.Schema, limit int, mem memory.Allocator) *scanCoalescer {
	c := &scanCoalescer{schema: schema, limit: limit, passThroughMin: max(1, limit/4)}
	for _, f := range schema.Fields() {
		c.cols = append(c.cols, newScanColBuilder(f.Type, mem))
	}
	return c
}

// add appends the rows in runs of cols (one array per output column),
// emitting every batch that reaches the limit.
func (c *scanCoalescer) add(cols []arrow.Array, runs []scanSpan, emit func(arrow.RecordBatch) error) error {
	for len(runs) > 0 {
		space := c.limit - c.rows
		// Take as many runs as fit, splitting the last one if needed.
		c.split = c.split[:0]
		taken := 0
		for len(runs) > 0 && taken < space {
			rn := runs[0]
			if l := rn.end - rn.start; taken+l <= space {
				c.split = append(c.split, rn)
				taken += l
				runs = runs[1:]
			} else {
				cut := rn.start + (space - taken)
				c.split = append(c.split, scanSpan{rn.start, cut})
				taken = space
				runs = append([]scanSpan{{cut, rn.end}}, runs[1:]...)
			}
		}
		if c.rows > 0 && c.wouldOverflow(cols, c.split) {
			if err := emit(c.flush()); err != nil {
				return err
			}
			continue
		}
		for i, b := range c.cols {
			b.appendRuns(cols[i], c.split)
		}
		c.rows += taken
		if c.rows >= c.limit {
			if err := emit(c.flush()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *scanCoalescer) wouldOverflow(cols []arrow.Array, runs []scanSpan) bool {
	for i, b := range c.cols {
		if bb, ok := b.(*scanBinaryBuilder); ok {
			if int64(bb.dataLen())+scanSpanBytes(cols[i].Data(), runs) > scanMaxBinaryBytes {
				return true
			}
		}
	}
	return false
}

// flush returns the gathered rows as a batch and starts a new one.
func (c *scanCoalescer) flush() arrow.RecordBatch {
	arrs := make([]arrow.Array, len(c.cols))
	for i, b := range c.cols {
		arrs[i] = b.finish()
	}
	rec := array.NewRecordBatch(c.schema, arrs, int64(c.rows))
	for _, a := range arrs {
		a.Release()
	}
	c.rows = 0
	return rec
}

func (c *scanCoalescer) release() {
	for _, b := range c.cols {
		b.release()
	}
	c.rows = 0
}

// scanColBuilder gathers selected rows of one column (a scanSelection-vector take).
type scanColBuilder interface {
	appendRuns(arr arrow.Array, runs []scanSpan)
	finish() arrow.Array
	release()
}

func newScanColBuilder(dt arrow.DataType, mem memory.Allocator) scanColBuilder {
	switch dt.ID() {
	case arrow.BOOL:
		return &scanBoolBuilder{dt: dt, mem: mem}
	case arrow.STRING, arrow.BINARY:
		return &scanBinaryBuilder{dt: dt, mem: mem}
	}
	if fw, ok := dt.(arrow.FixedWidthDataType); ok && fw.BitWidth() >= 8 && fw.BitWidth()%8 == 0 {
		switch dt.ID() {
		case arrow.INT32, arrow.INT64, arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64, arrow.TIMESTAMP,
			arrow.DECIMAL128, arrow.DECIMAL256, arrow.FIXED_SIZE_BINARY:
			return &scanFixedBuilder{dt: dt, mem: mem, width: fw.BitWidth() / 8}
		}
	}
	return &scanSliceBuilder{dt: dt, mem: mem}
}

// scanGrow makes buf hold at least n bytes, growing geometrically, and keeps
// its content.
func scanGrow(buf *memory.Buffer, n int) {
	if n <= buf.Cap() {
		return
	}
	buf.Reserve(max(n, 2*buf.Cap(), 256))
}

// scanNullMask is the scanValidity side of a builder: allocated at the first null,
// with every earlier row marked valid.
type scanNullMask struct {
	buf   *memory.Buffer
	nulls int
}

func (m *scanNullMask) append(mem memory.Allocator, d arrow.ArrayData, n int, runs []scanSpan) {
	src := scanValidity(d)
	if src == nil && m.buf == nil {
		return
	}
	total := n
	for _, rn := range runs {
		total += rn.end - rn.start
	}
	if m.buf == nil {
		m.buf = memory.NewResizableBuffer(mem)
		scanGrow(m.buf, int(bitutil.BytesForBits(int64(total))))
		bitutil.SetBitsTo(m.buf.Buf(), 0, int64(n), true)
	} else {
		scanGrow(m.buf, int(bitutil.BytesForBits(int64(total))))
	}
	dst := m.buf.Buf()
	at := n
	for _, rn := range runs {
		l := rn.end - rn.start
		if src == nil {
			bitutil.SetBitsTo(dst, int64(at), int64(l), true)
		} else {
			bitutil.CopyBitmap(src, d.Offset()+rn.start, l, dst, at)
			m.nulls += l - bitutil.CountSetBits(src, d.Offset()+rn.start, l)
		}
		at += l
	}
}

// take hands the mask over (nil when there were no nulls).
func (m *scanNullMask) take(n int) *memory.Buffer {
	b := m.buf
	if b != nil {
		b.ResizeNoShrink(int(bitutil.BytesForBits(int64(n))))
	}
	m.buf, m.nulls = nil, 0
	return b
}

func (m *scanNullMask) release() {
	if m.buf != nil {
		m.buf.Release()
		m.buf = nil
	}
	m.nulls = 0
}

// scanFixedBuilder takes rows of a fixed-width column (numbers, timestamps,
// decimals, fixed-size binary).
type scanFixedBuilder struct {
	dt     arrow.DataType
	mem    memory.Allocator
	width  int
	values *memory.Buffer
	mask   scanNullMask
	n      int
}

func (b *scanFixedBuilder) appendRuns(arr arrow.Array, runs []scanSpan) {
	d := arr.Data()
	b.mask.append(b.mem, d, b.n, runs)
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
	}
	total := 0
	for _, rn := range runs {
		total += rn.end - rn.start
	}
	scanGrow(b.values, (b.n+total)*b.width)
	dst := b.values.Buf()
	src := d.Buffers()[1].Bytes()
	w, off := b.width, d.Offset()
	for _, rn := range runs {
		copy(dst[b.n*w:], src[(off+rn.start)*w:(off+rn.end)*w])
		b.n += rn.end - rn.start
	}
}

func (b *scanFixedBuilder) finish() arrow.Array {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
	}
	b.values.ResizeNoShrink(b.n * b.width)
	arr := scanFinishValues(b.dt, b.n, b.values, &b.mask)
	b.values, b.n = nil, 0
	return arr
}

func (b *scanFixedBuilder) release() { scanReleaseValues(&b.values, &b.mask, &b.n) }

// scanFinishValues wraps a values buffer and the mask's validity as an
// array of n rows; it takes the caller's reference to values.
func scanFinishValues(dt arrow.DataType, n int, values *memory.Buffer, mask *scanNullMask) arrow.Array {
	nulls := mask.nulls
	valid := mask.take(n)
	d := array.NewData(dt, n, []*memory.Buffer{valid, values}, nil, nulls, 0)
	arr := array.MakeFromData(d)
	d.Release()
	values.Release()
	if valid != nil {
		valid.Release()
	}
	return arr
}

// scanReleaseValues drops a builder's buffers.
func scanReleaseValues(values **memory.Buffer, mask *scanNullMask, n *int) {
	if *values != nil {
		(*values).Release()
		*values = nil
	}
	mask.release()
	*n = 0
}

// scanBoolBuilder takes rows of a boolean column.
type scanBoolBuilder struct {
	dt     arrow.DataType
	mem    memory.Allocator
	values *memory.Buffer
	mask   scanNullMask
	n      int
}

func (b *scanBoolBuilder) appendRuns(arr arrow.Array, runs []scanSpan) {
	d := arr.Data()
	b.mask.append(b.mem, d, b.n, runs)
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
	}
	total := 0
	for _, rn := range runs {
		total += rn.end - rn.start
	}
	scanGrow(b.values, int(bitutil.BytesForBits(int64(b.n+total))))
	dst := b.values.Buf()
	src := d.Buffers()[1].Bytes()
	for _, rn := range runs {
		bitutil.CopyBitmap(src, d.Offset()+rn.start, rn.end-rn.start, dst, b.n)
		b.n += rn.end - rn.start
	}
}

func (b *scanBoolBuilder) finish() arrow.Array {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
	}
	b.values.ResizeNoShrink(int(bitutil.BytesForBits(int64(b.n))))
	arr := scanFinishValues(b.dt, b.n, b.values, &b.mask)
	b.values, b.n = nil, 0
	return arr
}

func (b *scanBoolBuilder) release() { scanReleaseValues(&b.values, &b.mask, &b.n) }

// scanBinaryBuilder takes rows of a utf8 or binary column (int32 offsets).
type scanBinaryBuilder struct {
	dt      arrow.DataType
	mem     memory.Allocator
	offsets *memory.Buffer
	data    *memory.Buffer
	size    int // bytes used in data
	mask    scanNullMask
	n       int
}

func (b *scanBinaryBuilder) dataLen() int { return b.size }

// scanSpanBytes is the number of value bytes the rows in runs of d hold.
func scanSpanBytes(d arrow.ArrayData, runs []scanSpan) int64 {
	if d.Len() == 0 {
		return 0
	}
	offs := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():]
	var n int64
	for _, rn := range runs {
		n += int64(offs[rn.end] - offs[rn.start])
	}
	return n
}

func (b *scanBinaryBuilder) appendRuns(arr arrow.Array, runs []scanSpan) {
	d := arr.Data()
	b.mask.append(b.mem, d, b.n, runs)
	if b.offsets == nil {
		b.offsets = memory.NewResizableBuffer(b.mem)
		b.data = memory.NewResizableBuffer(b.mem)
		scanGrow(b.offsets, 4)
		arrow.Int32Traits.CastFromBytes(b.offsets.Buf()[:4])[0] = 0
	}
	total := 0
	for _, rn := range runs {
		total += rn.end - rn.start
	}
	scanGrow(b.offsets, (b.n+total+1)*4)
	scanGrow(b.data, b.size+int(scanSpanBytes(d, runs)))
	dstOff := arrow.Int32Traits.CastFromBytes(b.offsets.Buf())
	dst := b.data.Buf()
	srcOff := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():]
	var src []byte
	if buf := d.Buffers()[2]; buf != nil {
		src = buf.Bytes()
	}
	for _, rn := range runs {
		lo, hi := srcOff[rn.start], srcOff[rn.end]
		copy(dst[b.size:], src[lo:hi])
		shift := int32(b.size) - lo
		for i := rn.start + 1; i <= rn.end; i++ {
			b.n++
			dstOff[b.n] = srcOff[i] + shift
		}
		b.size += int(hi - lo)
	}
}

func (b *scanBinaryBuilder) finish() arrow.Array {
	if b.offsets == nil {
		b.offsets = memory.NewResizableBuffer(b.mem)
		b.data = memory.NewResizableBuffer(b.mem)
		scanGrow(b.offsets, 4)
		arrow.Int32Traits.CastFromBytes(b.offsets.Buf()[:4])[0] = 0
	}
	b.offsets.ResizeNoShrink((b.n + 1) * 4)
	b.data.ResizeNoShrink(b.size)
	nulls := b.mask.nulls
	valid := b.mask.take(b.n)
	d := array.NewData(b.dt, b.n, []*memory.Buffer{valid, b.offsets, b.data}, nil, nulls, 0)
	arr := array.MakeFromData(d)
	d.Release()
	b.offsets.Release()
	b.data.Release()
	if valid != nil {
		valid.Release()
	}
	b.offsets, b.data, b.n, b.size = nil, nil, 0, 0
	return arr
}

func (b *scanBinaryBuilder) release() {
	if b.offsets != nil {
		b.offsets.Release()
		b.data.Release()
		b.offsets, b.data = nil, nil
	}
	b.mask.release()
	b.n, b.size = 0, 0
}

// scanSliceBuilder takes rows of any other column (struct, list, map) by
// keeping zero-copy slices of the selected runs and concatenating them.
type scanSliceBuilder struct {
	dt    arrow.DataType
	mem   memory.Allocator
	parts []arrow.Array
}

func (b *scanSliceBuilder) appendRuns(arr arrow.Array, runs []scanSpan) {
	for _, rn := range runs {
		b.parts = append(b.parts, array.NewSlice(arr, int64(rn.start), int64(rn.end)))
	}
}

func (b *scanSliceBuilder) finish() arrow.Array {
	defer b.release()
	switch len(b.parts) {
	case 0:
		return array.MakeArrayOfNull(b.mem, b.dt, 0)
	case 1:
		b.parts[0].Retain()
		return b.parts[0]
	}
	out, err := array.Concatenate(b.parts, b.mem)
	if err != nil {
		panic(fmt.Errorf("tableformat: concatenating %s slices: %w", b.dt, err))
	}
	return out
}

func (b *scanSliceBuilder) release() {
	for _, p := range b.parts {
		p.Release()
	}
	b.parts = b.parts[:0]
}
