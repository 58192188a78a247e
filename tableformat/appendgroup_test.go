package tableformat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// holdLeader makes the next commit attempt of e's table wait (inside
// testHookBeforeCommit) until release is called, so that appends started
// meanwhile queue up behind it; queued(n) waits until n of them do.
func holdLeader(t *testing.T, tb *Table) (release func(), queued func(n int)) {
	t.Helper()
	held, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	testHookBeforeCommit = func() {
		once.Do(func() {
			close(held)
			<-gate
		})
	}
	t.Cleanup(func() { testHookBeforeCommit = nil })
	var rel sync.Once
	release = func() { rel.Do(func() { close(gate) }) }
	t.Cleanup(release)
	queued = func(n int) {
		t.Helper()
		<-held
		deadline := time.Now().Add(10 * time.Second)
		for {
			tb.groups.mu.Lock()
			got := len(tb.groups.queue)
			tb.groups.mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d appends queued, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return release, queued
}

// startHeldGroup makes an append env whose table holds one row (0 s,
// entity host, v 0) and starts a second append (10 s, host, v 1) that
// holdLeader keeps inside its commit, so that the appends the test starts
// next queue up behind it until release.
func startHeldGroup(t *testing.T, host string) (e *appendEnv, release func(), queued func(n int), first <-chan appendOutcome) {
	t.Helper()
	e = newAppendEnv(t, tsIndex())
	if _, err := e.append(row{0, host, 0}); err != nil { // adopts the schema
		t.Fatal(err)
	}
	release, queued = holdLeader(t, e.tb)
	first = e.goAppend(e.ctx, row{10, host, 1})
	queued(0)
	return e, release, queued, first
}

type appendOutcome struct {
	res *AppendResult
	err error
}

// goAppend starts an append of rows on its own goroutine.
func (e *appendEnv) goAppend(ctx context.Context, rows ...row) <-chan appendOutcome {
	out := make(chan appendOutcome, 1)
	rdr := readerOf(e.t, inSchema(), inBatch(e.mem, rows...))
	go func() {
		res, err := e.tb.Append(ctx, rdr, e.opts())
		rdr.Release()
		out <- appendOutcome{res, err}
	}()
	return out
}

// TestGroupCommitSharesOneCommit: appends queued behind a commit in
// progress commit together: one version, one segment holding all their
// rows, each result naming its own row count; the table then reads every
// row once and refuses each of them again.
func TestGroupCommitSharesOneCommit(t *testing.T) {
	e, release, queued, first := startHeldGroup(t, "h0")
	defer e.mem.AssertSize(t, 0)
	var outs []<-chan appendOutcome
	for i := range 5 {
		outs = append(outs, e.goAppend(e.ctx, row{20, fmt.Sprintf("h%d", i), int64(i)}, row{30, fmt.Sprintf("h%d", i), int64(i)}))
	}
	queued(5)
	release()
	if o := <-first; o.err != nil || o.res.Version != 3 || o.res.Grouped != 1 || o.res.Rows != 1 {
		t.Fatalf("the leader: %+v %v", o.res, o.err)
	}
	var seg string
	for i, ch := range outs {
		o := <-ch
		if o.err != nil {
			t.Fatalf("append %d: %v", i, o.err)
		}
		if o.res.Version != 4 || o.res.Grouped != 5 || o.res.Rows != 2 || o.res.Segment.RowCount != 10 {
			t.Fatalf("append %d: %+v, want version 4 shared by 5 appends, 2 rows each in a 10-row segment", i, o.res)
		}
		if seg == "" {
			seg = o.res.Segment.Path
		} else if o.res.Segment.Path != seg {
			t.Fatalf("append %d landed in %s, another in %s", i, o.res.Segment.Path, seg)
		}
	}
	st := e.tb.State()
	if st.Version != 4 || len(st.Segments) != 3 || st.RowCount() != 12 {
		t.Fatalf("table: version %d, %d segments, %d rows", st.Version, len(st.Segments), st.RowCount())
	}
	seg4 := st.Segments[2]
	if seg4.Layout.Kind != LayoutMixed || seg4.IndexMin.String() != "2024-06-01T00:00:20Z" || seg4.IndexMax.String() != "2024-06-01T00:00:30Z" {
		t.Fatalf("the group's segment: %+v", seg4)
	}
	if n, s := scanCountSum(t, e.tb, e.mem, "v"); n != 12 || s != 1+2*(0+1+2+3+4) {
		t.Fatalf("scan: %d rows, sum %d", n, s)
	}
	// The coverage holds every row: a fresh handle refuses each again.
	fresh := mustOpen(t, storage.Local(e.dir), nil)
	e.tb = fresh
	for i := range 5 {
		if _, err := e.append(row{25, fmt.Sprintf("h%d", i), 9}); !errors.Is(err, ErrOverlap) {
			t.Fatalf("append over the group's rows of h%d: %v, want ErrOverlap", i, err)
		}
	}
	if rep, err := e.tb.Check(e.ctx, CheckOptions{}); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("check: %v %+v", err, rep)
	}
}

// TestGroupCommitRefusesOnlyTheOverlapping: in one group, an append that
// collides with an earlier one of the group, or with the table, fails
// alone with ErrOverlap; the others commit.
func TestGroupCommitRefusesOnlyTheOverlapping(t *testing.T) {
	e, release, queued, first := startHeldGroup(t, "a")
	defer e.mem.AssertSize(t, 0)
	ok1 := e.goAppend(e.ctx, row{20, "a", 2})
	queued(1)
	dup := e.goAppend(e.ctx, row{25, "a", 3}) // same 10 s interval as ok1
	queued(2)
	old := e.goAppend(e.ctx, row{5, "a", 4}) // the interval of the first append
	queued(3)
	ok2 := e.goAppend(e.ctx, row{20, "b", 5})
	queued(4)
	release()
	if o := <-first; o.err != nil {
		t.Fatal(o.err)
	}
	for name, ch := range map[string]<-chan appendOutcome{"ok1": ok1, "ok2": ok2} {
		if o := <-ch; o.err != nil || o.res.Version != 4 || o.res.Grouped != 2 {
			t.Fatalf("%s: %+v %v", name, o.res, o.err)
		}
	}
	var oe *OverlapError
	if o := <-dup; !errors.As(o.err, &oe) || oe.Within || oe.Version != 4 || oe.Count != 1 {
		t.Fatalf("the append overlapping one of its group: %v, want an OverlapError with the group's version 4", o.err)
	}
	if o := <-old; !errors.As(o.err, &oe) || oe.Version != 3 {
		t.Fatalf("the append overlapping the table: %v, want an OverlapError at version 3", o.err)
	}
	if n, s := scanCountSum(t, e.tb, e.mem, "v"); n != 4 || s != 0+1+2+5 {
		t.Fatalf("scan: %d rows, sum %d", n, s)
	}
}

// TestGroupCommitCancelledWhileQueued: an append whose context ends while
// it waits for the commit in progress leaves the queue and commits
// nothing; the ones behind it still commit, and the lead passes on even
// when the cancelled one was to take it.
func TestGroupCommitCancelledWhileQueued(t *testing.T) {
	e, release, queued, first := startHeldGroup(t, "a")
	defer e.mem.AssertSize(t, 0)
	ctx, cancel := context.WithCancel(e.ctx)
	gone := e.goAppend(ctx, row{20, "a", 2})
	queued(1)
	kept := e.goAppend(e.ctx, row{30, "a", 3})
	queued(2)
	cancel()
	if o := <-gone; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("the cancelled append: %+v %v", o.res, o.err)
	}
	release()
	if o := <-first; o.err != nil {
		t.Fatal(o.err)
	}
	if o := <-kept; o.err != nil || o.res.Version != 4 || o.res.Grouped != 1 {
		t.Fatalf("the append behind the cancelled one: %+v %v", o.res, o.err)
	}
	if n, s := scanCountSum(t, e.tb, e.mem, "v"); n != 3 || s != 4 {
		t.Fatalf("scan: %d rows, sum %d", n, s)
	}
	// The queue is idle again: an append leads at once.
	if res, err := e.append(row{40, "a", 4}); err != nil || res.Version != 5 {
		t.Fatalf("next append: %+v %v", res, err)
	}
}

// TestGroupCommitLeaderCancelled: the leader's context ending in the
// middle of the group's commit does not fail the commit for the others.
func TestGroupCommitLeaderCancelled(t *testing.T) {
	e, release, _, first := startHeldGroup(t, "a")
	defer e.mem.AssertSize(t, 0)
	release()
	if o := <-first; o.err != nil {
		t.Fatal(o.err)
	}
	release2, queued2 := holdLeader(t, e.tb)
	ctx, cancel := context.WithCancel(e.ctx)
	leader := e.goAppend(ctx, row{20, "a", 2})
	queued2(0)
	other := e.goAppend(e.ctx, row{20, "b", 3})
	cancel() // the leader's client goes away while it commits
	release2()
	o := <-leader
	if o.err != nil || o.res.Version != 4 {
		t.Fatalf("the cancelled leader's own append: %+v %v (its commit was under way)", o.res, o.err)
	}
	if o := <-other; o.err != nil {
		t.Fatalf("the other append: %v", o.err)
	}
	if n, _ := scanCountSum(t, e.tb, e.mem, "v"); n != 4 {
		t.Fatalf("scan: %d rows", n)
	}
}

// TestGroupCommitBigAppendStreams: an append over the group limits is
// written as its own segment, the batches read before the limit was
// reached included, in order.
func TestGroupCommitBigAppendStreams(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	defer e.mem.AssertSize(t, 0)
	var recs []arrow.RecordBatch
	var want int64
	for b := range 5 {
		var rows []row
		for i := range 40 {
			rows = append(rows, row{int64(b*400 + i*10), "h", int64(b*40 + i)})
			want += int64(b*40 + i)
		}
		recs = append(recs, inBatch(e.mem, rows...))
	}
	rdr := readerOf(t, inSchema(), recs...)
	defer rdr.Release()
	o := e.opts()
	o.GroupRows = 100 // the third batch goes over
	e.mustAppend(t, row{5000, "h", 0})
	res, err := e.tb.Append(e.ctx, rdr, o)
	if err != nil || res.Grouped != 1 || res.Rows != 200 || res.Segment.RowCount != 200 {
		t.Fatalf("big append: %+v %v", res, err)
	}
	if n, s := scanCountSum(t, e.tb, e.mem, "v"); n != 201 || s != want {
		t.Fatalf("scan: %d rows, sum %d, want 201 and %d", n, s, want)
	}
}

// TestGroupCommitFailedWriteLeavesNothing: when the group's segment cannot
// be written, every append of the group fails and no file stays.
func TestGroupCommitFailedWriteLeavesNothing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	fsys := storage.NewMem()
	tb := mustCreate(t, fsys)
	rdr := readerOf(t, inSchema(), inBatch(mem, row{0, "a", 0}))
	appendReader(t, ctx, tb, rdr, mem)
	before := memFiles(t, fsys)
	ffs, ft := openFaulty(t, fsys, nil)
	boom := errors.New("EIO")
	ffs.Inject(storage.Fault{Op: storage.OpSync, Match: func(n string) bool { return len(n) > len(appendDir) && n[:len(appendDir)] == appendDir }, Err: boom})
	rdr = readerOf(t, inSchema(), inBatch(mem, row{10, "a", 1}))
	defer rdr.Release()
	o := DefaultAppendOptions()
	o.Alloc = mem
	if _, err := ft.Append(ctx, rdr, o); !errors.Is(err, ErrStorage) || !errors.Is(err, boom) {
		t.Fatalf("append with a failing segment fsync: %v", err)
	}
	after := memFiles(t, fsys)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("files before %v, after %v", before, after)
	}
	if st, err := ft.Refresh(ctx); err != nil || st.Version != 2 {
		t.Fatalf("table after the failure: %v", err)
	}
}

// TestGroupCommitManyWriters: 8 writers of small appends to one handle,
// racing, with a second handle appending too: every row lands exactly
// once, and commits are fewer than appends.
func TestGroupCommitManyWriters(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	defer e.mem.AssertSize(t, 0)
	e.mustAppend(t, row{0, "w0", 0})
	other := mustOpen(t, storage.Local(e.dir), nil)
	const writers, puts = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*puts+puts)
	grouped := make(chan int, writers*puts)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range puts {
				rec := inBatch(e.mem, row{int64(10 + p*10), fmt.Sprintf("w%d", w), 1})
				rdr, _ := array.NewRecordReader(inSchema(), []arrow.RecordBatch{rec})
				rec.Release()
				res, err := e.tb.Append(e.ctx, rdr, e.opts())
				rdr.Release()
				if err != nil {
					errs <- err
					continue
				}
				grouped <- res.Grouped
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := range puts {
			rec := inBatch(e.mem, row{int64(10 + p*10), "other", 1})
			rdr, _ := array.NewRecordReader(inSchema(), []arrow.RecordBatch{rec})
			rec.Release()
			o := e.opts()
			if _, err := other.Append(e.ctx, rdr, o); err != nil {
				errs <- err
			}
			rdr.Release()
		}
	}()
	wg.Wait()
	close(errs)
	close(grouped)
	for err := range errs {
		t.Errorf("append: %v", err)
	}
	shared := 0
	for g := range grouped {
		if g > 1 {
			shared++
		}
	}
	st, err := e.tb.Refresh(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, s := scanCountSum(t, e.tb, e.mem, "v"); n != int64(1+writers*puts+puts) || s != int64(writers*puts+puts) {
		t.Fatalf("scan: %d rows, sum %d", n, s)
	}
	t.Logf("%d appends in %d commits; %d of the handle's appends shared a commit", writers*puts+puts+1, st.Version-1, shared)
	if st.Version-1 >= uint64(writers*puts+puts+1) {
		t.Errorf("%d commits for %d appends: nothing was grouped", st.Version-1, writers*puts+puts+1)
	}
	if rep, err := e.tb.Check(e.ctx, CheckOptions{}); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("check: %v %+v", err, rep)
	}
}
