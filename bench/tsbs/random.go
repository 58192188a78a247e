package tsbs

import "math/bits"

// Every random choice of the package comes from SplitMix64 (Steele,
// Lea and Flood 2014): a 64-bit counter advanced by golden and hashed
// by mix. Its output for a given key is fixed by this file alone, not
// by a library whose algorithms may change between Go releases, so the
// data and the queries are the same on every platform and toolchain,
// and another implementation (say a Python peer) could reproduce them.

// golden is SplitMix64's increment, 2^64 / φ rounded to odd.
const golden = 0x9e3779b97f4a7c15

// mix is SplitMix64's finaliser: a bijection of the 64-bit integers
// whose outputs for consecutive inputs look independent.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Domains keep the streams of different purposes apart.
const (
	domTags    = 1 + iota // a host's tag values
	domAnchor             // a host's field walk, hour by hour
	domStep               // a host's field walk, step by step
	domDrop               // which rows are dropped
	domLate               // which hours have a late part
	domQueries            // the query instances
)

// derive hashes the seed and parts into a key: a pure function of its
// arguments, different for (almost) every different argument list.
func derive(seed uint64, parts ...uint64) uint64 {
	h := mix(seed + golden)
	for _, p := range parts {
		h = mix(h ^ mix(p+golden))
	}
	return h
}

// at is the i-th value of the SplitMix64 stream keyed by key: a pure
// function of (key, i).
func at(key, i uint64) uint64 { return mix(key + (i+1)*golden) }

// stream is a sequential SplitMix64 generator.
type stream struct{ s uint64 }

func newStream(key uint64) *stream { return &stream{s: key} }

func (r *stream) next() uint64 {
	r.s += golden
	return mix(r.s)
}

// intN returns a number in [0, n) by Lemire's multiply-shift, without
// rejection: the bias, at most n/2^64, is of no consequence here.
func (r *stream) intN(n int) int {
	if n <= 0 {
		panic("tsbs: intN of a non-positive bound")
	}
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}

// uint64N returns a number in [0, n) as intN does; n must be > 0.
func (r *stream) uint64N(n uint64) uint64 {
	hi, _ := bits.Mul64(r.next(), n)
	return hi
}

// Walk values are fixed point with fracBits fraction bits, so that the
// walk is integer arithmetic and the same on every platform (Go may
// fuse floating-point multiply-adds on some architectures and not on
// others).
const (
	fracBits = 12
	one      = 1 << fracBits // 1.0
	top      = 100 * one     // 100.0, the values' upper bound
)

// gauss maps x to an approximately normal N(0, 1) variate in fixed
// point: the Irwin–Hall sum of the four uniform 16-bit quarters of x,
// centred and scaled by ihM/2^16, which makes its variance
// 4·(2^16)²/12·(ihM/2^16)² ≈ one² — a standard deviation of 1.0 like
// TSBS's N(0, 1) step. It lies within ±3.47.
func gauss(x uint64) int64 {
	const lanes = 0x0000ffff0000ffff
	s := x&lanes + x>>16&lanes // two 32-bit lanes, each the sum of two quarters
	s = s&0xffffffff + s>>32
	return int64(s*ihM>>16) - ihMean
}

const (
	ihM    = 7095                     // round(one·√3)
	ihMean = (2 * 0xffff * ihM) >> 16 // ≈ the mean of s·ihM>>16
)
