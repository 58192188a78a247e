package tableformat

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// A faster front end to the Parquet dictionary encoder of string and int64
// column chunks.
//
// arrow-go's dictionary encoders hash every value (the byte-array one also
// boxes each value into an interface, an allocation per value), which made
// dictionary encoding the bulk of an append's CPU time. Time-series tags,
// entity names and many fields repeat a small set of values, so the
// segment writer keeps its own map from value to dictionary id, in step
// with the encoder's: a chunk of rows whose values are all known is
// written as dictionary indices (WriteDictIndices), with the page
// statistics and page-size accounting the encoder would have done; a chunk
// that holds a new value or a null goes through the normal dense path,
// which inserts the new values into the encoder's dictionary in order of
// first appearance, and the map follows the same order. When the encoder
// falls back to plain encoding (dictionary page limit), or the column turns
// out to be high-cardinality, the rest of the chunk goes the dense way.
//
// The file is the same as the dense path writes: the same dictionary in
// the same order, the same indices, pages cut at the same accounting, and
// min/max statistics over the same values. Uncompressed columns are left
// to the dense path: for them arrow-go also weighs the dictionary's cost
// against plain encoding after each batch, which index writes would skip.

// dictFrontEnd encodes the batches of one column chunk.
type dictFrontEnd interface {
	write(arrProps *pqarrow.ArrowWriterProperties, cw file.ColumnChunkWriter, arr arrow.Array, levels []int16, nullable bool) error
}

// newDictFrontEnd returns the front end for a column of type t in a new
// row group, or nil when the column goes the dense way.
func newDictFrontEnd(t arrow.DataType, compressed bool) dictFrontEnd {
	if !compressed {
		return nil
	}
	switch t.ID() {
	case arrow.STRING:
		return &stringDict{ids: newStrIDs()}
	case arrow.INT64: // not timestamps: pqarrow may convert their unit
		return &int64Dict{}
	}
	return nil
}

// A column gives up the fast path when, after this many rows, it has more
// distinct values than half its rows.
const dictProbeRows = 8192

// dictFrontEnabled lets tests write the same data with and without the
// fast path and compare the files.
var dictFrontEnabled = true

// rawSizer is the dictionary encoder's page-size accounting (exported by
// arrow-go's encoder, reached through its concrete type).
type rawSizer interface{ AddRawSize(int64) }

// dictEncoding reports whether cw still dictionary-encodes.
func dictEncoding(cw file.ColumnChunkWriter) bool {
	e := cw.CurrentEncoder().Encoding()
	return e == parquet.Encodings.RLEDict || e == parquet.Encodings.PlainDict
}

// dictChunks is the typed part of a front end, over the batch being
// written: rows [s, e) are one write batch of the column writer.
type dictChunks interface {
	// lookup fills the ids of rows [s, e) into the state's idx and
	// reports whether every row is non-null and already known.
	lookup(st *dictState, s, e int) bool
	// learn records, in order of first appearance, the values of rows
	// [s, e) the dense path has just added to the encoder's dictionary.
	learn(s, e int)
	// stats updates the page statistics for rows [s, e) (ids in idx) and
	// returns the raw bytes the encoder would have counted for them.
	stats(st *dictState, ps metadata.TypedStatistics, s, e int) (int64, error)
	// distinct is how many values the dictionary holds.
	distinct() int
}

// dictState is what every front end keeps for its column chunk.
type dictState struct {
	rows int64 // rows written so far
	off  bool  // dense path for the rest of the chunk
	idx  []int32
}

// write encodes arr (a whole batch slice of the column) into cw through
// typed; levels are its definition levels (nil for a required column).
func (st *dictState) write(typed dictChunks, arrProps *pqarrow.ArrowWriterProperties, cw file.ColumnChunkWriter, arr arrow.Array, levels []int16, nullable bool) error {
	sizer, ok := cw.CurrentEncoder().(rawSizer)
	if !ok || st.off || !dictFrontEnabled || !dictEncoding(cw) {
		st.off = true
		return writeDense(arrProps, cw, arr, levels, nullable)
	}
	step := int(cw.Properties().WriteBatchSize())
	n := arr.Len()
	for s := 0; s < n; s += step {
		e := min(n, s+step)
		if st.off || !dictEncoding(cw) {
			st.off = true
			return writeDenseRange(arrProps, cw, arr, levels, nullable, s, n)
		}
		if typed.lookup(st, s, e) {
			if err := st.writeIndices(typed, cw, sizer, levels, s, e); err != nil {
				return err
			}
		} else {
			if err := writeDenseRange(arrProps, cw, arr, levels, nullable, s, e); err != nil {
				return err
			}
			typed.learn(s, e)
		}
		st.rows += int64(e - s)
		if st.rows >= dictProbeRows && int64(typed.distinct())*2 > st.rows {
			st.off = true
		}
	}
	return nil
}

// writeIndices writes rows [s, e), whose ids are in idx, as dictionary
// indices, first updating the page statistics and the page-size
// accounting as the encoder would have.
func (st *dictState) writeIndices(typed dictChunks, cw file.ColumnChunkWriter, sizer rawSizer, levels []int16, s, e int) error {
	raw, err := typed.stats(st, cw.PageStatistics(), s, e)
	if err != nil {
		return err
	}
	sizer.AddRawSize(raw)
	buf := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(st.idx))
	data := array.NewData(arrow.PrimitiveTypes.Int32, len(st.idx), []*memory.Buffer{nil, buf}, nil, 0, 0)
	indices := array.NewInt32Data(data)
	data.Release()
	defer indices.Release()
	var lv []int16
	if levels != nil {
		lv = levels[s:e]
	}
	return cw.WriteDictIndices(indices, lv, nil)
}

// countValues marks the null count as known (as the encoder's Update
// does) and counts n values.
func countValues(ps metadata.TypedStatistics, n int) {
	ps.IncNulls(0)
	ps.IncNumValues(int64(n))
}

// stringDict is the front end of a string column. Its ids are kept in a
// strIDs table (strids.go): a Go map cost twice as much per lookup.
type stringDict struct {
	dictState
	ids  *strIDs
	arr  *array.String
	seen []uint32 // seen[id] == gen: id occurs in the current chunk
	gen  uint32
}

func (d *stringDict) write(arrProps *pqarrow.ArrowWriterProperties, cw file.ColumnChunkWriter, arr arrow.Array, levels []int16, nullable bool) error {
	d.arr, _ = arr.(*array.String)
	if d.arr == nil {
		d.off = true
	}
	defer func() { d.arr = nil }()
	return d.dictState.write(d, arrProps, cw, arr, levels, nullable)
}

func (d *stringDict) distinct() int { return d.ids.Len() }

func (d *stringDict) lookup(st *dictState, s, e int) bool {
	arr, ids := d.arr, d.ids
	if ids.broken {
		st.off = true // rows from here go the dense way
		return false
	}
	if hasNull(arr, s, e) {
		return false
	}
	idx := st.idx[:0]
	for i := s; i < e; i++ {
		id, ok := ids.find(arr.Value(i))
		if !ok {
			return false
		}
		idx = append(idx, id)
	}
	st.idx = idx
	return true
}

// hasNull reports whether arr has a null among rows [s, e).
func hasNull(arr arrow.Array, s, e int) bool {
	bm := arr.NullBitmapBytes()
	return arr.NullN() > 0 && len(bm) > 0 && bitutil.CountSetBits(bm, arr.Data().Offset()+s, e-s) < e-s
}

// learn adds the new values; if the table refuses one (a probe ran too
// long: input built to collide), lookups stop and the rest of the chunk
// goes the dense way.
func (d *stringDict) learn(s, e int) {
	for i := s; i < e; i++ {
		if d.arr.IsNull(i) {
			continue
		}
		v := d.arr.Value(i)
		if _, ok := d.ids.find(v); !ok {
			if _, ok := d.ids.add(v); !ok {
				d.off = true
				return
			}
		}
	}
}

// stats: min and max over the chunk's distinct values; raw bytes are the
// values' lengths plus 4 each.
func (d *stringDict) stats(st *dictState, ps metadata.TypedStatistics, s, e int) (int64, error) {
	offs := d.arr.ValueOffsets()
	raw := int64(offs[e]-offs[s]) + 4*int64(e-s)
	if ps == nil {
		return raw, nil
	}
	if n := d.ids.Len(); len(d.seen) < n {
		d.seen = append(d.seen, make([]uint32, n-len(d.seen))...)
	}
	d.gen++
	if d.gen == 0 { // wrapped: forget every stamp
		clear(d.seen)
		d.gen = 1
	}
	lo, hi := d.ids.key(st.idx[0]), d.ids.key(st.idx[0])
	for _, id := range st.idx {
		if d.seen[id] == d.gen {
			continue
		}
		d.seen[id] = d.gen
		if v := d.ids.key(id); v < lo {
			lo = v
		} else if v > hi {
			hi = v
		}
	}
	bs, ok := ps.(*metadata.ByteArrayStatistics)
	if !ok {
		return 0, fmt.Errorf("%w: string column statistics are %T", ErrStorage, ps)
	}
	bs.SetMinMax(parquet.ByteArray(lo), parquet.ByteArray(hi))
	countValues(ps, e-s)
	return raw, nil
}

// int64Dict is the front end of an int64 column (counters, gauges and
// other fields with few distinct values per row group).
//
// Its ids live in a direct table over a window of int64Window values
// starting at base (placed around the first value it learns; entries hold
// id+1, 0 for unknown), and in a map for values outside the window: an
// index into a small table costs a fraction of a map lookup, and fields
// with few distinct values tend to sit close together.
type int64Dict struct {
	dictState
	base   int64
	window []int32 // nil until the first value is learnt
	far    map[int64]int32
	n      int // distinct values
	arr    *array.Int64
	vals   []int64
}

// int64Window is the span of the direct table (64 KiB of ids).
const int64Window = 1 << 14

// id returns v's id.
func (d *int64Dict) id(v int64) (int32, bool) {
	if off := uint64(v) - uint64(d.base); off < int64Window && d.window != nil {
		id := d.window[off]
		return id - 1, id != 0
	}
	id, ok := d.far[v]
	return id, ok
}

// add gives v, not known yet, the next id.
func (d *int64Dict) add(v int64) {
	if d.window == nil {
		d.window = make([]int32, int64Window)
		// Centre the window on v, without wrapping around.
		switch {
		case v < math.MinInt64+int64Window/2:
			d.base = math.MinInt64
		case v > math.MaxInt64-int64Window/2:
			d.base = math.MaxInt64 - int64Window + 1
		default:
			d.base = v - int64Window/2
		}
	}
	id := int32(d.n)
	d.n++
	if off := uint64(v) - uint64(d.base); off < int64Window {
		d.window[off] = id + 1
		return
	}
	if d.far == nil {
		d.far = make(map[int64]int32)
	}
	d.far[v] = id
}

func (d *int64Dict) write(arrProps *pqarrow.ArrowWriterProperties, cw file.ColumnChunkWriter, arr arrow.Array, levels []int16, nullable bool) error {
	d.arr, _ = arr.(*array.Int64)
	if d.arr == nil {
		d.off = true
	} else {
		d.vals = d.arr.Int64Values()
	}
	defer func() { d.arr, d.vals = nil, nil }()
	return d.dictState.write(d, arrProps, cw, arr, levels, nullable)
}

func (d *int64Dict) distinct() int { return d.n }

func (d *int64Dict) lookup(st *dictState, s, e int) bool {
	arr := d.arr
	if hasNull(arr, s, e) {
		return false
	}
	if d.window == nil {
		return false
	}
	idx := st.idx[:0]
	base, window := uint64(d.base), d.window[:int64Window]
	for _, v := range d.vals[s:e] {
		var id int32
		if off := uint64(v) - base; off < int64Window {
			id = window[off] - 1
		} else if far, ok := d.far[v]; ok {
			id = far
		} else {
			id = -1
		}
		if id < 0 {
			return false
		}
		idx = append(idx, id)
	}
	st.idx = idx
	return true
}

func (d *int64Dict) learn(s, e int) {
	for i := s; i < e; i++ {
		if d.arr.IsNull(i) {
			continue
		}
		if _, ok := d.id(d.vals[i]); !ok {
			d.add(d.vals[i])
		}
	}
}

// stats: min and max over the chunk's values; raw bytes are 8 each.
func (d *int64Dict) stats(_ *dictState, ps metadata.TypedStatistics, s, e int) (int64, error) {
	raw := 8 * int64(e-s)
	if ps == nil {
		return raw, nil
	}
	vals := d.vals[s:e]
	lo, hi := vals[0], vals[0]
	for _, v := range vals[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	is, ok := ps.(*metadata.Int64Statistics)
	if !ok {
		return 0, fmt.Errorf("%w: int64 column statistics are %T", ErrStorage, ps)
	}
	is.SetMinMax(lo, hi)
	countValues(ps, e-s)
	return raw, nil
}

// writeDense writes arr through pqarrow's dense path.
func writeDense(arrProps *pqarrow.ArrowWriterProperties, cw file.ColumnChunkWriter, arr arrow.Array, levels []int16, nullable bool) error {
	ctx := pqarrow.NewArrowWriteContext(context.Background(), arrProps)
	return pqarrow.WriteArrowToColumn(ctx, cw, arr, levels, nil, nullable)
}

// writeDenseRange writes rows [s, e) of arr through the dense path.
func writeDenseRange(arrProps *pqarrow.ArrowWriterProperties, cw file.ColumnChunkWriter, arr arrow.Array, levels []int16, nullable bool, s, e int) error {
	if s == 0 && e == arr.Len() {
		return writeDense(arrProps, cw, arr, levels, nullable)
	}
	part := array.NewSlice(arr, int64(s), int64(e))
	defer part.Release()
	var lv []int16
	if levels != nil {
		lv = levels[s:e]
	}
	return writeDense(arrProps, cw, part, lv, nullable)
}
