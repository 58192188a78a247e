package tsbs

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// newMem returns a checked allocator that must be empty when the test
// ends.
func newMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// small is a data set small enough to check row by row: 7 hosts over
// 3 hours at 10 s in batches of 1,000 rows.
func small() Params {
	return Params{Hosts: 7, Start: TSBSStart, Duration: 3 * 3600e9, Seed: 42, BatchRows: 1000}
}

// row is one generated row.
type row struct {
	ts     int64 // µs since the epoch
	tags   [numTags]string
	fields [numFields]int64
}

// key identifies a row: its host and step.
type key struct{ host, step int }

// collect returns d's batches, retained; release them with releaseAll.
func collect(t testing.TB, mem memory.Allocator, p Params, d Delivery) []arrow.RecordBatch {
	t.Helper()
	var recs []arrow.RecordBatch
	err := p.Batches(mem, d, func(rec arrow.RecordBatch) error {
		rec.Retain()
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		releaseAll(recs)
		t.Fatalf("Batches(%s): %v", d.Name(), err)
	}
	return recs
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// rowsOf returns the rows of recs in order.
func rowsOf(t testing.TB, recs []arrow.RecordBatch) []row {
	t.Helper()
	var out []row
	for _, rec := range recs {
		if !rec.Schema().Equal(Schema()) {
			t.Fatalf("batch schema %s, want %s", rec.Schema(), Schema())
		}
		ts := rec.Column(0).(*array.Timestamp)
		for i := range int(rec.NumRows()) {
			var r row
			r.ts = int64(ts.Value(i))
			for c := range numTags {
				r.tags[c] = rec.Column(1 + c).(*array.String).Value(i)
			}
			for f := range numFields {
				r.fields[f] = rec.Column(1 + numTags + f).(*array.Int64).Value(i)
			}
			out = append(out, r)
		}
	}
	return out
}

// keyOf returns the host and step of a row of p.
func keyOf(t testing.TB, p Params, r row) key {
	t.Helper()
	num, ok := strings.CutPrefix(r.tags[0], "host_")
	h, err := strconv.Atoi(num)
	if !ok || err != nil || strconv.Itoa(h) != num {
		t.Fatalf("hostname %q is not host_<i>", r.tags[0])
	}
	p = p.withDefaults()
	off := r.ts - p.Start.UnixMicro()
	step := p.Step.Microseconds()
	if off%step != 0 {
		t.Fatalf("timestamp %d is not on a step", r.ts)
	}
	return key{h, int(off / step)}
}

// allRows generates every delivery of p in order.
func allRows(t testing.TB, mem memory.Allocator, p Params) []row {
	t.Helper()
	var out []row
	for _, d := range p.Deliveries() {
		recs := collect(t, mem, p, d)
		out = append(out, rowsOf(t, recs)...)
		releaseAll(recs)
	}
	return out
}

// ipcBytes is every delivery of p as one Arrow IPC stream per delivery,
// concatenated: equal bytes mean equal batches, buffers and boundaries.
func ipcBytes(t testing.TB, mem memory.Allocator, p Params) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, d := range p.Deliveries() {
		w := ipc.NewWriter(&buf, ipc.WithSchema(Schema()), ipc.WithAllocator(mem))
		err := p.Batches(mem, d, func(rec arrow.RecordBatch) error { return w.Write(rec) })
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// refValue computes field f of host at step from the definition in
// generate.go, directly, with no state carried between steps.
func refValue(p Params, host, f, step int) int64 {
	p = p.withDefaults()
	S := p.stepsPerHour()
	k, h0 := step/S, step/S*S
	sqrtS := int64(math.Round(math.Sqrt(float64(S)) * one))
	akey := derive(p.Seed, domAnchor, uint64(host), uint64(f))
	a := int64(mix(akey)>>32) * (top + 1) >> 32
	var b int64
	for j := 0; j <= k; j++ {
		b = a + floorDiv(gauss(at(akey, uint64(j)))*sqrtS, one)
		if j < k {
			a = b
		}
	}
	skey := derive(p.Seed, domStep, uint64(host), uint64(f))
	var wi, ws int64
	for j := 1; j <= S; j++ {
		g := gauss(at(skey, uint64(h0+j)))
		ws += g
		if j <= step-h0 {
			wi += g
		}
	}
	slope := (ws - (b - a)) * (1 << slopeBits) / int64(S)
	v := a + wi - floorDiv(int64(step-h0)*slope, 1<<slopeBits)
	// fold into [0, 100]: reflect at 0, then at 100, until inside
	for v < 0 || v > top {
		if v < 0 {
			v = -v
		} else {
			v = 2*top - v
		}
	}
	return int64(math.Round(float64(v) / one))
}

// floorDiv is ⌊x / d⌋ for d > 0.
func floorDiv(x, d int64) int64 {
	q := x / d
	if x%d < 0 {
		q--
	}
	return q
}
