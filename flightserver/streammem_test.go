package flightserver

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat"
)

// TestStreamBudgetVictims: the streams stalled for the stall timeout are
// always picked; shorter stalls only once the first waiter has waited the
// stall timeout itself, longest first, and only until it has room.
func TestStreamBudgetVictims(t *testing.T) {
	b := newByteBudget(100, 10*time.Second, nil)
	long, mid, short := &streamMem{}, &streamMem{}, &streamMem{}
	stalled := func() []stalledStream {
		return []stalledStream{{short, 2 * time.Second, 30}, {long, 12 * time.Second, 30}, {mid, 5 * time.Second, 30}}
	}
	names := map[*streamMem]string{long: "12s", mid: "5s", short: "2s"}
	for _, tc := range []struct {
		name   string
		waited time.Duration
		want   int64
		picked []string
	}{
		{"waited less than the timeout", 3 * time.Second, 190, []string{"12s"}},
		{"waited the timeout, room after one", 10 * time.Second, 120, []string{"12s"}},
		{"waited the timeout, room after two", 10 * time.Second, 150, []string{"12s", "5s"}},
		{"waited the timeout, no room", 10 * time.Second, 500, []string{"12s", "5s", "2s"}},
	} {
		got := b.victims(stalled(), tc.waited, tc.want)
		var picked []string
		for _, s := range got {
			picked = append(picked, names[s])
		}
		if len(picked) != len(tc.picked) {
			t.Errorf("%s: picked %v, want %v", tc.name, picked, tc.picked)
			continue
		}
		for i := range picked {
			if picked[i] != tc.picked[i] {
				t.Errorf("%s: picked %v, want %v", tc.name, picked, tc.picked)
				break
			}
		}
	}
	if got := newByteBudget(100, -1, nil).victims(stalled(), time.Hour, 500); len(got) != 0 {
		t.Errorf("with eviction off %d streams were picked", len(got))
	}
}

// TestStreamBudgetReturnsMemoryWhenIdle: once the last stream of a burst
// of releaseBytes or more is gone, the memory is returned after
// releaseDelay; a smaller burst, or a stream still open, returns nothing.
func TestStreamBudgetReturnsMemoryWhenIdle(t *testing.T) {
	b := newByteBudget(-1, 0, nil)
	small := b.open(context.Background(), memory.NewGoAllocator())
	small.charge(releaseBytes / 2)
	small.charge(-releaseBytes / 2)
	small.end()
	big := b.open(context.Background(), memory.NewGoAllocator())
	big.charge(releaseBytes)
	other := b.open(context.Background(), memory.NewGoAllocator())
	big.charge(-releaseBytes)
	big.end()
	time.Sleep(releaseDelay + 500*time.Millisecond)
	if n := b.freed.Load(); n != 0 {
		t.Fatalf("memory returned %d times while a stream was open or after a small burst", n)
	}
	other.end()
	deadline := time.Now().Add(releaseDelay + 5*time.Second)
	for b.freed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := b.freed.Load(); n != 1 {
		t.Fatalf("memory returned %d times after the last stream of a %d-byte burst, want 1", n, releaseBytes)
	}
	if h := b.held.Load(); h != 0 {
		t.Fatalf("the budget holds %d bytes with no stream", h)
	}
}

// TestStreamMemAllocateUninit: memory a scan takes uninitialised through a
// stream's account is charged to the budget like any other, and its Free
// gives it back; it comes from the allocator the account wraps.
func TestStreamMemAllocateUninit(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer checked.AssertSize(t, 0)
	b := newByteBudget(-1, 0, nil)
	s := b.open(context.Background(), checked)
	defer s.end()
	buf := tableformat.AllocateUninit(s, 100_000)
	if len(buf) != 100_000 {
		t.Fatalf("AllocateUninit gave %d bytes, want 100000", len(buf))
	}
	if h := b.held.Load(); h != 100_000 {
		t.Fatalf("the budget holds %d bytes, want 100000", h)
	}
	if n := checked.CurrentAlloc(); n != 100_000 {
		t.Fatalf("the wrapped allocator holds %d bytes, want 100000", n)
	}
	s.Free(buf)
	if h := b.held.Load(); h != 0 {
		t.Fatalf("the budget holds %d bytes after Free, want 0", h)
	}
}
