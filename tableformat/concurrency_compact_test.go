package tableformat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// concurrencyDuration is how long TestConcurrentAppendsCompactionsScans
// appends: 2 s, or TSFLIGHT_CONCURRENCY_DURATION (a Go duration) for a
// longer run.
func concurrencyDuration(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("TSFLIGHT_CONCURRENCY_DURATION")
	if s == "" {
		return 2 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("TSFLIGHT_CONCURRENCY_DURATION=%q is not a positive duration", s)
	}
	return d
}

// scanSeen is what one scan read: the version its state was at and the
// batches it held (each whole, checked while scanning).
type scanSeen struct {
	version uint64
	pinned  bool
	batches []int64
}

// TestConcurrentAppendsCompactionsScans: goroutines append small batches
// through one handle (its appends may be grouped into one commit) and
// through a second handle of the same table (whose commits race the
// first's through the log), one loop compacts through the first handle
// over and over, and scanners read the newest state and pinned older ones
// (StateAt) of a third handle. No append may fail (compaction must never
// be in an append's way); every scan must hold each batch of its version
// whole and exactly once and as many rows as its state's segments say, and
// (checked at the end, once every append's version is known) exactly the
// batches acknowledged at or before its version; at the end every
// acknowledged batch is in the table once, the table checks clean and its
// coverage is exactly its rows. All Arrow memory is returned. It runs for
// about concurrencyDuration (and until a compaction has committed).
func TestConcurrentAppendsCompactionsScans(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	a := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: crashIndex()}, nil)
	// The first append adopts the schema; it is batch 0.
	res0, err := appendCrashBatch(ctx, a, mem, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, storage.Local(dir), nil)
	reader := mustOpen(t, storage.Local(dir), nil)

	const writersA, writersB, scanners = 3, 2, 3
	const writers = writersA + writersB
	// Each writer appends at least minAppends batches and goes on until
	// the duration has passed and a compaction has committed (at most ten
	// times the duration: on a machine too loaded for one, the test
	// fails below).
	const minAppends = 4
	duration := concurrencyDuration(t)
	start := time.Now()
	stop, hardStop := start.Add(duration), start.Add(10*duration)
	var compactions atomic.Int64
	more := func(seq int64) bool {
		now := time.Now()
		return now.Before(hardStop) && (seq < minAppends || now.Before(stop) || compactions.Load() == 0)
	}

	var (
		mu       sync.Mutex
		acked    = map[int64]uint64{0: res0.Version} // batch -> version
		failures []string
		scans    []scanSeen
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var appendsA, appendsB, grouped, retries atomic.Int64 // grouped: appends committed with others
	var writing sync.WaitGroup
	for w := range writers {
		tb, handle, count := a, "first", &appendsA
		if w >= writersA {
			tb, handle, count = b, "second", &appendsB
		}
		writing.Add(1)
		go func() {
			defer writing.Done()
			// Batch ids 1+w, 1+w+writers, …: the writers' time ranges
			// interleave and never overlap.
			for seq := int64(0); more(seq); seq++ {
				id := 1 + int64(w) + seq*writers
				res, err := appendCrashBatch(ctx, tb, mem, id)
				if err != nil {
					fail("append of batch %d through the %s handle failed: %v", id, handle, err)
					return
				}
				count.Add(1)
				retries.Add(int64(res.Retries))
				if res.Grouped > 1 {
					grouped.Add(1)
				}
				mu.Lock()
				acked[id] = res.Version
				mu.Unlock()
			}
		}()
	}

	var background sync.WaitGroup
	done := make(chan struct{})
	var compactRetries, dropped atomic.Int64
	background.Add(1)
	go func() {
		defer background.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			o := DefaultCompactOptions()
			o.Alloc = mem
			rep, err := a.Compact(ctx, o)
			if err != nil {
				fail("compaction: %v", err)
				return
			}
			if !rep.NoOp {
				compactions.Add(1)
			}
			compactRetries.Add(int64(rep.Retries))
			dropped.Add(int64(rep.DroppedGroups))
		}
	}()
	var pinnedScans, newestScans atomic.Int64
	for s := range scanners {
		background.Add(1)
		go func() {
			defer background.Done()
			rng := rand.New(rand.NewPCG(uint64(s), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-done:
					return
				default:
				}
				cur, err := reader.Refresh(ctx)
				if err != nil {
					fail("refresh: %v", err)
					return
				}
				st, pinned := cur, false
				if s > 0 && cur.Version > 2 && rng.IntN(2) == 0 {
					// A pinned older version (all are retained: the
					// default window is 7 days).
					v := 2 + rng.Uint64N(cur.Version-2)
					if st, err = reader.StateAt(ctx, v); err != nil {
						fail("StateAt(%d) at version %d: %v", v, cur.Version, err)
						return
					}
					pinned = true
				}
				counts, err := batchCountsAt(t, ctx, reader, st, mem)
				if err != nil {
					fail("scan of version %d: %v", st.Version, err)
					return
				}
				rec := scanSeen{version: st.Version, pinned: pinned}
				total := 0
				for id, n := range counts {
					if n != crashRows {
						fail("scan of version %d: batch %d has %d rows, want %d", st.Version, id, n, crashRows)
					}
					total += n
					rec.batches = append(rec.batches, id)
				}
				if uint64(total) != st.RowCount() {
					fail("scan of version %d read %d rows, its segments hold %d", st.Version, total, st.RowCount())
				}
				slices.Sort(rec.batches)
				if pinned {
					pinnedScans.Add(1)
				} else {
					newestScans.Add(1)
				}
				mu.Lock()
				scans = append(scans, rec)
				mu.Unlock()
			}
		}()
	}

	writing.Wait()
	close(done)
	background.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every scan held exactly the batches acknowledged at or before its
	// version.
	for _, rec := range scans {
		var want []int64
		for id, v := range acked {
			if v <= rec.version {
				want = append(want, id)
			}
		}
		slices.Sort(want)
		if !slices.Equal(rec.batches, want) {
			t.Errorf("a scan of version %d (pinned %v) read %d batches, the appends acknowledged by then %d", rec.version, rec.pinned, len(rec.batches), len(want))
		}
	}

	// The end: one more compaction, then every acknowledged batch once,
	// through a new handle too, and coverage equal to the rows.
	o := DefaultCompactOptions()
	o.Alloc = mem
	if _, err := a.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	fresh := mustOpen(t, storage.Local(dir), nil)
	for _, tb := range []*Table{a, fresh} {
		if _, err := tb.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		counts, err := batchCounts(t, ctx, tb, mem)
		if err != nil {
			t.Fatal(err)
		}
		tally := &crashTally{}
		if extra := checkBatches(t, tally, counts, acked); len(extra) > 0 || tally.lost+tally.dups+tally.partial > 0 {
			t.Errorf("version %d: %d lost, %d duplicated, %d partial, batches nobody appended %v", tb.State().Version, tally.lost, tally.dups, tally.partial, extra)
		}
		if err := checkCrashCoverage(t, ctx, tb, len(acked)*crashRows); err != nil {
			t.Errorf("version %d: %v", tb.State().Version, err)
		}
	}
	t.Logf("%s: %d appends through the first handle, %d through the second (%d committed with others, %d retries); %d compactions committed (%d retries, %d groups dropped); %d scans of the newest version, %d of pinned older ones; %d versions",
		time.Since(start).Round(time.Millisecond), appendsA.Load(), appendsB.Load(), grouped.Load(), retries.Load(), compactions.Load(), compactRetries.Load(), dropped.Load(),
		newestScans.Load(), pinnedScans.Load(), fresh.State().Version)
	if compactions.Load() == 0 || appendsA.Load() == 0 || appendsB.Load() == 0 || pinnedScans.Load() == 0 || newestScans.Load() == 0 {
		t.Fatal("the trial did not exercise every path: no compaction, no append through a handle, or no scan of a kind")
	}
}
