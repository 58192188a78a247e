package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// The load tests' shared fixture: a server with table cpu, and writers of
// Parquet, Arrow IPC and CSV test files. The tests are in load_*_test.go.

// loadTestEnv makes the binary count its Arrow memory: a leak fails the
// command.
var loadTestEnv = []string{loadCheckAllocEnv + "=1"}

// loadFixture is a server with one table "cpu" (index ts, 10 s, entity
// host) and a client.
type loadFixture struct {
	t   *testing.T
	p   *serverProc
	c   flight.Client
	ctx context.Context
	dir string
	mem *memory.CheckedAllocator
}

func newLoadFixture(t *testing.T) *loadFixture {
	t.Helper()
	p := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0")
	f := &loadFixture{t: t, p: p, c: dial(t, p.addr), ctx: testCtx(t), dir: t.TempDir(),
		mem: memory.NewCheckedAllocator(memory.NewGoAllocator())}
	t.Cleanup(func() { f.mem.AssertSize(t, 0) })
	f.create("cpu")
	return f
}

func (f *loadFixture) create(table string) {
	f.t.Helper()
	mustAction(f.t, f.ctx, f.c, "create-table", map[string]any{
		"table": table, "index_column": "ts", "index_type": "timestamp", "granularity": "10s",
		"entity_columns": []string{"host"},
	})
}

// load runs "tsflight load --server … args…".
func (f *loadFixture) load(args ...string) (stdout, stderr string, code int) {
	f.t.Helper()
	return runCLI(f.t, loadTestEnv, append([]string{"load", "--server", "grpc://" + f.p.addr}, args...)...)
}

// mustLoad runs load and requires success.
func (f *loadFixture) mustLoad(args ...string) (stdout, stderr string) {
	f.t.Helper()
	stdout, stderr, code := f.load(args...)
	if code != 0 {
		f.t.Fatalf("tsflight load %q: exit %d\nstderr: %s", args, code, stderr)
	}
	return stdout, stderr
}

func (f *loadFixture) describe(table string) map[string]any {
	f.t.Helper()
	return mustAction(f.t, f.ctx, f.c, "describe-table", map[string]any{"table": table})
}

func (f *loadFixture) version(table string) int64 {
	f.t.Helper()
	return num(f.t, f.describe(table), "version")
}

// scan returns the table's rows and the sum of its value column.
func (f *loadFixture) scan(table string) (int64, float64) {
	f.t.Helper()
	return scanRows(f.t, f.ctx, f.c, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
}

func (f *loadFixture) path(name string) string { return filepath.Join(f.dir, name) }

// loadSchema is the test table's schema, value of type valueType.
func loadSchema(valueType arrow.DataType) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "value", Type: valueType, Nullable: true},
	}, nil)
}

var loadFloatSchema = loadSchema(arrow.PrimitiveTypes.Float64)

const loadHosts = 4

// loadRows builds rows [first, first+n) of schema: row i is host h(i%4)
// at interval i/4 from base, value i (in the value column's type).
func loadRows(mem memory.Allocator, schema *arrow.Schema, first, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := first; i < first+n; i++ {
		for c, fld := range schema.Fields() {
			switch col := b.Field(c).(type) {
			case *array.TimestampBuilder:
				col.Append(arrow.Timestamp(base + int64(i/loadHosts)*10_000))
			case *array.StringBuilder:
				if fld.Name == "host" {
					col.Append(fmt.Sprintf("h%d", i%loadHosts))
				} else {
					col.Append(strconv.Itoa(i))
				}
			case *array.Float64Builder:
				col.Append(float64(i))
			case *array.Float32Builder:
				col.Append(float32(i))
			case *array.Int32Builder:
				col.Append(int32(i))
			case *array.Int64Builder:
				col.Append(int64(i))
			default:
				panic(fmt.Sprintf("loadRows: column %s of type %s", fld.Name, fld.Type))
			}
		}
	}
	return b.NewRecordBatch()
}

// loadSum is the sum of the values of rows [first, first+n).
func loadSum(first, n int) float64 {
	return float64(n) * float64(2*first+n-1) / 2
}

// writeParquet writes rows [first, first+n) of schema to path in row
// groups of groupRows rows.
func (f *loadFixture) writeParquet(name string, schema *arrow.Schema, first, n, groupRows int) string {
	f.t.Helper()
	path := f.path(name)
	out, err := os.Create(path)
	if err != nil {
		f.t.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithAllocator(f.mem))
	w, err := pqarrow.NewFileWriter(schema, out, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(f.mem)))
	if err != nil {
		f.t.Fatal(err)
	}
	f.writeRows(w, schema, first, n, groupRows)
	return path
}

// writeIPC writes rows [first, first+n) of schema as an Arrow IPC file or
// stream, in batches of batchRows rows.
func (f *loadFixture) writeIPC(name string, stream bool, schema *arrow.Schema, first, n, batchRows int) string {
	f.t.Helper()
	path := f.path(name)
	out, err := os.Create(path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer out.Close()
	var w batchWriter
	if stream {
		w = ipc.NewWriter(out, ipc.WithSchema(schema), ipc.WithAllocator(f.mem))
	} else if w, err = ipc.NewFileWriter(out, ipc.WithSchema(schema), ipc.WithAllocator(f.mem)); err != nil {
		f.t.Fatal(err)
	}
	f.writeRows(w, schema, first, n, batchRows)
	return path
}

// writeFile writes text to a file in the fixture's directory.
func (f *loadFixture) writeFile(name, text string) string {
	f.t.Helper()
	path := f.path(name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// loadCSVText is a CSV of rows [first, first+n) with the columns in the
// order value, ts, host; timestamps in RFC 3339 with a +02:00 offset.
func loadCSVText(first, n int) string {
	var b strings.Builder
	b.WriteString("value,ts,host\n")
	for i := first; i < first+n; i++ {
		ts := arrow.Timestamp(base + int64(i/loadHosts)*10_000).ToTime(arrow.Millisecond)
		fmt.Fprintf(&b, "%d,%s,h%d\n", i, ts.In(timeZone("+02:00")).Format("2006-01-02T15:04:05Z07:00"), i%loadHosts)
	}
	return b.String()
}

func timeZone(offset string) *time.Location {
	t, err := time.Parse("-07:00", offset)
	if err != nil {
		panic(err)
	}
	return t.Location()
}

// loadedRE matches a summary line; group 1 is the rows, 2 the version.
var loadedRE = regexp.MustCompile(`(?m)^loaded (\S+): (\d+) rows, [\d.]+ (?:B|KiB|MiB|GiB) in [\d.]+ s; table cpu version (\d+), segment data/\S+\.parquet$`)

// summaries returns file → rows and version of the summary lines.
func summaries(t *testing.T, stderr string) map[string][2]int64 {
	t.Helper()
	out := map[string][2]int64{}
	for _, m := range loadedRE.FindAllStringSubmatch(stderr, -1) {
		rows, _ := strconv.ParseInt(m[2], 10, 64)
		v, _ := strconv.ParseInt(m[3], 10, 64)
		out[filepath.Base(m[1])] = [2]int64{rows, v}
	}
	return out
}

// batchWriter is a Parquet or Arrow IPC writer.
type batchWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// writeRows writes rows [first, first+n) of schema to w in batches of per
// rows, and closes w.
func (f *loadFixture) writeRows(w batchWriter, schema *arrow.Schema, first, n, per int) {
	f.t.Helper()
	for off := 0; off < n; off += per {
		rec := loadRows(f.mem, schema, first+off, min(per, n-off))
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			f.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
}
