package main

import (
	"math"
	"testing"
)

func TestStatsOf(t *testing.T) {
	s := statsOf([]float64{5, 1, 3, 2, 4})
	if s.N != 5 || s.Median != 3 || s.Min != 1 || s.Max != 5 || s.P25 != 2 || s.P75 != 4 {
		t.Errorf("stats %+v", s)
	}
	if got := s.spread(); math.Abs(got-2.0/3) > 1e-12 {
		t.Errorf("spread %v", got)
	}
	if s := statsOf([]float64{1, 2}); s.Median != 1.5 || math.Abs(s.P99-1.99) > 1e-12 {
		t.Errorf("two runs: %+v", s)
	}
	if s := statsOf(nil); s.N != 0 || !math.IsNaN(s.Median) || !math.IsNaN(s.spread()) {
		t.Errorf("no runs: %+v", s)
	}
}
