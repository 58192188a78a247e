package tableformat

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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

// scanDecodeRows is about the rows pqarrow decodes at once (see
// scanEvenBatch). A scan's memory in flight grows with it faster than
// linearly (pqarrow's decoding buffers), its speed hardly does: streaming
// 20 M rows over Flight (GC percent 50, BenchmarkFlightDoGet), the server
// peaked at 205 MiB RSS with 16K-row batches and 239 MiB with 32K, at the
// same MB/s (measured when this was chosen).
const scanDecodeRows = 16 << 10

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
func (r *scanRun) readSegment(seg *SegmentMeta, acc *scanCoalescer, slot *decodeSlot) (err error) {
	emit := func(rec arrow.RecordBatch) error { return r.emit(rec, slot) }
	p := r.plan
	// The scan cache names the file by what Stat says before it is
	// opened: a file replaced in between is read, but cached under the
	// old file's name, which the new file never matches.
	var cfile scanCacheFile
	useCache := p.cache != nil
	if useCache {
		fi, err := r.fs.Stat(seg.Path)
		useCache = err == nil && !fi.IsDir
		if useCache {
			cfile = scanCacheFile{table: r.cacheTable, path: seg.Path, size: fi.Size, mtime: fi.ModTime.UnixNano()}
		}
	}
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
	if p.alloc == memory.Allocator(scanPool) || unwrapsTo(p.alloc, scanPool) {
		pageAlloc = scanPool
	}
	props := parquet.NewReaderProperties(pageAlloc)
	props.BufferedStreamEnabled = true
	props.BufferSize = scanReadBuffer
	// The file must be the one the log recorded (size, then the footer's
	// row count) before any of its rows are served.
	if err := verifySegmentSize(seg, f.Size()); err != nil {
		return err
	}
	useCache = useCache && f.Size() == cfile.size
	pf, err := file.NewParquetReader(src, file.WithReadProps(props))
	if err != nil {
		return scanSegmentError(seg, src, "cannot read the Parquet footer", err)
	}
	if err := verifySegmentFooter(seg, pf.MetaData()); err != nil {
		return err
	}
	arrProps := pqarrow.ArrowReadProperties{BatchSize: int64(min(p.batchRows, scanDecodeRows))}
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
	if limit < 0 {
		fr.Props.BatchSize = scanEvenBatch(fr, rgs.groups, fr.Props.BatchSize)
	}
	// Whole row groups: served from the scan cache when it holds every
	// column, else decoded into it (scan_cache.go).
	decodeAlloc := p.alloc
	var fill *scanCacheFill
	if useCache && skip == 0 && limit < 0 {
		if keys := r.cacheKeys(cfile, rgs.groups, fr.Props.BatchSize, cols); keys != nil {
			if chunks, ok := p.cache.get(keys); ok {
				return r.replaySegment(chunks, keys, acc, slot)
			}
			if fill = p.cache.newFill(keys, r.cacheSince); fill != nil {
				defer fill.abandon()
				decodeAlloc = p.cache.mem
				if fr, err = pqarrow.NewFileReader(pf, fr.Props, decodeAlloc); err != nil {
					return scanSegmentError(seg, src, "cannot map the Parquet schema to Arrow", err)
				}
			}
		}
	}
	// Top-level dictionary string columns of whole row groups are decoded
	// directly (scan_strings.go), as long as pqarrow still reads another
	// column to set the batch sizes.
	direct := make([]*stringColumnReader, len(p.read))
	defer func() {
		for _, d := range direct {
			if d != nil {
				d.release()
			}
		}
	}()
	if skip == 0 && limit < 0 {
		for i, c := range cols {
			if !c.dict || c.field < 0 {
				continue
			}
			leaf := scanLeaves(nil, &fr.Manifest.Fields[c.field])
			if len(leaf) != 1 || len(leaves) < 2 || !directStringEligible(pf, rgs.groups, leaf[0]) {
				continue
			}
			leaves = slices.DeleteFunc(leaves, func(l int) bool { return l == leaf[0] })
			direct[i] = newStringColumnReader(pf, leaf[0], rgs.groups, decodeAlloc, p.read[i].field.Type)
			r.stats.directString.Add(int64(len(rgs.groups)))
		}
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
		if cols[i].field >= 0 && direct[i] == nil {
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
	for limit < 0 || consumed < limit {
		if err := r.pace(slot); err != nil {
			return err
		}
		if !rr.Next() {
			break
		}
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
			case direct[i] != nil:
				a, err := direct[i].read(n)
				if err != nil {
					release()
					return scanSegmentError(seg, src, "cannot decode the Parquet segment", err)
				}
				aligned[i] = a
			case from[i] < 0:
				aligned[i] = array.MakeArrayOfNull(p.alloc, p.read[i].field.Type, n)
			case cols[i].dict:
				aligned[i] = scanExpandDict(decodeAlloc, rec.Column(from[i]).(*array.Dictionary), p.read[i].field.Type)
			case cols[i].rewrap:
				aligned[i] = scanRetype(rec.Column(from[i]), p.read[i].field.Type)
			default:
				a := rec.Column(from[i])
				a.Retain()
				aligned[i] = a
			}
		}
		var shared []scanCacheKey
		if fill != nil {
			fill.add(aligned)
			shared = fill.keys
		}
		if err := r.serveBatch(aligned, n, shared, acc, &sel, outCols, emit); err != nil {
			release()
			return err
		}
		release()
	}
	if err := rr.Err(); err != nil {
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return scanSegmentError(seg, src, "cannot decode the Parquet segment", err)
	}
	if fill != nil {
		fill.commit()
	}
	return nil
}

// serveBatch filters one batch of a segment's read columns (aligned, n
// rows) and passes the matching rows on: the arrays themselves when every
// row matches, else copies gathered by acc. shared, when not nil, marks
// the columns whose arrays are the scan cache's (a non-zero key): a batch
// passing them on charges their bytes to the scan's allocator while it is
// held, when that is a SharedHolder.
func (r *scanRun) serveBatch(aligned []arrow.Array, n int, shared []scanCacheKey, acc *scanCoalescer, sel *scanSelection, outCols []arrow.Array, emit func(arrow.RecordBatch) error) error {
	p := r.plan
	p.selectRows(aligned, n, sel)
	if sel.count == 0 {
		return nil
	}
	for i, k := range p.outRead {
		outCols[i] = aligned[k]
	}
	if sel.count < n || n < acc.passThroughMin {
		return acc.add(outCols, sel.runs, emit)
	}
	// Every row matches: hand the decoded arrays on as they are.
	var out arrow.RecordBatch = array.NewRecordBatch(p.output, outCols, int64(n))
	r.stats.passThrough.Add(1)
	if h, ok := p.alloc.(SharedHolder); ok && shared != nil {
		var bytes int64
		for i, k := range p.outRead {
			if shared[k] != (scanCacheKey{}) {
				bytes += arrayBytes(outCols[i])
			}
		}
		if bytes > 0 {
			out = newSharedBatch(out, bytes, h)
		}
	}
	return emit(out)
}

// scanEvenBatch returns the decode batch size for reading whole row groups
// in batches of at most target rows: the rows are split into equal batches
// (of more than target/2 rows), so that a segment leaves no short tail to
// be copied into a later batch.
func scanEvenBatch(fr *pqarrow.FileReader, groups []int, target int64) int64 {
	var rows int64
	md := fr.ParquetReader().MetaData()
	for _, g := range groups {
		rows += md.RowGroup(g).NumRows()
	}
	if rows <= target {
		return target
	}
	k := (rows + target - 1) / target
	return (rows + k - 1) / k
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
