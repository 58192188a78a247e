package tableformat

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// The spill benchmark's table: TSBS cpu-only rows of spillBenchHosts hosts
// every 10 s for spillBenchHours hours, appended a minute at a time in
// time order (as a loader sends them), compacted under a memory bound of
// spillBenchMemory. TSFLIGHT_SPILL_HOSTS, TSFLIGHT_SPILL_HOURS and
// TSFLIGHT_SPILL_MEMORY (bytes) set others. The defaults, 864,000 rows of
// about 155 MB decoded under 8 MiB, spill as the 34.5M rows (4,000
// hosts × 24 h) do under 64 MiB: an hour of rows is several runs.
const (
	spillBenchHosts  = 400
	spillBenchHours  = 6
	spillBenchMemory = 8 << 20
)

func spillBenchEnv(b *testing.B, name string, def, lo, hi int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		b.Fatalf("%s=%q: want %d..%d", name, s, lo, hi)
	}
	return n
}

// newSpillBenchTable creates the benchmark's table in dir.
func newSpillBenchTable(b *testing.B, ctx context.Context, dir string, hosts, hours int) *Table {
	tb := mustCreateTable(b, storage.Local(dir), CreateOptions{Index: tsbsIndex()}, nil)
	const perAppend = 6 // steps of 10 s: a minute
	for first := 0; first < hours*360; first += perAppend {
		batches := tsbsBatches(memory.DefaultAllocator, uint64(first)+1, hosts, first, perAppend, 1<<16)
		appendTSBSBatches(b, ctx, tb, batches)
	}
	return tb
}

// BenchmarkCompactSpill compacts the spill benchmark's table (see
// spillBenchHosts) under a small memory bound, undoing each compaction
// before the next. It reports the bytes spilled per byte written
// (spill/out), the spill in MB and its runs, and the CPU of the
// compaction; ns/op is its wall time. Run with
// go test -run '^$' -bench CompactSpill -benchtime 3x ./tableformat/
func BenchmarkCompactSpill(b *testing.B) {
	ctx := context.Background()
	hosts := int(spillBenchEnv(b, "TSFLIGHT_SPILL_HOSTS", spillBenchHosts, 1, 100000))
	hours := int(spillBenchEnv(b, "TSFLIGHT_SPILL_HOURS", spillBenchHours, 1, 24*7))
	limit := spillBenchEnv(b, "TSFLIGHT_SPILL_MEMORY", spillBenchMemory, MinCompactMemoryBytes, 1<<40)
	tb := newSpillBenchTable(b, ctx, b.TempDir(), hosts, hours)
	spill := b.TempDir()
	rows := uint64(hosts * hours * 360)
	var cpu time.Duration
	var spilled, out, runs, peak uint64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st := tb.State()
		o := DefaultCompactOptions()
		o.MemoryBytes = limit
		o.SpillDir = spill
		c0 := processCPU()
		b.StartTimer()
		rep, err := tb.Compact(ctx, o)
		b.StopTimer()
		cpu += processCPU() - c0
		if err != nil || rep.RowsWritten != rows {
			b.Fatalf("compaction: %+v %v", rep, err)
		}
		spilled += rep.SpillBytes
		out += rep.BytesAfter
		runs += uint64(rep.SpilledRuns)
		peak = max(peak, rep.MemoryPeak)
		if err := undoCompaction(ctx, tb, st, rep); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(spilled)/float64(max(out, 1)), "spill/out")
	b.ReportMetric(float64(spilled)/1e6/n, "spill-MB")
	b.ReportMetric(float64(runs)/n, "runs")
	b.ReportMetric(float64(out)/1e6/n, "out-MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
	b.ReportMetric(durMillis(cpu)/n, "cpu-ms/op")
	b.ReportMetric(float64(rows)*n/b.Elapsed().Seconds(), "rows/s")
}
