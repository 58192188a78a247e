package tableformat

import (
	"math/bits"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ScanAllocator returns the allocator scans use when ScanOptions.Alloc is
// nil: Go memory recycled through a bounded pool. A consumer that builds
// new batches from scan output (a server merging short batches) can use it
// too, so that their buffers are recycled as well.
func ScanAllocator() memory.Allocator { return scanPool }

// scanPool is the allocator of scans that name none. A scan allocates and
// frees a few batches' worth of memory per batch it returns; with the plain
// Go allocator that churn makes the heap, and so the RSS, grow to about
// twice the data in flight between collections, and with a sync.Pool every
// collection empties the pool and the churn starts again. Recycling through
// free lists the collector does not empty keeps a long scan's heap near its
// data in flight plus the pool.
var scanPool = newPoolAllocator(defaultPoolBytes)

func init() { scanPool.armTrim() }

const (
	poolMinBytes = 4 << 10   // smaller buffers come from the Go heap
	poolMaxBytes = 128 << 20 // so do larger ones
	// Each power of two is split into poolSteps size classes (2^k × 5/4,
	// 6/4, 7/4, 8/4), so that a buffer just over a power of two (Arrow
	// pads to 64 bytes: 256 KiB of values take 256 KiB + 64) wastes at
	// most a quarter, not half, of its class.
	poolSteps   = 4
	poolClasses = 28 * poolSteps

	// defaultPoolBytes bounds the free memory the scan pool keeps.
	defaultPoolBytes = 64 << 20
)

// poolAllocator is a memory.Allocator whose buffers of 4 KiB to 128 MiB
// come from, and return to, one free list per size class (four per power
// of two). The free
// lists together hold at most limit bytes: a freed buffer that does not fit
// evicts buffers of the fullest other size, or is left to the garbage
// collector. A pool that served no allocation between two garbage
// collections empties itself, so an idle server gives its memory back.
// Memory it hands out is zeroed, as the Go allocator's is.
type poolAllocator struct {
	mu     sync.Mutex
	free   [poolClasses][][]byte
	bytes  [poolClasses]int // bytes in each free list
	pooled int              // bytes in all free lists
	limit  int
	hits   int // allocations served from the pool since the last trim
}

// newPoolAllocator returns a pool of at most limit free bytes; armTrim
// makes garbage collections trim it.
func newPoolAllocator(limit int) *poolAllocator { return &poolAllocator{limit: limit} }

// gcSentinel is an object whose collection tells the pool that a garbage
// collection ran (it holds a pointer so that it is never batched with other
// tiny objects).
type gcSentinel struct{ _ *int }

// armTrim has the next garbage collection trim the pool.
func (a *poolAllocator) armTrim() {
	runtime.AddCleanup(&gcSentinel{}, func(a *poolAllocator) {
		a.trim()
		a.armTrim()
	}, a)
}

// trim empties the pool if no allocation used it since the last trim.
func (a *poolAllocator) trim() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hits == 0 {
		for c := range a.free {
			clear(a.free[c])
			a.free[c] = a.free[c][:0]
			a.bytes[c] = 0
		}
		a.pooled = 0
	}
	a.hits = 0
}

// poolClass returns the class of buffers of size bytes (poolMinBytes <
// size <= poolMaxBytes) and the capacity of its buffers.
func poolClass(size int) (class, capacity int) {
	k := bits.Len(uint(size-1)) - 1 // 2^k < size <= 2^(k+1)
	step := 1 << k / poolSteps
	q := (size - 1<<k + step - 1) / step // 1..poolSteps
	return k*poolSteps + q - 1, 1<<k + q*step
}

// poolSize reports whether a pool buffer may be this size.
func poolSize(size int) bool { return size > poolMinBytes && size <= poolMaxBytes }

// take pops a free buffer of class c, or returns nil.
func (a *poolAllocator) take(c int) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.free[c])
	if n == 0 {
		return nil
	}
	b := a.free[c][n-1]
	a.free[c][n-1] = nil
	a.free[c] = a.free[c][:n-1]
	a.bytes[c] -= cap(b)
	a.pooled -= cap(b)
	a.hits++
	return b
}

func (a *poolAllocator) Allocate(size int) []byte {
	if !poolSize(size) {
		return make([]byte, size)
	}
	c, capacity := poolClass(size)
	if b := a.take(c); b != nil {
		b = b[:size]
		clear(b)
		return b
	}
	return make([]byte, size, capacity)
}

// allocateUninit is Allocate without clearing recycled memory, for
// buffers the caller overwrites entirely.
func (a *poolAllocator) allocateUninit(size int) []byte {
	if !poolSize(size) {
		return make([]byte, size)
	}
	c, capacity := poolClass(size)
	if b := a.take(c); b != nil {
		return b[:size]
	}
	return make([]byte, size, capacity)
}

func (a *poolAllocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	// Only the bytes past the old contents need clearing (a growing
	// dictionary encoder's index buffer cleared whole each time it grew).
	nb := a.allocateUninit(size)
	clear(nb[copy(nb, b):])
	a.Free(b)
	return nb
}

func (a *poolAllocator) Free(b []byte) {
	n := cap(b)
	if !poolSize(n) || n > a.limit {
		return
	}
	c, capacity := poolClass(n)
	if capacity != n { // not one of ours
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.pooled+n > a.limit {
		// Evict from the fullest other class; give up if only this
		// class holds memory.
		victim := -1
		for v := range a.bytes {
			if v != c && a.bytes[v] > 0 && (victim < 0 || a.bytes[v] > a.bytes[victim]) {
				victim = v
			}
		}
		if victim < 0 {
			return
		}
		last := len(a.free[victim]) - 1
		a.bytes[victim] -= cap(a.free[victim][last])
		a.pooled -= cap(a.free[victim][last])
		a.free[victim][last] = nil
		a.free[victim] = a.free[victim][:last]
	}
	a.free[c] = append(a.free[c], b[:n])
	a.bytes[c] += n
	a.pooled += n
}
