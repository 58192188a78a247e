package tableformat

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// stringDict is a faster front end to the Parquet dictionary encoder of
// one string column chunk.
//
// arrow-go's byte-array dictionary encoder boxes every value into an
// interface before hashing it (an allocation per value), which made
// string columns the bulk of an append's CPU time. Time-series string
// columns (tags, entity names) repeat a small set of values, so the
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
// min/max statistics over the same values.
type stringDict struct {
	ids    map[string]int32
	values []string // by id
	rows   int64    // rows written so far
	off    bool     // dense path for the rest of the chunk

	idx  []int32
	seen []uint32 // seen[id] == gen: id occurs in the current chunk
	gen  uint32
}

// A column gives up the fast path when, after this many rows, it has more
// distinct values than half its rows.
const stringDictProbeRows = 8192

func newStringDict() *stringDict { return &stringDict{ids: make(map[string]int32)} }

// stringDictEnabled lets tests write the same data with and without the
// fast path and compare the files.
var stringDictEnabled = true

// rawSizer is the dictionary encoder's page-size accounting (exported by
// arrow-go's encoder, reached through its concrete type).
type rawSizer interface{ AddRawSize(int64) }

// dictEncoding reports whether cw still dictionary-encodes.
func dictEncoding(cw file.ColumnChunkWriter) bool {
	e := cw.CurrentEncoder().Encoding()
	return e == parquet.Encodings.RLEDict || e == parquet.Encodings.PlainDict
}

// write encodes arr (a whole batch slice of the column) into cw. levels
// are its definition levels (nil for a required column).
func (d *stringDict) write(arrProps *pqarrow.ArrowWriterProperties, cw file.ColumnChunkWriter, arr *array.String, levels []int16, nullable bool) error {
	bw, ok := cw.(*file.ByteArrayColumnChunkWriter)
	sizer, ok2 := cw.CurrentEncoder().(rawSizer)
	if !ok || !ok2 || d.off || !stringDictEnabled || !dictEncoding(cw) {
		d.off = true
		return writeDense(arrProps, cw, arr, levels, nullable)
	}
	step := int(cw.Properties().WriteBatchSize())
	n := arr.Len()
	for s := 0; s < n; s += step {
		e := min(n, s+step)
		if d.off || !dictEncoding(cw) {
			d.off = true
			return writeDenseRange(arrProps, cw, arr, levels, nullable, s, n)
		}
		if d.lookup(arr, s, e) {
			if err := d.writeIndices(bw, sizer, arr, levels, s, e); err != nil {
				return err
			}
		} else {
			if err := writeDenseRange(arrProps, cw, arr, levels, nullable, s, e); err != nil {
				return err
			}
			d.learn(arr, s, e)
		}
		d.rows += int64(e - s)
		if d.rows >= stringDictProbeRows && int64(len(d.values))*2 > d.rows {
			d.off = true
		}
	}
	return nil
}

// lookup fills d.idx with the ids of rows [s, e) and reports whether every
// row is non-null and already in the dictionary.
func (d *stringDict) lookup(arr *array.String, s, e int) bool {
	if arr.NullN() > 0 {
		for i := s; i < e; i++ {
			if arr.IsNull(i) {
				return false
			}
		}
	}
	d.idx = d.idx[:0]
	for i := s; i < e; i++ {
		id, ok := d.ids[arr.Value(i)]
		if !ok {
			return false
		}
		d.idx = append(d.idx, id)
	}
	return true
}

// learn records, in order of first appearance, the values of rows [s, e)
// the dense path has just added to the encoder's dictionary.
func (d *stringDict) learn(arr *array.String, s, e int) {
	for i := s; i < e; i++ {
		if arr.IsNull(i) {
			continue
		}
		v := arr.Value(i)
		if _, ok := d.ids[v]; !ok {
			v = strings.Clone(v)
			d.ids[v] = int32(len(d.values))
			d.values = append(d.values, v)
		}
	}
}

// writeIndices writes rows [s, e), whose ids are in d.idx, as dictionary
// indices, first updating the page statistics (min and max over the
// chunk's distinct values, the value count) and the page-size accounting.
func (d *stringDict) writeIndices(cw *file.ByteArrayColumnChunkWriter, sizer rawSizer, arr *array.String, levels []int16, s, e int) error {
	if stats := cw.PageStatistics(); stats != nil {
		if len(d.seen) < len(d.values) {
			d.seen = append(d.seen, make([]uint32, len(d.values)-len(d.seen))...)
		}
		d.gen++
		if d.gen == 0 { // wrapped: forget every stamp
			clear(d.seen)
			d.gen = 1
		}
		lo, hi := d.values[d.idx[0]], d.values[d.idx[0]]
		for _, id := range d.idx {
			if d.seen[id] == d.gen {
				continue
			}
			d.seen[id] = d.gen
			if v := d.values[id]; v < lo {
				lo = v
			} else if v > hi {
				hi = v
			}
		}
		bs, ok := stats.(*metadata.ByteArrayStatistics)
		if !ok {
			return fmt.Errorf("%w: string column statistics are %T", ErrStorage, stats)
		}
		bs.SetMinMax(parquet.ByteArray(lo), parquet.ByteArray(hi))
		stats.IncNulls(0) // marks the null count as known, as Update does
		stats.IncNumValues(int64(e - s))
	}
	offs := arr.ValueOffsets()
	sizer.AddRawSize(int64(offs[e]-offs[s]) + 4*int64(e-s))
	buf := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(d.idx))
	data := array.NewData(arrow.PrimitiveTypes.Int32, len(d.idx), []*memory.Buffer{nil, buf}, nil, 0, 0)
	indices := array.NewInt32Data(data)
	data.Release()
	defer indices.Release()
	var lv []int16
	if levels != nil {
		lv = levels[s:e]
	}
	return cw.WriteDictIndices(indices, lv, nil)
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

// int64Dict is the same front end for an int64 column (counters, gauges
// and other fields with few distinct values per row group), in step with
// arrow-go's int64 dictionary encoder, which hashes every value.
type int64Dict struct {
	ids  map[int64]int32
	n    int   // distinct values learned
	rows int64 // rows written so far
	off  bool
	idx  []int32
}

func newInt64Dict() *int64Dict { return &int64Dict{ids: make(map[int64]int32)} }

func (d *int64Dict) write(arrProps *pqarrow.ArrowWriterProperties, cw file.ColumnChunkWriter, arr *array.Int64, levels []int16, nullable bool) error {
	iw, ok := cw.(*file.Int64ColumnChunkWriter)
	sizer, ok2 := cw.CurrentEncoder().(rawSizer)
	if !ok || !ok2 || d.off || !stringDictEnabled || !dictEncoding(cw) {
		d.off = true
		return writeDense(arrProps, cw, arr, levels, nullable)
	}
	step := int(cw.Properties().WriteBatchSize())
	n := arr.Len()
	vals := arr.Int64Values()
	for s := 0; s < n; s += step {
		e := min(n, s+step)
		if d.off || !dictEncoding(cw) {
			d.off = true
			return writeDenseRange(arrProps, cw, arr, levels, nullable, s, n)
		}
		if d.lookup(arr, vals, s, e) {
			if err := d.writeIndices(iw, sizer, vals[s:e], levels, s, e); err != nil {
				return err
			}
		} else {
			if err := writeDenseRange(arrProps, cw, arr, levels, nullable, s, e); err != nil {
				return err
			}
			d.learn(arr, vals, s, e)
		}
		d.rows += int64(e - s)
		if d.rows >= stringDictProbeRows && int64(d.n)*2 > d.rows {
			d.off = true
		}
	}
	return nil
}

func (d *int64Dict) lookup(arr *array.Int64, vals []int64, s, e int) bool {
	if arr.NullN() > 0 {
		for i := s; i < e; i++ {
			if arr.IsNull(i) {
				return false
			}
		}
	}
	d.idx = d.idx[:0]
	for _, v := range vals[s:e] {
		id, ok := d.ids[v]
		if !ok {
			return false
		}
		d.idx = append(d.idx, id)
	}
	return true
}

func (d *int64Dict) learn(arr *array.Int64, vals []int64, s, e int) {
	for i := s; i < e; i++ {
		if arr.IsNull(i) {
			continue
		}
		if _, ok := d.ids[vals[i]]; !ok {
			d.ids[vals[i]] = int32(d.n)
			d.n++
		}
	}
}

func (d *int64Dict) writeIndices(cw *file.Int64ColumnChunkWriter, sizer rawSizer, vals []int64, levels []int16, s, e int) error {
	if stats := cw.PageStatistics(); stats != nil {
		lo, hi := vals[0], vals[0]
		for _, v := range vals[1:] {
			lo, hi = min(lo, v), max(hi, v)
		}
		is, ok := stats.(*metadata.Int64Statistics)
		if !ok {
			return fmt.Errorf("%w: int64 column statistics are %T", ErrStorage, stats)
		}
		is.SetMinMax(lo, hi)
		stats.IncNulls(0)
		stats.IncNumValues(int64(e - s))
	}
	sizer.AddRawSize(8 * int64(e-s))
	buf := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(d.idx))
	data := array.NewData(arrow.PrimitiveTypes.Int32, len(d.idx), []*memory.Buffer{nil, buf}, nil, 0, 0)
	indices := array.NewInt32Data(data)
	data.Release()
	defer indices.Release()
	var lv []int16
	if levels != nil {
		lv = levels[s:e]
	}
	return cw.WriteDictIndices(indices, lv, nil)
}
