package tableformat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

func TestScanEmpty(t *testing.T) {
	ctx := context.Background()
	tb := mustCreateTable(t, storage.Local(t.TempDir()), CreateOptions{Index: scHostIndex()}, nil)
	// No schema yet: an empty stream with no fields.
	res := scRunScan(t, tb, ScanOptions{})
	if res.schema.NumFields() != 0 || len(res.rows) != 0 {
		t.Fatalf("schema %s, rows %v", res.schema, res.rows)
	}
	if _, err := tb.Scan(ctx, nil, ScanOptions{Columns: []string{"v"}}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("unknown column without a schema: %v", err)
	}
	// A schema but no segments.
	f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
	res = scRunScan(t, f.tb, ScanOptions{Columns: []string{"v", "host"}})
	if res.schema.NumFields() != 2 || len(res.rows) != 0 {
		t.Fatalf("schema %s, rows %v", res.schema, res.rows)
	}
}

// ---- invalid options ----

func TestScanInvalidOptions(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"host", "n"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}}
	sch := &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Nanos}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "n", Type: DataType{Kind: TypeInt32}},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
	}}
	f := newScanFixture(t, ix, sch)
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		opts ScanOptions
		want []string
	}{
		{ScanOptions{Start: scIv(5)}, []string{"start", "5", "int64", "timestamp"}},
		{ScanOptions{End: scUv(5)}, []string{"end", "5", "uint64"}},
		{ScanOptions{Start: scTv(t0), End: scTv(t0)}, []string{"start", "end", "2024-01-01T00:00:00Z"}},
		{ScanOptions{Start: scTv(t0.Add(time.Second)), End: scTv(t0)}, []string{"start 2024-01-01T00:00:01Z", "end 2024-01-01T00:00:00Z"}},
		{ScanOptions{Columns: []string{"v", "nope"}}, []string{"columns", `"nope"`}},
		{ScanOptions{Columns: []string{"v", "v"}}, []string{"columns", `"v"`, "twice"}},
		{ScanOptions{Entities: map[string]EntityValue{"v": {Type: EntityInt64, Int: 1}}}, []string{"entities", `"v"`, "not an entity column"}},
		{ScanOptions{Entities: map[string]EntityValue{"nope": scStr("x")}}, []string{"entities", `"nope"`}},
		{ScanOptions{Entities: map[string]EntityValue{"host": {Type: EntityInt64, Int: 7}}}, []string{"entities", `"host"`, "Utf8", `"7"`, "int64"}},
		{ScanOptions{Entities: map[string]EntityValue{"n": {Type: EntityInt64, Int: 7}}}, []string{"entities", `"n"`, "Int32", "int64"}},
		{ScanOptions{Entities: map[string]EntityValue{"n": scStr("7")}}, []string{"entities", `"n"`, "utf8"}},
		{ScanOptions{BatchRows: -1}, []string{"batch_rows", "-1"}},
		{ScanOptions{Parallelism: -2}, []string{"parallelism", "-2"}},
	} {
		_, err := f.tb.State().Plan(c.opts)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: Plan error %v, want ErrInvalidInput", c.opts, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
		if _, err2 := f.tb.Scan(context.Background(), nil, c.opts); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("Scan error %v, Plan error %v", err2, err)
		}
	}
}

// ---- failures and cancellation ----

// scWaitGoroutines waits until at most n goroutines run.
func scWaitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func scBigScanFixture(t *testing.T, segments, rows int) *scanFixture {
	f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
	for s := range segments {
		ts := scSeq(int64(s*rows), int64(rows))
		f.addSegment(scSingle(scStr(fmt.Sprint("h", s))), 4096, scanRecord(t, f.canon, ts, scRepeat(fmt.Sprint("h", s), rows), ts))
	}
	return f
}

func TestScanCancel(t *testing.T) {
	f := scBigScanFixture(t, 8, 20_000)
	for _, how := range []string{"cancel", "release", "cancel-before-next", "cancel-then-drain"} {
		t.Run(how, func(t *testing.T) {
			before := runtime.NumGoroutine()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rr, err := f.tb.Scan(ctx, nil, ScanOptions{BatchRows: 1000, Parallelism: 4, Alloc: mem, Start: scTv(time.Unix(0, 1))})
			if err != nil {
				t.Fatal(err)
			}
			switch how {
			case "cancel-before-next":
				cancel()
			default:
				for range 3 {
					if !rr.Next() {
						t.Fatalf("stream ended early: %v", rr.Err())
					}
				}
			}
			switch how {
			case "release":
				rr.Release()
			case "cancel-then-drain":
				cancel()
				// Any batch already delivered stays valid; the stream
				// ends promptly.
				n := 0
				for rr.Next() {
					n++
				}
				if n > 0 {
					t.Errorf("%d batches after cancel", n)
				}
				if !errors.Is(rr.Err(), context.Canceled) {
					t.Errorf("Err() = %v, want context.Canceled", rr.Err())
				}
				rr.Release()
			default:
				cancel()
				if rr.Next() {
					t.Error("Next after cancel returned a batch")
				}
				if !errors.Is(rr.Err(), context.Canceled) {
					t.Errorf("Err() = %v, want context.Canceled", rr.Err())
				}
				rr.Release()
			}
			scWaitGoroutines(t, before)
			mem.AssertSize(t, 0)
		})
	}
	// A cancelled context refuses to start.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.tb.Scan(ctx, nil, ScanOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("scan with a cancelled context: %v", err)
	}
}

func TestScanMissingSegmentFile(t *testing.T) {
	f := scBigScanFixture(t, 4, 5000)
	segs := f.tb.State().Segments
	victim := segs[2].Path
	if err := os.Remove(filepath.Join(f.dir, filepath.FromSlash(victim))); err != nil {
		t.Fatal(err)
	}
	for _, par := range []int{1, 4} {
		before := runtime.NumGoroutine()
		_, err := scTryScan(t, f.tb, ScanOptions{Parallelism: par, BatchRows: 1000})
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Path != victim || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("parallelism %d: got %v, want a CorruptionError for %s", par, err, victim)
		}
		scWaitGoroutines(t, before)
	}
	// Pruned away, the missing file does not matter.
	res := scRunScan(t, f.tb, ScanOptions{Entities: map[string]EntityValue{"host": scStr("h1")}})
	if len(res.rows) != 5000 {
		t.Errorf("%d rows", len(res.rows))
	}
}

func TestScanCorruptSegmentFile(t *testing.T) {
	f := scBigScanFixture(t, 2, 1000)
	victim := f.tb.State().Segments[1].Path
	full := filepath.Join(f.dir, filepath.FromSlash(victim))
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"garbage":   []byte("this is not a parquet file at all"),
		"truncated": data[:len(data)/2],
		"scrambled": scScramble(data),
	} {
		if err := os.WriteFile(full, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := scTryScan(t, f.tb, ScanOptions{})
		var ce *CorruptionError
		if name == "scrambled" && err == nil {
			continue // the damage may hit bytes no decoder checks
		}
		if !errors.As(err, &ce) || ce.Path != victim {
			t.Errorf("%s: got %v, want a CorruptionError for %s", name, err, victim)
		}
	}
}

func scScramble(b []byte) []byte {
	out := slices.Clone(b)
	for i := 4; i < len(out)/2; i++ {
		out[i] ^= 0x5a
	}
	return out
}

// ---- the default (pooled) allocator ----

func TestScanPoolAllocator(t *testing.T) {
	a := newPoolAllocator(defaultPoolBytes)
	for _, size := range []int{0, 10, 4095, 4096, 5000, 1 << 20, (1 << 20) + 1} {
		b := a.Allocate(size)
		if len(b) != size {
			t.Fatalf("Allocate(%d): len %d", size, len(b))
		}
		for i := range b {
			b[i] = 0xff
		}
		a.Free(b)
		c := a.Allocate(size)
		for i, x := range c {
			if x != 0 {
				t.Fatalf("Allocate(%d) after reuse: byte %d is %#x", size, i, x)
			}
		}
		for i := range c {
			c[i] = byte(i)
		}
		d := a.Reallocate(size*2+10, c)
		if len(d) != size*2+10 {
			t.Fatalf("Reallocate: len %d", len(d))
		}
		for i := range d {
			want := byte(0)
			if i < size {
				want = byte(i)
			}
			if d[i] != want {
				t.Fatalf("Reallocate(%d → %d): byte %d is %#x, want %#x", size, len(d), i, d[i], want)
			}
		}
		e := a.Reallocate(size/2, d)
		if len(e) != size/2 || (size/2 > 0 && e[size/2-1] != byte(size/2-1)) {
			t.Fatalf("shrinking Reallocate: len %d", len(e))
		}
		a.Free(e)
	}
}

// scRunScanPooled scans with the default allocator, keeps every batch
// until the end and only then renders them, so that memory handed out twice
// by the pool would show as corrupt rows.
func scRunScanPooled(t *testing.T, tb *Table, opts ScanOptions) []string {
	t.Helper()
	opts.Alloc = nil
	rr, err := tb.Scan(context.Background(), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var kept []arrow.RecordBatch
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		kept = append(kept, rec)
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	rr.Release()
	var rows []string
	for _, rec := range kept {
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, scRenderRow(rec, i))
		}
		rec.Release()
	}
	slices.Sort(rows)
	return rows
}

func TestScanPooledAllocatorResults(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"e"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Days, 1}}}
	f := newScanFixture(t, ix, scAllTypesSchema())
	for s := range 3 {
		f.addSegment(scMixed, 150, scanJSONRecord(t, f.canon, scAllTypesRows(s*400, 400)))
	}
	big := scBigScanFixture(t, 4, 30_000)
	lo := int64(1_700_000_000_000_000)
	for _, c := range []struct {
		tb   *Table
		opts ScanOptions
	}{
		{f.tb, ScanOptions{BatchRows: 100}},
		{f.tb, ScanOptions{Start: scTv(time.UnixMicro(lo + 137)), End: scTv(time.UnixMicro(lo + 1111)), BatchRows: 64}},
		{f.tb, ScanOptions{Entities: map[string]EntityValue{"e": scStr("e1")}, BatchRows: 50}},
		{big.tb, ScanOptions{BatchRows: 4096}},
		{big.tb, ScanOptions{Start: scTv(time.Unix(0, 12_345)), End: scTv(time.Unix(0, 98_765)), BatchRows: 1000}},
	} {
		want := scRunScan(t, c.tb, c.opts).rows
		for range 3 {
			scSameRows(t, scRunScanPooled(t, c.tb, c.opts), want)
		}
	}
}

// ---- segments written by Table.Append ----

func TestScanAppendedTable(t *testing.T) {
	ctx := context.Background()
	tb := mustCreateTable(t, storage.Local(t.TempDir()), CreateOptions{Index: scHostIndex()}, nil)
	canon, err := ArrowSchema(scHostSchema(Nanos))
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for a := range 3 {
		n := 3000
		ts, hosts, vs := make([]int64, n), make([]string, n), make([]int64, n)
		for i := range n {
			step := int64(a*n+i) / 4
			ts[i] = step * 10 * int64(time.Second)
			hosts[i] = fmt.Sprint("h", (a*n+i)%4)
			vs[i] = int64(a*n + i)
		}
		rec := scanRecord(t, canon, ts, hosts, vs)
		recs = append(recs, rec)
		rdr, err := array.NewRecordReader(canon, []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		opts := DefaultAppendOptions()
		opts.MaxRowsPerRowGroup = 1000
		if _, err := tb.Append(ctx, rdr, opts); err != nil {
			t.Fatal(err)
		}
		rdr.Release()
	}
	if got := scRunScanCount(t, tb); got != 9000 {
		t.Fatalf("full scan: %d rows", got)
	}
	cols := []string{"ts", "host", "v"}
	lo, hi := int64(1000*10*time.Second), int64(1500*10*time.Second)
	res := scRunScan(t, tb, ScanOptions{Start: scTv(time.Unix(0, lo)), End: scTv(time.Unix(0, hi)), Entities: map[string]EntityValue{"host": scStr("h2")}, BatchRows: 128})
	scSameRows(t, res.rows, scExpectRows(recs, cols, func(r arrow.RecordBatch, i int) bool {
		ts := int64(r.Column(0).(*array.Timestamp).Value(i))
		return ts >= lo && ts < hi && r.Column(1).(*array.String).Value(i) == "h2"
	}))
	if g, rg := res.stats.rowGroups.Load(), res.stats.rowGroupsRead.Load(); rg >= g {
		t.Errorf("read %d of %d row groups; the statistics should prune some", rg, g)
	}
}

func scRunScanCount(t *testing.T, tb *Table) int {
	t.Helper()
	res := scRunScan(t, tb, ScanOptions{Columns: []string{}})
	n := 0
	for _, b := range res.batches {
		n += b
	}
	return n
}

// ---- storage failures ----

// scFlakyFS fails ReadAt on segment files after the first few calls.
type scFlakyFS struct {
	storage.FS
	okReads int
}

type scFlakyReader struct {
	storage.Reader
	left int
}

var errScFlaky = errors.New("injected read failure")

func (f *scFlakyFS) Open(name string) (storage.Reader, error) {
	r, err := f.FS.Open(name)
	if err != nil || !strings.HasPrefix(name, "data/") {
		return r, err
	}
	return &scFlakyReader{Reader: r, left: f.okReads}, nil
}

func (r *scFlakyReader) ReadAt(p []byte, off int64) (int, error) {
	if r.left <= 0 {
		return 0, errScFlaky
	}
	r.left--
	return r.Reader.ReadAt(p, off)
}

func TestScanStorageErrors(t *testing.T) {
	f := scBigScanFixture(t, 2, 3000)
	open := func(fsys storage.FS) *Table { return mustOpen(t, fsys, &Options{ReadOnly: true}) }
	// Opening a segment fails.
	ffs := storage.NewFaultFS(storage.Local(f.dir))
	tb := open(ffs)
	ffs.Inject(storage.Fault{Op: storage.OpOpen, Match: func(n string) bool { return strings.HasPrefix(n, "data/") }, Err: errScFlaky})
	_, err := scTryScan(t, tb, ScanOptions{})
	if !errors.Is(err, ErrStorage) || !errors.Is(err, errScFlaky) || errors.Is(err, ErrCorrupt) {
		t.Errorf("failed open: %v, want a storage error", err)
	}
	// Reading fails in the footer, then later and later, until the
	// segments are read before the failure would come.
	failed := 0
	for ok := 0; ; ok++ {
		tb := open(&scFlakyFS{FS: storage.Local(f.dir), okReads: ok})
		_, err := scTryScan(t, tb, ScanOptions{Parallelism: 1})
		if err == nil {
			break
		}
		failed++
		if !errors.Is(err, ErrStorage) || !errors.Is(err, errScFlaky) || errors.Is(err, ErrCorrupt) {
			t.Errorf("read failing after %d reads: %v, want a storage error", ok, err)
		}
	}
	if failed < 3 {
		t.Errorf("only %d failing cases", failed)
	}
}

// The pool keeps at most its limit of free memory, makes room by evicting
// the fullest other size class, and a trim empties it when it went unused
// since the previous trim. (This pool is not armed: no collection trims it
// behind the test's back.)
func TestScanPoolBounded(t *testing.T) {
	const mib = 1 << 20
	a := newPoolAllocator(4 * mib)
	bufs := make([][]byte, 6)
	for i := range bufs {
		bufs[i] = a.Allocate(mib) // exactly a class size
	}
	for _, b := range bufs {
		a.Free(b)
	}
	pooled := a.pooled
	if pooled != 4*mib {
		t.Fatalf("pool holds %d bytes after freeing 6 MiB, want its limit %d", pooled, 4*mib)
	}
	// A buffer of another class evicts from the fullest class.
	big := a.Allocate(2*mib + 1)
	a.Free(big)
	c, capacity := poolClass(2*mib + 1)
	c1, _ := poolClass(mib)
	got, got1, pooled := len(a.free[c]), len(a.free[c1]), a.pooled
	if got != 1 || got1 != 1 || pooled != capacity+mib {
		t.Fatalf("after freeing a %d-byte buffer: %d of its class, %d of 1 MiB, %d bytes pooled; want 1, 1, %d", capacity, got, got1, pooled, capacity+mib)
	}
	// A buffer larger than the limit is never pooled.
	a.Free(make([]byte, 8*mib))
	// Buffers of foreign capacities are ignored.
	a.Free(make([]byte, mib+3))
	if a.pooled != capacity+mib {
		t.Fatalf("foreign buffers were pooled: %d bytes", a.pooled)
	}
	// An allocation served from the pool keeps it through one trim; an
	// idle pool is emptied by the next.
	a.Free(a.Allocate(mib))
	a.trim()
	if a.pooled == 0 {
		t.Fatal("a pool used since the last trim was emptied")
	}
	a.trim()
	if a.pooled != 0 || len(a.free[c]) != 0 {
		t.Fatalf("an idle pool kept %d bytes", a.pooled)
	}
}

// Garbage collections trim the pool on their own.
func TestScanPoolTrimmedByGC(t *testing.T) {
	a := newPoolAllocator(4 << 20)
	a.armTrim()
	a.Free(a.Allocate(1 << 20))
	for range 50 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		a.mu.Lock()
		pooled := a.pooled
		a.mu.Unlock()
		if pooled == 0 {
			return
		}
	}
	t.Fatal("the pool still holds memory after 50 garbage collections")
}

// Size classes: four per power of two, each buffer at most a quarter
// larger than asked for.
func TestScanPoolClasses(t *testing.T) {
	prev := -1
	for size := poolMinBytes + 1; size <= poolMaxBytes; size += size/7 + 1 {
		c, capacity := poolClass(size)
		if capacity < size || float64(capacity) > 1.25*float64(size)+1 {
			t.Fatalf("size %d: class capacity %d", size, capacity)
		}
		if c < prev || c >= poolClasses {
			t.Fatalf("size %d: class %d after %d (of %d)", size, c, prev, poolClasses)
		}
		if c2, cap2 := poolClass(capacity); c2 != c || cap2 != capacity {
			t.Fatalf("capacity %d maps to class %d (%d), not %d", capacity, c2, cap2, c)
		}
		prev = c
	}
}
