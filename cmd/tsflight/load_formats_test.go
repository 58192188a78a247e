package main

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// Tests of loading each input format: Parquet, CSV and Arrow IPC.

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
