package tableformat

// Replaying a long log: linear in the number of commits (a replay owns
// the state it builds), and never touching the snapshot it started from.

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// oneRowAppends creates a table on an in-memory file system and appends n
// one-row segments to it, one commit each.
func oneRowAppends(tb testing.TB, n int) (storage.FS, *Table) {
	tb.Helper()
	ctx := context.Background()
	fsys := storage.NewMem()
	t, err := Create(ctx, fsys, CreateOptions{Index: tsIndex()}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	mem := memory.DefaultAllocator
	for i := range n {
		rec := inBatch(mem, row{int64(i) * 10, "h", int64(i)})
		rdr, err := array.NewRecordReader(inSchema(), []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := t.Append(ctx, rdr, nil); err != nil {
			tb.Fatal(err)
		}
		rdr.Release()
	}
	return fsys, t
}

// A replay starting from a kept snapshot builds its own state: the
// snapshot is the same afterwards, and every state equals one replayed
// from commit 1.
func TestReplayLeavesItsBaseAlone(t *testing.T) {
	ctx := context.Background()
	_, tb := oneRowAppends(t, 12)
	old := mustStateAt(t, tb, 5)
	kept := *old
	kept.Segments = append([]SegmentMeta(nil), old.Segments...)
	for _, v := range []uint64{13, 8, 6, 13} {
		st, err := tb.log.replayTo(ctx, old, v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := tb.log.replayTo(ctx, nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(st, want) || len(st.Segments) != int(v)-1 {
			t.Fatalf("replay from version 5 to %d: %d segments, want %d and the state replayed from commit 1", v, len(st.Segments), v-1)
		}
		if !reflect.DeepEqual(old.Segments, kept.Segments) || len(old.byPath) != len(kept.Segments) || old.Version != 5 {
			t.Fatalf("replaying to %d changed the version-5 snapshot it started from", v)
		}
	}
}

// BenchmarkOpenManyCommits opens tables of 500 and 2,000 one-row commits:
// with a linear replay the cost per commit stays about the same (it grew
// with the log before: 20,000 commits took 55 s to open).
func BenchmarkOpenManyCommits(b *testing.B) {
	for _, n := range []int{500, 2000} {
		fsys, _ := oneRowAppends(b, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				tb, err := Open(context.Background(), fsys, nil)
				if err != nil || tb.State().Version != uint64(n)+1 {
					b.Fatalf("open: %v", err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/commit")
		})
	}
}
