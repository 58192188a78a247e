package tsbs

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// A Delivery is one append a loader makes: the rows of one hour of data
// (Late false), or the part of an hour that was held back and arrives
// after later hours (Late true). Its rows are those of its hosts at its
// steps that are not Missing, in time-major order: for each step, each
// of its hosts in ascending order.
type Delivery struct {
	// Seq is the delivery's position in Params.Deliveries.
	Seq int `json:"seq"`
	// Hour is the hour of data it carries, counted from Start.
	Hour int `json:"hour"`
	// Late marks the held-back part of its hour.
	Late bool `json:"late"`
	// After is the hour whose on-time delivery this one follows: Hour
	// itself when on time; when late, a later hour, or Hour itself for
	// the last hour (its late part comes right after its on-time part).
	After int `json:"after"`
	// FirstStep and EndStep are its steps, [FirstStep, EndStep).
	FirstStep int `json:"first_step"`
	EndStep   int `json:"end_step"`
	// Start and End bound its timestamps, [Start, End).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Hosts are its hosts: ascending, disjoint, non-empty ranges.
	Hosts []HostRange `json:"hosts"`
}

// HostRange is the hosts [Lo, Hi).
type HostRange struct {
	Lo int `json:"lo"`
	Hi int `json:"hi"`
}

// Name is the delivery's name in file names and reports: "h03", or
// "h03-late" for a held-back part.
func (d Delivery) Name() string {
	if d.Late {
		return fmt.Sprintf("h%02d-late", d.Hour)
	}
	return fmt.Sprintf("h%02d", d.Hour)
}

// NumHosts is the number of hosts in d.
func (d Delivery) NumHosts() int {
	n := 0
	for _, r := range d.Hosts {
		n += r.Hi - r.Lo
	}
	return n
}

// HasHost reports whether host is one of d's hosts.
func (d Delivery) HasHost(host int) bool {
	for _, r := range d.Hosts {
		if host >= r.Lo && host < r.Hi {
			return true
		}
	}
	return false
}

// latePart is the held-back part of an hour.
type latePart struct {
	hosts HostRange
	after int
}

// lateParts chooses the hours with a late part: round(LateFraction ·
// Hours) of them, drawn without replacement. Each holds back a
// contiguous run of 1 … ⌈Hosts/2⌉ hosts at a uniform position, delivered
// after the on-time delivery of the hour 1, 2 or 3 hours later (or of
// the last hour, if that comes first).
func (p Params) lateParts() map[int]latePart {
	hours := p.Hours()
	n := int(math.Round(p.LateFraction * float64(hours)))
	if n == 0 {
		return nil
	}
	r := newStream(derive(p.Seed, domLate))
	order := make([]int, hours)
	for i := range order {
		order[i] = i
	}
	parts := make(map[int]latePart, n)
	for i := range n { // a partial Fisher–Yates shuffle
		j := i + r.intN(hours-i)
		order[i], order[j] = order[j], order[i]
		size := 1 + r.intN((p.Hosts+1)/2)
		lo := r.intN(p.Hosts - size + 1)
		after := min(order[i]+1+r.intN(3), hours-1)
		parts[order[i]] = latePart{HostRange{lo, lo + size}, after}
	}
	return parts
}

// Deliveries returns the appends a loader makes, in order: hour by hour,
// each hour's on-time rows, then the late parts due after that hour, by
// the hour they belong to. Every (host, step) row that is not Missing is
// in exactly one delivery. An hour whose late part is all its hosts (a
// single host) has no on-time delivery. Deliveries returns nil if p is
// not valid.
func (p Params) Deliveries() []Delivery {
	if p.Validate() != nil {
		return nil
	}
	p = p.withDefaults()
	hours, perHour, steps := p.Hours(), p.stepsPerHour(), p.Steps()
	late := p.lateParts()
	due := make(map[int][]int) // hour → the hours whose late parts follow it
	for h, lp := range late {
		due[lp.after] = append(due[lp.after], h)
	}
	var out []Delivery
	add := func(hour int, isLate bool, hosts []HostRange) {
		if len(hosts) == 0 {
			return
		}
		first, end := hour*perHour, min((hour+1)*perHour, steps)
		after := hour
		if isLate {
			after = late[hour].after
		}
		out = append(out, Delivery{Seq: len(out), Hour: hour, Late: isLate, After: after,
			FirstStep: first, EndStep: end, Start: p.StepTime(first), End: p.StepTime(end), Hosts: hosts})
	}
	for h := range hours {
		all := []HostRange{{0, p.Hosts}}
		if lp, ok := late[h]; ok {
			all = nil
			if lp.hosts.Lo > 0 {
				all = append(all, HostRange{0, lp.hosts.Lo})
			}
			if lp.hosts.Hi < p.Hosts {
				all = append(all, HostRange{lp.hosts.Hi, p.Hosts})
			}
		}
		add(h, false, all)
		ds := due[h]
		slices.Sort(ds)
		for _, lh := range ds {
			add(lh, true, []HostRange{late[lh].hosts})
		}
	}
	return out
}

// dropThreshold is the hash below which a row is dropped; all reports
// that every row is.
func (p Params) dropThreshold() (thr uint64, all bool) {
	switch {
	case p.DropFraction <= 0:
		return 0, false
	case p.DropFraction >= 1:
		return 0, true
	}
	return uint64(p.DropFraction * 0x1p64), false
}

// dropKey is the key of host's stream of drop decisions.
func (p Params) dropKey(host int) uint64 { return derive(p.Seed, domDrop, uint64(host)) }

// Missing reports whether the row of host at step is absent from the
// data: dropped (with probability DropFraction, a pure function of the
// seed, host and step) or outside [0, Hosts) × [0, Steps).
func (p Params) Missing(host, step int) bool {
	if host < 0 || host >= p.Hosts || step < 0 || step >= p.Steps() {
		return true
	}
	thr, all := p.dropThreshold()
	if all {
		return true
	}
	return thr != 0 && at(p.dropKey(host), uint64(step)) < thr
}

// Rows is the number of rows in the data, every delivery together: the
// (host, step) pairs that are not Missing. It costs a hash per pair
// when DropFraction is strictly between 0 and 1. It is 0 if p is not
// valid.
func (p Params) Rows() int64 {
	if p.Validate() != nil {
		return 0
	}
	steps := p.Steps()
	thr, all := p.dropThreshold()
	switch {
	case all:
		return 0
	case thr == 0:
		return int64(p.Hosts) * int64(steps)
	}
	var n int64
	for h := range p.Hosts {
		key := p.dropKey(h)
		for s := range steps {
			if at(key, uint64(s)) >= thr {
				n++
			}
		}
	}
	return n
}
