package testkit

import (
	"math"
	"slices"
)

// Median is the median of v (the mean of the middle two when their number
// is even), NaN when v is empty. v is not changed.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// Alternate runs fns in order when i is even and in reverse order when it
// is odd: in iteration i of a benchmark that measures several systems in
// turn, none always runs first (or last, after the others have warmed
// caches or left garbage).
func Alternate(i int, fns ...func()) {
	for k := range fns {
		if i%2 == 1 {
			k = len(fns) - 1 - k
		}
		fns[k]()
	}
}
