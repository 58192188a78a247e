package main

import (
	"math"
	"slices"
)

// stat summarises the timed runs of one measurement, in seconds.
type stat struct {
	N                int
	Median, P25, P75 float64
	P99, Min, Max    float64
}

// statsOf summarises v (seconds per run). Percentiles interpolate between
// the nearest ranks.
func statsOf(v []float64) stat {
	if len(v) == 0 {
		nan := math.NaN()
		return stat{Median: nan, P25: nan, P75: nan, P99: nan, Min: nan, Max: nan}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return stat{N: len(s), Median: quantile(s, 0.5), P25: quantile(s, 0.25), P75: quantile(s, 0.75),
		P99: quantile(s, 0.99), Min: s[0], Max: s[len(s)-1]}
}

// quantile of sorted s, q in [0, 1].
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// spread is the interquartile range relative to the median (0.05 = ±5 %
// around it, roughly).
func (s stat) spread() float64 {
	if s.Median == 0 || math.IsNaN(s.Median) {
		return math.NaN()
	}
	return (s.P75 - s.P25) / s.Median
}
