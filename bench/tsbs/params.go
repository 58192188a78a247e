package tsbs

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Params choose a data set. The same Params always give the same data,
// deliveries and queries.
type Params struct {
	// Hosts is the number of hosts, host_0 … host_<Hosts-1>.
	Hosts int
	// Start is the first timestamp; it must be a whole microsecond.
	Start time.Time
	// Duration is the span of the data, [Start, Start+Duration): a
	// positive multiple of Step.
	Duration time.Duration
	// Step is the interval between a host's rows; 0 means DefaultStep.
	// It must divide an hour and be a whole number of microseconds, at
	// least a millisecond.
	Step time.Duration
	// Seed chooses the tags, the walks, the dropped rows, the late parts
	// and the queries.
	Seed uint64
	// DropFraction in [0, 1] is the probability with which each (host,
	// step) row is dropped, decided by the seed (see Missing).
	DropFraction float64
	// LateFraction in [0, 1] is the fraction of the hours (rounded to
	// the nearest whole number of hours) whose rows from a contiguous
	// run of hosts are held back and delivered late, one to three hours
	// after the rest of their hour (see Deliveries).
	LateFraction float64
	// BatchRows is the most rows in one batch; 0 means DefaultBatchRows.
	BatchRows int
}

const (
	// DefaultStep is TSBS's interval for cpu-only.
	DefaultStep = 10 * time.Second
	// DefaultBatchRows is the default size of a batch.
	DefaultBatchRows = 1 << 16
	// MaxBatchRows bounds BatchRows, keeping a batch's string columns
	// well within 32-bit offsets.
	MaxBatchRows = 1 << 22
	// MaxHosts bounds Hosts (a delivery's walk state is 320 bytes a
	// host).
	MaxHosts = 1 << 20
)

// TSBSStart is TSBS's default --timestamp-start, 2016-01-01T00:00:00Z.
var TSBSStart = time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultParams are the full-scale data set of the benchmark: TSBS's
// scale 4,000 for one day from TSBS's default start at a 10 s interval
// (34.56 M rows), seed 123 (TSBS's documented example), nothing dropped
// or late.
func DefaultParams() Params {
	return Params{
		Hosts:     4000,
		Start:     TSBSStart,
		Duration:  24 * time.Hour,
		Step:      DefaultStep,
		Seed:      123,
		BatchRows: DefaultBatchRows,
	}
}

// withDefaults returns p with the zero Step and BatchRows replaced by
// their defaults.
func (p Params) withDefaults() Params {
	if p.Step == 0 {
		p.Step = DefaultStep
	}
	if p.BatchRows == 0 {
		p.BatchRows = DefaultBatchRows
	}
	return p
}

// Validate reports the first thing wrong with p, or nil.
func (p Params) Validate() error {
	p = p.withDefaults()
	switch {
	case p.Hosts < 1 || p.Hosts > MaxHosts:
		return fmt.Errorf("tsbs: Hosts %d is not in [1, %d]", p.Hosts, MaxHosts)
	case p.Start.IsZero():
		return errors.New("tsbs: Start is not set")
	case p.Start.Nanosecond()%1000 != 0:
		return fmt.Errorf("tsbs: Start %s is not a whole microsecond", p.Start.Format(time.RFC3339Nano))
	case p.Step < time.Millisecond:
		return fmt.Errorf("tsbs: Step %v is less than 1ms", p.Step)
	case p.Step%time.Microsecond != 0:
		return fmt.Errorf("tsbs: Step %v is not a whole number of microseconds", p.Step)
	case time.Hour%p.Step != 0:
		return fmt.Errorf("tsbs: Step %v does not divide an hour", p.Step)
	case p.Duration <= 0:
		return fmt.Errorf("tsbs: Duration %v is not positive", p.Duration)
	case p.Duration%p.Step != 0:
		return fmt.Errorf("tsbs: Duration %v is not a multiple of Step %v", p.Duration, p.Step)
	case !(p.DropFraction >= 0 && p.DropFraction <= 1): // NaN fails too
		return fmt.Errorf("tsbs: DropFraction %v is not in [0, 1]", p.DropFraction)
	case !(p.LateFraction >= 0 && p.LateFraction <= 1):
		return fmt.Errorf("tsbs: LateFraction %v is not in [0, 1]", p.LateFraction)
	case p.BatchRows < 1 || p.BatchRows > MaxBatchRows:
		return fmt.Errorf("tsbs: BatchRows %d is not in [1, %d]", p.BatchRows, MaxBatchRows)
	}
	return nil
}

// Steps is the number of timestamps: Duration / Step.
func (p Params) Steps() int {
	p = p.withDefaults()
	if p.Step <= 0 || p.Duration <= 0 {
		return 0
	}
	return int(p.Duration / p.Step)
}

// stepsPerHour is the number of steps in a whole hour.
func (p Params) stepsPerHour() int { return int(time.Hour / p.withDefaults().Step) }

// Hours is the number of hours the data touches (the last may be
// partial): one on-time delivery each.
func (p Params) Hours() int {
	s := p.stepsPerHour()
	return (p.Steps() + s - 1) / s
}

// End is the end of the data's span, Start + Duration (exclusive).
func (p Params) End() time.Time { return p.Start.Add(p.Duration) }

// StepTime is the timestamp of step s, Start + s·Step, in UTC.
func (p Params) StepTime(s int) time.Time {
	return p.Start.Add(time.Duration(s) * p.withDefaults().Step).UTC()
}

// paramsJSON is Params as JSON: durations and the start as integer
// microseconds (exact in every language) and the start also as RFC 3339
// for people.
type paramsJSON struct {
	Hosts        int     `json:"hosts"`
	Start        string  `json:"start"`
	StartMicros  int64   `json:"start_us"`
	DurationUs   int64   `json:"duration_us"`
	StepUs       int64   `json:"step_us"`
	Seed         uint64  `json:"seed"`
	DropFraction float64 `json:"drop_fraction"`
	LateFraction float64 `json:"late_fraction"`
	BatchRows    int     `json:"batch_rows"`
}

// MarshalJSON writes p with its defaults filled in; see paramsJSON.
func (p Params) MarshalJSON() ([]byte, error) {
	p = p.withDefaults()
	return json.Marshal(paramsJSON{
		Hosts:        p.Hosts,
		Start:        p.Start.UTC().Format(time.RFC3339Nano),
		StartMicros:  p.Start.UnixMicro(),
		DurationUs:   p.Duration.Microseconds(),
		StepUs:       p.Step.Microseconds(),
		Seed:         p.Seed,
		DropFraction: p.DropFraction,
		LateFraction: p.LateFraction,
		BatchRows:    p.BatchRows,
	})
}

// UnmarshalJSON reads what MarshalJSON writes; the start is taken from
// start_us (it must agree with start) and is in UTC.
func (p *Params) UnmarshalJSON(b []byte) error {
	var j paramsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	start := time.UnixMicro(j.StartMicros).UTC()
	if j.Start != "" {
		t, err := time.Parse(time.RFC3339Nano, j.Start)
		if err != nil {
			return fmt.Errorf("tsbs: params start: %w", err)
		}
		if !t.Equal(start) {
			return fmt.Errorf("tsbs: params start %s and start_us %d disagree", j.Start, j.StartMicros)
		}
	}
	if j.DurationUs > math.MaxInt64/1000 || j.StepUs > math.MaxInt64/1000 {
		return errors.New("tsbs: params duration out of range")
	}
	*p = Params{
		Hosts:        j.Hosts,
		Start:        start,
		Duration:     time.Duration(j.DurationUs) * time.Microsecond,
		Step:         time.Duration(j.StepUs) * time.Microsecond,
		Seed:         j.Seed,
		DropFraction: j.DropFraction,
		LateFraction: j.LateFraction,
		BatchRows:    j.BatchRows,
	}
	return nil
}
