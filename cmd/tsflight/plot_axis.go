package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The heat map's index axis: the grid's edges read as times or integers,
// and the x ticks (nice time or integer steps) with the axis title.

// plotAxis is the grid's index axis: the edges as int64 (Unix nanoseconds
// for a timestamp index, values for an integer one).
type plotAxis struct {
	times bool
	edges []int64
	start int64 // the range asked for (the edges' ends if not given)
	end   int64
}

var (
	plotMinTime = time.Unix(0, math.MinInt64).UTC()
	plotMaxTime = time.Unix(0, math.MaxInt64).UTC()
)

// plotIndexValue reads an edge, start or end: an RFC3339 string (time) or
// an integer (float64 or json.Number from encoding/json, or a Go integer).
func plotIndexValue(v any) (n int64, isTime bool, err error) {
	switch v := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return 0, false, fmt.Errorf("%q is not an RFC 3339 time", v)
		}
		if t.Before(plotMinTime) || t.After(plotMaxTime) {
			return 0, false, fmt.Errorf("time %s is out of range", v)
		}
		return t.UnixNano(), true, nil
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return 0, false, fmt.Errorf("%s is not an integer", v)
		}
		return n, false, nil
	case float64:
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, false, fmt.Errorf("%v is not an integer", v)
		}
		return int64(v), false, nil
	case int:
		return int64(v), false, nil
	case int64:
		return v, false, nil
	case int32:
		return int64(v), false, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, false, fmt.Errorf("%d is out of range", v)
		}
		return int64(v), false, nil
	case nil:
		return 0, false, errors.New("missing")
	}
	return 0, false, fmt.Errorf("%v (%T) is neither a time nor an integer", v, v)
}

// plotTick is an x tick: its value, its label and, for times, the date
// under it where the day changes.
type plotTick struct {
	v     int64
	label string
	date  string
}

// plotRangeText is the grid's range for the subtitle.
func plotRangeText(ax *plotAxis) string {
	if !ax.times {
		return fmt.Sprintf("index %d to %d", ax.start, ax.end)
	}
	layout := plotTimeLayout(append([]int64{ax.start, ax.end}, ax.edges...))
	return time.Unix(0, ax.start).UTC().Format(layout) + " to " + time.Unix(0, ax.end).UTC().Format(layout) + " UTC"
}

// plotTimeLayout is the shortest date-time layout that shows all of ts
// exactly (to the millisecond).
func plotTimeLayout(ts []int64) string {
	var unit int64 = 24 * int64(time.Hour)
	for _, t := range ts {
		for unit > int64(time.Millisecond) && t%unit != 0 {
			switch unit {
			case 24 * int64(time.Hour):
				unit = int64(time.Minute)
			case int64(time.Minute):
				unit = int64(time.Second)
			default:
				unit = int64(time.Millisecond)
			}
		}
	}
	switch unit {
	case 24 * int64(time.Hour):
		return "2006-01-02"
	case int64(time.Minute):
		return "2006-01-02 15:04"
	case int64(time.Second):
		return "2006-01-02 15:04:05"
	}
	return "2006-01-02 15:04:05.000"
}

// plotTimeStep is a candidate spacing of time ticks: a duration, or a
// number of months.
type plotTimeStep struct {
	d      time.Duration
	months int
}

var plotTimeSteps = func() []plotTimeStep {
	var s []plotTimeStep
	for _, d := range []time.Duration{
		time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
		10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
		24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour,
	} {
		s = append(s, plotTimeStep{d: d})
	}
	for _, m := range []int{1, 2, 3, 6, 12, 24, 60, 120, 240, 600, 1200, 2400, 6000} {
		s = append(s, plotTimeStep{months: m})
	}
	return s
}()

// plotTicks picks at most maxTicks nice ticks in the axis's edges, and the
// axis title.
func plotTicks(ax *plotAxis, maxTicks int) ([]plotTick, string) {
	lo, hi := ax.edges[0], ax.edges[len(ax.edges)-1]
	if !ax.times {
		return plotIntTicks(lo, hi, maxTicks), "index"
	}
	span := float64(uint64(hi) - uint64(lo))
	step := plotTimeSteps[len(plotTimeSteps)-1]
	for _, s := range plotTimeSteps {
		length := float64(s.d)
		if s.months > 0 {
			length = float64(s.months) * 31 * 24 * float64(time.Hour)
		}
		if span/length <= float64(maxTicks) {
			step = s
			break
		}
	}
	var layout string
	switch {
	case step.months >= 12:
		layout = "2006"
	case step.months > 0:
		layout = "2006-01"
	case step.d >= 24*time.Hour:
		layout = "2006-01-02"
	case step.d >= time.Minute:
		layout = "15:04"
	case step.d >= time.Second:
		layout = "15:04:05"
	default:
		layout = "15:04:05.000"
	}
	subDay := step.months == 0 && step.d < 24*time.Hour
	startT := time.Unix(0, lo).UTC()
	var vals []int64
	if step.months > 0 {
		y, m, _ := startT.Date()
		t := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		if t.UnixNano() < lo {
			t = t.AddDate(0, 1, 0)
		}
		for ; len(vals) <= maxTicks+1 && !t.After(plotMaxTime) && t.UnixNano() <= hi; t = t.AddDate(0, 1, 0) {
			if (t.Year()*12+int(t.Month())-1)%step.months == 0 {
				vals = append(vals, t.UnixNano())
			}
		}
	} else {
		d := int64(step.d)
		var off int64
		if step.d == 7*24*time.Hour || step.d == 14*24*time.Hour {
			off = 4 * 24 * int64(time.Hour) // Mondays (1970-01-05 was one)
		}
		for v := plotCeilTo(lo-off, d) + off; v <= hi && len(vals) <= maxTicks+1; v += d {
			vals = append(vals, v)
			if v > math.MaxInt64-d {
				break
			}
		}
	}
	day := func(v int64) string { return time.Unix(0, v).UTC().Format("2006-01-02") }
	var ticks []plotTick
	prev := day(lo)
	for _, v := range vals {
		t := plotTick{v: v, label: time.Unix(0, v).UTC().Format(layout)}
		if subDay && day(v) != prev {
			t.date = day(v)
			prev = t.date
		}
		ticks = append(ticks, t)
	}
	if len(ticks) == 0 {
		ticks = []plotTick{{v: lo, label: time.Unix(0, lo).UTC().Format(plotTimeLayout([]int64{lo}))}}
	}
	title := "time (UTC)"
	if subDay {
		if day(lo) == day(hi-1) {
			title = "time (UTC) on " + day(lo)
		} else {
			title = "time (UTC) from " + day(lo)
		}
	}
	return ticks, title
}

// plotCeilTo rounds v up to a multiple of step (> 0).
func plotCeilTo(v, step int64) int64 {
	q := v / step
	if v%step != 0 && v > 0 {
		q++
	}
	if q > math.MaxInt64/step {
		return math.MaxInt64
	}
	return q * step
}

// plotIntTicks picks ticks at multiples of 1, 2 or 5 × 10^k in [lo, hi].
func plotIntTicks(lo, hi int64, maxTicks int) []plotTick {
	span := float64(uint64(hi) - uint64(lo))
	raw := span / float64(maxTicks)
	var step int64 = 1
	for p := 1.0; p <= 1e18; p *= 10 {
		found := false
		for _, m := range []float64{1, 2, 5} {
			if m*p >= raw {
				step, found = int64(m*p), true
				break
			}
		}
		if found {
			break
		}
	}
	var ticks []plotTick
	if step <= 0 {
		step = math.MaxInt64
	}
	for v := plotCeilTo(lo, step); v <= hi && len(ticks) <= maxTicks+1; v += step {
		ticks = append(ticks, plotTick{v: v, label: strconv.FormatInt(v, 10)})
		if v > math.MaxInt64-step {
			break
		}
	}
	if len(ticks) == 0 {
		ticks = []plotTick{{v: lo, label: strconv.FormatInt(lo, 10)}}
	}
	return ticks
}
