package testkit

import (
	"math"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	v := []float64{5, 1, 3}
	if got := Median(v); got != 3 {
		t.Errorf("Median(5 1 3) = %v", got)
	}
	if !slices.Equal(v, []float64{5, 1, 3}) {
		t.Errorf("Median sorted its argument: %v", v)
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("Median(4 1 3 2) = %v", got)
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median() = %v, want NaN", got)
	}
}

func TestAlternate(t *testing.T) {
	var order []int
	for i := range 3 {
		Alternate(i, func() { order = append(order, 1) }, func() { order = append(order, 2) }, func() { order = append(order, 3) })
	}
	if want := []int{1, 2, 3, 3, 2, 1, 1, 2, 3}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
}
