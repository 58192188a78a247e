package tableformat

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// BenchmarkCompactSmallAppends: a table of 2,000 appends of 100 rows (5
// entities × 20 steps each), scanned whole and for one entity before and
// after Compact, and the compaction itself. Run with
// go test -run '^$' -bench CompactSmallAppends -benchtime 5x ./tableformat/
func BenchmarkCompactSmallAppends(b *testing.B) {
	ctx := context.Background()
	mem := memory.DefaultAllocator
	dir := b.TempDir()
	tb := mustCreateTable(b, storage.Local(dir), CreateOptions{Index: tsIndex()}, nil)
	const appends, steps = 2000, 20
	for i := range appends {
		var rows []row
		for s := range steps {
			for h := range compactHosts {
				step := int64(i*steps + s)
				rows = append(rows, row{sec: step * 10, host: fmt.Sprintf("h%d", h), v: step*10 + int64(h)})
			}
		}
		if _, err := appendRows(ctx, tb, mem, rows); err != nil {
			b.Fatal(err)
		}
	}
	scan := func(b *testing.B, entity bool) {
		opts := ScanOptions{}
		if entity {
			opts.Entities = map[string]EntityValue{"host": {Type: EntityUtf8, Str: "h3"}}
		}
		for range b.N {
			n := int(scanCount(b, tb, opts))
			want := appends * steps * compactHosts
			if entity {
				want /= compactHosts
			}
			if n != want {
				b.Fatalf("%d rows, want %d", n, want)
			}
		}
	}
	b.Run("scan-before", func(b *testing.B) { scan(b, false) })
	b.Run("entity-before", func(b *testing.B) { scan(b, true) })
	b.Run("compact", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			st := tb.State()
			b.StartTimer()
			rep, err := tb.Compact(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if rep.SourceSegments != appends {
				b.Fatalf("%+v", rep)
			}
			// Undo it for the next iteration: put the sources back.
			if err := undoCompaction(ctx, tb, st, rep); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	if _, err := tb.Compact(ctx, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("scan-after", func(b *testing.B) { scan(b, false) })
	b.Run("entity-after", func(b *testing.B) { scan(b, true) })
}
