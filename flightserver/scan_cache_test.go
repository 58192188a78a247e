package flightserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
)

// cachePair is a server with a scan cache and one without, over the same
// root: the second answers as DoGet did before the cache.
type cachePair struct {
	cached, plain *testServer
}

func startCachePair(t *testing.T, cacheBytes int64) *cachePair {
	t.Helper()
	cached := startServer(t, func(o *Options) { o.ScanCacheBytes = cacheBytes })
	plain := startServer(t, func(o *Options) { o.Root = cached.root })
	return &cachePair{cached: cached, plain: plain}
}

// same fetches desc from the plain server, then twice from the cached one
// (filling, then from the cache), and requires the three answers to be
// equal: schema, rows in order, batch sizes, nulls and extra columns. It
// returns the answer.
func (p *cachePair) same(t *testing.T, what string, desc *flight.FlightDescriptor) *fetched {
	t.Helper()
	ctx := ctxT(t)
	want, err := p.plain.fetchAll(ctx, p.plain.info(ctx, desc))
	if err != nil {
		t.Fatalf("%s: uncached: %v", what, err)
	}
	for _, pass := range []string{"filling", "cached"} {
		got, err := p.cached.fetchAll(ctx, p.cached.info(ctx, desc))
		if err != nil {
			t.Fatalf("%s (%s): %v", what, pass, err)
		}
		switch {
		case !got.schema.Equal(want.schema):
			t.Fatalf("%s (%s): schema %s, uncached %s", what, pass, got.schema, want.schema)
		case !reflect.DeepEqual(got.batches, want.batches):
			t.Fatalf("%s (%s): batches %v, uncached %v", what, pass, got.batches, want.batches)
		case !reflect.DeepEqual(got.rows, want.rows):
			t.Fatalf("%s (%s): %d rows differ from the uncached %d", what, pass, len(got.rows), len(want.rows))
		case !reflect.DeepEqual(got.nulls, want.nulls) || !reflect.DeepEqual(got.extra, want.extra):
			t.Fatalf("%s (%s): nulls %v extra %d columns, uncached %v and %d", what, pass, got.nulls, len(got.extra), want.nulls, len(want.extra))
		}
	}
	// Every byte a stream charged for cached arrays came back.
	if !waitFor(10*time.Second, func() bool { return p.cached.svc.streamBytesHeld() == 0 }) {
		t.Fatalf("%s: the streams still hold %d bytes", what, p.cached.svc.streamBytesHeld())
	}
	return want
}

// DoGet answers from the scan cache as it does without one, for whole,
// projected and filtered reads, and after every change a table goes
// through: an append, added columns, compaction, vacuum, and being
// dropped and created again under its name with other rows.
func TestScanCacheDoGetAnswers(t *testing.T) {
	p := startCachePair(t, 64<<20)
	ts := p.cached
	ctx := ctxT(t)
	model := flatten(loadWindows(t, ts, "cpu", 3))
	shapes := func(stage string) {
		t.Helper()
		got := p.same(t, stage+": whole", pathDesc("cpu"))
		if stage == "loaded" {
			sameRows(t, "whole table", got.rows, model)
		}
		p.same(t, stage+": projected", cmdDesc(t, map[string]any{"table": "cpu", "columns": []string{"usage_idle", "hostname"}}))
		p.same(t, stage+": time range", cmdDesc(t, map[string]any{"table": "cpu", "start": rfc(timeOfStep(500)), "end": rfc(timeOfStep(2100))}))
		p.same(t, stage+": entity", cmdDesc(t, map[string]any{"table": "cpu", "entity": map[string]string{"hostname": "host_1"}}))
	}
	shapes("loaded")
	st := ts.svc.ScanCacheStats()
	if st.Hits == 0 || st.Misses == 0 || st.Bytes == 0 || st.Evictions != 0 {
		t.Fatalf("cache after the first reads: %+v", st)
	}

	// An append adds a segment: the old ones hit, the new one fills.
	more := genRows(t0.Add(timeOfStep(3000)), 500, 3)
	ts.mustPut(ctx, pathDesc("cpu"), more, 700, 5)
	model = append(model, more...)
	shapes("appended")

	ts.mustAction(ctx, ActionAddColumns, map[string]any{"table": "cpu", "columns": []any{
		map[string]any{"name": "temp", "type": "float64", "nullable": true}}})
	shapes("added a column")

	res := ts.compactRun(t, map[string]any{"table": "cpu"})
	if res.OutputSegments == 0 {
		t.Fatalf("compaction wrote nothing: %+v", res)
	}
	shapes("compacted")
	raw, err := ts.action(ctx, ActionVacuum, map[string]any{"table": "cpu", "retention": "0s", "keep_snapshots": "0s", "apply": true})
	if err != nil {
		t.Fatal(err)
	}
	var vac VacuumResult
	if err := json.Unmarshal(raw, &vac); err != nil || !vac.Applied || vac.Totals.Deleted == 0 {
		t.Fatalf("vacuum: %s (%v)", raw, err)
	}
	got := p.same(t, "vacuumed", pathDesc("cpu"))
	sameRows(t, "after vacuum", got.rows, model)

	// Dropped (its directory removed) and created again with other rows:
	// never the old table's.
	if err := os.RemoveAll(filepath.Join(ts.root, "cpu")); err != nil {
		t.Fatal(err)
	}
	ts.createTSBS(ctx, "cpu")
	fresh := genRows(t0.Add(timeOfStep(7)), 1000, 3)
	for i := range fresh {
		fresh[i].user += 5000
	}
	ts.mustPut(ctx, pathDesc("cpu"), fresh, 1024, 2)
	got = p.same(t, "recreated", pathDesc("cpu"))
	sameRows(t, "recreated table", got.rows, fresh)
	shapes("recreated")
}

// Under a bound of about one segment: a table read again and again keeps
// what fit and is served from it, the bound holds, and a second table
// read later evicts the first's entries; the answers do not change.
func TestScanCacheDoGetEvicts(t *testing.T) {
	const bound = 200 << 10
	p := startCachePair(t, bound)
	model := flatten(loadWindows(t, p.cached, "cpu", 4))
	for range 3 {
		got := p.same(t, "small cache", pathDesc("cpu"))
		sameRows(t, "small cache", got.rows, model)
		if st := p.cached.svc.ScanCacheStats(); st.Bytes > bound || st.Limit != bound {
			t.Fatalf("cache over its bound: %+v", st)
		}
	}
	st := p.cached.svc.ScanCacheStats()
	if st.Hits == 0 || st.Bytes == 0 {
		t.Fatalf("a table read again under a bound of about one segment: %+v", st)
	}
	other := flatten(loadWindows(t, p.cached, "cpu2", 2))
	for range 2 {
		got := p.same(t, "second table", pathDesc("cpu2"))
		sameRows(t, "second table", got.rows, other)
	}
	if st2 := p.cached.svc.ScanCacheStats(); st2.Evictions <= st.Evictions || st2.Hits <= st.Hits || st2.Bytes > bound {
		t.Fatalf("after reading a second table: %+v (before %+v)", st2, st)
	}
}

// Readers at once (run with -race) get the whole table each, from a cache
// they fill together.
func TestScanCacheDoGetConcurrent(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.ScanCacheBytes = 64 << 20 })
	model := flatten(loadWindows(t, ts, "cpu", 4))
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	got := make([][]row, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := ts.client.GetFlightInfo(ctx, pathDesc("cpu"))
			if err != nil {
				errs <- err
				return
			}
			for range 2 {
				f, err := ts.fetchAll(ctx, info)
				if err != nil {
					errs <- err
					return
				}
				got[i] = f.rows
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range got {
		sameRows(t, "concurrent reader", got[i], model)
	}
	if st := ts.svc.ScanCacheStats(); st.Hits == 0 {
		t.Fatalf("no reader was served from the cache: %+v", st)
	}
}

// A DoGet served from the cache and cancelled after its first batch
// leaves no goroutine and gives every byte it charged back; what the
// server then holds is the cache's entries, freed by Close (the test
// server's cleanup checks zero bytes).
func TestScanCacheDoGetCancel(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.ScanCacheBytes = 256 << 20; o.MaxEndpoints = 1 })
	ctx := ctxT(t)
	total := loadBig(t, ts, "big", 2, 1000, 100, 500) // 200,000 rows
	info := ts.info(ctx, pathDesc("big"))
	f, err := ts.fetchAll(ctx, info) // fills the cache
	if err != nil || len(f.rows) != total {
		t.Fatalf("fill: %d rows, %v", len(f.rows), err)
	}
	base := testkit.SettledGoroutines()
	hits := ts.svc.ScanCacheStats().Hits
	cctx, cancel := context.WithCancel(ctx)
	rdr := ts.mustStream(t, cctx, info.Endpoint[0].Ticket)
	if !rdr.Next() {
		t.Fatalf("no first batch: %v", rdr.Err())
	}
	cancel()
	for rdr.Next() {
	}
	wantCode(t, "reading after cancel", rdr.Err(), codes.Canceled)
	rdr.Release()
	if ts.svc.ScanCacheStats().Hits == hits {
		t.Fatal("the cancelled DoGet was not served from the cache")
	}
	if !waitFor(10*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines 10 s after the cancel, %d before the DoGet:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
	}
	if !waitFor(10*time.Second, func() bool {
		return ts.svc.streamBytesHeld() == 0 && ts.srvMem.CurrentAlloc() == int(ts.svc.ScanCacheStats().Allocated)
	}) {
		t.Fatalf("after the cancel: streams hold %d bytes, the server %d, the cache %+v", ts.svc.streamBytesHeld(), ts.srvMem.CurrentAlloc(), ts.svc.ScanCacheStats())
	}
}

// Without a cache (the library's default) nothing is kept, and the
// metrics say so; with one, they count it.
func TestScanCacheMetrics(t *testing.T) {
	s := startOpsServer(t, nil, nil)
	loadWindows(t, s.testServer, "cpu", 2)
	ctx := ctxT(t)
	if _, err := s.fetchAll(ctx, s.info(ctx, pathDesc("cpu"))); err != nil {
		t.Fatal(err)
	}
	m := s.scrape()
	for _, name := range []string{"tsflight_scan_cache_bytes", "tsflight_scan_cache_limit_bytes", "tsflight_scan_cache_hits_total", "tsflight_scan_cache_misses_total", "tsflight_scan_cache_evictions_total"} {
		if v, ok := m.value(name); !ok || v != 0 {
			t.Fatalf("without a cache %s = %v (present %v), want 0", name, v, ok)
		}
	}
	if st := s.svc.ScanCacheStats(); st != (tableformat.ScanCacheStats{}) {
		t.Fatalf("without a cache: %+v", st)
	}
	if s.srvMem.CurrentAlloc() != 0 {
		t.Fatalf("without a cache the server holds %d bytes after a read", s.srvMem.CurrentAlloc())
	}

	// The same service's collector over a cache: run a server with one.
	c := startServer(t, func(o *Options) { o.ScanCacheBytes = 32 << 20 })
	loadWindows(t, c, "cpu", 2)
	for range 2 {
		if _, err := c.fetchAll(ctx, c.info(ctx, pathDesc("cpu"))); err != nil {
			t.Fatal(err)
		}
	}
	mc, err := NewMetrics(c.svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	families, err := mc.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := scraped{}
	for _, mf := range families {
		got[mf.GetName()] = mf
	}
	st := c.svc.ScanCacheStats()
	for name, want := range map[string]int64{
		"tsflight_scan_cache_bytes": st.Bytes, "tsflight_scan_cache_limit_bytes": 32 << 20,
		"tsflight_scan_cache_hits_total": st.Hits, "tsflight_scan_cache_misses_total": st.Misses,
	} {
		if v, ok := got.value(name); !ok || int64(v) != want || want == 0 {
			t.Fatalf("%s = %v (present %v), want %d (not 0)", name, v, ok, want)
		}
	}
}

// New refuses a negative cache size.
func TestScanCacheNegativeRefused(t *testing.T) {
	_, err := New(&Options{Root: t.TempDir(), ScanCacheBytes: -1})
	wantCode(t, "negative ScanCacheBytes", Status(err), codes.InvalidArgument, "ScanCacheBytes")
}
