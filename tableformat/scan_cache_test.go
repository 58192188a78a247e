package tableformat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// scanOrdered is what one scan returned, in order: its batches' row
// counts and its rows rendered, with the decoded-row counters.
type scanOrdered struct {
	batches []int64
	rows    []string
	decoded int64
	cached  int64
}

// cacheScan scans tb with one worker (so that the order is the scan's)
// through cache (nil: none), its output allocated from a checked
// allocator that must end at zero.
func cacheScan(t testing.TB, tb *Table, cache *ScanCache, opts ScanOptions) scanOrdered {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	opts.Alloc, opts.Cache, opts.Parallelism = mem, cache, 1
	rr, err := tb.Scan(context.Background(), nil, opts)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer rr.Release()
	var out scanOrdered
	for rr.Next() {
		rec := rr.RecordBatch()
		out.batches = append(out.batches, rec.NumRows())
		for i := 0; i < int(rec.NumRows()); i++ {
			out.rows = append(out.rows, scRenderRow(rec, i))
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	st := rr.(*scanReader).run.stats
	out.decoded, out.cached = st.rowsDecoded.Load(), st.rowsCached.Load()
	return out
}

func sameOrdered(t *testing.T, what string, got, want scanOrdered) {
	t.Helper()
	if !slices.Equal(got.batches, want.batches) {
		t.Fatalf("%s: batches %v, uncached %v", what, got.batches, want.batches)
	}
	if !slices.Equal(got.rows, want.rows) {
		t.Fatalf("%s: %d rows differ from the uncached scan's %d (first %q / %q)", what, len(got.rows), len(want.rows), first(got.rows), first(want.rows))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// cacheFixture is a host table of three segments of 3,000 rows in row
// groups of 1,000 (hosts h0..h4, v null every 7th row), and a later
// segment after a score column was added.
func cacheFixture(t *testing.T) *scanFixture {
	t.Helper()
	f := newScanFixture(t, scHostIndex(), scHostSchema(Millis))
	for s := range 3 {
		const n = 3000
		ts, hosts, vs := make([]int64, n), make([]string, n), make([]*int64, n)
		for i := range n {
			ts[i] = int64(s*n+i) * 1000
			hosts[i] = fmt.Sprintf("h%d", i%5)
			if i%7 != 0 {
				v := int64(s*n + i)
				vs[i] = &v
			}
		}
		f.addSegment(scMixed, 1000, scanRecord(t, f.canon, ts, hosts, vs))
	}
	return f
}

// The cached answers of many scan shapes are the uncached ones, batch for
// batch and row for row; the second read of a whole-row-group scan decodes
// nothing; partial reads neither fill nor use the cache; columns added
// later read null; everything the cache allocated is freed by Close.
func TestScanCacheAnswersAsDecoded(t *testing.T) {
	f := cacheFixture(t)
	f.addColumns(Field{Name: "score", Type: DataType{Kind: TypeFloat64}, Nullable: true})
	f.addSegment(scMixed, 0, scanJSONRecord(t, f.canon, `[
		{"ts": 9000000, "host": "h1", "v": 1, "score": 0.5},
		{"ts": 9001000, "host": "h2", "v": null, "score": null}]`))

	cacheMem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cache := NewScanCache(64<<20, cacheMem)
	// cached is the rows the second read takes from the cache (all the
	// rows of the segments it reads whole that hold a read column),
	// decodes whether it decodes any rows.
	shapes := []struct {
		name    string
		opts    ScanOptions
		cached  int64
		decodes bool
	}{
		{"all", ScanOptions{}, 9002, false},
		{"projected", ScanOptions{Columns: []string{"v", "host"}}, 9002, false},
		// The older segments lack the column: they are not cached, and
		// reading them decodes the index column for the row counts.
		{"added column only", ScanOptions{Columns: []string{"score"}}, 2, true},
		{"small batches", ScanOptions{BatchRows: 700}, 9002, false},
		// The last segment (hosts h1, h2) is pruned by its statistics.
		{"entity", ScanOptions{Entities: map[string]EntityValue{"host": scStr("h3")}}, 9000, false},
		// Row groups 1-2 of the first segment and 0-1 of the second.
		{"range on row-group bounds", ScanOptions{Start: scTv(time.UnixMilli(1000 * 1000)), End: scTv(time.UnixMilli(5000 * 1000))}, 4000, false},
		{"range inside row groups", ScanOptions{Start: scTv(time.UnixMilli(1500 * 1000)), End: scTv(time.UnixMilli(4321 * 1000))}, 0, true},
	}
	for _, sh := range shapes {
		want := cacheScan(t, f.tb, nil, sh.opts)
		if len(want.rows) == 0 {
			t.Fatalf("%s: the uncached scan returned nothing", sh.name)
		}
		fill := cacheScan(t, f.tb, cache, sh.opts)
		sameOrdered(t, sh.name+" (filling)", fill, want)
		hit := cacheScan(t, f.tb, cache, sh.opts)
		sameOrdered(t, sh.name+" (cached)", hit, want)
		if hit.cached != sh.cached || (hit.decoded > 0) != sh.decodes {
			t.Fatalf("%s: the second read took %d rows from the cache (want %d) and decoded %d", sh.name, hit.cached, sh.cached, hit.decoded)
		}
	}
	st := cache.Stats()
	if st.Bytes <= 0 || st.Allocated < st.Bytes || st.Evictions != 0 || st.Hits == 0 {
		t.Fatalf("cache stats %+v", st)
	}
	cache.Close()
	if st := cache.Stats(); st.Entries != 0 || st.Bytes != 0 || st.Allocated != 0 {
		t.Fatalf("after Close: %+v", st)
	}
	cacheMem.AssertSize(t, 0)
	// A closed cache keeps nothing; scans still answer.
	sameOrdered(t, "closed cache", cacheScan(t, f.tb, cache, ScanOptions{}), cacheScan(t, f.tb, nil, ScanOptions{}))
	if st := cache.Stats(); st.Entries != 0 || st.Allocated != 0 {
		t.Fatalf("a closed cache kept %+v", st)
	}
	cacheMem.AssertSize(t, 0)
}

// Under a bound smaller than the table, a table read whole again and
// again keeps the part that fit (a read never evicts what it, or a later
// read, used), the bound holds and answers stay right; a later read of
// other segments evicts the least recently used entries; a segment larger
// than the whole bound is not cached at all.
func TestScanCacheEvictsAndRejects(t *testing.T) {
	f := cacheFixture(t)
	want := cacheScan(t, f.tb, nil, ScanOptions{})
	cacheMem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	// Measure one segment's entries with a roomy cache.
	probe := NewScanCache(64<<20, cacheMem)
	plan, err := f.tb.State().Plan(ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	segs := plan.Segments()
	cacheScan(t, f.tb, probe, ScanOptions{End: &segs[1].IndexMin}) // the first segment alone, whole
	seg := probe.Stats().Bytes
	probe.Close()
	if seg <= 0 {
		t.Fatalf("one segment cached %d bytes", seg)
	}

	small := NewScanCache(seg*3/2, cacheMem) // room for one segment of three
	for round := range 3 {
		got := cacheScan(t, f.tb, small, ScanOptions{})
		sameOrdered(t, fmt.Sprintf("round %d", round), got, want)
		if round > 0 && got.cached != 3000 {
			t.Fatalf("round %d took %d rows from the cache, want the 3,000 of the segment that fit", round, got.cached)
		}
		if st := small.Stats(); st.Bytes > seg*3/2 || st.Evictions != 0 || st.Entries != 3 {
			t.Fatalf("round %d: %+v (bound %d)", round, st, seg*3/2)
		}
	}
	if st := small.Stats(); st.Hits != 2 || st.Rejected < 4 {
		t.Fatalf("after three whole reads: %+v", st)
	}
	// A read of another segment, later: the first segment's entries go,
	// as many as make room (entries are columns, least recently used
	// first).
	other := ScanOptions{Start: &segs[2].IndexMin} // the third segment alone, whole
	cacheScan(t, f.tb, small, other)
	if got := cacheScan(t, f.tb, small, other); got.cached != 3000 {
		t.Fatalf("the second read of another segment took %d rows from the cache", got.cached)
	}
	if st := small.Stats(); st.Evictions == 0 || st.Entries < 3 || st.Bytes > seg*3/2 {
		t.Fatalf("after reading another segment: %+v", st)
	}
	small.Close()

	tiny := NewScanCache(seg/2, cacheMem)
	sameOrdered(t, "tiny", cacheScan(t, f.tb, tiny, ScanOptions{}), want)
	if st := tiny.Stats(); st.Entries != 0 || st.Rejected != 3 || st.Allocated != 0 {
		t.Fatalf("a bound below one segment: %+v", st)
	}
	tiny.Close()
	cacheMem.AssertSize(t, 0)
}

// A segment file replaced behind the log's back by one of the same size
// is read anew (its modification time differs), never from the entry of
// the old file.
func TestScanCacheMissesReplacedFile(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	seg := f.addSegment(scNA, 0, scanRecord(t, f.canon, scSeq(0, 100), scSeq(1000, 100)))
	cacheMem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cache := NewScanCache(16<<20, cacheMem)
	defer cacheMem.AssertSize(t, 0)
	defer cache.Close()
	old := cacheScan(t, f.tb, cache, ScanOptions{})
	if got := cacheScan(t, f.tb, cache, ScanOptions{}); got.cached == 0 {
		t.Fatal("the second read did not use the cache")
	}
	// Same rows and widths, other values: the same file size.
	full := filepath.Join(f.dir, filepath.FromSlash(seg.Path))
	size := f.writeParquet(seg.Path, 0, scanRecord(t, f.canon, scSeq(0, 100), scSeq(2000, 100)))
	if size != *seg.FileSize {
		t.Skipf("the rewritten file has %d bytes, not %d: the case needs equal sizes", size, *seg.FileSize)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(full, later, later); err != nil {
		t.Fatal(err)
	}
	want := cacheScan(t, f.tb, nil, ScanOptions{})
	got := cacheScan(t, f.tb, cache, ScanOptions{})
	sameOrdered(t, "replaced file", got, want)
	if slices.Equal(got.rows, old.rows) || got.cached != 0 {
		t.Fatalf("the replaced file was answered from the old file's entry")
	}
}

// holdCounter is a scan allocator that also counts what a scan holds of
// the cache's arrays (SharedHolder).
type holdCounter struct {
	*memory.CheckedAllocator
	peakGauge // what the scan holds now (cur) and at most (peak)
}

func (h *holdCounter) Hold(n int64) { h.add(n) }

// A scan whose allocator is a SharedHolder has the cached arrays it passes
// on charged while it holds them, and nothing once they are released.
func TestScanCacheChargesSharedBatches(t *testing.T) {
	f := cacheFixture(t)
	cacheMem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cache := NewScanCache(64<<20, cacheMem)
	defer cacheMem.AssertSize(t, 0)
	defer cache.Close()
	for _, pass := range []string{"filling", "cached"} {
		h := &holdCounter{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
		// Batches of 1,000 rows: every decoded batch is passed on as it is.
		rr, err := f.tb.Scan(context.Background(), nil, ScanOptions{Alloc: h, Cache: cache, Parallelism: 1, BatchRows: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var rows int64
		for rr.Next() {
			rows += rr.RecordBatch().NumRows()
			if h.cur.Load() <= 0 {
				t.Fatalf("%s: a batch of cached arrays is held, %d bytes charged", pass, h.cur.Load())
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		rr.Release()
		if rows != 9000 || h.cur.Load() != 0 || h.peak.Load() <= 0 {
			t.Fatalf("%s: %d rows, %d bytes still charged, peak %d", pass, rows, h.cur.Load(), h.peak.Load())
		}
		h.AssertSize(t, 0)
	}
}

// Readers sharing one cache at once (run with -race) all get the
// uncached answer; a scan stopped early leaves nothing behind.
func TestScanCacheConcurrentReaders(t *testing.T) {
	f := cacheFixture(t)
	want := cacheScan(t, f.tb, nil, ScanOptions{})
	sort := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	cacheMem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cache := NewScanCache(64<<20, cacheMem)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				ctx, cancel := context.WithCancel(context.Background())
				rr, err := f.tb.Scan(ctx, nil, ScanOptions{Alloc: mem, Cache: cache, Parallelism: 2})
				if err != nil {
					cancel()
					errs <- err
					return
				}
				var rows []string
				for rr.Next() {
					rec := rr.RecordBatch()
					for i := 0; i < int(rec.NumRows()); i++ {
						rows = append(rows, scRenderRow(rec, i))
					}
					if g%4 == 3 && len(rows) > 0 {
						cancel() // this reader gives up after its first batch
						break
					}
				}
				err = rr.Err()
				rr.Release()
				cancel()
				if g%4 != 3 {
					if err != nil {
						errs <- err
						return
					}
					if !slices.Equal(sort(rows), sort(want.rows)) {
						errs <- fmt.Errorf("reader %d: %d rows, want %d", g, len(rows), len(want.rows))
						return
					}
				}
				if mem.CurrentAlloc() != 0 {
					errs <- fmt.Errorf("reader %d: %d bytes of scan output not freed", g, mem.CurrentAlloc())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := cache.Stats(); st.Hits == 0 {
		t.Fatalf("no reader was served from the cache: %+v", st)
	}
	cache.Close()
	cacheMem.AssertSize(t, 0)
}

// Segments being decoded into the cache hold at most its bound together:
// a second fill that would take them over it is abandoned (and counted),
// the first still commits, and nothing is left counted as filling.
func TestScanCacheBoundsFills(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ints := func(n int) arrow.Array {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		for i := range n {
			b.Append(int64(i))
		}
		return b.NewArray()
	}
	cache := NewScanCache(10_000, mem)
	defer cache.Close()
	key := func(path string) []scanCacheKey {
		return []scanCacheKey{{file: scanCacheFile{path: path, size: 1}, groups: "0", batch: 1, column: "v", typ: "l"}}
	}
	a, b := ints(750), ints(750) // 6,000 bytes of values each
	defer a.Release()
	defer b.Release()
	f1, f2 := cache.newFill(key("one"), 0), cache.newFill(key("two"), 0)
	f1.add([]arrow.Array{a})
	f2.add([]arrow.Array{b})
	if !f2.dead || f1.dead || cache.filling.Load() != arrayBytes(a) {
		t.Fatalf("two fills of 6,000 bytes under a bound of 10,000: first dead %v, second dead %v, filling %d", f1.dead, f2.dead, cache.filling.Load())
	}
	f1.commit()
	f1.abandon() // as the deferred call after a commit: a no-op
	f2.abandon()
	if st := cache.Stats(); st.Entries != 1 || st.Rejected != 1 || cache.filling.Load() != 0 || st.Bytes != arrayBytes(a) {
		t.Fatalf("after the fills: %+v, filling %d", st, cache.filling.Load())
	}
	if chunks, ok := cache.get(key("one")); !ok || len(chunks[0]) != 1 || chunks[0][0].Len() != 750 {
		t.Fatalf("the committed fill is not served: %v", ok)
	} else {
		chunks[0][0].Release()
	}
	if _, ok := cache.get(key("two")); ok {
		t.Fatal("the abandoned fill is served")
	}
}

// Entries of one segment that disagree on its batches (which one fill
// never makes) stop the scan with an error instead of misaligned rows.
func TestScanCacheRefusesDisagreeingEntries(t *testing.T) {
	f := cacheFixture(t)
	cacheMem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cache := NewScanCache(64<<20, cacheMem)
	defer cacheMem.AssertSize(t, 0)
	defer cache.Close()
	opts := ScanOptions{Columns: []string{"host", "v"}, BatchRows: 1000} // three batches a segment
	cacheScan(t, f.tb, cache, opts)
	// Drop the last batch of one column's entry of every segment.
	cache.mu.Lock()
	cut := 0
	for k, el := range cache.items {
		ent := el.Value.(*scanCacheEntry)
		if k.column == "v" && len(ent.chunks) > 1 {
			last := ent.chunks[len(ent.chunks)-1]
			ent.chunks = ent.chunks[:len(ent.chunks)-1]
			last.Release()
			cut++
		}
	}
	cache.mu.Unlock()
	if cut == 0 {
		t.Fatal("no entry of several batches to cut")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	opts.Alloc, opts.Cache, opts.Parallelism = mem, cache, 1
	rr, err := f.tb.Scan(context.Background(), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	for rr.Next() {
	}
	err = rr.Err()
	rr.Release()
	if err == nil || !strings.Contains(err.Error(), "scan cache entries of one segment disagree") {
		t.Fatalf("scan over disagreeing entries: %v", err)
	}
	mem.AssertSize(t, 0)
}
