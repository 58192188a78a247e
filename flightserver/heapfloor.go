package flightserver

import "sync"

// RecommendedHeapFloor is the heap floor tsflight serve runs with (see
// SetHeapFloor): 64 MiB.
//
// A server that takes small appends all day has a small live heap (a few
// MiB: table states, coverage) and allocates about 1.4 MiB per 100-row
// DoPut. Go starts a collection when the heap has grown by GOGC percent of
// what was live after the last one, and never below 4 MiB × GOGC/100, so
// with RecommendedGCPercent it collected every one or two puts, and the
// collector's fixed cost per cycle (stacks, globals, sweeping) was a
// third of the server's CPU. With a 64 MiB floor it collects every few
// dozen puts: a 100-row DoPut's p50 went from 8.9-12.1 ms to 6.5-6.9 ms
// (BenchmarkFlightSmallPut, same run, same machine). The price is the
// garbage that builds up between the rarer collections: a 200,000-row
// DoPut's server peaked at 189-200 MiB RSS instead of 161-169 MiB, at the
// same speed (BenchmarkFlightDoPut).
const RecommendedHeapFloor = 64 << 20

var heapFloor struct {
	sync.Mutex
	ballast []byte
}

// SetHeapFloor makes the garbage collector treat n more bytes as live, so
// that collections start only once the heap has grown by GOGC percent of
// at least n; 0 removes the floor. The floor is one pointer-free
// allocation the program never touches: the collector does not scan it,
// and the operating system does not back its pages with memory, so it
// costs address space, not RSS. It counts against a soft memory limit
// (debug.SetMemoryLimit, serve --memory-limit), which should leave room
// for it.
func SetHeapFloor(n int64) {
	heapFloor.Lock()
	defer heapFloor.Unlock()
	heapFloor.ballast = nil
	if n > 0 {
		heapFloor.ballast = make([]byte, n)
	}
}
