package coverage

// This file reads the portable 64-bit Roaring serialization (the
// Rust RoaringTreemap / Go roaring64 format):
//
//	partition count        u64 LE
//	per partition:         high 32 bits u32 LE, then a 32-bit Roaring bitmap
//
// and the 32-bit bitmap of the Roaring format specification: cookie 12346
// (u32) plus a u32 container count, or cookie 12347 with count-1 in the high
// 16 bits followed by a bitset of run containers; then (key u16, card-1 u16)
// per container; then u32 offsets (always for 12346, from 4 containers on
// for 12347); then the containers: arrays of u16, 1024 u64 words, or a u16
// run count followed by (start, length-1) u16 pairs.
//
// The writer (roaring_write.go) does not use roaring64's own serializer
// for the output because the reference picks container types by rules of
// its own (see container.choice); it serializes with roaring64 only to read
// a bitmap's contents container by container.

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

const (
	cookieNoRuns = 12346
	cookieRuns   = 12347
	arrayLimit   = 4096 // largest array container
	bitmapWords  = 1024
	bitmapBytes  = bitmapWords * 8
)

type containerType uint8

const (
	ctArray containerType = iota
	ctBitmap
	ctRun
)

// interval is an inclusive run [start, last] inside one container.
type interval struct{ start, last uint16 }

// container is one 2^16 block of a 32-bit bitmap, decoded into its stored
// representation. Exactly one of array, words or runs is set.
type container struct {
	key   uint16
	card  int // 1..65536
	array []uint16
	words []uint64
	runs  []interval
}

// layout selects how containers are written.
type layout uint8

const (
	// layoutGlobal: arrays up to 4096 values, bitmaps above, no runs.
	layoutGlobal layout = iota
	// layoutEntity: the reference's canonical entity form.
	layoutEntity
	// layoutNative: each container as it was read, for loading into
	// roaring64 with memory proportional to the input.
	layoutNative
)

type partition struct {
	key        uint32
	containers []container
}

// reader is a bounds-checked cursor over untrusted input. It never panics
// and never allocates more than the bytes that remain.
type reader struct {
	b   []byte
	off int
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) fail(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrMalformed, r.off, fmt.Sprintf(format, args...))
}

func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || n > r.remaining() {
		return nil, r.fail("truncated: need %d bytes, %d left", n, r.remaining())
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

// fixedInt reads an n-byte integer that get decodes.
func fixedInt[T any](r *reader, n int, get func([]byte) T) (T, error) {
	p, err := r.take(n)
	if err != nil {
		var zero T
		return zero, err
	}
	return get(p), nil
}

func (r *reader) u8() (uint8, error) {
	return fixedInt(r, 1, func(p []byte) uint8 { return p[0] })
}

func (r *reader) le16() (uint16, error) { return fixedInt(r, 2, binary.LittleEndian.Uint16) }

func (r *reader) le32() (uint32, error) { return fixedInt(r, 4, binary.LittleEndian.Uint32) }

func (r *reader) le64() (uint64, error) { return fixedInt(r, 8, binary.LittleEndian.Uint64) }

func (r *reader) be32() (uint32, error) { return fixedInt(r, 4, binary.BigEndian.Uint32) }

func (r *reader) be64() (uint64, error) { return fixedInt(r, 8, binary.BigEndian.Uint64) }

// lengthPrefixed reads a big-endian 64-bit length and then that many
// bytes; what names the length in the error when fewer are left.
func (r *reader) lengthPrefixed(what string) ([]byte, error) {
	n, err := r.be64()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.remaining()) {
		return nil, r.fail("%s length %d exceeds the %d bytes left", what, n, r.remaining())
	}
	return r.take(int(n))
}

// minPartitionBytes is the smallest serialized partition: a key and an
// empty 12346 bitmap (cookie and zero count).
const minPartitionBytes = 4 + 8

// parseTreemap reads one complete 64-bit bitmap that must span all of data.
// Partition keys must be strictly increasing; empty partitions are accepted
// and dropped.
func parseTreemap(data []byte) ([]partition, error) {
	r := &reader{b: data}
	n, err := r.le64()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.remaining()/minPartitionBytes) {
		return nil, r.fail("partition count %d exceeds what %d bytes can hold", n, r.remaining())
	}
	parts := make([]partition, 0, n)
	var prev uint32
	for i := range n {
		key, err := r.le32()
		if err != nil {
			return nil, err
		}
		if i > 0 && key <= prev {
			return nil, r.fail("partition keys not strictly increasing (%#x after %#x)", key, prev)
		}
		prev = key
		cs, err := parseBitmap32(r)
		if err != nil {
			return nil, err
		}
		if len(cs) > 0 {
			parts = append(parts, partition{key: key, containers: cs})
		}
	}
	if r.remaining() != 0 {
		return nil, r.fail("%d trailing bytes", r.remaining())
	}
	return parts, nil
}

// parseBitmap32 reads one 32-bit Roaring bitmap and validates it the way
// the reference does (sorted keys, sorted arrays, bitmap popcount equal to
// the declared cardinality, sorted non-adjacent runs), and additionally
// requires a run container's declared cardinality to match its runs.
// Offsets are read and ignored, as the reference does.
func parseBitmap32(r *reader) ([]container, error) {
	cookie, err := r.le32()
	if err != nil {
		return nil, err
	}
	var n int
	var runFlags []byte
	switch {
	case cookie == cookieNoRuns:
		c, err := r.le32()
		if err != nil {
			return nil, err
		}
		if c > 1<<16 {
			return nil, r.fail("container count %d exceeds 65536", c)
		}
		n = int(c)
	case cookie&0xFFFF == cookieRuns:
		n = int(cookie>>16) + 1
		if runFlags, err = r.take((n + 7) / 8); err != nil {
			return nil, err
		}
	default:
		return nil, r.fail("unknown roaring cookie %#x", cookie)
	}
	hasOffsets := runFlags == nil || n >= 4
	headerLen := 4 * n
	if hasOffsets {
		headerLen *= 2
	}
	// Every container has at least 2 data bytes, so this bounds n by the
	// input before anything is allocated.
	if headerLen+2*n > r.remaining() {
		return nil, r.fail("truncated: %d containers need at least %d bytes, %d left", n, headerLen+2*n, r.remaining())
	}
	desc, _ := r.take(4 * n)
	if hasOffsets {
		_, _ = r.take(4 * n)
	}
	cs := make([]container, n)
	for i := range cs {
		c := &cs[i]
		c.key = binary.LittleEndian.Uint16(desc[4*i:])
		c.card = int(binary.LittleEndian.Uint16(desc[4*i+2:])) + 1
		if i > 0 && c.key <= cs[i-1].key {
			return nil, r.fail("container keys not strictly increasing (%#x after %#x)", c.key, cs[i-1].key)
		}
		isRun := runFlags != nil && runFlags[i/8]&(1<<(i%8)) != 0
		switch {
		case isRun:
			err = parseRuns(r, c)
		case c.card <= arrayLimit:
			err = parseArray(r, c)
		default:
			err = parseWords(r, c)
		}
		if err != nil {
			return nil, err
		}
	}
	return cs, nil
}

func parseRuns(r *reader, c *container) error {
	nr, err := r.le16()
	if err != nil {
		return err
	}
	if nr == 0 {
		return r.fail("run container with no runs")
	}
	p, err := r.take(4 * int(nr))
	if err != nil {
		return err
	}
	c.runs = make([]interval, nr)
	total := 0
	for j := range c.runs {
		start := binary.LittleEndian.Uint16(p[4*j:])
		length := binary.LittleEndian.Uint16(p[4*j+2:])
		if uint32(start)+uint32(length) > 0xFFFF {
			return r.fail("run [%d, +%d] passes the container end", start, length)
		}
		if j > 0 && uint32(start) <= uint32(c.runs[j-1].last)+1 {
			return r.fail("runs overlap, touch or are unsorted")
		}
		c.runs[j] = interval{start, start + length}
		total += int(length) + 1
	}
	if total != c.card {
		return r.fail("run container declares %d values but holds %d", c.card, total)
	}
	return nil
}

func parseArray(r *reader, c *container) error {
	p, err := r.take(2 * c.card)
	if err != nil {
		return err
	}
	c.array = make([]uint16, c.card)
	for j := range c.array {
		c.array[j] = binary.LittleEndian.Uint16(p[2*j:])
		if j > 0 && c.array[j] <= c.array[j-1] {
			return r.fail("array container values not strictly increasing")
		}
	}
	return nil
}

func parseWords(r *reader, c *container) error {
	p, err := r.take(bitmapBytes)
	if err != nil {
		return err
	}
	c.words = make([]uint64, bitmapWords)
	pop := 0
	for j := range c.words {
		w := binary.LittleEndian.Uint64(p[8*j:])
		c.words[j] = w
		pop += bits.OnesCount64(w)
	}
	if pop != c.card {
		return r.fail("bitmap container declares %d values but holds %d", c.card, pop)
	}
	return nil
}
