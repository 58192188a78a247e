package tsbs

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The walks. Each field of each host is a random walk with N(0, 1)
// steps kept within [0, 100] by reflection at the bounds (TSBS clamps
// instead; both wander over the whole range and change by about one per
// step), whose value at any step is a pure function of (seed, host,
// field, step), so that any hour, or any part of one, can be generated
// alone, in any order, with the same result:
//
//   - At the first step of every hour the free (unbounded) walk is at
//     an anchor. The anchors form a coarse walk: the first uniform in
//     [0, 100], each next one the previous plus a step of N(0, √S) (S
//     steps per hour). The anchor of hour k costs k draws.
//   - Within hour k the free walk is a random-walk bridge from anchor k
//     to anchor k+1: a fine walk W with N(0, 1) steps drawn at each step
//     from a SplitMix64 stream indexed by the step, less the straight
//     line that makes it end at anchor k+1. So there is no jump at hour
//     boundaries.
//   - The value is the free walk folded into [0, 100] (reflected at 0
//     and 100: a triangle wave of period 200), rounded to the nearest
//     integer. Folding a free walk gives the walk reflected at the
//     bounds, without the state having to know about them.
//
// All of it is integer fixed-point arithmetic (see random.go).

// slopeBits are the fraction bits of a bridge's slope.
const slopeBits = 20

// anchors returns the anchors of hours k and k+1 of a field's walk.
func anchors(key uint64, k int, sqrtS int64) (a, b int64) {
	a = int64(mix(key) >> 32 * (top + 1) >> 32) // uniform in [0, top]
	for j := 0; ; j++ {
		b = a + gauss(at(key, uint64(j)))*sqrtS>>fracBits
		if j == k {
			return a, b
		}
		a = b
	}
}

// value is the field value of free walk position v: v folded into
// [0, top], rounded to an integer.
func value(v int64) int64 {
	const period = 2 * top
	m := v % period
	if m < 0 {
		m += period
	}
	if m > top {
		m = period - m
	}
	return (m + one/2) >> fracBits
}

// walk is the state of one field of one host within an hour.
type walk struct {
	key   uint64 // the fine walk's stream (indexed by step)
	v     int64  // anchor + W at the current step
	acc   int64  // i·slope at the current step i of the hour
	slope int64  // (W_S − (b − a)) / S, in 1/2^slopeBits
}

// hourWalks returns the walks of hosts at step first of hour k, whose
// first step is h0.
func (p Params) hourWalks(hosts []int, k, h0, first int) []walk {
	S := p.stepsPerHour()
	sqrtS := int64(math.Round(math.Sqrt(float64(S)) * one))
	ws := make([]walk, len(hosts)*numFields)
	for i, h := range hosts {
		for f := range numFields {
			a, b := anchors(derive(p.Seed, domAnchor, uint64(h), uint64(f)), k, sqrtS)
			key := derive(p.Seed, domStep, uint64(h), uint64(f))
			// W_i = Σ_{j=1..i} gauss(step h0+j): to first for the start,
			// to S for the bridge.
			var w, wFirst int64
			for j := 1; j <= S; j++ {
				w += gauss(at(key, uint64(h0+j)))
				if h0+j == first {
					wFirst = w
				}
			}
			slope := ((w - (b - a)) << slopeBits) / int64(S)
			ws[i*numFields+f] = walk{key: key, v: a + wFirst, acc: int64(first-h0) * slope, slope: slope}
		}
	}
	return ws
}

// hostStrings holds a delivery's string columns: for each column, its
// hosts' values concatenated in delivery order, and their offsets.
type hostStrings struct {
	data [numTags][]byte
	off  [numTags][]int32 // len(hosts)+1 each
}

func (p Params) hostStrings(hosts []int) *hostStrings {
	hs := &hostStrings{}
	for c := range numTags {
		hs.off[c] = make([]int32, 1, len(hosts)+1)
	}
	for _, h := range hosts {
		for c, v := range p.HostTags(h) {
			hs.data[c] = append(hs.data[c], v...)
			hs.off[c] = append(hs.off[c], int32(len(hs.data[c])))
		}
	}
	return hs
}

// checkDelivery reports what makes d impossible to generate under p.
// Any hosts, and any steps within one hour, will do: d need not be one
// of p.Deliveries.
func (p Params) checkDelivery(d Delivery) error {
	S := p.stepsPerHour()
	switch {
	case d.Hour < 0 || d.Hour >= p.Hours():
		return fmt.Errorf("tsbs: delivery hour %d is not in [0, %d)", d.Hour, p.Hours())
	case d.FirstStep < d.Hour*S || d.EndStep > min((d.Hour+1)*S, p.Steps()) || d.FirstStep > d.EndStep:
		return fmt.Errorf("tsbs: delivery steps [%d, %d) are not within hour %d", d.FirstStep, d.EndStep, d.Hour)
	}
	prev := 0
	for _, r := range d.Hosts {
		if r.Lo < prev || r.Hi <= r.Lo || r.Hi > p.Hosts {
			return fmt.Errorf("tsbs: delivery hosts %v are not ascending disjoint non-empty ranges within [0, %d)", d.Hosts, p.Hosts)
		}
		prev = r.Hi
	}
	return nil
}

// Batches generates d's rows (see Delivery) and calls fn with each
// batch of at most BatchRows rows, in order; a delivery without rows
// makes no call. Only the last batch may be short, so the batches of a
// delivery are the same however it is consumed. The batch is released
// when fn returns: fn must Retain it to keep it. An error from fn stops
// generation and is returned.
//
// d is normally one of p.Deliveries, but any steps within one hour and
// any host ranges will do: the rows are a pure function of (p, host,
// step), so a part generated alone equals the same part of a whole.
// Generation costs, besides the rows, one pass over the hour's steps per
// host and field, and the hour number's draws for its anchors.
func (p Params) Batches(alloc memory.Allocator, d Delivery, fn func(arrow.RecordBatch) error) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p = p.withDefaults()
	if err := p.checkDelivery(d); err != nil {
		return err
	}
	if alloc == nil {
		return errors.New("tsbs: nil allocator")
	}
	var hosts []int
	for _, r := range d.Hosts {
		for h := r.Lo; h < r.Hi; h++ {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 || d.FirstStep == d.EndStep {
		return nil
	}
	thr, all := p.dropThreshold()
	if all {
		return nil
	}
	S := p.stepsPerHour()
	h0 := d.Hour * S
	ws := p.hourWalks(hosts, d.Hour, h0, d.FirstStep)
	drop := make([]uint64, len(hosts))
	if thr != 0 {
		for i, h := range hosts {
			drop[i] = p.dropKey(h)
		}
	}
	b := newBatcher(alloc, p.hostStrings(hosts), min(p.BatchRows, len(hosts)*(d.EndStep-d.FirstStep)))
	defer b.release()
	start, step := p.Start.UnixMicro(), p.Step.Microseconds()
	for s := d.FirstStep; s < d.EndStep; s++ {
		ts := start + int64(s)*step
		next := uint64(s + 1)
		for i := range hosts {
			w := ws[i*numFields : (i+1)*numFields : (i+1)*numFields]
			if thr == 0 || at(drop[i], uint64(s)) >= thr {
				if b.n == 0 {
					b.start()
				}
				n := b.n
				b.time[n] = ts
				b.rows[n] = int32(i)
				for f := range w {
					b.fields[f][n] = value(w[f].v - w[f].acc>>slopeBits)
				}
				if b.n++; b.n == b.size {
					if err := b.flush(fn); err != nil {
						return err
					}
				}
			}
			for f := range w { // to step s+1
				w[f].v += gauss(at(w[f].key, next))
				w[f].acc += w[f].slope
			}
		}
	}
	return b.flush(fn)
}

// batcher collects rows, the fixed-width columns straight into Arrow
// buffers, and turns them into batches.
type batcher struct {
	alloc  memory.Allocator
	hs     *hostStrings
	size   int // rows per batch
	n      int // rows collected
	bufs   [1 + numFields]*memory.Buffer
	time   []int64            // bufs[0]'s values
	fields [numFields][]int64 // bufs[1:]'s values
	rows   []int32            // the index in the delivery's hosts of each row
	runs   []int32            // scratch: the starts of runs of consecutive hosts
}

func newBatcher(alloc memory.Allocator, hs *hostStrings, size int) *batcher {
	return &batcher{alloc: alloc, hs: hs, size: size, rows: make([]int32, size)}
}

// start allocates the buffers of a new batch.
func (b *batcher) start() {
	for i := range b.bufs {
		buf := memory.NewResizableBuffer(b.alloc)
		buf.Resize(b.size * 8)
		b.bufs[i] = buf
	}
	b.time = arrow.Int64Traits.CastFromBytes(b.bufs[0].Bytes())
	for f := range b.fields {
		b.fields[f] = arrow.Int64Traits.CastFromBytes(b.bufs[1+f].Bytes())
	}
}

// release frees the buffers of an unfinished batch.
func (b *batcher) release() {
	for i, buf := range b.bufs {
		if buf != nil {
			buf.Release()
			b.bufs[i] = nil
		}
	}
}

// flush makes a batch of the collected rows, if any, and calls fn.
func (b *batcher) flush(fn func(arrow.RecordBatch) error) error {
	n := b.n
	if n == 0 {
		return nil
	}
	b.n = 0
	cols := make([]arrow.Array, 0, 1+numTags+numFields)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	fixed := func(i int, dt arrow.DataType) arrow.Array {
		buf := b.bufs[i]
		b.bufs[i] = nil
		buf.ResizeNoShrink(n * 8)
		data := array.NewData(dt, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
		buf.Release()
		defer data.Release()
		return array.MakeFromData(data)
	}
	cols = append(cols, fixed(0, timeType))
	// Runs of consecutive hosts are contiguous in hs.data: one copy each.
	rows := b.rows[:n]
	b.runs = b.runs[:0]
	for i := range rows {
		if i == 0 || rows[i] != rows[i-1]+1 {
			b.runs = append(b.runs, int32(i))
		}
	}
	b.runs = append(b.runs, int32(n))
	for c := range numTags {
		cols = append(cols, b.strings(rows, b.hs.data[c], b.hs.off[c]))
	}
	for f := range numFields {
		cols = append(cols, fixed(1+f, arrow.PrimitiveTypes.Int64))
	}
	rec := array.NewRecordBatch(schema, cols, int64(n))
	defer rec.Release()
	return fn(rec)
}

// strings makes a string array of the rows' values of one column.
func (b *batcher) strings(rows []int32, data []byte, off []int32) arrow.Array {
	n := len(rows)
	size := 0
	for r := 0; r+1 < len(b.runs); r++ {
		i, j := b.runs[r], b.runs[r+1]
		size += int(off[rows[j-1]+1] - off[rows[i]])
	}
	offBuf := memory.NewResizableBuffer(b.alloc)
	offBuf.Resize((n + 1) * 4)
	offs := arrow.Int32Traits.CastFromBytes(offBuf.Bytes())
	dataBuf := memory.NewResizableBuffer(b.alloc)
	dataBuf.Resize(size)
	dst := dataBuf.Bytes()
	pos := int32(0)
	offs[0] = 0
	for r := 0; r+1 < len(b.runs); r++ {
		i, j := b.runs[r], b.runs[r+1]
		base := off[rows[i]]
		pos += int32(copy(dst[pos:], data[base:off[rows[j-1]+1]]))
		shift := offs[i] - base
		for k := i; k < j; k++ {
			offs[k+1] = off[rows[k]+1] + shift
		}
	}
	arr := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, offBuf, dataBuf}, nil, 0, 0)
	offBuf.Release()
	dataBuf.Release()
	defer arr.Release()
	return array.MakeFromData(arr)
}
