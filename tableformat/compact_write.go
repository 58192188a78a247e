package tableformat

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/tsflight/tsflight/coverage"
)

// compactChunkRows is the most rows gathered into one batch for the
// writer: at most a row group, so that the writer's byte count (which grows
// when a row group closes) is up to date after each batch.
const compactChunkRows = 1 << 16

// compactRun owns the files one Compact call writes until they are
// committed.
type compactRun struct {
	t         *Table
	opts      *CompactOptions
	written   []string // every file created, for cleanup
	committed bool
}

// cleanup removes every file of a call that did not commit.
func (r *compactRun) cleanup() {
	if r.committed {
		return
	}
	for _, p := range r.written {
		r.t.log.removeQuietly(p)
	}
}

// drop removes the files of a group that will not be committed.
func (r *compactRun) drop(g *compactGroup) {
	for i := range g.outputs {
		r.t.log.removeQuietly(g.outputs[i].Path)
		r.t.log.removeQuietly(g.outputs[i].CoveragePath)
	}
}

// checkFiles makes sure the outputs still exist just before the commit (a
// vacuum with a cutoff younger than this call could have taken them), as
// appends do.
func (r *compactRun) checkFiles(groups []*compactGroup) error {
	for _, g := range groups {
		for i := range g.outputs {
			for _, p := range []string{g.outputs[i].Path, g.outputs[i].CoveragePath} {
				if _, err := r.t.fs.Stat(p); err != nil {
					return storageErr("the compaction's file "+p+" disappeared before its commit (was a vacuum run with a cutoff younger than the compaction?); nothing was committed", err)
				}
			}
		}
	}
	return nil
}

// syncParents makes the entries of the directories the outputs live in
// durable, up to the table root (they exist already on a table with
// segments, unless every segment lives elsewhere).
func (r *compactRun) syncParents() error {
	for _, d := range []string{"data/_managed", "data", "_coverage", "."} {
		if err := r.t.fs.SyncDir(d); err != nil {
			return storageErr("sync "+d, err)
		}
	}
	return nil
}

// compactRows are the decoded rows of one group, and their order.
type compactRows struct {
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	order   []compactRef
}

// compactRef is one row: its identity's rank, its index as an ordered key,
// and where it is.
type compactRef struct {
	ident uint32
	key   uint64
	batch uint32
	row   uint32
}

func (rows *compactRows) release() {
	for _, b := range rows.batches {
		b.Release()
	}
	rows.batches = nil
}

// writeGroup reads, sorts, writes and verifies one group.
func (r *compactRun) writeGroup(ctx context.Context, st *State, g *compactGroup) error {
	rows, err := r.readGroup(ctx, st, g)
	if err != nil {
		return err
	}
	defer rows.release()
	if g.rowsRead != g.rows {
		return corruptf("", st.Version, nil, "compaction read %d rows from %d segments (%s, …) whose log records %d; nothing was committed",
			g.rowsRead, len(g.sources), g.sources[0].Path, g.rows)
	}
	ir, er := newIndexReader(st, st.Schema()), newEntityReader(st, st.Schema())
	if err := rows.sort(ir, er); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	wopts := &AppendOptions{Compression: r.opts.Compression, MaxRowsPerRowGroup: r.opts.MaxRowsPerRowGroup,
		MaxBytesPerRowGroup: DefaultCompactTargetBytes, Alloc: r.opts.Alloc}
	chunk := int(min(r.opts.MaxRowsPerRowGroup, compactChunkRows))
	entity := len(er.cols) > 0
	union := newSegmentCoverage(st.Index(), entity)
	var out *compactOutput
	defer func() {
		if out != nil {
			out.w.abort()
		}
	}()
	for lo := 0; lo < len(rows.order); {
		if out == nil {
			if out, err = r.newOutput(st, rows.schema, wopts, entity); err != nil {
				return err
			}
		}
		rec, n := rows.take(r.opts.Alloc, rows.order[lo:min(lo+chunk, len(rows.order))])
		err := out.stats.observe(ctx, ir, er, rec)
		if err == nil && out.stats.dups == 0 {
			err = out.w.write(rec)
		}
		rec.Release()
		if err != nil {
			return err
		}
		lo += n
		if lo < len(rows.order) && compactWrittenBytes(out.w) >= r.opts.TargetBytes {
			seg, err := r.finishOutput(st, out, ir)
			out = nil
			if err != nil {
				return err
			}
			g.addOutput(seg, union)
		}
	}
	if out != nil {
		seg, err := r.finishOutput(st, out, ir)
		out = nil
		if err != nil {
			return err
		}
		g.addOutput(seg, union)
	}
	// Verify before anything can be committed.
	if g.rowsWritten != g.rowsRead {
		return corruptf("", st.Version, nil, "compaction wrote %d rows of the %d it read from %d segments (%s, …); nothing was committed",
			g.rowsWritten, g.rowsRead, len(g.sources), g.sources[0].Path)
	}
	if !union.set.Equal(g.cov.set) || union.set.Cardinality() != g.rowsWritten {
		return corruptf("", st.Version, nil, "the coverage of the %d compacted segments (%d pairs for %d rows) differs from the union of the %d sources' sidecars (%d pairs; first source %s); nothing was committed",
			len(g.outputs), union.set.Cardinality(), g.rowsWritten, len(g.sources), g.cov.set.Cardinality(), g.sources[0].Path)
	}
	return nil
}

// addOutput records a finished output and adds its coverage to union.
func (g *compactGroup) addOutput(seg compactSegment, union *segmentCoverage) {
	g.outputs = append(g.outputs, seg.meta)
	g.outputBytes += *seg.meta.FileSize
	g.rowsWritten += seg.meta.RowCount
	if err := union.set.Union(seg.cov.set); err != nil {
		panic(fmt.Sprintf("union of same-kind coverage sets failed: %v", err)) // unreachable
	}
}

// readGroup decodes every row of the group's sources through the scan
// path, aligned to the current schema.
func (r *compactRun) readGroup(ctx context.Context, st *State, g *compactGroup) (*compactRows, error) {
	rdr, err := r.t.Scan(ctx, st, ScanOptions{Segments: g.paths(), Alloc: r.opts.Alloc})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	rows := &compactRows{schema: rdr.Schema()}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		rec.Retain()
		rows.batches = append(rows.batches, rec)
		g.rowsRead += uint64(rec.NumRows())
	}
	if err := rdr.Err(); err != nil {
		rows.release()
		return nil, err
	}
	return rows, nil
}

// sort orders the rows by (identity, index): identities in the canonical
// order of the coverage (component by component, strings bytewise), index
// values ascending.
func (rows *compactRows) sort(ir indexReader, er entityReader) error {
	var total int
	for _, b := range rows.batches {
		total += int(b.NumRows())
	}
	if total > 1<<32-1 || len(rows.batches) > 1<<32-1 {
		return invalidf("compaction: a group of %d rows is too large to sort; lower TargetBytes", total)
	}
	rows.order = make([]compactRef, 0, total)
	seen := map[string]uint32{}
	var idents []coverage.Identity
	var key []byte
	for bi, b := range rows.batches {
		n := int(b.NumRows())
		keys := compactIndexKeys(b.Column(ir.col), ir.typ)
		cols := make([]arrow.Array, len(er.cols))
		for k, c := range er.cols {
			cols[k] = b.Column(c)
		}
		for row := range n {
			var id uint32
			if len(cols) > 0 {
				key = compactIdentityKey(key[:0], cols, er.types, row)
				var ok bool
				if id, ok = seen[string(key)]; !ok {
					id = uint32(len(idents))
					seen[string(key)] = id
					idents = append(idents, compactIdentity(cols, er.types, row))
				}
			}
			rows.order = append(rows.order, compactRef{ident: id, key: keys[row], batch: uint32(bi), row: uint32(row)})
		}
	}
	if len(idents) > 1 {
		byRank := make([]uint32, len(idents))
		for i := range byRank {
			byRank[i] = uint32(i)
		}
		slices.SortFunc(byRank, func(a, b uint32) int { return idents[a].Compare(idents[b]) })
		rank := make([]uint32, len(idents))
		for r, id := range byRank {
			rank[id] = uint32(r)
		}
		for i := range rows.order {
			rows.order[i].ident = rank[rows.order[i].ident]
		}
	}
	slices.SortFunc(rows.order, func(a, b compactRef) int {
		if c := cmp.Compare(a.ident, b.ident); c != 0 {
			return c
		}
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		if c := cmp.Compare(a.batch, b.batch); c != 0 {
			return c
		}
		return cmp.Compare(a.row, b.row)
	})
	return nil
}

// compactIndexKeys maps index values to keys that sort as the values do
// (signed values with the sign bit flipped). Null values (refused later by
// the coverage) get key 0.
func compactIndexKeys(idx arrow.Array, typ IndexType) []uint64 {
	n := idx.Len()
	out := make([]uint64, n)
	d := idx.Data()
	if n == 0 || d.Buffers()[1] == nil {
		return out
	}
	if typ == IndexUInt64 {
		copy(out, arrow.Uint64Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():][:n])
		return out
	}
	for i, v := range arrow.Int64Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():][:n] {
		out[i] = uint64(v) ^ 1<<63
	}
	return out
}

// compactIdentityKey appends a map key for the identity of row: per
// component a tag byte and the value (strings length-prefixed), so that
// equal keys are equal identities; a null component has its own tag.
func compactIdentityKey(b []byte, cols []arrow.Array, types []EntityType, row int) []byte {
	for k, col := range cols {
		if col.IsNull(row) {
			b = append(b, 0xff)
			continue
		}
		b = append(b, byte(k))
		switch types[k] {
		case EntityUtf8:
			s := col.(*array.String).Value(row)
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		case EntityInt32:
			b = binary.LittleEndian.AppendUint64(b, uint64(col.(*array.Int32).Value(row)))
		case EntityInt64:
			b = binary.LittleEndian.AppendUint64(b, uint64(col.(*array.Int64).Value(row)))
		default:
			b = binary.LittleEndian.AppendUint64(b, col.(*array.Uint64).Value(row))
		}
	}
	return b
}

// compactIdentity is the identity of row, owning its strings (nulls, which
// the coverage refuses later, read as zero values).
func compactIdentity(cols []arrow.Array, types []EntityType, row int) coverage.Identity {
	id := make(coverage.Identity, len(cols))
	for k, col := range cols {
		switch types[k] {
		case EntityUtf8:
			id[k] = coverage.Utf8(strings.Clone(col.(*array.String).Value(row)))
		case EntityInt32:
			id[k] = coverage.Int32(col.(*array.Int32).Value(row))
		case EntityInt64:
			id[k] = coverage.Int64(col.(*array.Int64).Value(row))
		default:
			id[k] = coverage.UInt64(col.(*array.Uint64).Value(row))
		}
	}
	return id
}

// compactOutput is one output segment being written.
type compactOutput struct {
	path    string
	attempt uuid.UUID
	w       *segmentWriter
	stats   *streamStats
}

// compactSegment is a finished output: its log entry and its coverage.
type compactSegment struct {
	meta SegmentMeta
	cov  *segmentCoverage
}

func (r *compactRun) newOutput(st *State, schema *arrow.Schema, wopts *AppendOptions, entity bool) (*compactOutput, error) {
	p := path.Join(appendDir, uuid.NewString()+".parquet")
	w, err := newSegmentWriter(r.t.fs, p, schema, wopts, r.opts.Alloc)
	if err != nil {
		return nil, err
	}
	r.written = append(r.written, p)
	return &compactOutput{path: p, attempt: uuid.New(), w: w, stats: &streamStats{cov: newSegmentCoverage(st.Index(), entity)}}, nil
}

// finishOutput closes the file durably, derives its SegmentMeta as an
// append does, and writes its coverage sidecar.
func (r *compactRun) finishOutput(st *State, out *compactOutput, ir indexReader) (compactSegment, error) {
	if out.stats.dups > 0 {
		return compactSegment{}, corruptf("", st.Version, nil, "the compacted rows hold more than one row in %d (identity, index interval) pairs, e.g. %s: the source segments overlap; nothing was committed",
			out.stats.dups, out.stats.firstDup)
	}
	size, err := out.w.finish()
	if err != nil {
		return compactSegment{}, err
	}
	if err := r.t.fs.SyncDir(appendDir); err != nil {
		return compactSegment{}, storageErr("sync "+appendDir, err)
	}
	lo, hi := out.stats.bounds(ir)
	seg := SegmentMeta{
		Path:     out.path,
		Format:   FormatParquet,
		Layout:   out.stats.cov.layout(),
		IndexMin: lo,
		IndexMax: hi,
		RowCount: out.stats.rows,
		FileSize: &size,
	}
	name, data := out.stats.cov.encodeSegment(out.attempt)
	p := path.Join(segmentCoverageDir, name+".roar")
	if err := r.t.log.writeDurable(p, data); err != nil {
		return compactSegment{}, err
	}
	r.written = append(r.written, p)
	if err := r.t.fs.SyncDir(segmentCoverageDir); err != nil {
		return compactSegment{}, storageErr("sync "+segmentCoverageDir, err)
	}
	seg.CoveragePath = p
	return compactSegment{meta: seg, cov: out.stats.cov}, nil
}

// compactWrittenBytes is about the size of the segment so far: the bytes
// handed to the file plus the open row group's encoded bytes.
func compactWrittenBytes(w *segmentWriter) int64 {
	n := w.count.n
	switch {
	case w.rgw != nil:
		n += w.rgw.TotalBytesWritten()
	case w.fw != nil:
		n += w.fw.RowGroupTotalBytesWritten()
	}
	return n
}

// take gathers the rows refs into one batch of the group's schema. When a
// string or binary column would pass scanMaxBinaryBytes it takes fewer
// rows (at least one); n is how many.
func (rows *compactRows) take(mem memory.Allocator, refs []compactRef) (arrow.RecordBatch, int) {
	n := len(refs)
	var binCols []int
	for c, f := range rows.schema.Fields() {
		if id := f.Type.ID(); id == arrow.STRING || id == arrow.BINARY {
			binCols = append(binCols, c)
		}
	}
	if len(binCols) > 0 {
		sums := make([]int64, len(binCols))
	scan:
		for i, ref := range refs {
			for k, c := range binCols {
				d := rows.batches[ref.batch].Column(c).Data()
				offs := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():]
				sums[k] += int64(offs[ref.row+1] - offs[ref.row])
				if sums[k] > scanMaxBinaryBytes && i > 0 {
					n = i
					break scan
				}
			}
		}
	}
	refs = refs[:n]
	cols := make([]arrow.Array, rows.schema.NumFields())
	src := make([]arrow.Array, len(rows.batches))
	for c, f := range rows.schema.Fields() {
		for b, rec := range rows.batches {
			src[b] = rec.Column(c)
		}
		cols[c] = compactTakeColumn(mem, f.Type, src, refs)
	}
	rec := array.NewRecordBatch(rows.schema, cols, int64(n))
	for _, a := range cols {
		a.Release()
	}
	return rec, n
}

// compactTakeColumn gathers rows refs of one column (src[b] is the column
// of batch b).
func compactTakeColumn(mem memory.Allocator, dt arrow.DataType, src []arrow.Array, refs []compactRef) arrow.Array {
	n := len(refs)
	switch dt.ID() {
	case arrow.INT32, arrow.INT64, arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64, arrow.TIMESTAMP,
		arrow.DECIMAL128, arrow.DECIMAL256, arrow.FIXED_SIZE_BINARY:
		width := dt.(arrow.FixedWidthDataType).BitWidth() / 8
		valid, nulls := compactTakeValidity(mem, src, refs)
		values := memory.NewResizableBuffer(mem)
		values.Resize(n * width)
		dst := values.Bytes()
		if width == 8 {
			d64 := arrow.Uint64Traits.CastFromBytes(dst)
			for i, ref := range refs {
				d := src[ref.batch].Data()
				d64[i] = arrow.Uint64Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset()+int(ref.row)]
			}
		} else {
			for i, ref := range refs {
				d := src[ref.batch].Data()
				at := (d.Offset() + int(ref.row)) * width
				copy(dst[i*width:(i+1)*width], d.Buffers()[1].Bytes()[at:at+width])
			}
		}
		return compactArray(dt, n, []*memory.Buffer{valid, values}, nulls)
	case arrow.BOOL:
		valid, nulls := compactTakeValidity(mem, src, refs)
		values := memory.NewResizableBuffer(mem)
		values.Resize(int(bitutil.BytesForBits(int64(n))))
		dst := values.Bytes()
		clear(dst)
		for i, ref := range refs {
			d := src[ref.batch].Data()
			if bitutil.BitIsSet(d.Buffers()[1].Bytes(), d.Offset()+int(ref.row)) {
				bitutil.SetBit(dst, i)
			}
		}
		return compactArray(dt, n, []*memory.Buffer{valid, values}, nulls)
	case arrow.STRING, arrow.BINARY:
		valid, nulls := compactTakeValidity(mem, src, refs)
		var size int
		for _, ref := range refs {
			d := src[ref.batch].Data()
			offs := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():]
			size += int(offs[ref.row+1] - offs[ref.row])
		}
		offsets := memory.NewResizableBuffer(mem)
		offsets.Resize((n + 1) * 4)
		data := memory.NewResizableBuffer(mem)
		data.Resize(size)
		dstOffs := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
		dst := data.Bytes()
		pos := 0
		dstOffs[0] = 0
		for i, ref := range refs {
			d := src[ref.batch].Data()
			offs := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset():]
			lo, hi := offs[ref.row], offs[ref.row+1]
			if hi > lo {
				pos += copy(dst[pos:], d.Buffers()[2].Bytes()[lo:hi])
			}
			dstOffs[i+1] = int32(pos)
		}
		return compactArray(dt, n, []*memory.Buffer{valid, offsets, data}, nulls)
	}
	// Nested columns: zero-copy slices of the runs of consecutive rows,
	// concatenated.
	var parts []arrow.Array
	for i := 0; i < n; {
		j := i + 1
		for j < n && refs[j].batch == refs[i].batch && refs[j].row == refs[j-1].row+1 {
			j++
		}
		start := int64(refs[i].row)
		parts = append(parts, array.NewSlice(src[refs[i].batch], start, start+int64(j-i)))
		i = j
	}
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	switch len(parts) {
	case 0:
		return array.MakeArrayOfNull(mem, dt, 0)
	case 1:
		parts[0].Retain()
		return parts[0]
	}
	out, err := array.Concatenate(parts, mem)
	if err != nil {
		panic(fmt.Errorf("tableformat: concatenating %s slices: %w", dt, err)) // same types: unreachable
	}
	return out
}

// compactTakeValidity gathers the validity bits of refs: nil when no
// source array has a null.
func compactTakeValidity(mem memory.Allocator, src []arrow.Array, refs []compactRef) (*memory.Buffer, int) {
	hasNulls := false
	for _, a := range src {
		if a.NullN() > 0 {
			hasNulls = true
			break
		}
	}
	if !hasNulls {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(len(refs)))))
	bits := buf.Bytes()
	clear(bits)
	nulls := 0
	for i, ref := range refs {
		if src[ref.batch].IsValid(int(ref.row)) {
			bitutil.SetBit(bits, i)
		} else {
			nulls++
		}
	}
	if nulls == 0 {
		buf.Release()
		return nil, 0
	}
	return buf, nulls
}

// compactArray builds an array over buffers, taking the caller's
// references to them.
func compactArray(dt arrow.DataType, n int, bufs []*memory.Buffer, nulls int) arrow.Array {
	d := array.NewData(dt, n, bufs, nil, nulls, 0)
	arr := array.MakeFromData(d)
	d.Release()
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	return arr
}
