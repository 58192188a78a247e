package tableformat

import (
	"hash/maphash"
	"math/bits"
	"strings"
)

// strIDs gives strings dense int32 ids (0, 1, 2, … in order of addition):
// the table behind the string dictionary front end (segdict.go) and the
// entity lookup of an append's coverage (coverage.go).
//
// A Go map[string]int32 spent about 12 ns per lookup on TSBS tags, half of
// it hashing (measured in BenchmarkAppendTSBS's profile: string dictionary
// lookups were the largest cost of an append after the RLE encoder). Tags,
// entity names and enum-like fields are short, so this table keeps the
// first and last 8 bytes of each string in its slot: a string of at most 16
// bytes is hashed from two word loads and compared without touching the
// string again; a longer one is hashed in full (hash/maphash) and compared
// with the string kept by id.
//
// Open addressing with linear probing, at most half full. The hash is
// seeded per process, and a probe that runs past maxProbe slots (only
// input built to collide gets there) makes find and add report failure,
// so that the caller takes its general path instead of degrading to
// quadratic time.
type strIDs struct {
	slots []strSlot
	mask  uint64
	shift uint     // 64 - log2(len(slots)): a hash's home slot is its top bits
	keys  []string // by id; owned copies
	// broken is set when a probe ran too long: add fails from then on, and
	// the caller stops using the table (find does not check it:
	// stringDict.lookup does).
	broken bool
}

// strSlot is one entry: the string's length and words (see strWords),
// and its id plus one (0: empty).
type strSlot struct {
	w0, w1 uint64
	n      uint32
	id1    int32
}

// maxProbe bounds a probe sequence (a variable for tests). With the table
// at most half full a probe of 64 slots is astronomically unlikely for
// honest data.
var maxProbe = 64

var strSeed = maphash.MakeSeed()

// strSeedWord is strSeed as a word, mixed into the short strings' hash.
var strSeedWord = maphash.String(strSeed, "tsflight") | 1

func newStrIDs() *strIDs {
	t := &strIDs{}
	t.resize(64)
	return t
}

// Len is the number of strings the table holds.
func (t *strIDs) Len() int { return len(t.keys) }

// key returns the string of id.
func (t *strIDs) key(id int32) string { return t.keys[id] }

// le64 reads 8 bytes of s at i, little-endian (one load once compiled).
func le64(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

func le32(s string, i int) uint64 {
	_ = s[i+3]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24
}

// strWords packs s into two words that, with its length, determine a
// string of at most 16 bytes: the first and last 8 bytes (overlapping
// when shorter), the first and last 4 below 8 bytes, and the first,
// middle and last byte below 4. For longer strings they are the first
// and last 8 bytes only.
func strWords(s string) (w0, w1 uint64) {
	if n := len(s); n >= 8 {
		return le64(s, 0), le64(s, n-8)
	}
	return shortWord(s), 0
}

func shortWord(s string) uint64 {
	n := len(s)
	switch {
	case n >= 4:
		return le32(s, 0) | le32(s, n-4)<<32
	case n > 0:
		return uint64(s[0]) | uint64(s[n/2])<<8 | uint64(s[n-1])<<16
	}
	return 0
}

// strHash hashes s from its words (its slot's home is the top bits).
func strHash(s string, w0, w1 uint64) uint64 {
	h := ((w0^strSeedWord)*0x9e3779b97f4a7c15 ^ (w1 + uint64(len(s)))) * 0xc2b2ae3d27d4eb4f
	if len(s) > 16 {
		h ^= longHash(s)
	}
	return h
}

// longHash is the part of a long string's hash its words do not cover.
func longHash(s string) uint64 { return maphash.String(strSeed, s) }

// find returns s's id.
func (t *strIDs) find(s string) (int32, bool) {
	n := len(s)
	var w0, w1 uint64
	if n >= 8 {
		w0, w1 = le64(s, 0), le64(s, n-8)
	} else {
		w0 = shortWord(s)
	}
	h := ((w0^strSeedWord)*0x9e3779b97f4a7c15 ^ (w1 + uint64(n))) * 0xc2b2ae3d27d4eb4f
	if n > 16 {
		h ^= longHash(s)
	}
	slots, mask := t.slots, t.mask
	i := h >> t.shift
	for range maxProbe {
		sl := &slots[i&mask]
		if sl.id1 == 0 {
			return 0, false
		}
		if sl.w0 == w0 && sl.w1 == w1 && sl.n == uint32(n) && (n <= 16 || t.keys[sl.id1-1] == s) {
			return sl.id1 - 1, true
		}
		i++
	}
	return 0, false
}

// add gives s, which the table must not hold, the next id; it reports
// false (and adds nothing) when the table is broken or its probe ran too
// long, which breaks it.
func (t *strIDs) add(s string) (int32, bool) {
	if t.broken || len(t.keys) >= 1<<30 {
		return 0, false
	}
	if 2*(len(t.keys)+1) > len(t.slots) {
		if !t.resize(2 * len(t.slots)) {
			return 0, false
		}
	}
	id := int32(len(t.keys))
	s = strings.Clone(s) // out of the Arrow buffer it points into
	if !t.place(s, id) {
		t.broken = true
		return 0, false
	}
	t.keys = append(t.keys, s)
	return id, true
}

// place puts s with id in the first free slot of its probe sequence.
func (t *strIDs) place(s string, id int32) bool {
	w0, w1 := strWords(s)
	i := strHash(s, w0, w1) >> t.shift
	for range maxProbe {
		sl := &t.slots[i&t.mask]
		if sl.id1 == 0 {
			*sl = strSlot{w0: w0, w1: w1, n: uint32(len(s)), id1: id + 1}
			return true
		}
		i++
	}
	return false
}

// resize rebuilds the table with size slots (a power of two).
func (t *strIDs) resize(size int) bool {
	t.slots = make([]strSlot, size)
	t.mask = uint64(size - 1)
	t.shift = uint(64 - bits.Len(uint(size-1)))
	for id, s := range t.keys {
		if !t.place(s, int32(id)) {
			t.broken = true
			return false
		}
	}
	return true
}
