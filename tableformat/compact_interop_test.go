package tableformat

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// compactInteropCase is a table shape for the compaction interop test.
type compactInteropCase struct {
	interopShape
	// batch is small batch i (8 rows), later batches later in the index.
	batch func(mem memory.Allocator, i int) arrow.RecordBatch
}

func compactInteropCases() []compactInteropCase {
	entity, global := interopShapes()
	tsSchema, intSchema, base := entity.schema, global.schema, interopBase
	return []compactInteropCase{
		{
			interopShape: entity,
			batch: func(mem memory.Allocator, i int) arrow.RecordBatch {
				b := array.NewRecordBuilder(mem, tsSchema)
				defer b.Release()
				for s := range 2 {
					for h := range 4 {
						step := int64(2*i + s)
						b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + step*10_000 + int64(h)))
						b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host_%d", 3-h))
						if (i+h)%5 == 0 {
							b.Field(2).AppendNull()
						} else {
							b.Field(2).(*array.Int64Builder).Append(step*10 + int64(h))
						}
					}
				}
				return b.NewRecordBatch()
			},
		},
		{
			interopShape: global,
			batch: func(mem memory.Allocator, i int) arrow.RecordBatch {
				b := array.NewRecordBuilder(mem, intSchema)
				defer b.Release()
				for j := range 8 {
					k := int64(i*8+7-j)*10 - 500 // descending inside a batch
					b.Field(0).(*array.Int64Builder).Append(k)
					b.Field(1).(*array.Int64Builder).Append(k / 3)
				}
				return b.NewRecordBatch()
			},
		},
	}
}

// compactInteropSum is the sum of column v over batches [0, n).
func compactInteropSum(c compactInteropCase, n int) int64 {
	mem := memory.DefaultAllocator
	var sum int64
	for i := range n {
		rec := c.batch(mem, i)
		col := rec.Column(rec.Schema().FieldIndices("v")[0]).(*array.Int64)
		for j := range col.Len() {
			if col.IsValid(j) {
				sum += col.Value(j)
			}
		}
		rec.Release()
	}
	return sum
}

// TestCompactInterop: tables written by tsflight and by the 0.9.0 package,
// fed by many small appends, are compacted by tsflight; the package then
// opens them, counts their rows with SQL and appends more, and tsflight
// reads everything, compacts again, and the package still reads it all.
func TestCompactInterop(t *testing.T) {
	requireReference(t)
	for _, c := range compactInteropCases() {
		for _, writer := range []string{"tsflight", "reference"} {
			t.Run(c.name+"/"+writer, func(t *testing.T) {
				ctx := context.Background()
				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				defer mem.AssertSize(t, 0)
				root := t.TempDir()
				dir := filepath.Join(root, "table")
				ipc := func(i int) string {
					p := filepath.Join(root, fmt.Sprintf("batch%d.arrows", i))
					rec := c.batch(mem, i)
					writeIPC(t, p, rec)
					rec.Release()
					return p
				}
				const first = 24
				if writer == "tsflight" {
					tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: c.spec}, nil)
					for i := range first {
						rdr := readerOf(t, c.schema, c.batch(mem, i))
						o := DefaultAppendOptions()
						o.Alloc = mem
						if _, err := tb.Append(ctx, rdr, o); err != nil {
							t.Fatalf("append %d: %v", i, err)
						}
						rdr.Release()
					}
				} else {
					var files []string
					for i := range first {
						files = append(files, ipc(i))
					}
					var rep struct{ Appends []any }
					interop(t, &rep, append([]string{"append", c.pySpec, dir}, files...)...)
					if len(rep.Appends) != first {
						t.Fatalf("the package made %d appends", len(rep.Appends))
					}
				}
				tb := mustOpen(t, storage.Local(dir), nil)
				compact := func(sources int) {
					t.Helper()
					o := DefaultCompactOptions()
					o.Alloc = mem
					rep, err := tb.Compact(ctx, o)
					if err != nil {
						t.Fatal(err)
					}
					if rep.SourceSegments != sources || rep.OutputSegments != 1 || len(tb.State().Segments) != 1 {
						t.Fatalf("compaction: %+v, %d segments", rep, len(tb.State().Segments))
					}
					checkTable(t, ctx, tb)
				}
				count := func(batches int) {
					t.Helper()
					var q struct {
						Rows [][]any `json:"rows"`
					}
					interop(t, &q, "query", dir, "SELECT count(*) AS n, sum(v) AS s FROM t")
					if want := fmt.Sprintf("[[%d %d]]", batches*8, compactInteropSum(c, batches)); fmt.Sprint(q.Rows) != want {
						t.Fatalf("the package reads %v, want %s", q.Rows, want)
					}
					if _, err := tb.Refresh(ctx); err != nil {
						t.Fatal(err)
					}
					if n, s := scanCountSum(t, tb, mem, "v"); n != int64(batches*8) || s != compactInteropSum(c, batches) {
						t.Fatalf("tsflight reads %d rows sum %d, want %d rows sum %d", n, s, batches*8, compactInteropSum(c, batches))
					}
				}

				compact(first)
				count(first)

				// The package appends to the compacted table, and still
				// refuses rows the compacted segment holds.
				var rep struct{ Appends []any }
				interop(t, &rep, "append", c.pySpec, dir, ipc(first), ipc(first+1))
				count(first + 2)
				py := requireReference(t)
				out, err := exec.Command(py, filepath.Join("..", "testdata", "reference", "interop.py"), "append", c.pySpec, dir, ipc(3)).CombinedOutput()
				if err == nil || !strings.Contains(strings.ToLower(string(out)), "overlap") {
					t.Fatalf("the package appended rows the compacted segment holds (%v):\n%s", err, out)
				}
				count(first + 2)

				// tsflight appends too, compacts the lot again, and the
				// package reads it.
				rdr := readerOf(t, c.schema, c.batch(mem, first+2))
				appendReader(t, ctx, tb, rdr, mem)
				compact(4)
				count(first + 3)
				interop(t, &rep, "append", c.pySpec, dir, ipc(first+3))
				count(first + 4)
			})
		}
	}
}
