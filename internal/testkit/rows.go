package testkit

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Rows is a query result made comparable across systems (tsflight,
// DuckDB, the Python package): one []any per row, in which a timestamp is
// microseconds since the epoch and every number is a float64 (both as
// float64), a string is a string and NULL is nil. It is also what a
// result decoded from JSON looks like (FromJSON), which is how the Python
// peers and child processes hand theirs over.
type Rows [][]any

// AppendRows appends rec's rows to out in canonical form. Strings are
// copied: the batch's buffers may be C memory freed with it.
func AppendRows(out Rows, rec arrow.RecordBatch) (Rows, error) {
	for r := 0; r < int(rec.NumRows()); r++ {
		row := make([]any, rec.NumCols())
		for c := range row {
			v, err := cell(rec.Column(c), r)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", rec.ColumnName(c), err)
			}
			row[c] = v
		}
		out = append(out, row)
	}
	return out, nil
}

// cell is the canonical form of a[i].
func cell(a arrow.Array, i int) (any, error) {
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
	case *array.Uint64:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	case *array.Decimal128:
		return a.Value(i).ToFloat64(a.DataType().(*arrow.Decimal128Type).Scale), nil
	case *array.String:
		return strings.Clone(a.Value(i)), nil
	case *array.LargeString:
		return strings.Clone(a.Value(i)), nil
	case *array.StringView:
		return strings.Clone(a.Value(i)), nil
	case *array.Dictionary:
		return cell(a.Dictionary(), a.GetValueIndex(i))
	}
	return nil, fmt.Errorf("no canonical form for %s", a.DataType())
}

// ReadRows reads every batch of rdr and counts the rows; with keep it
// also returns them in canonical form.
func ReadRows(rdr array.RecordReader, keep bool) (Rows, int64, error) {
	var out Rows
	var n int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		n += rec.NumRows()
		if keep {
			var err error
			if out, err = AppendRows(out, rec); err != nil {
				return nil, 0, err
			}
		}
	}
	return out, n, rdr.Err()
}

// FromJSON turns rows decoded from JSON (numbers as float64 already)
// into Rows.
func FromJSON(v [][]any) Rows {
	out := make(Rows, len(v))
	for i, r := range v {
		out[i] = r
	}
	return out
}

// Diff compares r and other as multisets of rows, floats equal to 1e-9
// relative; "" means equal. Otherwise it names the first difference
// after sorting both (see Sorted), r's side first.
func (r Rows) Diff(other Rows) string {
	if len(r) != len(other) {
		return fmt.Sprintf("%d rows vs %d", len(r), len(other))
	}
	a, b := r.Sorted(), other.Sorted()
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return fmt.Sprintf("sorted row %d: %d vs %d columns", i, len(a[i]), len(b[i]))
		}
		for c := range a[i] {
			if !sameCell(a[i][c], b[i][c]) {
				return fmt.Sprintf("sorted row %d column %d: %v vs %v (rows %v vs %v)", i, c, a[i][c], b[i][c], a[i], b[i])
			}
		}
	}
	return ""
}

// Sorted returns the rows in a total order: by a key of every column,
// left first, in which a float is rounded to 9 significant digits, so
// that two systems' near-equal sums sort alike.
func (r Rows) Sorted() Rows {
	type keyed struct {
		key string
		row []any
	}
	ks := make([]keyed, len(r))
	var b strings.Builder
	for i, row := range r {
		b.Reset()
		for _, v := range row {
			if f, ok := v.(float64); ok {
				fmt.Fprintf(&b, "%.9g\x00", f)
			} else {
				fmt.Fprintf(&b, "%v\x00", v)
			}
		}
		ks[i] = keyed{b.String(), row}
	}
	slices.SortStableFunc(ks, func(x, y keyed) int { return strings.Compare(x.key, y.key) })
	out := make(Rows, len(ks))
	for i, k := range ks {
		out[i] = k.row
	}
	return out
}

// sameCell is equality, floats to 1e-9 relative.
func sameCell(x, y any) bool {
	fx, okx := x.(float64)
	fy, oky := y.(float64)
	if okx && oky {
		return fx == fy || math.Abs(fx-fy) <= 1e-9*math.Max(math.Abs(fx), math.Abs(fy))
	}
	return x == y
}
