package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
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
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

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
	for off := 0; off < n; off += groupRows {
		rec := loadRows(f.mem, schema, first+off, min(groupRows, n-off))
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			f.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
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
	type writer interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	var w writer
	if stream {
		w = ipc.NewWriter(out, ipc.WithSchema(schema), ipc.WithAllocator(f.mem))
	} else if w, err = ipc.NewFileWriter(out, ipc.WithSchema(schema), ipc.WithAllocator(f.mem)); err != nil {
		f.t.Fatal(err)
	}
	for off := 0; off < n; off += batchRows {
		rec := loadRows(f.mem, schema, first+off, min(batchRows, n-off))
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			f.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
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

// TestLoadParquet: a Parquet file into a table without columns adopts its
// schema; a second one appends; rows and sums read back.
func TestLoadParquet(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 1000, 300)
	stdout, stderr := f.mustLoad("cpu", a)
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	got := summaries(t, stderr)
	if got["a.parquet"] != [2]int64{1000, 2} {
		t.Errorf("summary %v, want 1000 rows at version 2; stderr:\n%s", got, stderr)
	}
	if lines := strings.Count(stderr, "\n"); lines != 1 || strings.Contains(stderr, "\r") {
		t.Errorf("stderr has %d lines, want only the summary (no progress off a terminal):\n%q", lines, stderr)
	}
	b := f.writeParquet("b.parquet", loadFloatSchema, 1000, 70_000, 70_000) // one batch is split in two
	f.mustLoad("cpu", b)
	if rows, sum := f.scan("cpu"); rows != 71_000 || sum != loadSum(0, 71_000) {
		t.Errorf("scan: %d rows, sum %v; want 71000, %v", rows, sum, loadSum(0, 71_000))
	}
	d := f.describe("cpu")
	if num(t, d, "version") != 3 || num(t, d, "segments") != 2 {
		t.Errorf("describe: %v; want version 3 and 2 segments", d)
	}
}

// TestLoadCSV: CSV columns in any order, RFC 3339 timestamps with an
// offset, several batches; a CSV into a table without columns is refused.
func TestLoadCSV(t *testing.T) {
	f := newLoadFixture(t)
	c := f.writeFile("first.csv", loadCSVText(0, 10))
	_, stderr, code := f.load("cpu", c)
	if code != 1 || !strings.Contains(stderr, "first.csv: table cpu has no columns yet and CSV carries no types") {
		t.Fatalf("CSV into a table without columns: exit %d, stderr %q", code, stderr)
	}
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 100, 100)
	b := f.writeFile("b.csv", loadCSVText(100, 2500))
	// The Parquet file gives the table its columns, which the CSV file is
	// checked against before anything is sent.
	_, stderr = f.mustLoad("--batch-rows", "1000", "cpu", a, b)
	got := summaries(t, stderr)
	if got["a.parquet"] != [2]int64{100, 2} || got["b.csv"] != [2]int64{2500, 3} {
		t.Errorf("summaries %v; stderr:\n%s", got, stderr)
	}
	if !strings.Contains(stderr, "loaded 2 files into cpu: 2600 rows") {
		t.Errorf("no total line in:\n%s", stderr)
	}
	if rows, sum := f.scan("cpu"); rows != 2600 || sum != loadSum(0, 2600) {
		t.Errorf("scan: %d rows, sum %v; want 2600, %v", rows, sum, loadSum(0, 2600))
	}
}

// TestLoadArrow: IPC file and stream; a float32 column widens to the
// table's float64, a non-nullable one fills a nullable column.
func TestLoadArrow(t *testing.T) {
	f := newLoadFixture(t)
	f.mustLoad("cpu", f.writeIPC("a.arrow", false, loadFloatSchema, 0, 500, 128))
	narrow := arrow.NewSchema([]arrow.Field{
		{Name: "host", Type: arrow.BinaryTypes.String, Nullable: false},
		{Name: "value", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	s := f.writeIPC("b.arrows", true, narrow, 500, 300, 100)
	ipcName := f.writeIPC("c.ipc", false, narrow, 800, 200, 200)
	// .feather holding a stream: the format is sniffed, not assumed.
	feather := f.writeIPC("d.feather", true, loadFloatSchema, 1000, 100, 100)
	_, stderr := f.mustLoad("cpu", s, ipcName, feather)
	got := summaries(t, stderr)
	if got["b.arrows"] != [2]int64{300, 3} || got["c.ipc"] != [2]int64{200, 4} || got["d.feather"] != [2]int64{100, 5} {
		t.Errorf("summaries %v; stderr:\n%s", got, stderr)
	}
	if rows, sum := f.scan("cpu"); rows != 1100 || sum != loadSum(0, 1100) {
		t.Errorf("scan: %d rows, sum %v; want 1100, %v", rows, sum, loadSum(0, 1100))
	}
	// --input-format reads a file whatever its name.
	odd := f.writeIPC("e.data", false, loadFloatSchema, 1100, 10, 10)
	f.mustLoad("--input-format", "arrow", "cpu", odd)
	if rows, _ := f.scan("cpu"); rows != 1110 {
		t.Errorf("after --input-format arrow: %d rows, want 1110", rows)
	}
}

// TestLoadMismatch: files that do not fit the table are refused before
// anything is sent, with a message naming the file and the column.
func TestLoadMismatch(t *testing.T) {
	f := newLoadFixture(t)
	f.mustLoad("cpu", f.writeParquet("a.parquet", loadFloatSchema, 0, 100, 100))
	v := f.version("cpu")
	noTS := arrow.NewSchema([]arrow.Field{
		{Name: "host", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	extra := arrow.NewSchema(append(loadFloatSchema.Fields(), arrow.Field{Name: "temp", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	for _, tc := range []struct {
		name string
		path string
		want []string
	}{
		{"wrong type", f.writeParquet("strings.parquet", loadSchema(arrow.BinaryTypes.String), 100, 10, 10),
			[]string{"strings.parquet: ", `column "value" is utf8 in the file but float64 in table cpu`, "nothing was sent"}},
		{"narrowing", f.writeParquet("int64.parquet", loadSchema(arrow.PrimitiveTypes.Int64), 100, 10, 10),
			[]string{"int64.parquet: ", `column "value" is int64 in the file but float64`}},
		{"missing key column", f.writeParquet("nots.parquet", noTS, 100, 10, 10),
			[]string{"nots.parquet: ", `the index column "ts" is missing`}},
		{"extra column", f.writeIPC("extra.arrow", false, extra, 100, 10, 10),
			[]string{"extra.arrow: ", `column "temp" is not in table cpu (its columns: ts, host, value)`}},
		{"CSV header", f.writeFile("bad.csv", "ts,value\n2024-06-01T00:00:00Z,1\n"),
			[]string{"bad.csv: ", `the entity column "host" is missing`}},
		{"CSV value", f.writeFile("badvalue.csv", "ts,host,value\n2024-06-01T01:00:00Z,h1,1\n2024-06-01T01:00:10Z,h1,lots\n"),
			[]string{"badvalue.csv: ", `line 3, column "value": "lots" is not a valid float64`}},
	} {
		stdout, stderr, code := f.load("cpu", tc.path)
		t.Logf("%s: %s", tc.name, stderr)
		if code != 1 || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want 1 and nothing", tc.name, code, stdout)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, w, stderr)
			}
		}
		if got := f.version("cpu"); got != v {
			t.Errorf("%s: version %d after a refused file, want %d", tc.name, got, v)
		}
	}
}

// TestLoadPrecheckAllFiles: when the second file does not fit, the first
// is not sent either, and every bad file is named.
func TestLoadPrecheckAllFiles(t *testing.T) {
	f := newLoadFixture(t)
	f.mustLoad("cpu", f.writeParquet("a.parquet", loadFloatSchema, 0, 100, 100))
	good := f.writeParquet("good.parquet", loadFloatSchema, 100, 100, 100)
	bad := f.writeParquet("bad.parquet", loadSchema(arrow.BinaryTypes.String), 200, 100, 100)
	bad2 := f.writeFile("bad2.csv", "ts,host,value,nope\n")
	_, stderr, code := f.load("cpu", good, bad, bad2)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, w := range []string{"2 of 3 files do not fit table cpu; nothing was sent", "bad.parquet: column \"value\" is utf8", "bad2.csv: column \"nope\" is not in table cpu"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, "loaded good.parquet") {
		t.Errorf("good.parquet was loaded:\n%s", stderr)
	}
	if v := f.version("cpu"); v != 2 {
		t.Errorf("version %d, want 2 (nothing loaded)", v)
	}
}

// TestLoadOverlap: a file whose rows are already in the table is refused
// whole (FAILED_PRECONDITION); with several files, the ones before stay
// loaded and the message lists the ones not loaded.
func TestLoadOverlap(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 1000, 1000)
	f.mustLoad("cpu", a)
	_, stderr, code := f.load("cpu", a)
	if code != 1 || !strings.Contains(stderr, "a.parquet: the input overlaps data already in the table") ||
		!strings.Contains(stderr, "nothing was committed (failed precondition)\n") {
		t.Errorf("reloading a.parquet: exit %d, stderr:\n%s", code, stderr)
	}
	if v := f.version("cpu"); v != 2 {
		t.Errorf("version %d after the overlap, want 2", v)
	}

	b := f.writeParquet("b.parquet", loadFloatSchema, 1000, 100, 100)
	c := f.writeParquet("c.parquet", loadFloatSchema, 900, 200, 200) // overlaps a and b
	d := f.writeParquet("d.parquet", loadFloatSchema, 2000, 100, 100)
	_, stderr, code = f.load("cpu", b, c, d)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, w := range []string{"loaded " + b + ": 100 rows", "loaded 1 of 3 files: " + b + "; not loaded: " + c + ", " + d, c + ": the input overlaps"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if rows, _ := f.scan("cpu"); rows != 1100 {
		t.Errorf("%d rows, want 1100 (a and b)", rows)
	}
	if v := f.version("cpu"); v != 3 {
		t.Errorf("version %d, want 3", v)
	}
}

// TestLoadDuplicateInFile: rows repeated within one file are refused.
func TestLoadDuplicateInFile(t *testing.T) {
	f := newLoadFixture(t)
	f.mustLoad("cpu", f.writeParquet("a.parquet", loadFloatSchema, 0, 10, 10))
	dup := f.writeFile("dup.csv", "ts,host,value\n2024-06-01T05:00:00Z,h1,1\n2024-06-01T05:00:00Z,h1,2\n")
	_, stderr, code := f.load("cpu", dup)
	if code != 1 || !strings.Contains(stderr, "dup.csv: ") || !strings.Contains(stderr, "failed precondition") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if v := f.version("cpu"); v != 2 {
		t.Errorf("version %d, want 2", v)
	}
}

// TestLoadUnknownTable: exit 1 with a message naming the table.
func TestLoadUnknownTable(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 10, 10)
	_, stderr, code := f.load("nope", a)
	if code != 1 || !strings.Contains(stderr, `table "nope" does not exist`) {
		t.Errorf("exit %d, stderr %q; want 1 and the table named", code, stderr)
	}
}

// TestLoadCorrupt: unreadable files are named; one that breaks half way
// commits nothing.
func TestLoadCorrupt(t *testing.T) {
	f := newLoadFixture(t)
	f.mustLoad("cpu", f.writeParquet("a.parquet", loadFloatSchema, 0, 10, 10))
	good := f.writeParquet("good.parquet", loadFloatSchema, 10_000, 3000, 1000)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := f.writeFile("truncated.parquet", string(data[:len(data)/2]))
	garbage := f.writeFile("garbage.arrow", strings.Repeat("not arrow ", 100))
	// Break the page header of the value column in the last row group: the
	// footer reads fine, so the file passes the check and fails mid-way.
	pf, err := file.OpenParquetFile(good, false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(2).ColumnChunk(2)
	if err != nil {
		t.Fatal(err)
	}
	off := cc.DataPageOffset()
	pf.Close()
	broken := bytes.Clone(data)
	copy(broken[off:], bytes.Repeat([]byte{0xff}, 32))
	midway := f.writeFile("midway.parquet", string(broken))
	// A CSV whose bad value comes after the first batch, which the check
	// parses.
	csvText := loadCSVText(20_000, 250)
	lines := strings.Split(csvText, "\n")
	lines[181] = strings.Replace(lines[181], "20180,", "oops,", 1)
	badCSV := f.writeFile("late.csv", strings.Join(lines, "\n"))
	missing := f.path("missing.parquet")
	for _, tc := range []struct {
		path string
		args []string
		want string
	}{
		{truncated, nil, "truncated.parquet: not a readable Parquet file"},
		{garbage, nil, "garbage.arrow: not a readable Arrow IPC file or stream"},
		{missing, nil, "missing.parquet: cannot read the file: no such file or directory"},
		{f.dir, []string{"--input-format", "csv"}, f.dir + ": is a directory"},
		{midway, []string{"--batch-rows", "1000"}, "midway.parquet: "},
		{badCSV, []string{"--batch-rows", "100"}, `late.csv: line 182, column "value": "oops" is not a valid float64`},
	} {
		_, stderr, code := f.load(append(append(tc.args, "cpu"), tc.path)...)
		t.Logf("%s: %s", filepath.Base(tc.path), stderr)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", filepath.Base(tc.path), code, stderr, tc.want)
		}
		if tc.path == midway || tc.path == badCSV {
			if !strings.Contains(stderr, "nothing of it was committed") {
				t.Errorf("%s: stderr %q does not say nothing was committed", filepath.Base(tc.path), stderr)
			}
		}
		if v := f.version("cpu"); v != 2 {
			t.Errorf("%s: version %d, want 2", filepath.Base(tc.path), v)
		}
	}
	if rows, _ := f.scan("cpu"); rows != 10 {
		t.Errorf("%d rows, want 10", rows)
	}
}

// TestLoadUsage: bad invocations exit 2 before any connection.
func TestLoadUsage(t *testing.T) {
	dir := t.TempDir()
	txt := filepath.Join(dir, "data.txt")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"load"}, "missing TABLE and FILE arguments"},
		{[]string{"load", "cpu"}, "missing FILE argument"},
		{[]string{"load", "cpu", txt}, txt + ` has an unknown extension ".txt"`},
		{[]string{"load", "cpu", filepath.Join(dir, "data")}, "data has no extension"},
		{[]string{"load", "--input-format", "xls", "cpu", txt}, "must be one of parquet|csv|arrow"},
		{[]string{"load", "--progress", "sometimes", "cpu", txt}, "must be one of auto|always|never"},
		{[]string{"load", "--batch-rows", "0", "cpu", txt}, "--batch-rows must be positive"},
	} {
		stdout, stderr, code := runCLI(t, nil, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("tsflight %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
	stdout, _, code := runCLI(t, nil, "load", "--help")
	if code != 0 || !strings.Contains(stdout, "Example:") || !strings.Contains(stdout, "--input-format") {
		t.Errorf("load --help: exit %d, stdout:\n%s", code, stdout)
	}
}

// TestLoadServerDown: an unreachable server is exit 3.
func TestLoadServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := filepath.Join(t.TempDir(), "a.csv")
	os.WriteFile(path, []byte("ts,value\n"), 0o644)
	_, stderr, code := runCLI(t, nil, "load", "--server", "grpc://"+addr, "cpu", path)
	if code != 3 || !strings.Contains(stderr, "cannot reach a tsflight server at "+addr) {
		t.Errorf("exit %d, stderr %q; want 3", code, stderr)
	}
}

// TestLoadProgressAlways: off a terminal, --progress always prints plain
// lines (no carriage returns), then the summary.
func TestLoadProgressAlways(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 5000, 1000)
	_, stderr := f.mustLoad("--progress", "always", "--batch-rows", "1000", "cpu", a)
	if strings.Contains(stderr, "\r") {
		t.Errorf("carriage return off a terminal: %q", stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	progress := regexp.MustCompile(`^a\.parquet: \d+ rows, [\d.]+ (B|KiB|MiB) of [\d.]+ KiB \(\d+%\), [\d.]+ (B|KiB|MiB|GiB)/s, [\d.]+[kM]? rows/s, [\d.]+ s$`)
	if len(lines) < 2 {
		t.Fatalf("want progress lines and a summary, got:\n%s", stderr)
	}
	for _, l := range lines[:len(lines)-1] {
		if !progress.MatchString(l) {
			t.Errorf("progress line %q does not match %s", l, progress)
		}
	}
	if !loadedRE.MatchString(lines[len(lines)-1]) {
		t.Errorf("last line %q is not the summary", lines[len(lines)-1])
	}
	_, stderr = f.mustLoad("--progress", "never", "cpu", f.writeParquet("b.parquet", loadFloatSchema, 5000, 10, 10))
	if strings.Count(stderr, "\n") != 1 {
		t.Errorf("--progress never: %q", stderr)
	}
}

// TestLoadJSON: --format json writes one object per file on stdout.
func TestLoadJSON(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 100, 100)
	b := f.writeFile("b.csv", loadCSVText(100, 50))
	empty := f.writeFile("empty.csv", "ts,host,value\n")
	stdout, stderr := f.mustLoad("--format", "json", "cpu", a, empty, b)
	var got []loadResult
	dec := json.NewDecoder(strings.NewReader(stdout))
	for dec.More() {
		var r loadResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("stdout %q: %v", stdout, err)
		}
		got = append(got, r)
	}
	if len(got) != 3 || strings.Count(stdout, "\n") != 3 {
		t.Fatalf("want 3 JSON lines, got:\n%s", stdout)
	}
	if got[0].File != a || got[0].Rows != 100 || got[0].Version == nil || *got[0].Version != 2 || !strings.HasPrefix(got[0].Segment, "data/") || got[0].Table != "cpu" {
		t.Errorf("first object %+v", got[0])
	}
	if got[1].File != empty || got[1].Rows != 0 || got[1].Version != nil {
		t.Errorf("empty file %+v", got[1])
	}
	if got[2].File != b || got[2].Rows != 50 || got[2].Version == nil || *got[2].Version != 3 {
		t.Errorf("third object %+v", got[2])
	}
	if !strings.Contains(stderr, "skipped "+empty+": no rows, nothing to load") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// TestLoadNonNullable: a table column that is not nullable refuses a
// file's nulls as they are sent.
func TestLoadNonNullable(t *testing.T) {
	f := newLoadFixture(t)
	strict := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: false},
		{Name: "host", Type: arrow.BinaryTypes.String, Nullable: false},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: false},
	}, nil)
	f.mustLoad("cpu", f.writeParquet("a.parquet", strict, 0, 10, 10))
	// A nullable file column without nulls is fine.
	f.mustLoad("cpu", f.writeParquet("b.parquet", loadFloatSchema, 10, 10, 10))
	c := f.writeFile("c.csv", "ts,host,value\n2024-06-01T05:00:00Z,h1,1\n2024-06-01T05:00:10Z,h1,\n")
	_, stderr, code := f.load("cpu", c)
	if code != 1 || !strings.Contains(stderr, `c.csv: column "value" is not nullable in the table but row 2 of the file has no value in it`) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if v := f.version("cpu"); v != 3 {
		t.Errorf("version %d, want 3", v)
	}
}

// TestLoadProgressRedraw: on a terminal the line is redrawn in place (a
// carriage return, padded over a longer previous line) at most ten times a
// second, and cleared before the summary.
func TestLoadProgressRedraw(t *testing.T) {
	var b bytes.Buffer
	p := newLoadProgress(&b, loadProgressRedraw, "/data/cpu.parquet", 10<<20)
	p.update(65536, 5<<20)
	p.update(131072, 6<<20) // within 100 ms of the first: not drawn
	if n := strings.Count(b.String(), "\r"); n != 1 {
		t.Fatalf("%d redraws, want 1: %q", n, b.String())
	}
	first := strings.TrimPrefix(b.String(), "\r")
	if !regexp.MustCompile(`^cpu\.parquet: 65536 rows, 5\.0 MiB of 10\.0 MiB \(50%\), `).MatchString(first) || strings.Contains(first, "\n") {
		t.Errorf("first draw %q", first)
	}
	p.last = p.last.Add(-time.Second)
	p.width += 5 // as if the previous line was longer
	p.update(131072, 6<<20)
	second := b.String()[len(first)+1:]
	if !strings.HasPrefix(second, "\rcpu.parquet: 131072 rows, 6.0 MiB of 10.0 MiB (60%)") || !strings.HasSuffix(second, "     ") {
		t.Errorf("second draw %q", second)
	}
	b.Reset()
	p.clear()
	if s := b.String(); !strings.HasPrefix(s, "\r") || !strings.HasSuffix(s, "\r") || strings.TrimSpace(s) != "" {
		t.Errorf("clear wrote %q", s)
	}
	b.Reset()
	p.clear()
	if b.Len() != 0 {
		t.Errorf("a second clear wrote %q", b.String())
	}
}
