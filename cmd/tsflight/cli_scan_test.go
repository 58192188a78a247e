package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Tests of the scan and sql commands, on the fixture of
// cli_fixture_test.go.

// cliCSV is the csv output of rows: the header and one line per row.
func cliCSV(rows []cliRow) string {
	lines := []string{"ts,host,value,n"}
	for _, r := range rows {
		lines = append(lines, r.csv())
	}
	return cliText(lines...)
}

// cliJSON is the json output of rows.
func cliJSON(rows []cliRow) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.json() + "\n")
	}
	return b.String()
}

// cliReadParquet reads a Parquet file and checks that it holds rows in
// order, with schema (the fixture's, or another time unit).
func cliReadParquet(t *testing.T, data []byte, schema *arrow.Schema, rows []cliRow) {
	t.Helper()
	if !bytes.HasPrefix(data, []byte("PAR1")) || !bytes.HasSuffix(data, []byte("PAR1")) {
		t.Fatalf("not a Parquet file: %d bytes starting %q", len(data), data[:min(len(data), 16)])
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), parquet.NewReaderProperties(mem), pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if tbl.Schema().NumFields() != schema.NumFields() {
		t.Fatalf("Parquet schema:\n%s\nwant:\n%s", tbl.Schema(), schema)
	}
	for i, got := range tbl.Schema().Fields() {
		want := schema.Field(i)
		if got.Name != want.Name || !arrow.TypeEqual(got.Type, want.Type) || got.Nullable != want.Nullable {
			t.Fatalf("Parquet schema:\n%s\nwant:\n%s", tbl.Schema(), schema)
		}
	}
	unit := schema.Field(0).Type.(*arrow.TimestampType).Unit
	if tbl.NumRows() != int64(len(rows)) {
		t.Fatalf("Parquet file: %d rows, want %d", tbl.NumRows(), len(rows))
	}
	var cols [4]arrow.Array
	for i := range cols {
		a, err := array.Concatenate(tbl.Column(i).Data().Chunks(), mem)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release()
		cols[i] = a
	}
	ts, host, val, n := cols[0].(*array.Timestamp), cols[1].(*array.String), cols[2].(*array.Float64), cols[3].(*array.Int64)
	for i, r := range rows {
		got := fmt.Sprintf("%d %s %s %d", ts.Value(i).ToTime(unit).UnixMilli(), host.Value(i), val.ValueStr(i), n.Value(i))
		v := "(null)"
		if p := r.value(); p != nil {
			v = fmt.Sprint(*p)
		}
		want := fmt.Sprintf("%d %s %s %d", base+int64(r.step)*10_000, r.host, v, r.n())
		if got != want || ts.IsNull(i) || host.IsNull(i) || n.IsNull(i) {
			t.Fatalf("Parquet row %d: %s, want %s", i, got, want)
		}
	}
}

func TestScanFormats(t *testing.T) {
	f := newCLIFixture(t)
	all := cliRows(0, 90)
	if len(all) != 160 {
		t.Fatalf("fixture: %d rows, want 160", len(all))
	}

	// table: numbers right-aligned, NULL for nulls, the first --max-rows
	// rows and a line about the rest.
	want := cliText(
		"ts                    host  value   n",
		"--------------------  ----  -----  --",
		"2024-06-01T00:00:00Z  a         0   0",
		"2024-06-01T00:00:00Z  b         0   0",
		"2024-06-01T00:00:10Z  a       0.1   1",
		"2024-06-01T00:00:10Z  b      0.25  -1",
		"2024-06-01T00:00:20Z  a       0.2   2",
		"(160 rows, first 5 shown; --max-rows 0 shows all, --format csv|json|parquet writes all)",
	)
	if out := f.ok(t, "scan", "--max-rows", "5", cliTable); out != want {
		t.Errorf("scan --max-rows 5:\n%s\nwant:\n%s", out, want)
	}
	want = cliText(
		"ts                    host  value   n",
		"--------------------  ----  -----  --",
		"2024-06-01T00:00:40Z  b         1  -4",
		"2024-06-01T00:00:50Z  b      NULL  -5",
		"2024-06-01T00:01:00Z  b       NaN  -6",
		"(3 rows)",
	)
	if out := f.ok(t, "scan", "--entity", "host=b", "--start", cliTime(4), "--end", cliTime(7), cliTable); out != want {
		t.Errorf("scan of b's steps 4…6:\n%s\nwant:\n%s", out, want)
	}
	want = cliText("ts                    host  value  n", "--------------------  ----  -----  -", "2024-06-01T00:00:10Z  a       0.1  1", "(1 row)")
	if out := f.ok(t, "scan", "--entity", "host=a", "--start", cliTime(1), "--end", cliTime(2), cliTable); out != want {
		t.Errorf("scan of one row:\n%s\nwant:\n%s", out, want)
	}
	// The default shows 40 rows; --max-rows 0 all of them.
	lines := cliLines(t, f.ok(t, "scan", cliTable))
	if len(lines) != 2+40+1 || lines[len(lines)-1] != "(160 rows, first 40 shown; --max-rows 0 shows all, --format csv|json|parquet writes all)" {
		t.Errorf("scan: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	lines = cliLines(t, f.ok(t, "scan", "--max-rows", "0", cliTable))
	if len(lines) != 2+160+1 || lines[len(lines)-1] != "(160 rows)" || lines[len(lines)-2] != "2024-06-01T00:14:50Z  b     22.25  -89" {
		t.Errorf("scan --max-rows 0: %d lines, ending %q", len(lines), lines[len(lines)-2:])
	}

	// csv and json write every row.
	if out := f.ok(t, "scan", "--format", "csv", cliTable); out != cliCSV(all) {
		t.Errorf("scan --format csv:\n%s\nwant:\n%s", out, cliCSV(all))
	}
	out := f.ok(t, "scan", "--format", "json", "--max-rows", "3", cliTable)
	if out != cliJSON(all) {
		t.Errorf("scan --format json:\n%s\nwant:\n%s", out, cliJSON(all))
	}
	for i, line := range cliLines(t, out) {
		var row struct {
			TS    string `json:"ts"`
			Host  string `json:"host"`
			Value any    `json:"value"`
			N     int64  `json:"n"`
		}
		d := json.NewDecoder(strings.NewReader(line))
		d.DisallowUnknownFields()
		if err := d.Decode(&row); err != nil {
			t.Fatalf("json line %d %q: %v", i, line, err)
		}
		r := all[i]
		if row.TS != cliTime(r.step) || row.Host != r.host || row.N != r.n() {
			t.Errorf("json line %d: %+v, want %+v", i, row, r)
		}
	}

	// parquet to a file, and to a standard output that is not a terminal.
	path := filepath.Join(t.TempDir(), "m.parquet")
	if out := f.ok(t, "scan", "--format", "parquet", "--output", path, cliTable); out != "" {
		t.Errorf("scan --format parquet --output: stdout %q", out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cliReadParquet(t, data, cliSchema, all)
	cliReadParquet(t, []byte(f.ok(t, "scan", "--format", "parquet", cliTable)), cliSchema, all)
	b := cliRows(0, 90, "b")
	cliReadParquet(t, []byte(f.ok(t, "scan", "--format", "parquet", "--entity", "host=b", cliTable)), cliSchema, b)

	// --output replaces a file and works for every format.
	for format, want := range map[string]string{"csv": cliCSV(b), "json": cliJSON(b)} {
		path := filepath.Join(t.TempDir(), "out."+format)
		if err := os.WriteFile(path, []byte(strings.Repeat("old content\n", 10_000)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := f.ok(t, "scan", "--format", format, "--output", path, "--entity", "host=b", cliTable); out != "" {
			t.Errorf("scan --format %s --output: stdout %q", format, out)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("scan --format %s --output: %v\n%s", format, err, got)
		}
	}

	// An empty result: the header, no rows.
	late := "2024-07-01T00:00:00Z"
	if out := f.ok(t, "scan", "--start", late, cliTable); out != cliText("ts  host  value  n", "--  ----  -----  -", "(0 rows)") {
		t.Errorf("empty scan:\n%s", out)
	}
	if out := f.ok(t, "scan", "--format", "csv", "--start", late, cliTable); out != "ts,host,value,n\n" {
		t.Errorf("empty scan --format csv: %q", out)
	}
	if out := f.ok(t, "scan", "--format", "json", "--start", late, cliTable); out != "" {
		t.Errorf("empty scan --format json: %q", out)
	}
	cliReadParquet(t, []byte(f.ok(t, "scan", "--format", "parquet", "--start", late, cliTable)), cliSchema, nil)
}

func TestScanSelect(t *testing.T) {
	f := newCLIFixture(t)
	csv := func(args ...string) string {
		t.Helper()
		return f.ok(t, append(append([]string{"scan", "--format", "csv"}, args...), cliTable)...)
	}
	// --columns: these columns, in this order.
	want := cliText("n,ts,host", "0,"+cliTime(0)+",a", "1,"+cliTime(1)+",a", "2,"+cliTime(2)+",a")
	if out := csv("--columns", "n,ts", "--columns", "host", "--entity", "host=a", "--end", cliTime(3)); out != want {
		t.Errorf("scan --columns n,ts --columns host:\n%s\nwant:\n%s", out, want)
	}
	if out := csv("--columns", "value", "--entity", "host=b", "--start", cliTime(4), "--end", cliTime(8)); out != cliText("value", "1", "", "NaN", "1.75") {
		t.Errorf("scan --columns value:\n%s", out)
	}
	// --entity keeps one host.
	for _, h := range []string{"a", "b"} {
		if out := csv("--entity", "host="+h); out != cliCSV(cliRows(0, 90, h)) {
			t.Errorf("scan --entity host=%s:\n%s", h, out)
		}
	}
	if out := csv("--entity", "host=c"); out != "ts,host,value,n\n" {
		t.Errorf("scan --entity host=c: %q", out)
	}
	// [--start, --end) is half-open, in any offset, across the two
	// segments.
	for _, tc := range []struct {
		start, end string
		rows       []cliRow
	}{
		{cliTime(3), cliTime(4), cliRows(3, 4)},
		{cliTime(59), cliTime(61), cliRows(59, 61)},
		{"2024-06-01T02:09:50+02:00", "2024-06-01T00:10:10Z", cliRows(59, 61)},
		{"2024-06-01T00:00:25Z", "2024-06-01T00:00:45.5Z", cliRows(3, 5)},
		{cliTime(85), "", cliRows(85, 90)},
		{"", cliTime(2), cliRows(0, 2)},
		{cliTime(10), cliTime(20), cliRows(10, 20)},
	} {
		args := []string{}
		if tc.start != "" {
			args = append(args, "--start", tc.start)
		}
		if tc.end != "" {
			args = append(args, "--end", tc.end)
		}
		if out := csv(args...); out != cliCSV(tc.rows) {
			t.Errorf("scan [%s, %s):\n%s\nwant:\n%s", tc.start, tc.end, out, cliCSV(tc.rows))
		}
	}
	// --version pins an older version; the combination with the others.
	if out := csv("--version", "2"); out != cliCSV(cliRows(0, 60)) {
		t.Errorf("scan --version 2:\n%s", out)
	}
	if out := csv("--version", "3"); out != cliCSV(cliRows(0, 90)) {
		t.Errorf("scan --version 3:\n%s", out)
	}
	if out := csv("--version", "2", "--entity", "host=a", "--start", cliTime(58)); out != cliCSV(cliRows(58, 60, "a")) {
		t.Errorf("scan --version 2 --entity host=a --start:\n%s", out)
	}
	if out := f.ok(t, "scan", "--version", "2", "--max-rows", "1", cliTable); !strings.HasSuffix(out, "\n(102 rows, first 1 shown; --max-rows 0 shows all, --format csv|json|parquet writes all)\n") {
		t.Errorf("scan --version 2 --max-rows 1:\n%s", out)
	}
}

func TestScanErrors(t *testing.T) {
	f := newCLIFixture(t)
	f.failAll(t, "scan", []cliFailure{
		{1, []string{`start: "yesterday" is not an RFC 3339 timestamp`, "(invalid argument)"}, []string{"--start", "yesterday", cliTable}},
		{1, []string{`end: "2024-06-01" is not an RFC 3339 timestamp`}, []string{"--end", "2024-06-01", cliTable}},
		{1, []string{`table "nope": not found`, "(not found)"}, []string{"nope"}},
		{1, []string{`unknown column "nope" (the table has "ts", "host", "value", "n")`, "(invalid argument)"}, []string{"--columns", "ts,nope", cliTable}},
		{1, []string{`"dc" is not an entity column (entity columns: host)`}, []string{"--entity", "dc=x", cliTable}},
		{1, []string{"version 9 does not exist (the table is at version 3)", "(not found)"}, []string{"--version", "9", cliTable}},
		{2, []string{`invalid value "-1" for flag --version: "-1" is not a table version (a non-negative integer)`}, []string{"--version", "-1", cliTable}},
		{2, []string{`invalid value "host" for flag --entity: "host" is not COLUMN=VALUE`}, []string{"--entity", "host", cliTable}},
		{2, []string{`invalid value "=a" for flag --entity: "=a" is not COLUMN=VALUE`}, []string{"--entity", "=a", cliTable}},
		{2, []string{`invalid value "host=b" for flag --entity: column "host" given twice`}, []string{"--entity", "host=a", "--entity", "host=b", cliTable}},
		{2, []string{`invalid value "ts,,n" for flag --columns: empty name`}, []string{"--columns", "ts,,n", cliTable}},
		{2, []string{"--max-rows must not be negative, got -1"}, []string{"--max-rows", "-1", cliTable}},
		{2, []string{`invalid value "xml" for flag --format: must be one of table|csv|json|parquet`}, []string{"--format", "xml", cliTable}},
		{2, []string{"flag provided but not defined: --limit"}, []string{"--limit", "3", cliTable}},
		{2, []string{`unexpected argument "n" after the table name`}, []string{cliTable, "n"}},
	})
	f.fail(t, 2, []string{"missing the table name"}, "scan")

	// An output that cannot be created fails and leaves nothing; a
	// request the server refuses leaves an existing file alone.
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing", "m.parquet"), "no such file or directory"},
		{filepath.Join(notDir, "m.parquet"), "not a directory"},
		{dir, "is a directory"},
	} {
		f.fail(t, 1, []string{"open " + tc.path + ": " + tc.want}, "scan", "--format", "parquet", "--output", tc.path, cliTable)
		if _, err := os.Lstat(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after --output %s: %v", tc.path, err)
		}
	}
	f.fail(t, 1, []string{`unknown column "nope"`}, "scan", "--format", "parquet", "--output", notDir, "--columns", "nope", cliTable)
	if b, err := os.ReadFile(notDir); err != nil || string(b) != "keep" {
		t.Errorf("a refused scan touched its --output file: %q, %v", b, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("files left in %s: %v, %v", dir, entries, err)
	}
}

// TestParquetToDevNull: standard output redirected to /dev/null is not a
// terminal, so --format parquet may write there.
func TestParquetToDevNull(t *testing.T) {
	f := newCLIFixture(t)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd := cliCommand(t, []string{"TSFLIGHT_SERVER=" + f.server}, "scan", "--format", "parquet", cliTable)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = null, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("tsflight scan --format parquet >/dev/null: %v, stderr %q", err, stderr.String())
	}
}

// TestParquetFileIsValid reads the scan's Parquet file with the Parquet
// reader itself: row groups and statistics are there.
func TestParquetFileIsValid(t *testing.T) {
	f := newCLIFixture(t)
	data := []byte(f.ok(t, "scan", "--format", "parquet", "--columns", "n", cliTable))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rdr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	if md.NumRows != 160 || md.Schema.NumColumns() != 1 || md.Schema.Column(0).Name() != "n" {
		t.Fatalf("Parquet metadata: %d rows, %d columns", md.NumRows, md.Schema.NumColumns())
	}
	var rows int64
	for i := 0; i < rdr.NumRowGroups(); i++ {
		rg := rdr.MetaData().RowGroup(i)
		rows += rg.NumRows()
		col, err := rg.ColumnChunk(0)
		if err != nil {
			t.Fatal(err)
		}
		if col.Compression().String() != "ZSTD" {
			t.Errorf("row group %d: compression %s, want ZSTD", i, col.Compression())
		}
	}
	if rows != 160 {
		t.Errorf("row groups hold %d rows, want 160", rows)
	}
}

func TestSQL(t *testing.T) {
	f := newCLIFixture(t)
	if !sqlEnabled {
		f.fail(t, 1, []string{"Flight SQL is not served: this tsflight server was built without -tags duckdb_arrow", "(unimplemented)"}, "sql", "SELECT 1")
		f.fail(t, 2, []string{"missing the query"}, "sql")
		return
	}
	var sumA, sumB int64
	for _, r := range cliRows(0, 90) {
		if r.host == "a" {
			sumA += r.n()
		} else {
			sumB += r.n()
		}
	}
	query := "SELECT host, count(*) AS n_rows, sum(n)::BIGINT AS total, max(ts) AS last FROM m GROUP BY host ORDER BY host"
	want := cliText(
		"host  n_rows  total  last",
		"----  ------  -----  --------------------",
		fmt.Sprintf("a         85  %5d  %s", sumA, cliTime(89)),
		fmt.Sprintf("b         75  %5d  %s", sumB, cliTime(89)),
		"(2 rows)",
	)
	if out := f.ok(t, "sql", query); out != want {
		t.Errorf("sql:\n%s\nwant:\n%s", out, want)
	}
	wantCSV := cliText("host,n_rows,total,last", fmt.Sprintf("a,85,%d,%s", sumA, cliTime(89)), fmt.Sprintf("b,75,%d,%s", sumB, cliTime(89)))
	if out := f.ok(t, "sql", "--format", "csv", query); out != wantCSV {
		t.Errorf("sql --format csv:\n%s\nwant:\n%s", out, wantCSV)
	}
	wantJSON := fmt.Sprintf("{\"host\":\"a\",\"n_rows\":85,\"total\":%d,\"last\":%q}\n{\"host\":\"b\",\"n_rows\":75,\"total\":%d,\"last\":%q}\n", sumA, cliTime(89), sumB, cliTime(89))
	if out := f.ok(t, "sql", "--format", "json", query); out != wantJSON {
		t.Errorf("sql --format json:\n%s\nwant:\n%s", out, wantJSON)
	}
	// A time predicate, with NULL and NaN values.
	if out := f.ok(t, "sql", "--format", "csv", "SELECT * FROM m WHERE ts >= '2024-06-01T00:00:40Z' AND ts < '2024-06-01T00:01:10Z' AND host = 'b' ORDER BY ts"); out != cliCSV(cliRows(4, 7, "b")) {
		t.Errorf("sql with a time range:\n%s", out)
	}
	// parquet to a file: read back.
	path := filepath.Join(t.TempDir(), "q.parquet")
	if out := f.ok(t, "sql", "--format", "parquet", "--output", path, "SELECT * FROM m ORDER BY ts, host"); out != "" {
		t.Errorf("sql --format parquet --output: stdout %q", out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// DuckDB's timestamps are in microseconds.
	usSchema := arrow.NewSchema(append([]arrow.Field{{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true}},
		cliSchema.Fields()[1:]...), nil)
	cliReadParquet(t, data, usSchema, cliRows(0, 90))

	// A write is refused, a bad statement fails, and a result the output
	// cannot take leaves no file behind.
	f.fail(t, 1, []string{"tsflight SQL is read-only", "(INSERT)", "(invalid argument)"}, "sql", "INSERT INTO m (host) VALUES ('c')")
	f.fail(t, 1, []string{`syntax error at or near "SELEC"`, "(invalid argument)"}, "sql", "SELEC 1")
	f.fail(t, 1, []string{`table "nope" does not exist (tables: m)`, "(not found)"}, "sql", "SELECT * FROM nope")
	f.fail(t, 1, []string{"boom"}, "sql", "SELECT error('boom')")
	iv := filepath.Join(t.TempDir(), "iv.parquet")
	f.fail(t, 1, []string{"INTERVAL_MONTH_DAY_NANO"}, "sql", "--format", "parquet", "--output", iv, "SELECT INTERVAL 1 DAY AS d")
	if _, err := os.Lstat(iv); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed sql --output left %s: %v", iv, err)
	}
	f.fail(t, 2, []string{"missing the query"}, "sql")
	f.fail(t, 2, []string{"the query is empty"}, "sql", "  ")
	f.fail(t, 2, []string{`unexpected argument "1" after the query (quote the whole query)`}, "sql", "SELECT", "1")
	if d := f.describe(t, cliTable); d["version"] != 3.0 || d["rows"] != 160.0 {
		t.Errorf("after the refused statements: %v", d)
	}
}
