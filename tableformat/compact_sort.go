package tableformat

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tsflight/tsflight/coverage"
)

// Sorting and gathering rows in memory: the rows of a compaction that fit
// its memory bound are sorted by (time bucket, identity, index) through an
// index of row references, and gathered in that order into new batches.
//
// The bucket (CompactOptions.SortBucket, one hour by default: the UTC
// bucket of a timestamp index; integer indexes have none) comes first so
// that a compacted segment's row groups follow time: a query for the last
// hour reads the row groups of that hour instead of every row group, as it
// must when the rows of each identity span the whole segment. Inside a
// bucket, rows stay grouped by identity, so that a query for one entity
// reads the pages (page index) of its rows in the row groups of its hours.
//
// Measured with DuckDB on the bench's stream table (1,000,000 rows, 100
// hosts, 28 hours, row groups of 65,536) against the same rows in arrival
// order: count of the last hour 3.2 ms sorted by (identity, index), 1.2 ms
// by (day, identity, index), 2.0 ms in arrival order; one host's maximum
// over the whole span 1.0 / 1.4 / 3.8 ms; one host over an hour 1.5 / 1.9
// / 3.7 ms; the maximum of every host 2.4 / 3.5 / 3.7 ms. An hour instead
// of a day: see docs/format/segments.md (TSBS, 864,000 rows: the measured
// layouts). InfluxDB 3 partitions by day and sorts by tags and time inside
// for the same reason.

// compactRows are the decoded rows of one group, and their order.
type compactRows struct {
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	order   []compactRef

	// Scratch space of take, kept between calls.
	spans []compactSpan
	srcs  []takeSource
}

// compactRef is one row: its identity's rank, its index as an ordered key,
// and where it is.
type compactRef struct {
	bucket uint64 // compactBuckets order key
	ident  uint32
	key    uint64
	batch  uint32
	row    uint32
}

// compactBuckets returns the function that maps an index key (as
// compactIndexKeys makes them) to the order key of its UTC time bucket of
// the given length (a whole number of seconds, at least one; see
// CompactOptions.SortBucket): for a timestamp index, the bucket number
// with its sign bit flipped, which keeps the order; 0 for integer indexes,
// whose rows are sorted by (identity, index) alone.
func compactBuckets(ir indexReader, bucket time.Duration) func(key uint64) uint64 {
	if ir.typ != IndexTimestamp || ir.unitsPerSecond <= 0 || bucket < time.Second {
		return func(uint64) uint64 { return 0 }
	}
	secs := int64(bucket / time.Second)
	per := int64(math.MaxInt64)
	if secs <= math.MaxInt64/ir.unitsPerSecond {
		per = secs * ir.unitsPerSecond
	}
	return func(key uint64) uint64 {
		n, _ := floorDiv(int64(key^1<<63), per)
		return uint64(n) ^ 1<<63
	}
}

// compactBucketKeys is compactBuckets applied to keys.
func compactBucketKeys(bucketOf func(uint64) uint64, keys []uint64) []uint64 {
	out := make([]uint64, len(keys))
	for i, k := range keys {
		out[i] = bucketOf(k)
	}
	return out
}

func (rows *compactRows) release() {
	for _, b := range rows.batches {
		b.Release()
	}
	rows.batches = nil
}

// sort orders the rows by (bucket, identity, index): buckets ascending
// (see compactBuckets), identities in the canonical order of the coverage
// (component by component, strings bytewise), index values ascending.
func (rows *compactRows) sort(ir indexReader, er entityReader, bucketOf func(uint64) uint64) error {
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
			rows.order = append(rows.order, compactRef{bucket: bucketOf(keys[row]), ident: id, key: keys[row], batch: uint32(bi), row: uint32(row)})
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
		if c := cmp.Compare(a.bucket, b.bucket); c != 0 {
			return c
		}
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
