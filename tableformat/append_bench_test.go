package tableformat

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/tableformat/storage"
)

var tsbsTags = []struct {
	name   string
	values []string
}{
	{"region", []string{"us-east-1", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "sa-east-1"}},
	{"datacenter", []string{"a", "b", "c", "d"}},
	{"rack", nil}, {"os", []string{"Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"}},
	{"arch", []string{"x64", "x86"}}, {"team", []string{"SF", "NYC", "LON", "CHI"}},
	{"service", nil}, {"service_version", []string{"0", "1"}},
	{"service_environment", []string{"production", "staging", "test"}},
}

var tsbsFields = []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}

// tsbsSchema is TSBS cpu-only: a timestamp, hostname and nine more string
// tags, ten int64 fields.
func tsbsSchema() *arrow.Schema {
	fields := []arrow.Field{{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}}, {Name: "hostname", Type: arrow.BinaryTypes.String}}
	for _, t := range tsbsTags {
		fields = append(fields, arrow.Field{Name: t.name, Type: arrow.BinaryTypes.String})
	}
	for _, f := range tsbsFields {
		fields = append(fields, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Int64})
	}
	return arrow.NewSchema(fields, nil)
}

// appendTSBS appends recs, batches of tsbsSchema, to tb in one append with
// options o (nil: the defaults); the batches stay the caller's.
func appendTSBS(t testing.TB, ctx context.Context, tb *Table, recs []arrow.RecordBatch, o *AppendOptions) {
	t.Helper()
	rdr, err := array.NewRecordReader(tsbsSchema(), recs)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if _, err := tb.Append(ctx, rdr, o); err != nil {
		t.Fatal(err)
	}
}

func tsbsIndex() IndexSpec {
	return IndexSpec{Column: "time", EntityColumns: []string{"hostname"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}}
}

// tsbsBatches generates hosts × steps rows starting at step first, in
// time-major order, cut into batches of at most batchRows rows.
func tsbsBatches(mem memory.Allocator, seed uint64, hosts, first, steps, batchRows int) []arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(seed, 1))
	tags := make([][]string, hosts)
	walk := make([][]int64, hosts)
	for h := range hosts {
		tags[h] = make([]string, len(tsbsTags))
		for i, t := range tsbsTags {
			if t.values == nil {
				tags[h][i] = fmt.Sprint(rng.IntN(100))
			} else {
				tags[h][i] = t.values[rng.IntN(len(t.values))]
			}
		}
		walk[h] = make([]int64, len(tsbsFields))
		for i := range walk[h] {
			walk[h][i] = rng.Int64N(101)
		}
	}
	schema := tsbsSchema()
	var out []arrow.RecordBatch
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	n := 0
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for s := first; s < first+steps; s++ {
		ts := arrow.Timestamp(base + int64(s)*10e9)
		for h := range hosts {
			b.Field(0).(*array.TimestampBuilder).Append(ts)
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host_%d", h))
			for i := range tsbsTags {
				b.Field(2 + i).(*array.StringBuilder).Append(tags[h][i])
			}
			for i := range tsbsFields {
				v := walk[h][i] + int64(rng.NormFloat64())
				walk[h][i] = min(max(v, 0), 100)
				b.Field(11 + i).(*array.Int64Builder).Append(walk[h][i])
			}
			if n++; n == batchRows {
				out = append(out, b.NewRecordBatch())
				n = 0
			}
		}
	}
	if n > 0 {
		out = append(out, b.NewRecordBatch())
	}
	return out
}

const (
	benchHosts = 1000
	benchSteps = 100 // 100,000 rows per append
)

// BenchmarkAppendTSBS appends 100,000 TSBS cpu-only rows (1,000 hosts × 100
// steps of 10 s, 64K-row batches) per op to a local table, commits durable.
// Compare with BenchmarkParquetFloorTSBS, the cost of encoding the same
// batches to Parquet with the same settings and nothing else.
func BenchmarkAppendTSBS(b *testing.B) {
	ctx := context.Background()
	mem := memory.DefaultAllocator
	tb := mustCreateTable(b, storage.Local(b.TempDir()), CreateOptions{Index: tsbsIndex()}, nil)
	batches := make([][]arrow.RecordBatch, b.N)
	for i := range b.N {
		batches[i] = tsbsBatches(mem, 1, benchHosts, i*benchSteps, benchSteps, 1<<16)
	}
	b.ResetTimer()
	for i := range b.N {
		appendTSBS(b, ctx, tb, batches[i], nil)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchHosts*benchSteps)/b.Elapsed().Seconds(), "rows/s")
	for _, bs := range batches {
		for _, r := range bs {
			r.Release()
		}
	}
}

func BenchmarkParquetFloorTSBS(b *testing.B) {
	mem := memory.DefaultAllocator
	batches := make([][]arrow.RecordBatch, b.N)
	for i := range b.N {
		batches[i] = tsbsBatches(mem, 1, benchHosts, i*benchSteps, benchSteps, 1<<16)
	}
	o := DefaultAppendOptions()
	b.ResetTimer()
	for i := range b.N {
		props := parquet.NewWriterProperties(parquet.WithCompression(o.Compression), parquet.WithMaxRowGroupLength(o.MaxRowsPerRowGroup), parquet.WithDictionaryDefault(true), parquet.WithStats(true))
		w, err := pqarrow.NewFileWriter(tsbsSchema(), io.Discard, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range batches[i] {
			if err := w.WriteBuffered(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchHosts*benchSteps)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkAppendSmall appends 100 TSBS cpu-only rows (one row per host for
// 100 hosts, the next 10 s step each time) per op to a local table, each
// commit durable: the append a collector makes every few seconds. Reports
// the p50 and the last tenth's median over the first tenth's.
func BenchmarkAppendSmall(b *testing.B) {
	ctx := context.Background()
	mem := memory.DefaultAllocator
	tb := mustCreateTable(b, storage.Local(b.TempDir()), CreateOptions{Index: tsbsIndex()}, nil)
	batches := make([][]arrow.RecordBatch, b.N)
	for i := range b.N {
		batches[i] = tsbsBatches(mem, 1, 100, i, 1, 100)
	}
	took := make([]time.Duration, b.N)
	cpu0 := processCPU()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		appendTSBS(b, ctx, tb, batches[i], nil)
		took[i] = time.Since(start)
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	for _, bs := range batches {
		for _, r := range bs {
			r.Release()
		}
	}
	b.ReportMetric(durMillis(cpu)/float64(b.N), "cpu-ms/op")
	tenth := max(1, b.N/10)
	b.ReportMetric(durMillis(durQuantile(took, 0.5)), "p50-ms")
	b.ReportMetric(durMillis(durQuantile(took[b.N-tenth:], 0.5))/durMillis(durQuantile(took[:tenth], 0.5)), "last/first")
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func durMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func durQuantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
