package tableformat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// withCompactHook sets testHookCompactBeforeCommit for one test.
func withCompactHook(t *testing.T, h func(retry int)) {
	t.Helper()
	testHookCompactBeforeCommit = h
	t.Cleanup(func() { testHookCompactBeforeCommit = nil })
}

// TestCompactRebasesOnAppends: appends committed through another handle
// between the compaction's plan and its commit make it retry on the new
// version; the appends keep their rows, and nothing is lost or doubled.
func TestCompactRebasesOnAppends(t *testing.T) {
	e, ctx := newCompactEnv(t, 20)
	other := mustOpen(t, storage.Local(e.dir), nil)
	next := 20
	withCompactHook(t, func(retry int) {
		if retry < 2 {
			appendSmall(t, ctx, other, e.mem, next, next+1)
			next++
		}
	})
	rep, err := e.tb.Compact(ctx, compactOpts(e.mem))
	if err != nil || rep.Retries != 2 || rep.SourceSegments != 20 || rep.DroppedGroups != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	st := e.tb.State()
	if len(st.Segments) != 3 || rep.CommittedVersion != rep.StartingVersion+3 {
		t.Fatalf("%d segments at version %d (report %+v)", len(st.Segments), st.Version, rep)
	}
	if n := len(tableRows(t, ctx, e.tb, nil, e.mem)); n != 220 {
		t.Fatalf("%d rows, want 220", n)
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactWithConcurrentAppends: appends from another handle run
// throughout repeated compactions; every append succeeds and every row is
// there exactly once.
func TestCompactWithConcurrentAppends(t *testing.T) {
	e, ctx := newCompactEnv(t, 10)
	other := mustOpen(t, storage.Local(e.dir), nil)
	const total = 80
	done := make(chan error, 1)
	go func() {
		for i := 10; i < total; i++ {
			if _, err := appendRows(ctx, other, e.mem, compactRowsOf(i)); err != nil {
				done <- fmt.Errorf("append %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	var compactions, retries int
	var appendErr error
loop:
	for {
		select {
		case appendErr = <-done:
			break loop
		default:
		}
		rep, err := e.tb.Compact(ctx, compactOpts(e.mem))
		if err != nil {
			t.Fatalf("compaction: %v", err)
		}
		if !rep.NoOp {
			compactions++
		}
		retries += rep.Retries
	}
	if appendErr != nil {
		t.Fatal(appendErr)
	}
	if _, err := e.tb.Compact(ctx, compactOpts(e.mem)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d compactions committed (%d retries) while %d appends ran", compactions, retries, total-10)
	if compactions == 0 {
		t.Fatal("no compaction committed")
	}
	var got, want []string
	for _, r := range tableRows(t, ctx, e.tb, nil, e.mem) {
		got = append(got, r[strings.Index(r, "|v=")+3:])
	}
	for i := range total {
		for _, r := range compactRowsOf(i) {
			want = append(want, fmt.Sprint(r.v))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows: %d, want %d", len(got), len(want))
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactLosesToAnotherCompaction: another handle compacts the same
// segments first; this one drops its group (and removes its files) and
// commits nothing, or commits the groups that are still whole.
func TestCompactLosesToAnotherCompaction(t *testing.T) {
	e, ctx := newCompactEnv(t, 20)
	rowsBefore := tableRows(t, ctx, e.tb, nil, e.mem)
	other := mustOpen(t, storage.Local(e.dir), nil)
	var largest uint64
	for _, seg := range e.tb.State().Segments {
		largest = max(largest, *seg.FileSize)
	}
	target := int64(largest * 10) // two groups of about ten

	var fired bool
	var otherRep *CompactReport
	withCompactHook(t, func(int) {
		if fired {
			return // the other compaction's own commit
		}
		fired = true
		o := compactOpts(e.mem)
		o.TargetBytes, o.MaxGroups = target, 1
		var err error
		if otherRep, err = other.Compact(ctx, o); err != nil {
			t.Errorf("the other compaction: %v", err)
		}
	})
	o := compactOpts(e.mem)
	o.TargetBytes = target
	rep, err := e.tb.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if otherRep == nil || len(otherRep.Groups) != 1 || rep.DroppedGroups != 1 || len(rep.Groups) == 0 || rep.Retries != 1 ||
		rep.Groups[0].Sources[0] == otherRep.Groups[0].Sources[0] {
		t.Fatalf("report %+v, other %+v", rep, otherRep)
	}
	if got := tableRows(t, ctx, e.tb, nil, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatalf("rows differ: %d vs %d", len(got), len(rowsBefore))
	}
	want := 20 - otherRep.SourceSegments - rep.SourceSegments + otherRep.OutputSegments + rep.OutputSegments
	if n := len(e.tb.State().Segments); n != want {
		t.Fatalf("%d segments, want %d", n, want)
	}
	// Only live segments and the original sources remain: the dropped
	// group's files are gone.
	vac, err := e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
	if err != nil || vac.Removable != 0 {
		t.Fatalf("vacuum finds %d stray files (%v): the dropped group left files behind", vac.Removable, err)
	}
	checkTable(t, ctx, e.tb)

	// Both at once, over and over: one wins each round, rows stay once.
	appendSmall(t, ctx, e.tb, e.mem, 20, 60)
	testHookCompactBeforeCommit = nil
	rowsBefore = tableRows(t, ctx, e.tb, nil, e.mem)
	var wg sync.WaitGroup
	for _, tb := range []*Table{e.tb, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				o := compactOpts(e.mem)
				o.TargetBytes = target
				if _, err := tb.Compact(ctx, o); err != nil {
					t.Errorf("concurrent compaction: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := tableRows(t, ctx, e.tb, nil, e.mem); !slices.Equal(got, rowsBefore) {
		t.Fatalf("rows differ after concurrent compactions: %d vs %d", len(got), len(rowsBefore))
	}
	vac, err = e.tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now()})
	if err != nil || vac.Removable != 0 {
		t.Fatalf("vacuum finds %d stray files after concurrent compactions (%v)", vac.Removable, err)
	}
	checkTable(t, ctx, e.tb)
}

// TestCompactCancelled: a cancelled context returns ctx.Err() and commits
// and leaves nothing, whether it ends before the call or just before the
// commit.
func TestCompactCancelled(t *testing.T) {
	e, _ := newCompactEnv(t, 20)
	v := e.tb.State().Version
	files := dirSnapshot(t, e.dir)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.tb.Compact(ctx, compactOpts(e.mem)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: %v", err)
	}
	ctx, cancel = context.WithCancel(e.ctx)
	withCompactHook(t, func(int) { cancel() })
	rep, err := e.tb.Compact(ctx, compactOpts(e.mem))
	if err != context.Canceled || rep != nil {
		t.Fatalf("cancelled before the commit: %+v %v", rep, err)
	}
	if st, _ := e.tb.Refresh(e.ctx); st.Version != v {
		t.Fatalf("committed version %d", st.Version)
	}
	if diff := sameSnapshot(files, dirSnapshot(t, e.dir)); diff != "" {
		t.Fatalf("a cancelled compaction left files: %s", diff)
	}
}
