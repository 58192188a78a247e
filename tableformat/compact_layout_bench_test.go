package tableformat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// layoutHosts × layoutHours of TSBS cpu-only rows at 10 s: 864,000 rows,
// the issue-21 data set ("400 hosts × 6 h"). TSFLIGHT_LAYOUT_HOURS sets
// another number of hours (24: a day, 3,456,000 rows).
const (
	layoutHosts = 400
	layoutHours = 6
)

func layoutHoursFromEnv(b *testing.B) int {
	s := os.Getenv("TSFLIGHT_LAYOUT_HOURS")
	if s == "" {
		return layoutHours
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 24*7 {
		b.Fatalf("TSFLIGHT_LAYOUT_HOURS=%q: want 1..168 hours", s)
	}
	return n
}

// tsbsLayout is one way of writing the same rows as one segment.
type tsbsLayout struct {
	name string
	// rowGroup is the bulk append's MaxRowsPerRowGroup; 0 for a
	// compacted layout.
	rowGroup int64
	// bucket is the compaction's SortBucket (hourly appends, compacted
	// into one segment).
	bucket time.Duration
}

var tsbsLayouts = []tsbsLayout{
	{name: "append_rg64k", rowGroup: 1 << 16},
	{name: "append_rg128k", rowGroup: 1 << 17},
	{name: "append_rg256k", rowGroup: 1 << 18},
	{name: "append_rg1m", rowGroup: 1 << 20},
	{name: "compact_1h", bucket: time.Hour},
	{name: "compact_24h", bucket: 24 * time.Hour},
}

// BenchmarkTSBSLayouts writes the 864,000 rows of 400 hosts × 6 hours
// (time-major, as a loader sends them) as one segment in each layout of
// tsbsLayouts: one bulk append with row groups of 64 Ki … 1 Mi rows, or
// the hourly appends compacted into one segment sorted by (hour or day,
// hostname, time). It reports the write's time and CPU (for compacted
// layouts, the compaction alone), the file's size and its row groups.
//
// With TSFLIGHT_LAYOUT_DIR set, the last table of each layout is kept in
// $TSFLIGHT_LAYOUT_DIR/<layout>, for the DuckDB side of the measurement
// (bench/layoutquery, which runs the queries on
// the same files; DuckDB may not be imported here).
func BenchmarkTSBSLayouts(b *testing.B) {
	keep := os.Getenv("TSFLIGHT_LAYOUT_DIR")
	ctx := context.Background()
	mem := memory.DefaultAllocator
	perHour := 360 // steps of 10 s
	hours := make([][]arrow.RecordBatch, layoutHoursFromEnv(b))
	for h := range hours {
		hours[h] = tsbsBatches(mem, 21, layoutHosts, h*perHour, perHour, 1<<16)
	}
	defer func() {
		for _, bs := range hours {
			for _, r := range bs {
				r.Release()
			}
		}
	}()
	appendAll := func(tb *Table, batches []arrow.RecordBatch, o *AppendOptions) { appendTSBS(b, ctx, tb, batches, o) }
	for _, l := range tsbsLayouts {
		b.Run(l.name, func(b *testing.B) {
			var size, groups int64
			var cpu time.Duration
			for i := range b.N {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "t")
				if keep != "" && i == b.N-1 {
					dir = filepath.Join(keep, l.name)
					if err := os.RemoveAll(dir); err != nil {
						b.Fatal(err)
					}
				}
				tb := mustCreateTable(b, storage.Local(dir), CreateOptions{Index: tsbsIndex()}, nil)
				if l.rowGroup == 0 {
					for _, bs := range hours {
						appendAll(tb, bs, nil)
					}
				}
				c0 := processCPU()
				b.StartTimer()
				if l.rowGroup > 0 {
					var all []arrow.RecordBatch
					for _, bs := range hours {
						all = append(all, bs...)
					}
					o := DefaultAppendOptions()
					o.MaxRowsPerRowGroup = l.rowGroup
					appendAll(tb, all, o)
				} else {
					o := DefaultCompactOptions()
					o.SortBucket = l.bucket
					rep, err := tb.Compact(ctx, o)
					if err != nil || rep.OutputSegments != 1 {
						b.Fatalf("compaction: %+v %v", rep, err)
					}
				}
				b.StopTimer()
				cpu += processCPU() - c0
				segs := tb.State().Segments
				if len(segs) != 1 || segs[0].RowCount != uint64(layoutHosts*len(hours)*perHour) {
					b.Fatalf("segments %+v", segs)
				}
				size = int64(*segs[0].FileSize)
				pf, err := file.OpenParquetFile(filepath.Join(dir, filepath.FromSlash(segs[0].Path)), false)
				if err != nil {
					b.Fatal(err)
				}
				groups = int64(pf.NumRowGroups())
				pf.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(size)/1e6, "file-MB")
			b.ReportMetric(float64(groups), "rowgroups")
			b.ReportMetric(durMillis(cpu)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(layoutHosts*len(hours)*perHour*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	if keep != "" {
		fmt.Fprintf(os.Stderr, "layouts kept in %s\n", keep)
	}
}
