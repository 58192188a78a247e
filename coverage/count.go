package coverage

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
)

// Range is an inclusive range of interval ids [First, Last]. Domain builds
// ranges from half-open value ranges; a Range with First > Last is invalid
// and rejected by every query with ErrEmptyRange.
type Range struct {
	First, Last uint64
}

// Len returns the number of ids in the range (up to 2^64, hence a Count);
// zero for an invalid range.
func (r Range) Len() Count {
	if r.First > r.Last {
		return Count{}
	}
	return spanLen(r.First, r.Last)
}

// Contains reports whether id lies in the range.
func (r Range) Contains(id uint64) bool { return r.First <= id && id <= r.Last }

func (r Range) valid() error {
	if r.First > r.Last {
		return fmt.Errorf("%w: ids [%d, %d]", ErrEmptyRange, r.First, r.Last)
	}
	return nil
}

// Count is a non-negative 128-bit count. Counts of interval ids can reach
// 2^64 (a range over the whole id space) and expected (identity, interval)
// pairs can exceed it, so they do not fit a uint64.
type Count struct {
	hi, lo uint64
}

// CountOf returns v as a Count.
func CountOf(v uint64) Count { return Count{lo: v} }

// spanLen is last - first + 1 for first <= last.
func spanLen(first, last uint64) Count {
	lo, carry := bits.Add64(last-first, 1, 0)
	return Count{hi: carry, lo: lo}
}

// Uint64 returns the count and whether it fits in a uint64.
func (c Count) Uint64() (uint64, bool) { return c.lo, c.hi == 0 }

// IsZero reports whether the count is zero.
func (c Count) IsZero() bool { return c.hi == 0 && c.lo == 0 }

// Cmp returns -1, 0 or +1 as c is less than, equal to or greater than o.
func (c Count) Cmp(o Count) int {
	switch {
	case c.hi < o.hi:
		return -1
	case c.hi > o.hi:
		return 1
	case c.lo < o.lo:
		return -1
	case c.lo > o.lo:
		return 1
	}
	return 0
}

// Float64 returns the count as the nearest float64.
func (c Count) Float64() float64 {
	return float64(c.hi)*(1<<64) + float64(c.lo)
}

// Big returns the count as a new big.Int.
func (c Count) Big() *big.Int {
	v := new(big.Int).SetUint64(c.hi)
	v.Lsh(v, 64)
	return v.Or(v, new(big.Int).SetUint64(c.lo))
}

// String formats the count in decimal.
func (c Count) String() string {
	if c.hi == 0 {
		return fmt.Sprint(c.lo)
	}
	return c.Big().String()
}

// sub returns c - o for o <= c (zero otherwise).
func (c Count) sub(o Count) Count {
	if c.Cmp(o) <= 0 {
		return Count{}
	}
	lo, borrow := bits.Sub64(c.lo, o.lo, 0)
	hi, _ := bits.Sub64(c.hi, o.hi, borrow)
	return Count{hi: hi, lo: lo}
}

// mul returns c * n, saturating at the maximum Count.
func (c Count) mul(n uint64) Count {
	h1, l := bits.Mul64(c.lo, n)
	h2, m := bits.Mul64(c.hi, n)
	hi, carry := bits.Add64(h1, m, 0)
	if h2 != 0 || carry != 0 {
		return Count{hi: math.MaxUint64, lo: math.MaxUint64}
	}
	return Count{hi: hi, lo: l}
}
