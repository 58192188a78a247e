package coverage

// Writing the portable 64-bit Roaring serialization (see roaring_read.go
// for the layout), with the container types the reference would choose.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// shape summarizes a container's contents: the number of maximal runs and
// the length of the first one.
func (c *container) shape() (runs, firstRun int) {
	switch {
	case c.runs != nil:
		return len(c.runs), int(c.runs[0].last-c.runs[0].start) + 1
	case c.array != nil:
		runs = 1
		firstRun = 1
		counting := true
		for j := 1; j < len(c.array); j++ {
			if c.array[j] != c.array[j-1]+1 {
				runs++
				counting = false
			} else if counting {
				firstRun++
			}
		}
		return runs, firstRun
	default:
		var carry uint64 // top bit of the previous word
		for _, w := range c.words {
			runs += bits.OnesCount64(w &^ (w<<1 | carry))
			carry = w >> 63
		}
		return runs, c.firstRunFromWords()
	}
}

func (c *container) firstRunFromWords() int {
	start := nextBit(c.words, 0, false)
	if start < 0 {
		return 0
	}
	end := nextBit(c.words, start, true)
	if end < 0 {
		end = 1 << 16
	}
	return end - start
}

// choice decides how a container is written.
//
// Global coverage is written as the reference builds it, one id at a time:
// arrays up to 4096 values, bitmaps above, never runs.
//
// Entity coverage is canonicalised by the reference: it re-inserts every
// maximal run with a range insert and then optimizes. A container whose
// first run has at least 3 values therefore starts as a run container and
// stays one when that is no larger than the best alternative; otherwise it
// starts as an array (becoming a bitmap above 4096 values) and turns into a
// run container only when that is strictly smaller. The two paths differ
// only on ties (cardinality = 2*runs + 1).
func (c *container) choice(l layout) containerType {
	switch {
	case l == layoutNative && c.runs != nil:
		return ctRun
	case l == layoutNative && c.words != nil:
		return ctBitmap
	case l == layoutNative:
		return ctArray
	}
	plain := ctArray
	if c.card > arrayLimit {
		plain = ctBitmap
	}
	if l == layoutGlobal {
		return plain
	}
	runs, first := c.shape()
	runSize := 2 + 4*runs
	best := min(2*c.card, bitmapBytes)
	if runSize < best || (first >= 3 && runSize == best) {
		return ctRun
	}
	return plain
}

// appendBitmap32 writes a partition's containers as a 32-bit bitmap.
func appendBitmap32(out []byte, cs []container, l layout) []byte {
	types := make([]containerType, len(cs))
	anyRun := false
	for i := range cs {
		types[i] = cs[i].choice(l)
		anyRun = anyRun || types[i] == ctRun
	}
	n := len(cs)
	hasOffsets := true
	header := 8 + 8*n
	if anyRun {
		out = binary.LittleEndian.AppendUint32(out, cookieRuns|uint32(n-1)<<16)
		flags := make([]byte, (n+7)/8)
		for i, t := range types {
			if t == ctRun {
				flags[i/8] |= 1 << (i % 8)
			}
		}
		out = append(out, flags...)
		hasOffsets = n >= 4
		header = 4 + len(flags) + 4*n
		if hasOffsets {
			header += 4 * n
		}
	} else {
		out = binary.LittleEndian.AppendUint32(out, cookieNoRuns)
		out = binary.LittleEndian.AppendUint32(out, uint32(n))
	}
	for i := range cs {
		out = binary.LittleEndian.AppendUint16(out, cs[i].key)
		out = binary.LittleEndian.AppendUint16(out, uint16(cs[i].card-1))
	}
	if hasOffsets {
		off := header
		for i := range cs {
			out = binary.LittleEndian.AppendUint32(out, uint32(off))
			off += cs[i].size(types[i])
		}
	}
	for i := range cs {
		out = cs[i].appendAs(out, types[i])
	}
	return out
}

func (c *container) size(t containerType) int {
	switch t {
	case ctArray:
		return 2 * c.card
	case ctBitmap:
		return bitmapBytes
	default:
		runs, _ := c.shape()
		return 2 + 4*runs
	}
}

// forEachRun calls f for every maximal run of the container in order.
func (c *container) forEachRun(f func(start, last uint16)) {
	switch {
	case c.runs != nil:
		for _, iv := range c.runs {
			f(iv.start, iv.last)
		}
	case c.array != nil:
		start := c.array[0]
		for j := 1; j < len(c.array); j++ {
			if c.array[j] != c.array[j-1]+1 {
				f(start, c.array[j-1])
				start = c.array[j]
			}
		}
		f(start, c.array[len(c.array)-1])
	default:
		for pos := 0; pos < 1<<16; {
			start := nextBit(c.words, pos, false)
			if start < 0 {
				return
			}
			end := nextBit(c.words, start, true) // first clear bit, or -1
			if end < 0 {
				end = 1 << 16
			}
			f(uint16(start), uint16(end-1))
			pos = end
		}
	}
}

// nextBit returns the position of the first set (clear=false) or clear
// (clear=true) bit at or after pos, or -1 if there is none.
func nextBit(words []uint64, pos int, clear bool) int {
	for j := pos / 64; j < len(words); j++ {
		w := words[j]
		if clear {
			w = ^w
		}
		if j == pos/64 {
			w &= ^uint64(0) << uint(pos%64)
		}
		if w != 0 {
			return j*64 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

func (c *container) appendAs(out []byte, t containerType) []byte {
	switch t {
	case ctArray:
		if c.array != nil {
			for _, v := range c.array {
				out = binary.LittleEndian.AppendUint16(out, v)
			}
			return out
		}
		c.forEachRun(func(start, last uint16) {
			for v := uint32(start); v <= uint32(last); v++ {
				out = binary.LittleEndian.AppendUint16(out, uint16(v))
			}
		})
		return out
	case ctBitmap:
		if c.words != nil {
			for _, w := range c.words {
				out = binary.LittleEndian.AppendUint64(out, w)
			}
			return out
		}
		var words [bitmapWords]uint64
		c.forEachRun(func(start, last uint16) { setBits(words[:], int(start), int(last)) })
		for _, w := range words {
			out = binary.LittleEndian.AppendUint64(out, w)
		}
		return out
	default:
		runs, _ := c.shape()
		out = binary.LittleEndian.AppendUint16(out, uint16(runs))
		c.forEachRun(func(start, last uint16) {
			out = binary.LittleEndian.AppendUint16(out, start)
			out = binary.LittleEndian.AppendUint16(out, last-start)
		})
		return out
	}
}

// setBits sets bits [from, to] of words.
func setBits(words []uint64, from, to int) {
	for from <= to {
		j := from / 64
		lo := from % 64
		hi := 63
		if to/64 == j {
			hi = to % 64
		}
		mask := (^uint64(0) >> uint(63-hi+lo)) << uint(lo)
		words[j] |= mask
		from = j*64 + hi + 1
	}
}

// appendTreemap writes partitions as a 64-bit bitmap.
func appendTreemap(out []byte, parts []partition, l layout) []byte {
	out = binary.LittleEndian.AppendUint64(out, uint64(len(parts)))
	for _, p := range parts {
		out = binary.LittleEndian.AppendUint32(out, p.key)
		out = appendBitmap32(out, p.containers, l)
	}
	return out
}

// partitionsOf returns the contents of bm container by container, using
// roaring64's serializer only as an efficient way to read them.
func partitionsOf(bm *roaring64.Bitmap) ([]partition, error) {
	var buf bytes.Buffer
	if _, err := bm.WriteTo(&buf); err != nil {
		return nil, err
	}
	parts, err := parseTreemap(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("coverage: reading roaring64 output: %w", err)
	}
	return parts, nil
}

// bitmapOf builds a roaring64 bitmap from validated partitions by writing
// them back in the layout they were read in and loading that, so memory
// stays proportional to the input.
func bitmapOf(parts []partition) (*roaring64.Bitmap, error) {
	bm := roaring64.New()
	if len(parts) == 0 {
		return bm, nil
	}
	data := appendTreemap(nil, parts, layoutNative)
	if _, err := bm.ReadFrom(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("coverage: loading bitmap: %w", err)
	}
	return bm, nil
}
