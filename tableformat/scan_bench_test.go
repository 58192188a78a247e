package tableformat

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// scanCPUFields are the payload columns of the TSBS cpu use case.
var scanCPUFields = []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
	"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}

const scanCPUHosts = 100

var scanCPUStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func scanCPUIndex() IndexSpec {
	return IndexSpec{Column: "time", EntityColumns: []string{"hostname"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}}
}

func scanCPUSchema() *Schema {
	utc := "UTC"
	s := &Schema{Columns: []Field{
		{Name: "time", Type: DataType{Kind: TypeTimestamp, Unit: Nanos, Timezone: &utc}},
		{Name: "hostname", Type: DataType{Kind: TypeUtf8}},
	}}
	for _, f := range scanCPUFields {
		s.Columns = append(s.Columns, Field{Name: f, Type: DataType{Kind: TypeInt64}, Nullable: true})
	}
	return s
}

// scanBuildCPUTable writes a TSBS-cpu-like table of rows rows (scanCPUHosts hosts
// every 10 s, in time order) in segments Mixed segments of 1 Mi-row row
// groups, as the append path writes them.
func scanBuildCPUTable(tb testing.TB, dir string, rows, segments int) *Table {
	ctx := context.Background()
	t, err := Create(ctx, storage.Local(dir), CreateOptions{Index: scanCPUIndex()}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	m := t.State().Meta.Clone()
	m.Schema = scanCPUSchema()
	if _, err := t.Commit(ctx, t.State().Version, []Action{UpdateTableMeta{Meta: *m}}); err != nil {
		tb.Fatal(err)
	}
	f := &scanFixture{t: tb, dir: dir, tb: t}
	if f.canon, err = ArrowSchema(m.Schema); err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	per := rows / segments
	const chunk = 1 << 16
	row := 0
	for s := range segments {
		var recs []arrow.RecordBatch
		for done := 0; done < per; done += chunk {
			n := min(chunk, per-done)
			b := array.NewRecordBuilder(memory.DefaultAllocator, f.canon)
			tsb := b.Field(0).(*array.TimestampBuilder)
			hb := b.Field(1).(*array.StringBuilder)
			for i := range n {
				r := row + i
				tsb.Append(arrow.Timestamp(scanCPUStart.Add(time.Duration(r/scanCPUHosts) * 10 * time.Second).UnixNano()))
				hb.Append("host_" + strconv.Itoa(r%scanCPUHosts))
			}
			for k := range scanCPUFields {
				fb := b.Field(2 + k).(*array.Int64Builder)
				for range n {
					fb.Append(rng.Int64N(100))
				}
			}
			recs = append(recs, b.NewRecordBatch())
			b.Release()
			row += n
		}
		f.n = s
		f.addSegment(EntityLayout{Kind: LayoutMixed}, 1<<20, recs...)
		for _, r := range recs {
			r.Release()
		}
	}
	return t
}

// scanCount runs a scan to the end and returns its row count.
func scanCount(tb testing.TB, t *Table, opts ScanOptions) int64 {
	var n int64
	scanEach(tb, context.Background(), t, nil, opts, func(rec arrow.RecordBatch) { n += rec.NumRows() })
	return n
}

// BenchmarkScan scans a 2 M-row TSBS-cpu-like table in 4 segments and
// reports rows/s (rows returned per second of wall time).
func BenchmarkScan(b *testing.B) {
	const rows = 2_000_000
	t := scanBuildCPUTable(b, b.TempDir(), rows, 4)
	steps := rows / scanCPUHosts
	at := func(step int) *IndexValue { return scTv(scanCPUStart.Add(time.Duration(step) * 10 * time.Second)) }
	for _, c := range []struct {
		name string
		opts ScanOptions
		want int64
	}{
		{"full", ScanOptions{}, rows},
		{"full-3cols", ScanOptions{Columns: []string{"time", "hostname", "usage_user"}}, rows},
		// 1 % of the time range, inside one segment.
		{"narrow", ScanOptions{Start: at(steps / 3), End: at(steps/3 + steps/100)}, int64(steps/100) * scanCPUHosts},
		// One host over the whole range (a scattered selection).
		{"one-host", ScanOptions{Entities: map[string]EntityValue{"hostname": scStr("host_7")}}, int64(steps)},
		{"full-p1", ScanOptions{Parallelism: 1}, rows},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int64
			for b.Loop() {
				got := scanCount(b, t, c.opts)
				if got != c.want {
					b.Fatalf("scanned %d rows, want %d", got, c.want)
				}
				n += got
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// TestScanPeakRSS builds a large TSBS-cpu-like table and scans it in a
// child process, checking its peak RSS (VmHWM). It is slow, so it runs
// only with TSFLIGHT_SCAN_RSS_ROWS set (e.g. 20000000); the limit is
// TSFLIGHT_SCAN_RSS_MB (default 256); TSFLIGHT_SCAN_RSS_PARALLELISM sets the
// scan's parallelism, TSFLIGHT_SCAN_RSS_GOALLOC=1 makes it use
// memory.DefaultAllocator instead of the pool, TSFLIGHT_SCAN_RSS_DIR keeps
// the table between runs and TSFLIGHT_SCAN_RSS_HEAPPROF writes a heap
// profile taken during the scan.
func TestScanPeakRSS(t *testing.T) {
	if dir := os.Getenv("TSFLIGHT_SCAN_RSS_CHILD"); dir != "" {
		scanRSSChild(t, dir)
		return
	}
	rowsEnv := os.Getenv("TSFLIGHT_SCAN_RSS_ROWS")
	if rowsEnv == "" {
		t.Skip("set TSFLIGHT_SCAN_RSS_ROWS to run")
	}
	rows, err := strconv.Atoi(rowsEnv)
	if err != nil {
		t.Fatal(err)
	}
	limit := 256
	if v := os.Getenv("TSFLIGHT_SCAN_RSS_MB"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	// TSFLIGHT_SCAN_RSS_DIR keeps the table between runs.
	dir := os.Getenv("TSFLIGHT_SCAN_RSS_DIR")
	segs := max(1, rows/2_000_000)
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := os.Stat(dir + "/_timeseries_log/CURRENT"); err != nil {
		scanBuildCPUTable(t, dir, rows, segs)
	}
	runtime.GC()
	cmd := exec.Command(os.Args[0], "-test.run=^TestScanPeakRSS$", "-test.v")
	cmd.Env = append(os.Environ(), "TSFLIGHT_SCAN_RSS_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var hwm int
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), "SCAN-RSS "); ok {
			fmt.Sscanf(after, "%d", &hwm)
		}
	}
	t.Logf("%d rows in %d segments: child peak RSS %d MiB\n%s", rows, segs, hwm>>10, out)
	if hwm == 0 {
		t.Fatal("the child did not report its RSS")
	}
	if hwm>>10 > limit {
		t.Errorf("peak RSS %d MiB, limit %d MiB", hwm>>10, limit)
	}
}

func scanRSSChild(t *testing.T, dir string) {
	tb := mustOpen(t, storage.Local(dir), &Options{ReadOnly: true})
	var opts ScanOptions
	if v := os.Getenv("TSFLIGHT_SCAN_RSS_PARALLELISM"); v != "" {
		opts.Parallelism, _ = strconv.Atoi(v)
	}
	if os.Getenv("TSFLIGHT_SCAN_RSS_GOALLOC") != "" {
		opts.Alloc = memory.DefaultAllocator // compare with the pool
	}
	base := scanProcStatusKB("VmHWM")
	if prof := os.Getenv("TSFLIGHT_SCAN_RSS_HEAPPROF"); prof != "" {
		go func() {
			time.Sleep(400 * time.Millisecond)
			f, _ := os.Create(prof)
			runtime.GC()
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}()
	}
	start := time.Now()
	n := scanCount(t, tb, opts)
	el := time.Since(start)
	fmt.Printf("SCAN-RSS %d\n", scanProcStatusKB("VmHWM"))
	fmt.Printf("scanned %d rows in %v (%.0f rows/s); peak RSS before the scan %d MiB\n", n, el, float64(n)/el.Seconds(), base>>10)
}

// scanProcStatusKB reads a kB field of /proc/self/status (0 if unavailable).
func scanProcStatusKB(field string) int {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb
		}
	}
	return 0
}
