package flightserver

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestSetHeapFloor: with a floor the collector's heap goal is above it;
// without, it falls back to what the live heap asks for.
func TestSetHeapFloor(t *testing.T) {
	const floor = 256 << 20
	t.Cleanup(func() { SetHeapFloor(0) })
	SetHeapFloor(floor)
	runtime.GC()
	if g := heapGoal(); g < floor {
		t.Fatalf("heap goal %d with a %d-byte floor", g, floor)
	}
	SetHeapFloor(0)
	runtime.GC()
	if g := heapGoal(); g >= floor {
		t.Fatalf("heap goal %d after the floor was removed", g)
	}
}
