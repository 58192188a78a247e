package testkit

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tsflight/tsflight/bench/tsbs"
)

// TestTSBSSteps: a step range across hours is exactly that slice of the
// data the deliveries hold, cut into batches of at most BatchRows that
// also end at the hour.
func TestTSBSSteps(t *testing.T) {
	mem := newMem(t)
	p := tsbs.Params{Hosts: 7, Start: tsbs.TSBSStart, Duration: 3 * time.Hour, Seed: 42, BatchRows: 1000}
	var all Rows
	for _, d := range p.Deliveries() {
		err := p.Batches(mem, d, func(rec arrow.RecordBatch) error {
			var err error
			all, err = AppendRows(all, rec)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(all) != 7*1080 {
		t.Fatalf("the deliveries hold %d rows, want %d", len(all), 7*1080)
	}
	for _, c := range []struct{ first, steps int }{{300, 500}, {0, 1080}, {1079, 1}, {360, 360}} {
		recs, err := TSBSSteps(mem, p, c.first, c.steps)
		if err != nil {
			t.Fatalf("steps %d+%d: %v", c.first, c.steps, err)
		}
		var got Rows
		var ends []int // rows so far at each batch's end
		for _, rec := range recs {
			if rec.NumRows() > int64(p.BatchRows) || rec.NumRows() == 0 {
				t.Errorf("steps %d+%d: a batch of %d rows", c.first, c.steps, rec.NumRows())
			}
			if !rec.Schema().Equal(tsbs.Schema()) {
				t.Errorf("steps %d+%d: schema %s", c.first, c.steps, rec.Schema())
			}
			if got, err = AppendRows(got, rec); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, len(got))
		}
		Release(recs)
		if want := all[c.first*7 : (c.first+c.steps)*7]; !reflect.DeepEqual(got, want) {
			t.Errorf("steps %d+%d: %d rows differ from the deliveries' %d", c.first, c.steps, len(got), len(want))
		}
		for h := 360; h < c.first+c.steps; h += 360 {
			if at := (h - c.first) * 7; h > c.first && !slices.Contains(ends, at) {
				t.Errorf("steps %d+%d: no batch ends at hour %d (row %d); ends %v", c.first, c.steps, h/360, at, ends)
			}
		}
	}
	for _, c := range []struct{ first, steps int }{{-1, 2}, {0, 0}, {1000, 81}} {
		if recs, err := TSBSSteps(mem, p, c.first, c.steps); err == nil {
			Release(recs)
			t.Errorf("steps %d+%d outside the data: no error", c.first, c.steps)
		}
	}
	bad := p
	bad.Hosts = 0
	if _, err := TSBSSteps(mem, bad, 0, 1); err == nil {
		t.Error("invalid params: no error")
	}
}
