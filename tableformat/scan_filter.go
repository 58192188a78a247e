package tableformat

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// Row selection: which rows of a decoded batch match the scan's range and
// entity filters, as runs.

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
