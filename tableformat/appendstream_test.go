package tableformat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// A streamed append (too big for a group) encodes each batch in the
// background while the next is read (segmentWriter.writeAsync). These
// tests cover that path: a crash at every storage call, an encoding error,
// and a cancelled stream.

const (
	streamBatches   = 4
	streamBatchRows = 5_000
)

// smallSegmentBuffers makes segment writers buffer 16 KiB instead of
// 1 MiB until the test ends, so that a small streamed append writes to
// its file from the background encoding.
func smallSegmentBuffers(t *testing.T) {
	old := segmentBuffers
	segmentBuffers = &sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 16<<10) }}
	t.Cleanup(func() { segmentBuffers = old })
}

// streamBatch is batch id of a streamed append: streamBatchRows rows of
// host "w", in a time range no other batch touches, with random values
// (the segment outgrows the writer's buffer before it ends).
func streamBatch(mem memory.Allocator, id int64) arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(uint64(id), 9))
	b := array.NewRecordBuilder(mem, crashSchema())
	defer b.Release()
	for i := range int64(streamBatchRows) {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(id*streamBatchRows+i) * 10 * time.Second).UnixMilli()))
		b.Field(1).(*array.StringBuilder).Append("w")
		b.Field(2).(*array.Int64Builder).Append(id)
		b.Field(3).(*array.Int64Builder).Append(rng.Int64())
	}
	return b.NewRecordBatch()
}

// streamOpts: no groups (every append streams), row groups that close
// inside the background encoding.
func streamOpts(mem memory.Allocator) *AppendOptions {
	o := DefaultAppendOptions()
	o.Alloc = mem
	o.GroupRows = 0
	o.MaxRowsPerRowGroup = 3_000
	return o
}

// streamReader is the batches first … first+streamBatches-1.
func streamReader(t *testing.T, mem memory.Allocator, first int64) array.RecordReader {
	t.Helper()
	var recs []arrow.RecordBatch
	for id := first; id < first+streamBatches; id++ {
		recs = append(recs, streamBatch(mem, id))
	}
	return readerOf(t, crashSchema(), recs...)
}

// streamTable is a table on fsys holding batch 0 (which adopted the
// schema): version 2.
func streamTable(t *testing.T, fsys storage.FS, mem memory.Allocator) {
	t.Helper()
	ctx := context.Background()
	tb := mustCreateTable(t, fsys, CreateOptions{Index: crashIndex()}, nil)
	if _, err := appendCrashBatch(ctx, tb, mem, 0); err != nil {
		t.Fatal(err)
	}
}

var uuidName = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|tmp-[0-9a-f]{16}|[0-9a-f]{16}\.tmp`)

func normalizeUUID(s string) string { return uuidName.ReplaceAllString(s, "X") }

// TestStreamedAppendCrashAtEveryStep crashes a streamed append before and
// after each storage call it makes (the segment's writes from the
// background encoding among them, and the sidecar's, written at once with
// the segment's last encoding and fsync) and checks what a power loss
// leaves: the table opens, holds the append either whole or not at all
// (whole when it was acknowledged), and takes the next append. It does so
// for a table holding a segment and for a new table, whose first append
// also makes and syncs the table's directories.
func TestStreamedAppendCrashAtEveryStep(t *testing.T) {
	t.Run("existing", func(t *testing.T) { streamedAppendCrashes(t, false) })
	t.Run("new", func(t *testing.T) { streamedAppendCrashes(t, true) })
}

// streamedAppendCrashes is TestStreamedAppendCrashAtEveryStep on a table
// at version 2 holding batch 0 or, fresh, a new table at version 1.
func streamedAppendCrashes(t *testing.T, fresh bool) {
	smallSegmentBuffers(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	setup := func(fsys storage.FS, mem memory.Allocator) {
		if !fresh {
			streamTable(t, fsys, mem)
		} else if _, err := Create(ctx, fsys, CreateOptions{Index: crashIndex()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	base := uint64(2) // the version before the append
	if fresh {
		base = 1
	}

	// The trace of one streamed append.
	basefs := storage.NewMem()
	setup(basefs, mem)
	ffs, tb := openFaulty(t, basefs, nil)
	ffs.Reset()
	rdr := streamReader(t, mem, 1)
	if _, err := tb.Append(ctx, rdr, streamOpts(mem)); err != nil {
		t.Fatal(err)
	}
	rdr.Release()
	tr := ffs.Trace()
	writes := 0
	for i := range tr {
		tr[i].Name, tr[i].Name2 = normalizeUUID(tr[i].Name), normalizeUUID(tr[i].Name2)
		if tr[i].Op == storage.OpWrite && strings.HasSuffix(tr[i].Name, ".parquet") {
			writes++
		}
	}
	if writes < 4 {
		t.Fatalf("the segment was written in %d calls; the test needs writes during the stream", writes)
	}
	t.Logf("a streamed append of %d batches is %d storage calls (%d segment writes)", streamBatches, len(tr), writes)

	seen := map[bool]int{}
	for i := range tr {
		for _, after := range []bool{false, true} {
			if after && (tr[i].Op == storage.OpReadFile || tr[i].Op == storage.OpStat) {
				continue // the same as a crash before the next call
			}
			t.Run(fmt.Sprintf("%s %d %s", map[bool]string{false: "before", true: "after"}[after], i, tr[i]), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				defer mem.AssertSize(t, 0)
				fsys := storage.NewMem()
				setup(fsys, mem)
				ffs, tb := openFaulty(t, fsys, nil)
				ffs.Reset()
				want := tr[i]
				nth := 0
				for j := 0; j <= i; j++ {
					if tr[j] == want {
						nth++
					}
				}
				ffs.Inject(storage.Fault{Op: want.Op, Nth: nth, After: after,
					Match: func(n string) bool { n = normalizeUUID(n); return n == want.Name || n == want.Name2 }})
				rdr := streamReader(t, mem, 1)
				_, aerr := tb.Append(ctx, rdr, streamOpts(mem))
				rdr.Release()
				if !ffs.Crashed() {
					t.Fatalf("the crash did not fire (append: %v)", aerr)
				}
				re, err := Open(ctx, fsys.CrashClone(), nil)
				if err != nil {
					t.Fatalf("the table does not open after the crash: %v", err)
				}
				v := re.State().Version
				if v != base && v != base+1 || aerr == nil && v != base+1 {
					t.Fatalf("version %d after the crash (append: %v)", v, aerr)
				}
				counts, err := batchCounts(t, ctx, re, mem)
				if err != nil {
					t.Fatal(err)
				}
				if !fresh && counts[0] != crashRows {
					t.Fatalf("batch 0 has %d rows, want %d", counts[0], crashRows)
				}
				for id := int64(1); id <= streamBatches; id++ {
					if want := map[bool]int{false: 0, true: streamBatchRows}[v == base+1]; counts[id] != want {
						t.Fatalf("version %d: batch %d has %d rows, want %d (the append must be whole or absent)", v, id, counts[id], want)
					}
				}
				seen[v == base+1]++
				res, err := appendCrashBatch(ctx, re, mem, 1+streamBatches)
				if err != nil || res.Version != v+1 {
					t.Fatalf("the next append: %v, %v", res, err)
				}
			})
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("the crashes never left both outcomes: %v", seen)
	}
}

// An error of the background encoding (here a batch after the first)
// is the append's error, and the append commits nothing and leaves no
// file behind.
func TestStreamedAppendEncodeErrorFails(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fsys, tb, before := openStreamTable(t, mem)
	boom := errors.New("encoder on fire")
	n := 0
	testHookEncoded = func() error {
		if n++; n == 2 {
			return boom
		}
		return nil
	}
	defer func() { testHookEncoded = nil }()
	rdr := streamReader(t, mem, 1)
	defer rdr.Release()
	_, err := tb.Append(ctx, rdr, streamOpts(mem))
	if !errors.Is(err, boom) {
		t.Fatalf("append: %v, want the encoding's error", err)
	}
	if n != 2 {
		t.Fatalf("%d batches encoded, want the append to stop after the failing second", n)
	}
	st, err := tb.Refresh(ctx)
	if err != nil || st.Version != 2 {
		t.Fatalf("version %v after a failed append (%v), want 2", st.Version, err)
	}
	if after := memFiles(t, fsys); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("files after the failed append: %v, before: %v", after, before)
	}
}

// cancelAfter cancels its context once n batches were read, and goes on
// handing out batches.
type cancelAfter struct {
	array.RecordReader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Next() bool {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return c.RecordReader.Next()
}

// A cancelled streamed append returns the cancellation once the batch
// being encoded in the background is done: no goroutine of it is left,
// nothing is committed, no file remains.
func TestStreamedAppendCancelLeavesNoGoroutine(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fsys, tb, before := openStreamTable(t, mem)
	// A slow encoding: the cancellation arrives while one is in flight.
	testHookEncoded = func() error { time.Sleep(100 * time.Millisecond); return nil }
	defer func() { testHookEncoded = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdr := streamReader(t, mem, 1)
	defer rdr.Release()
	_, err := tb.Append(ctx, &cancelAfter{RecordReader: rdr, n: 2, cancel: cancel}, streamOpts(mem))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("append: %v, want context.Canceled", err)
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "(*segmentWriter).writeAsync") {
		t.Fatalf("a background encoding outlived the cancelled append:\n%s", stacks)
	}
	st, err := tb.Refresh(context.Background())
	if err != nil || st.Version != 2 {
		t.Fatalf("version %v after a cancelled append (%v), want 2", st.Version, err)
	}
	if after := memFiles(t, fsys); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("files after the cancelled append: %v, before: %v", after, before)
	}
}

// CheckOnly refuses what the append would refuse (a duplicate interval in
// the stream, a null key, an overlap with the table, no rows) and accepts
// the rest, writing and committing nothing either way.
func TestAppendCheckOnly(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	check := func(rows ...row) (*AppendResult, error) {
		rdr := readerOf(e.t, inSchema(), inBatch(e.mem, rows...))
		defer rdr.Release()
		o := e.opts()
		o.CheckOnly = true
		return e.tb.Append(e.ctx, rdr, o)
	}
	// On the empty table (adopting the schema).
	if res, err := check(row{0, "h1", 1}, row{10, "h1", 2}, row{0, "h2", 3}); err != nil || res.Rows != 3 || res.Version != 1 {
		t.Fatalf("check of a good stream: %+v, %v", res, err)
	}
	if files := e.dataFiles(); len(files) != 0 || e.tb.State().Version != 1 {
		t.Fatalf("a check wrote %v (version %d)", files, e.tb.State().Version)
	}
	e.mustAppend(t, row{0, "h1", 1}, row{10, "h1", 2})
	before := e.dataFiles()
	var oe *OverlapError
	if _, err := check(row{20, "h1", 1}, row{25, "h1", 2}); !errors.As(err, &oe) || !oe.Within {
		t.Fatalf("duplicate in the stream: %v", err)
	}
	if _, err := check(row{5, "h1", 1}); !errors.As(err, &oe) || oe.Within || oe.Version != 2 {
		t.Fatalf("overlap with the table: %v", err)
	}
	if _, err := check(row{20, "", 1}); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), `entity column "host" is null`) {
		t.Fatalf("null entity: %v", err)
	}
	if _, err := check(); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("no rows: %v", err)
	}
	if res, err := check(row{20, "h1", 1}, row{0, "h3", 1}); err != nil || res.Rows != 2 || res.Version != 2 {
		t.Fatalf("check of a good stream: %+v, %v", res, err)
	}
	after := e.dataFiles()
	slices.Sort(before)
	slices.Sort(after)
	if !slices.Equal(after, before) || e.tb.State().Version != 2 {
		t.Fatalf("checks changed the files %v -> %v (version %d)", before, after, e.tb.State().Version)
	}
}

// openStreamTable writes streamTable into a new MemFS and opens it; before
// lists its files.
func openStreamTable(t *testing.T, mem memory.Allocator) (fsys *storage.MemFS, tb *Table, before []string) {
	t.Helper()
	fsys = storage.NewMem()
	streamTable(t, fsys, mem)
	return fsys, mustOpen(t, fsys, nil), memFiles(t, fsys)
}
