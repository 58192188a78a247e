package coverage

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// ErrSetKind reports mixing global and entity coverage, or passing an
// identity to a global set (or none to an entity set).
var ErrSetKind = errors.New("coverage: global and entity coverage do not mix")

// Set is the coverage of a segment or a table: the (identity, interval id)
// pairs that hold a row.
//
// A global Set (table without entity columns) is one bitmap of interval ids
// and takes a nil identity everywhere. An entity Set keeps one bitmap per
// complete identity; an identity may be present with an empty bitmap (rows
// whose index value was null), which is preserved by the encoding.
//
// Create Sets with NewGlobal or NewEntity; the zero Set is not usable. A Set
// is not safe for concurrent mutation; concurrent reads are fine.
type Set struct {
	entity bool
	global *roaring64.Bitmap
	byKey  map[string]*entry
}

type entry struct {
	ident Identity
	bm    *roaring64.Bitmap
}

// NewGlobal returns an empty global Set.
func NewGlobal() *Set { return &Set{global: roaring64.New()} }

// NewEntity returns an empty entity Set.
func NewEntity() *Set { return &Set{entity: true, byKey: make(map[string]*entry)} }

// IsEntity reports whether s keeps coverage per identity.
func (s *Set) IsEntity() bool { return s.entity }

// bitmapFor returns the bitmap that holds ident's coverage, creating the
// identity if create is set. It checks that the identity fits the set.
func (s *Set) bitmapFor(ident Identity, create bool) (*roaring64.Bitmap, error) {
	if !s.entity {
		if len(ident) != 0 {
			return nil, fmt.Errorf("%w: identity %v given to global coverage", ErrSetKind, ident)
		}
		return s.global, nil
	}
	if len(ident) == 0 {
		return nil, fmt.Errorf("%w: entity coverage needs an identity", ErrSetKind)
	}
	// The key is built in a stack buffer and the map lookup does not copy
	// it, so lookups do not allocate (and concurrent readers share nothing).
	var buf [64]byte
	key := ident.appendKey(buf[:0])
	if e := s.byKey[string(key)]; e != nil {
		return e.bm, nil
	}
	if err := ident.Validate(); err != nil {
		return nil, err
	}
	if !create {
		return nil, nil
	}
	e := &entry{ident: ident.Clone(), bm: roaring64.New()}
	s.byKey[string(key)] = e
	return e.bm, nil
}

// Add records interval id for ident (nil for a global set). It reports
// whether the pair was already present, which is how an append detects two
// rows in one interval.
func (s *Set) Add(ident Identity, id uint64) (already bool, err error) {
	bm, err := s.bitmapFor(ident, true)
	if err != nil {
		return false, err
	}
	return !bm.CheckedAdd(id), nil
}

// AddTo returns the bitmap that holds ident's coverage, creating the
// identity when absent: bm.CheckedAdd(id) is then Add(ident, id) without
// looking the identity up again, for a caller that adds the ids of many
// rows. The bitmap belongs to s; it stays valid until s is next changed
// by anything but adds to it.
func (s *Set) AddTo(ident Identity) (*roaring64.Bitmap, error) {
	return s.bitmapFor(ident, true)
}

// AddRange records every id of r for ident.
func (s *Set) AddRange(ident Identity, r Range) error {
	if err := r.valid(); err != nil {
		return err
	}
	bm, err := s.bitmapFor(ident, true)
	if err != nil {
		return err
	}
	addRange(bm, r.First, r.Last)
	return nil
}

// addRange adds [first, last] including last == math.MaxUint64, which the
// half-open roaring64 AddRange cannot express.
func addRange(bm *roaring64.Bitmap, first, last uint64) {
	if last == math.MaxUint64 {
		bm.Add(last)
		if first == last {
			return
		}
		last--
	}
	bm.AddRange(first, last+1)
}

// AddIdentity records ident with no intervals (if it is not present yet).
// An entity segment whose rows for an identity all have a null index value
// has such an entry.
func (s *Set) AddIdentity(ident Identity) error {
	if !s.entity {
		return fmt.Errorf("%w: AddIdentity on global coverage", ErrSetKind)
	}
	_, err := s.bitmapFor(ident, true)
	return err
}

// Contains reports whether (ident, id) is covered.
func (s *Set) Contains(ident Identity, id uint64) bool {
	bm, err := s.bitmapFor(ident, false)
	return err == nil && bm != nil && bm.Contains(id)
}

// Has reports whether ident is present (possibly with no intervals). For a
// global set it reports whether ident is nil.
func (s *Set) Has(ident Identity) bool {
	bm, err := s.bitmapFor(ident, false)
	return err == nil && bm != nil
}

// Bitmap returns the interval ids covered for ident (nil for a global set),
// or nil when the identity is absent. The bitmap is shared with s: do not
// modify it (Clone it first).
func (s *Set) Bitmap(ident Identity) *roaring64.Bitmap {
	bm, err := s.bitmapFor(ident, false)
	if err != nil {
		return nil
	}
	return bm
}

// Len returns the number of identities of an entity set, including those
// with no intervals. It is always 0 for a global set.
func (s *Set) Len() int { return len(s.byKey) }

// Cardinality returns the number of covered (identity, interval) pairs.
func (s *Set) Cardinality() uint64 {
	if !s.entity {
		return s.global.GetCardinality()
	}
	var n uint64
	for _, e := range s.byKey {
		n += e.bm.GetCardinality()
	}
	return n
}

// IsEmpty reports whether the set has no identities and no intervals.
func (s *Set) IsEmpty() bool {
	if !s.entity {
		return s.global.IsEmpty()
	}
	return len(s.byKey) == 0
}

// Identities returns the identities of an entity set in canonical order
// (Identity.Compare). The slices are shared with s: do not modify them.
func (s *Set) Identities() []Identity {
	return identitiesOf(s.sortedEntries())
}

func identitiesOf(es []*entry) []Identity {
	out := make([]Identity, len(es))
	for i, e := range es {
		out[i] = e.ident
	}
	return out
}

func (s *Set) sortedEntries() []*entry {
	es := make([]*entry, 0, len(s.byKey))
	for _, e := range s.byKey {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *entry) int { return a.ident.Compare(b.ident) })
	return es
}

// Clone returns a deep copy of s.
func (s *Set) Clone() *Set {
	if !s.entity {
		return &Set{global: s.global.Clone()}
	}
	out := &Set{entity: true, byKey: make(map[string]*entry, len(s.byKey))}
	for k, e := range s.byKey {
		out.byKey[k] = &entry{ident: e.ident, bm: e.bm.Clone()}
	}
	return out
}

// Union adds every pair of o to s. Both must be global or both entity.
func (s *Set) Union(o *Set) error {
	if s.entity != o.entity {
		return ErrSetKind
	}
	if s == o {
		return nil
	}
	if !s.entity {
		s.global.Or(o.global)
		return nil
	}
	for k, oe := range o.byKey {
		if e, ok := s.byKey[k]; ok {
			e.bm.Or(oe.bm)
		} else {
			s.byKey[k] = &entry{ident: oe.ident, bm: oe.bm.Clone()}
		}
	}
	return nil
}

// Absorb adds every pair of o to s without copying o's bitmaps: an
// identity s lacks shares o's bitmap, one both hold gets a new bitmap
// (their union); no bitmap of s or o is changed. It is Union for sets
// built from others that stay unchanged (the coverage of a group of
// appends, built from theirs): from then on s must only be changed by
// Absorb, and o's bitmaps must not change while s is in use.
func (s *Set) Absorb(o *Set) error {
	if s.entity != o.entity {
		return ErrSetKind
	}
	if s == o {
		return nil
	}
	if !s.entity {
		s.global = roaring64.Or(s.global, o.global)
		return nil
	}
	for k, oe := range o.byKey {
		if e, ok := s.byKey[k]; ok {
			s.byKey[k] = &entry{ident: e.ident, bm: roaring64.Or(e.bm, oe.bm)}
		} else {
			s.byKey[k] = oe
		}
	}
	return nil
}

// Extended returns a new Set holding every pair of s and of o, without
// changing either, and copies only what o touches: the bitmaps of
// identities o does not hold are shared with s. It is for sets used as
// immutable values (a table's coverage at one version, extended by the
// segments of the next): neither s nor the result may be mutated
// afterwards, and o must not be mutated while the result is in use. The
// cost is the number of identities plus the size of o's bitmaps and of
// the bitmaps of s they meet, not the size of s.
func (s *Set) Extended(o *Set) (*Set, error) {
	if s.entity != o.entity {
		return nil, ErrSetKind
	}
	if !s.entity {
		g := roaring64.Or(s.global, o.global)
		g.RunOptimize()
		return &Set{global: g}, nil
	}
	out := &Set{entity: true, byKey: make(map[string]*entry, len(s.byKey)+len(o.byKey))}
	for k, e := range s.byKey {
		out.byKey[k] = e
	}
	for k, oe := range o.byKey {
		if e, ok := s.byKey[k]; ok {
			bm := roaring64.Or(e.bm, oe.bm)
			bm.RunOptimize()
			out.byKey[k] = &entry{ident: e.ident, bm: bm}
		} else {
			out.byKey[k] = oe
		}
	}
	return out, nil
}

// RunOptimize stores each bitmap of s as runs where that is smaller, which
// it is for coverage without gaps: the bitmaps of a set extended commit
// after commit (Extended) then stay a few bytes each instead of growing
// to an array or a bitmap container per 65,536 intervals, and extending
// one copies those few bytes (measured: an identity with 1,000 covered
// intervals, 1.5 µs per extension as an array, 0.2 µs as runs). It
// changes the representation only: the pairs, and the bytes Encode writes
// (the container types are chosen there), stay the same. Call it on a set
// no other goroutine reads.
func (s *Set) RunOptimize() {
	if !s.entity {
		s.global.RunOptimize()
		return
	}
	for _, e := range s.byKey {
		e.bm.RunOptimize()
	}
}

// Union returns a new Set holding every pair of the given sets, which must
// all be global or all entity. With no arguments it returns an empty global
// set.
func Union(sets ...*Set) (*Set, error) {
	if len(sets) == 0 {
		return NewGlobal(), nil
	}
	out := sets[0].Clone()
	for _, o := range sets[1:] {
		if err := out.Union(o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Equal reports whether s and o hold the same identities and pairs.
func (s *Set) Equal(o *Set) bool {
	if s.entity != o.entity {
		return false
	}
	if !s.entity {
		return s.global.Equals(o.global)
	}
	if len(s.byKey) != len(o.byKey) {
		return false
	}
	for k, e := range s.byKey {
		oe, ok := o.byKey[k]
		if !ok || !e.bm.Equals(oe.bm) {
			return false
		}
	}
	return true
}

// Overlap describes the pairs two sets share.
type Overlap struct {
	// Count is the number of shared (identity, interval) pairs.
	Count uint64
	// Identity and ID are the first shared pair: the smallest identity in
	// canonical order that has one, and its smallest shared id. Identity is
	// nil for global sets. Both are zero when Count is 0.
	Identity Identity
	ID       uint64
}

// Overlap counts the (identity, interval) pairs present in both s and o and
// returns the first one as an example. It intersects bitmaps without
// enumerating ids, so it is cheap even for dense coverage.
func (s *Set) Overlap(o *Set) (Overlap, error) {
	if s.entity != o.entity {
		return Overlap{}, ErrSetKind
	}
	if !s.entity {
		n := s.global.AndCardinality(o.global)
		if n == 0 {
			return Overlap{}, nil
		}
		return Overlap{Count: n, ID: firstShared(s.global, o.global)}, nil
	}
	small, large := s, o
	if len(large.byKey) < len(small.byKey) {
		small, large = large, small
	}
	var res Overlap
	var first *entry
	var firstOther *roaring64.Bitmap
	for k, e := range small.byKey {
		oe, ok := large.byKey[k]
		if !ok {
			continue
		}
		n := e.bm.AndCardinality(oe.bm)
		if n == 0 {
			continue
		}
		res.Count += n
		if first == nil || e.ident.Compare(first.ident) < 0 {
			first, firstOther = e, oe.bm
		}
	}
	if first != nil {
		res.Identity = first.ident
		res.ID = firstShared(first.bm, firstOther)
	}
	return res, nil
}

// firstShared returns the smallest id in both bitmaps, which must intersect.
func firstShared(a, b *roaring64.Bitmap) uint64 {
	return roaring64.And(a, b).Minimum()
}
