package tableformat

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/coverage"
)

// Reading the newest rows of identities out of segments, for the
// last-value index (lastvalues.go).

// lastWinner is the best row seen so far for one identity while folding
// scanned batches.
type lastWinner struct {
	rec *heldBatch
	row int
	s   int64
	u   uint64
}

// heldBatch counts the winners a scanned batch holds, so that a batch is
// released as soon as no winner points into it.
type heldBatch struct {
	rec  arrow.RecordBatch
	wins int
	keys []string // the identities that won in it (some since beaten)
}

func (h *heldBatch) drop() {
	h.wins--
	if h.wins == 0 {
		h.rec.Release()
	}
}

// lastRead scans the segments segs of st from the start of interval bound
// and keeps, in wins, the newest row of every identity of need.
func (t *Table) lastRead(ctx context.Context, st *State, segs map[string]bool, bound uint64, need map[string]lastChoice, wins map[string]*lastWinner) error {
	ix := st.Index()
	start, err := intervalStart(ix, bound)
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(segs))
	for p := range segs {
		paths = append(paths, p)
	}
	// One segment at a time, in small batches from the recycling pool
	// (shrink copies the winning rows out before a batch goes back): the
	// index is often built in the background next to streams with a
	// memory budget, and what it keeps is only the winners.
	rd, err := t.scanOnly(ctx, st, paths, ScanOptions{Start: &start, Parallelism: 1, BatchRows: 16 << 10})
	if err != nil {
		return err
	}
	defer rd.Release()
	schema := rd.Schema()
	idxCol := schema.FieldIndices(ix.Column)[0]
	ents := make([]int, len(ix.EntityColumns))
	for i, n := range ix.EntityColumns {
		ents[i] = schema.FieldIndices(n)[0]
	}
	ident := make(coverage.Identity, len(ents))
	var key []byte
	for rd.Next() {
		rec := rd.RecordBatch()
		held := &heldBatch{rec: rec}
		idx := rec.Column(idxCol)
		sv, uv := indexInts(idx)
		cols := make([]arrow.Array, len(ents))
		for i, c := range ents {
			cols[i] = rec.Column(c)
		}
		for row := 0; row < int(rec.NumRows()); row++ {
			if idx.IsNull(row) || !rowIdentity(cols, row, ident) {
				continue
			}
			key = ident.AppendKey(key[:0])
			if _, ok := need[string(key)]; !ok {
				continue
			}
			w := wins[string(key)]
			var s int64
			var u uint64
			if sv != nil {
				s = sv[row]
			} else {
				u = uv[row]
			}
			if w != nil && (s < w.s || u < w.u) {
				continue
			}
			if w == nil {
				w = &lastWinner{}
				wins[string(key)] = w
			} else {
				w.rec.drop()
			}
			if held.wins == 0 {
				rec.Retain()
			}
			held.wins++
			held.keys = append(held.keys, string(key))
			w.rec, w.row, w.s, w.u = held, row, s, u
		}
		if held.wins > 0 {
			if err := held.shrink(wins); err != nil {
				return err
			}
		}
	}
	return rd.Err()
}

// shrink copies the rows of h that are still some identity's newest into
// a batch of their own and lets h go: a read keeps the winning rows, not
// the batches they came in (a compacted segment's newest rows are spread
// over all its batches; holding those would hold the segment).
func (h *heldBatch) shrink(wins map[string]*lastWinner) error {
	type keyRow struct {
		key string
		row int
	}
	var live []keyRow
	seen := map[string]bool{}
	for _, k := range h.keys {
		if w := wins[k]; w != nil && w.rec == h && !seen[k] {
			seen[k] = true
			live = append(live, keyRow{k, w.row})
		}
	}
	if len(live) == 0 { // unreachable: wins counts the winners in h
		h.rec.Release()
		h.wins, h.keys = 0, nil
		return nil
	}
	slices.SortFunc(live, func(a, b keyRow) int { return a.row - b.row })
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	for i := 0; i < len(live); {
		j := i + 1
		for j < len(live) && live[j].row == live[j-1].row+1 {
			j++
		}
		parts = append(parts, h.rec.NewSlice(int64(live[i].row), int64(live[j-1].row+1)))
		i = j
	}
	small, err := ConcatBatches(parts, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	nh := &heldBatch{rec: small, wins: len(live)}
	for i, kr := range live {
		w := wins[kr.key]
		w.rec, w.row = nh, i
	}
	h.rec.Release() // the reference its winners held
	h.wins, h.keys = 0, nil
	return nil
}

// indexInts returns the values of a canonical index column: signed
// (timestamps, int64) or unsigned.
func indexInts(a arrow.Array) ([]int64, []uint64) {
	switch c := a.(type) {
	case *array.Timestamp:
		return arrow.Int64Traits.CastFromBytes(c.Data().Buffers()[1].Bytes())[c.Data().Offset():][:c.Len()], nil
	case *array.Int64:
		return c.Int64Values(), nil
	case *array.Uint64:
		return nil, c.Uint64Values()
	}
	return nil, nil
}

// rowIdentity fills ident with the entity values of row; false when one is
// null (such a row has no identity).
func rowIdentity(cols []arrow.Array, row int, ident coverage.Identity) bool {
	for k, col := range cols {
		if col.IsNull(row) {
			return false
		}
		switch c := col.(type) {
		case *array.String:
			ident[k] = coverage.Utf8(c.Value(row))
		case *array.LargeString:
			ident[k] = coverage.Utf8(c.Value(row))
		case *array.Int32:
			ident[k] = coverage.Int32(c.Value(row))
		case *array.Int64:
			ident[k] = coverage.Int64(c.Value(row))
		case *array.Uint64:
			ident[k] = coverage.UInt64(c.Value(row))
		default:
			return false
		}
	}
	return true
}

// intervalStart is the first index value of interval id.
func intervalStart(ix *IndexSpec, id uint64) (IndexValue, error) {
	d := indexDomain(ix)
	switch ix.Kind.Type {
	case IndexUInt64:
		iv, err := d.UnsignedInterval(id)
		if err != nil {
			return IndexValue{}, err
		}
		return Uint64Value(iv.Start), nil
	case IndexInt64:
		iv, err := d.SignedInterval(id)
		if err != nil {
			return IndexValue{}, err
		}
		return Int64Value(iv.Start), nil
	}
	iv, err := d.SignedInterval(id)
	if err != nil {
		return IndexValue{}, err
	}
	return TimeValue(unixUTC(iv.Start)), nil
}
