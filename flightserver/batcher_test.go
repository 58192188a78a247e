package flightserver

import (
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowsBatch is a batch of one int64 column holding n rows.
func rowsBatch(mem memory.Allocator, n int) arrow.RecordBatch {
	b := array.NewInt64Builder(mem)
	defer b.Release()
	for i := range n {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, int64(n))
}

// groupLog records the groups a Batcher sends, as rows per batch, and
// releases them as a sender must.
type groupLog [][]int64

func (g *groupLog) send(group []arrow.RecordBatch) error {
	var rows []int64
	for _, b := range group {
		rows = append(rows, b.NumRows())
	}
	*g = append(*g, rows)
	releaseAll(group)
	return nil
}

// feed adds a batch of each size (released after Add, as a reader's are)
// and returns the groups each Add sent.
func feed(t *testing.T, mem memory.Allocator, b *Batcher, sizes ...int) []groupLog {
	t.Helper()
	var out []groupLog
	for _, n := range sizes {
		rec := rowsBatch(mem, n)
		var log groupLog
		if err := b.Add(rec, log.send); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		out = append(out, log)
	}
	return out
}

func sameGroups(t *testing.T, what string, got, want groupLog) {
	t.Helper()
	if !slices.EqualFunc(got, want, slices.Equal[[]int64]) {
		t.Fatalf("%s: groups %v, want %v", what, got, want)
	}
}

// TestBatcherRows: without a byte bound a group is sent once it holds
// min rows; empty batches are dropped; Flush sends the rest.
func TestBatcherRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewBatcher(10, 0)
	adds := feed(t, mem, b, 4, 0, 4, 4, 9, 1, 3)
	want := []groupLog{nil, nil, nil, {{4, 4, 4}}, nil, {{9, 1}}, nil}
	for i := range want {
		sameGroups(t, "add", adds[i], want[i])
	}
	var last groupLog
	if err := b.Flush(last.send); err != nil {
		t.Fatal(err)
	}
	sameGroups(t, "flush", last, groupLog{{3}})
	last = nil
	if err := b.Flush(last.send); err != nil || last != nil {
		t.Fatalf("a second flush sent %v (%v)", last, err)
	}
}

// TestBatcherBytes: with a byte bound, a batch that would take the held
// batches past it sends them first, and one batch can then complete a
// group of its own at once; a failing send stops with its error and
// Release frees what is held.
func TestBatcherBytes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	size := func(n int) int {
		rec := rowsBatch(mem, n)
		defer rec.Release()
		return BatchBytes(rec)
	}
	small, large := size(10), size(1000)
	if large <= 2*small {
		t.Fatalf("a batch of 1000 rows takes %d bytes, of 10 rows %d", large, small)
	}
	b := NewBatcher(1<<20, 2*small+small/2) // two small batches fit, three do not
	adds := feed(t, mem, b, 10, 10, 10, 1000, 10)
	want := []groupLog{nil, nil, {{10, 10}}, {{10}, {1000}}, nil}
	for i := range want {
		sameGroups(t, "add", adds[i], want[i])
	}
	rec := rowsBatch(mem, 10)
	defer rec.Release()
	stop := errors.New("stop")
	if err := b.Add(rec, func(g []arrow.RecordBatch) error { releaseAll(g); return stop }); err != nil {
		t.Fatalf("Add with room sent a group (%v)", err)
	}
	if err := b.Add(rec, func(g []arrow.RecordBatch) error { releaseAll(g); return stop }); !errors.Is(err, stop) {
		t.Fatalf("Add returned %v, want the send's error", err)
	}
	b.Release()
}
