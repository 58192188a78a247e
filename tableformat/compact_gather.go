package tableformat

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Gathering: rows chosen by reference (a sort's order, a merge's choice)
// are copied into a new batch. Consecutive rows of one batch are copied as
// one span: a merge takes whole stretches of a series at a time, and a
// sort of rows that were nearly in order finds long spans too.

// compactBinaryLimit bounds the bytes of one string or binary column in a
// gathered batch (int32 offsets must not overflow); a variable so that
// tests can lower it.
var compactBinaryLimit int64 = scanMaxBinaryBytes

// compactSpan is rows [row, row+n) of batch.
type compactSpan struct {
	batch, row, n int
}

// compactSpans groups refs into spans of consecutive rows, appended to
// out.
func compactSpans(out []compactSpan, refs []compactRef) []compactSpan {
	for i := 0; i < len(refs); {
		j := i + 1
		for j < len(refs) && refs[j].batch == refs[i].batch && refs[j].row == refs[j-1].row+1 {
			j++
		}
		out = append(out, compactSpan{batch: int(refs[i].batch), row: int(refs[i].row), n: j - i})
		i = j
	}
	return out
}

// take gathers the rows refs into one batch of the group's schema. When a
// string or binary column would pass compactBinaryLimit it takes fewer
// rows (at least one); n is how many.
func (rows *compactRows) take(mem memory.Allocator, refs []compactRef) (arrow.RecordBatch, int) {
	rows.spans = compactSpans(rows.spans[:0], refs)
	spans := rows.spans
	n := len(refs)
	nb := len(rows.batches)
	fields := rows.schema.Fields()
	cols := make([]arrow.Array, len(fields))
	if cap(rows.srcs) < nb*len(fields) {
		rows.srcs = make([]takeSource, nb*len(fields))
	}
	// The string and binary columns whose batches together hold too many
	// bytes for one batch (rarely any).
	var binCols [][]takeSource
	for c, f := range fields {
		if id := f.Type.ID(); id == arrow.STRING || id == arrow.BINARY {
			srcs := rows.sources(c, rows.srcs[c*nb:(c+1)*nb])
			var total int64
			for i := range srcs {
				total += int64(srcs[i].offs[srcs[i].arr.Len()] - srcs[i].offs[0])
			}
			if total > compactBinaryLimit {
				binCols = append(binCols, srcs)
			}
		}
	}
	if len(binCols) > 0 {
		spans, n = limitBinary(spans, binCols)
	}
	for c, f := range fields {
		cols[c] = compactTakeColumn(mem, f.Type, rows.sources(c, rows.srcs[c*nb:(c+1)*nb]), spans, n)
	}
	clear(rows.srcs) // no references to released batches
	rec := array.NewRecordBatch(rows.schema, cols, int64(n))
	for _, a := range cols {
		a.Release()
	}
	return rec, n
}

// takeSource is one batch's column as the gather reads it: its buffers
// from the array's offset on.
type takeSource struct {
	arr    arrow.Array
	off    int
	valid  []byte // nil without nulls
	values []byte // fixed width: from the first row; bool: the bitmap
	offs   []int32
	data   []byte
}

// sources fills dst with column c of every batch.
func (rows *compactRows) sources(c int, dst []takeSource) []takeSource {
	for b, rec := range rows.batches {
		a := rec.Column(c)
		d := a.Data()
		s := takeSource{arr: a, off: d.Offset()}
		bufs := d.Buffers()
		if a.NullN() > 0 && bufs[0] != nil {
			s.valid = bufs[0].Bytes()
		}
		switch dt := a.DataType(); dt.ID() {
		case arrow.BOOL:
			s.values = bufs[1].Bytes()
		case arrow.STRING, arrow.BINARY:
			s.offs = arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[s.off:]
			if bufs[2] != nil {
				s.data = bufs[2].Bytes()
			}
		default:
			if fw, ok := dt.(arrow.FixedWidthDataType); ok && len(bufs) > 1 && bufs[1] != nil {
				s.values = bufs[1].Bytes()[s.off*(fw.BitWidth()/8):]
			}
		}
		dst[b] = s
	}
	return dst
}

// limitBinary cuts spans where a string or binary column would pass
// compactBinaryLimit (keeping at least one row), and returns the rows
// kept.
func limitBinary(spans []compactSpan, binCols [][]takeSource) ([]compactSpan, int) {
	sums := make([]int64, len(binCols))
	kept := 0
	for i, sp := range spans {
		fits := true
		for k, src := range binCols {
			offs := src[sp.batch].offs
			if sums[k]+int64(offs[sp.row+sp.n]-offs[sp.row]) > compactBinaryLimit {
				fits = false
			}
		}
		if fits {
			for k, src := range binCols {
				offs := src[sp.batch].offs
				sums[k] += int64(offs[sp.row+sp.n] - offs[sp.row])
			}
			kept += sp.n
			continue
		}
		// Row by row up to the row that does not fit.
		for r := sp.row; r < sp.row+sp.n; r++ {
			for k, src := range binCols {
				offs := src[sp.batch].offs
				sums[k] += int64(offs[r+1] - offs[r])
				if sums[k] > compactBinaryLimit && kept > 0 {
					if r == sp.row {
						return spans[:i], kept
					}
					return append(spans[:i:i], compactSpan{batch: sp.batch, row: sp.row, n: r - sp.row}), kept
				}
			}
			kept++
		}
	}
	return spans, kept
}

// compactTakeColumn gathers the spans of one column (src[b] is the column
// of batch b) into an array of n rows.
func compactTakeColumn(mem memory.Allocator, dt arrow.DataType, src []takeSource, spans []compactSpan, n int) arrow.Array {
	switch dt.ID() {
	case arrow.INT32, arrow.INT64, arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64, arrow.TIMESTAMP,
		arrow.DECIMAL128, arrow.DECIMAL256, arrow.FIXED_SIZE_BINARY:
		width := dt.(arrow.FixedWidthDataType).BitWidth() / 8
		valid, nulls := compactTakeValidity(mem, src, spans, n)
		values := memory.NewResizableBuffer(mem)
		values.Resize(n * width)
		dst := values.Bytes()
		pos := 0
		if width == 8 {
			d64 := arrow.Uint64Traits.CastFromBytes(dst)
			for _, sp := range spans {
				s64 := arrow.Uint64Traits.CastFromBytes(src[sp.batch].values)
				if sp.n == 1 {
					d64[pos] = s64[sp.row]
				} else {
					copy(d64[pos:pos+sp.n], s64[sp.row:sp.row+sp.n])
				}
				pos += sp.n
			}
		} else {
			for _, sp := range spans {
				pos += copy(dst[pos:], src[sp.batch].values[sp.row*width:(sp.row+sp.n)*width])
			}
		}
		return compactArray(dt, n, []*memory.Buffer{valid, values}, nulls)
	case arrow.BOOL:
		valid, nulls := compactTakeValidity(mem, src, spans, n)
		values := memory.NewResizableBuffer(mem)
		values.Resize(int(bitutil.BytesForBits(int64(n))))
		dst := values.Bytes()
		clear(dst)
		pos := 0
		for _, sp := range spans {
			s := &src[sp.batch]
			bitutil.CopyBitmap(s.values, s.off+sp.row, sp.n, dst, pos)
			pos += sp.n
		}
		return compactArray(dt, n, []*memory.Buffer{valid, values}, nulls)
	case arrow.STRING, arrow.BINARY:
		valid, nulls := compactTakeValidity(mem, src, spans, n)
		var size int
		for _, sp := range spans {
			offs := src[sp.batch].offs
			size += int(offs[sp.row+sp.n] - offs[sp.row])
		}
		offsets := memory.NewResizableBuffer(mem)
		offsets.Resize((n + 1) * 4)
		data := memory.NewResizableBuffer(mem)
		data.Resize(size)
		dstOffs := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
		dst := data.Bytes()
		pos, at := 0, 0
		dstOffs[0] = 0
		for _, sp := range spans {
			s := &src[sp.batch]
			lo, hi := s.offs[sp.row], s.offs[sp.row+sp.n]
			copy(dst[pos:], s.data[lo:hi])
			delta := int32(pos) - lo
			for i := 1; i <= sp.n; i++ {
				dstOffs[at+i] = s.offs[sp.row+i] + delta
			}
			pos += int(hi - lo)
			at += sp.n
		}
		return compactArray(dt, n, []*memory.Buffer{valid, offsets, data}, nulls)
	}
	// Nested columns: zero-copy slices of the spans, concatenated.
	parts := make([]arrow.Array, 0, len(spans))
	for _, sp := range spans {
		parts = append(parts, array.NewSlice(src[sp.batch].arr, int64(sp.row), int64(sp.row+sp.n)))
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

// compactTakeValidity gathers the validity bits of the spans: nil when
// none of their rows is null.
func compactTakeValidity(mem memory.Allocator, src []takeSource, spans []compactSpan, n int) (*memory.Buffer, int) {
	hasNulls := false
	for i := range src {
		if src[i].valid != nil {
			hasNulls = true
			break
		}
	}
	if !hasNulls {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	bits := buf.Bytes()
	clear(bits)
	pos := 0
	for _, sp := range spans {
		s := &src[sp.batch]
		switch {
		case s.valid == nil:
			bitutil.SetBitsTo(bits, int64(pos), int64(sp.n), true)
		case sp.n == 1:
			bitutil.SetBitTo(bits, pos, bitutil.BitIsSet(s.valid, s.off+sp.row))
		default:
			bitutil.CopyBitmap(s.valid, s.off+sp.row, sp.n, bits, pos)
		}
		pos += sp.n
	}
	nulls := n - bitutil.CountSetBits(bits, 0, n)
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
