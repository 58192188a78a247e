package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// rows is a result made comparable across systems: timestamps as
// microseconds since the epoch and every number as a float64, strings as
// strings, NULL as nil — the form the Python peer prints too.
type rows [][]any

// canonical appends rec's rows to out.
func canonical(out rows, rec arrow.RecordBatch) (rows, error) {
	for r := 0; r < int(rec.NumRows()); r++ {
		row := make([]any, rec.NumCols())
		for c := range row {
			v, err := canonicalValue(rec.Column(c), r)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", rec.ColumnName(c), err)
			}
			row[c] = v
		}
		out = append(out, row)
	}
	return out, nil
}

func canonicalValue(a arrow.Array, i int) (any, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return float64(a.Value(i).ToTime(unit).UnixMicro()), nil
	case *array.Int64:
		return float64(a.Value(i)), nil
	case *array.Int32:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.String: // copied: the buffer may be C memory freed with the batch
		return strings.Clone(a.Value(i)), nil
	case *array.LargeString:
		return strings.Clone(a.Value(i)), nil
	case *array.Dictionary:
		return canonicalValue(a.Dictionary(), a.GetValueIndex(i))
	case *array.Decimal128:
		typ := a.DataType().(*arrow.Decimal128Type)
		return a.Value(i).ToFloat64(typ.Scale), nil
	}
	return nil, fmt.Errorf("no canonical form for %s", a.DataType())
}

// readResult reads every batch of rdr and counts the rows; with keep it
// also returns them in canonical form.
func readResult(rdr array.RecordReader, keep bool) (rows, int64, error) {
	var out rows
	var n int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		n += rec.NumRows()
		if keep {
			var err error
			if out, err = canonical(out, rec); err != nil {
				return nil, 0, err
			}
		}
	}
	return out, n, rdr.Err()
}

// fromJSON turns decoded JSON rows (numbers as float64 already) into rows.
func fromJSON(v [][]any) rows {
	out := make(rows, len(v))
	for i, r := range v {
		out[i] = r
	}
	return out
}

// diff compares two results as multisets of rows, floats to 1e-9
// relative; "" means equal.
func (a rows) diff(b rows) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d rows vs %d", len(a), len(b))
	}
	sa, sb := a.sorted(), b.sorted()
	for i := range sa {
		if len(sa[i]) != len(sb[i]) {
			return fmt.Sprintf("row %d: %d vs %d columns", i, len(sa[i]), len(sb[i]))
		}
		for j := range sa[i] {
			if !same(sa[i][j], sb[i][j]) {
				return fmt.Sprintf("row %v vs %v", sa[i], sb[i])
			}
		}
	}
	return ""
}

// sorted orders rows by a key in which floats are rounded to 9
// significant digits, so that two systems' near-equal sums sort alike.
func (a rows) sorted() rows {
	key := func(r []any) string {
		var b strings.Builder
		for _, v := range r {
			if f, ok := v.(float64); ok {
				fmt.Fprintf(&b, "%.9g\x00", f)
			} else {
				fmt.Fprintf(&b, "%v\x00", v)
			}
		}
		return b.String()
	}
	s := slices.Clone(a)
	slices.SortFunc(s, func(x, y []any) int { return strings.Compare(key(x), key(y)) })
	return s
}

func same(x, y any) bool {
	fx, okx := x.(float64)
	fy, oky := y.(float64)
	if okx && oky {
		return fx == fy || math.Abs(fx-fy) <= 1e-9*math.Max(math.Abs(fx), math.Abs(fy))
	}
	return x == y
}
