package testkit

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/bench/tsbs"
)

// TSBSSteps returns the rows of every host of p at steps [first,
// first+steps) in delivery order (each step, then each host ascending),
// less those p drops (tsbs.Params.Missing), in the schema tsbs.Schema.
// Each hour's part comes from p.Batches, so a batch holds at most
// p.BatchRows rows and also ends where an hour does. It is for a test or
// benchmark that appends step ranges rather than p.Deliveries. The
// batches are retained: release them with Release.
func TSBSSteps(alloc memory.Allocator, p tsbs.Params, first, steps int) ([]arrow.RecordBatch, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if first < 0 || steps < 1 || first+steps > p.Steps() {
		return nil, fmt.Errorf("testkit: steps [%d, %d) are not within the data's [0, %d)", first, first+steps, p.Steps())
	}
	step := p.Step
	if step == 0 {
		step = tsbs.DefaultStep
	}
	perHour := int(time.Hour / step)
	var out []arrow.RecordBatch
	keep := func(rec arrow.RecordBatch) error {
		rec.Retain()
		out = append(out, rec)
		return nil
	}
	for s, end := first, first+steps; s < end; {
		hour := s / perHour
		e := min(end, (hour+1)*perHour)
		d := tsbs.Delivery{Hour: hour, After: hour, FirstStep: s, EndStep: e, Start: p.StepTime(s), End: p.StepTime(e),
			Hosts: []tsbs.HostRange{{Lo: 0, Hi: p.Hosts}}}
		if err := p.Batches(alloc, d, keep); err != nil {
			Release(out)
			return nil, err
		}
		s = e
	}
	return out, nil
}

// Release releases every batch of recs.
func Release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
