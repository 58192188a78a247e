package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Unit tests of the output helpers (output.go).

// outTimestamps builds a timestamp array of unit and zone.
func outTimestamps(t *testing.T, mem memory.Allocator, unit arrow.TimeUnit, zone string, vals ...int64) arrow.Array {
	t.Helper()
	b := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: unit, TimeZone: zone})
	defer b.Release()
	for _, v := range vals {
		b.Append(arrow.Timestamp(v))
	}
	b.AppendNull()
	return b.NewArray()
}

// june1 is 2024-06-01T00:00:00Z in seconds.
const june1 = base / 1000

func TestValueStringTimestamps(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	jan1 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for _, tc := range []struct {
		unit arrow.TimeUnit
		zone string
		v    int64
		want string
	}{
		{arrow.Second, "", june1, "2024-06-01T00:00:00Z"},
		{arrow.Millisecond, "", june1*1000 + 250, "2024-06-01T00:00:00.25Z"},
		{arrow.Millisecond, "UTC", june1 * 1000, "2024-06-01T00:00:00Z"},
		{arrow.Microsecond, "UTC", june1*1_000_000 + 1, "2024-06-01T00:00:00.000001Z"},
		{arrow.Nanosecond, "Europe/Paris", june1*1_000_000_000 + 123456789, "2024-06-01T02:00:00.123456789+02:00"},
		{arrow.Second, "America/New_York", jan1, "2023-12-31T19:00:00-05:00"},
		{arrow.Microsecond, "+05:30", june1*1_000_000 + 500_000, "2024-06-01T05:30:00.5+05:30"},
		{arrow.Second, "Mars/Olympus", june1, "2024-06-01T00:00:00Z"}, // an unknown zone: UTC
		{arrow.Second, "", -1, "1969-12-31T23:59:59Z"},
	} {
		a := outTimestamps(t, mem, tc.unit, tc.zone, tc.v)
		if got := valueString(a, 0); got != tc.want {
			t.Errorf("valueString(%d %s in %q) = %q, want %q", tc.v, tc.unit, tc.zone, got, tc.want)
		}
		if got := valueString(a, 1); got != "" {
			t.Errorf("valueString(null timestamp) = %q, want \"\"", got)
		}
		if got, err := json.Marshal(jsonValue(a, 0)); err != nil || string(got) != `"`+tc.want+`"` {
			t.Errorf("jsonValue(%d %s in %q) = %s, %v; want %q", tc.v, tc.unit, tc.zone, got, err, tc.want)
		}
		a.Release()
	}
}

// rendered is a value and how valueString and jsonValue write it.
type rendered[T any] struct {
	v          T
	str, jsonv string
}

// checkRendered checks valueString and jsonValue of the first len(cases)
// values of a (of type kind) against cases.
func checkRendered[T any](t *testing.T, kind string, a arrow.Array, cases []rendered[T]) {
	t.Helper()
	for i, c := range cases {
		if got := valueString(a, i); got != c.str {
			t.Errorf("valueString(%s %v) = %q, want %q", kind, c.v, got, c.str)
		}
		if got, err := json.Marshal(jsonValue(a, i)); err != nil || string(got) != c.jsonv {
			t.Errorf("jsonValue(%s %v) = %s, %v; want %s", kind, c.v, got, err, c.jsonv)
		}
	}
}

func TestValueStringFloats(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f64 := []rendered[float64]{
		{0.1, "0.1", "0.1"},
		{math.Nextafter(0.3, 1), "0.30000000000000004", "0.30000000000000004"}, // 0.1 + 0.2
		{2.5, "2.5", "2.5"},
		{100, "100", "100"},
		{123456, "123456", "123456"},
		{-7.25, "-7.25", "-7.25"},
		{1e21, "1e+21", "1e+21"},
		{1e-7, "1e-07", "1e-7"},
		{math.Copysign(0, -1), "-0", "-0"},
		{math.NaN(), "NaN", `"NaN"`},
		{math.Inf(1), "+Inf", `"+Inf"`},
		{math.Inf(-1), "-Inf", `"-Inf"`},
	}
	b := array.NewFloat64Builder(mem)
	for _, c := range f64 {
		b.Append(c.v)
	}
	b.AppendNull()
	a := b.NewArray()
	b.Release()
	defer a.Release()
	checkRendered(t, "float64", a, f64)
	if got, j := valueString(a, len(f64)), jsonValue(a, len(f64)); got != "" || j != nil {
		t.Errorf("null float64: valueString %q, jsonValue %v", got, j)
	}

	// float32 in its own shortest form: 0.1, not 0.10000000149011612.
	f32 := []rendered[float32]{
		{0.1, "0.1", "0.1"},
		{2.5, "2.5", "2.5"},
		{float32(math.NaN()), "NaN", `"NaN"`},
		{float32(math.Inf(-1)), "-Inf", `"-Inf"`},
	}
	b32 := array.NewFloat32Builder(mem)
	for _, c := range f32 {
		b32.Append(c.v)
	}
	a32 := b32.NewArray()
	b32.Release()
	defer a32.Release()
	checkRendered(t, "float32", a32, f32)
}

func TestValueStringOthers(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	// A dictionary prints its values; a null index is null.
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	db := array.NewDictionaryBuilder(mem, dt).(*array.BinaryDictionaryBuilder)
	for _, s := range []string{"us-east-1", "eu-west-1", "us-east-1"} {
		if err := db.AppendString(s); err != nil {
			t.Fatal(err)
		}
	}
	db.AppendNull()
	dict := db.NewArray()
	db.Release()
	defer dict.Release()
	for i, want := range []string{"us-east-1", "eu-west-1", "us-east-1", ""} {
		if got := valueString(dict, i); got != want {
			t.Errorf("valueString(dictionary, %d) = %q, want %q", i, got, want)
		}
		wantJSON := `"` + want + `"`
		if want == "" {
			wantJSON = "null"
		}
		if got, err := json.Marshal(jsonValue(dict, i)); err != nil || string(got) != wantJSON {
			t.Errorf("jsonValue(dictionary, %d) = %s, %v; want %s", i, got, err, wantJSON)
		}
	}

	// Strings as they are (no quoting), integers, booleans, decimals.
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{`a "quoted", comma`, "héllo", ""}, nil)
	sb.AppendNull()
	str := sb.NewArray()
	sb.Release()
	defer str.Release()
	lsb := array.NewLargeStringBuilder(mem)
	lsb.Append("large")
	lstr := lsb.NewArray()
	lsb.Release()
	defer lstr.Release()
	ib := array.NewInt64Builder(mem)
	ib.AppendValues([]int64{-42, math.MaxInt64}, nil)
	ints := ib.NewArray()
	ib.Release()
	defer ints.Release()
	ub := array.NewUint64Builder(mem)
	ub.Append(math.MaxUint64)
	uints := ub.NewArray()
	ub.Release()
	defer uints.Release()
	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues([]bool{true, false}, nil)
	bools := bb.NewArray()
	bb.Release()
	defer bools.Release()
	decb := array.NewDecimal128Builder(mem, &arrow.Decimal128Type{Precision: 10, Scale: 2})
	decb.Append(decimal128.FromI64(-12345))
	decs := decb.NewArray()
	decb.Release()
	defer decs.Release()

	for _, tc := range []struct {
		a        arrow.Array
		i        int
		str, jsn string
	}{
		{str, 0, `a "quoted", comma`, `"a \"quoted\", comma"`},
		{str, 1, "héllo", `"héllo"`},
		{str, 2, "", `""`},
		{str, 3, "", "null"},
		{lstr, 0, "large", `"large"`},
		{ints, 0, "-42", "-42"},
		{ints, 1, "9223372036854775807", "9223372036854775807"},
		{uints, 0, "18446744073709551615", "18446744073709551615"},
		{bools, 0, "true", "true"},
		{bools, 1, "false", "false"},
		{decs, 0, "-123.45", `"-123.45"`},
	} {
		if got := valueString(tc.a, tc.i); got != tc.str {
			t.Errorf("valueString(%s, %d) = %q, want %q", tc.a.DataType(), tc.i, got, tc.str)
		}
		if got, err := json.Marshal(jsonValue(tc.a, tc.i)); err != nil || string(got) != tc.jsn {
			t.Errorf("jsonValue(%s, %d) = %s, %v; want %s", tc.a.DataType(), tc.i, got, err, tc.jsn)
		}
	}
}

// TestSinks writes one record through the csv, json and table sinks.
func TestSinks(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "Europe/Paris"}, Nullable: true},
		{Name: "name, with comma", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{june1, june1 + 10, june1 + 20}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"x", `say "hi"`, ""}, []bool{true, true, false})
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{1.5, math.NaN(), 0}, []bool{true, true, false})
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()

	write := func(format string, maxRows int) string {
		t.Helper()
		var buf bytes.Buffer
		o := &outputFlags{format: newChoice(format, formatTable, formatCSV, formatJSON), maxRows: maxRows}
		sink, err := o.newSink(&buf, schema)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.write(rec); err != nil {
			t.Fatal(err)
		}
		first := rec.NewSlice(0, 1) // a second batch
		defer first.Release()
		if err := sink.write(first); err != nil {
			t.Fatal(err)
		}
		if err := sink.close(); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if got, want := write(formatCSV, 0), cliText(
		`time,"name, with comma",v`,
		"2024-06-01T02:00:00+02:00,x,1.5",
		`2024-06-01T02:00:10+02:00,"say ""hi""",NaN`,
		"2024-06-01T02:00:20+02:00,,",
		"2024-06-01T02:00:00+02:00,x,1.5",
	); got != want {
		t.Errorf("csv:\n%s\nwant:\n%s", got, want)
	}
	if got, want := write(formatJSON, 0), cliText(
		`{"time":"2024-06-01T02:00:00+02:00","name, with comma":"x","v":1.5}`,
		`{"time":"2024-06-01T02:00:10+02:00","name, with comma":"say \"hi\"","v":"NaN"}`,
		`{"time":"2024-06-01T02:00:20+02:00","name, with comma":null,"v":null}`,
		`{"time":"2024-06-01T02:00:00+02:00","name, with comma":"x","v":1.5}`,
	); got != want {
		t.Errorf("json:\n%s\nwant:\n%s", got, want)
	}
	if got, want := write(formatTable, 0), cliText(
		"time                       name, with comma     v",
		"-------------------------  ----------------  ----",
		"2024-06-01T02:00:00+02:00  x                  1.5",
		`2024-06-01T02:00:10+02:00  say "hi"           NaN`,
		"2024-06-01T02:00:20+02:00  NULL              NULL",
		"2024-06-01T02:00:00+02:00  x                  1.5",
		"(4 rows)",
	); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	if got, want := write(formatTable, 3), cliText(
		"time                       name, with comma     v",
		"-------------------------  ----------------  ----",
		"2024-06-01T02:00:00+02:00  x                  1.5",
		`2024-06-01T02:00:10+02:00  say "hi"           NaN`,
		"2024-06-01T02:00:20+02:00  NULL              NULL",
		"(4 rows, first 3 shown; --max-rows 0 shows all, --format csv|json|parquet writes all)",
	); got != want {
		t.Errorf("table --max-rows 3:\n%s\nwant:\n%s", got, want)
	}
}

func TestGridPrint(t *testing.T) {
	for _, tc := range []struct {
		g    grid
		want string
	}{
		{ // numbers right-aligned, text left-aligned, the last column
			// not padded, widths in runes
			grid{header: []string{"name", "count", "note"}, right: []bool{false, true, false},
				rows: [][]string{{"a", "1", "x"}, {"héllo", "12345", ""}, {"bb", "-7", "long note"}}},
			cliText(
				"name   count  note",
				"-----  -----  ---------",
				"a          1  x",
				"héllo  12345",
				"bb        -7  long note",
			),
		},
		{ // a right-aligned last column; right shorter than the header
			grid{header: []string{"k", "v", "w"}, right: []bool{false, true},
				rows: [][]string{{"x", "10", "a"}, {"yyy", "2", "bb"}}},
			cliText(
				"k     v  w",
				"---  --  --",
				"x    10  a",
				"yyy   2  bb",
			),
		},
		{ // no rows
			grid{header: []string{"table", "rows"}, right: []bool{false, true}},
			cliText("table  rows", "-----  ----"),
		},
	} {
		var buf bytes.Buffer
		if err := tc.g.print(&buf); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tc.want {
			t.Errorf("grid.print:\n%s\nwant:\n%s", buf.String(), tc.want)
		}
	}
	g := grid{header: []string{"a", "b c"}, rows: [][]string{{"1", `x"y`}, {"", ""}}}
	var buf bytes.Buffer
	if err := g.writeCSV(&buf); err != nil || buf.String() != cliText("a,b c", `1,"x""y"`, ",") {
		t.Errorf("grid.writeCSV: %q, %v", buf.String(), err)
	}
	if err := g.print(failWriter{}); err == nil {
		t.Error("grid.print to a failing writer: no error")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestPercent(t *testing.T) {
	for r, want := range map[float64]string{
		0: "0.00 %", 1: "100.00 %", 0.5: "50.00 %", 0.123456: "12.35 %", 160.0 / 180: "88.89 %",
		0.99999: "99.99 %", 0.999999999: "99.99 %", math.Nextafter(1, 0): "99.99 %", 0.9999: "99.99 %", 0.99985: "99.98 %",
		1e-9: "0.01 %", 0.00004: "0.01 %", math.SmallestNonzeroFloat64: "0.01 %", 0.0001: "0.01 %", 0.00016: "0.02 %",
	} {
		if got := percent(r); got != want {
			t.Errorf("percent(%v) = %q, want %q", r, got, want)
		}
	}
	// Partial coverage never reads as complete or as none.
	for k := 1; k <= 17; k++ {
		tiny := math.Pow(10, -float64(k))
		if got := percent(1 - tiny); got == "100.00 %" && 1-tiny < 1 {
			t.Errorf("percent(1 - 1e-%d) = %q", k, got)
		}
		if got := percent(tiny); got == "0.00 %" {
			t.Errorf("percent(1e-%d) = %q", k, got)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1: "1 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 4245: "4.1 KiB",
		10 << 20: "10.0 MiB", 1<<30 + 1<<29: "1.5 GiB", 5 << 40: "5.0 TiB", 1<<50 - 1: "1.0 PiB", 1 << 50: "1.0 PiB", 3 << 60: "3072.0 PiB",
		1048575: "1.0 MiB", 1048500: "1023.9 KiB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestJSONFloatSpecials: NaN and the infinities of every float width are
// JSON strings, as for float64 ("NaN", "+Inf", "-Inf"): JSON has no
// number for them. A float16 NaN used to fail the row.
func TestJSONFloatSpecials(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vals := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1.5}
	want := []string{`"NaN"`, `"+Inf"`, `"-Inf"`, "1.5"}

	b16 := array.NewFloat16Builder(mem)
	b32 := array.NewFloat32Builder(mem)
	b64 := array.NewFloat64Builder(mem)
	for _, v := range vals {
		b16.Append(float16.New(float32(v)))
		b32.Append(float32(v))
		b64.Append(v)
	}
	arrs := []arrow.Array{b16.NewArray(), b32.NewArray(), b64.NewArray()}
	b16.Release()
	b32.Release()
	b64.Release()
	// And through a dictionary of float16.
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.FixedWidthTypes.Float16}
	idx := array.NewInt8Builder(mem)
	idx.AppendValues([]int8{0, 1, 2, 3}, nil)
	indices := idx.NewArray()
	idx.Release()
	arrs = append(arrs, array.NewDictionaryArray(dt, indices, arrs[0]))
	indices.Release()
	for _, a := range arrs {
		defer a.Release()
		for i, w := range want {
			got, err := json.Marshal(jsonValue(a, i))
			if err != nil || string(got) != w {
				t.Errorf("%s %v: jsonValue gives %s, %v; want %s", a.DataType(), vals[i], got, err, w)
			}
		}
	}
}

// TestOutputOpen: --output replaces a file when the command succeeds and,
// when it fails, leaves the old file as it was (and a new one unmade);
// without --output the writer is standard output.
func TestOutputOpen(t *testing.T) {
	var stdout bytes.Buffer
	e := &env{stdout: &stdout, stderr: io.Discard, getenv: func(string) string { return "" }}
	o := &outputFlags{format: newChoice(formatCSV, formatCSV)}
	w, finish, err := o.open(e)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "to stdout\n")
	if err := finish(true); err != nil || stdout.String() != "to stdout\n" {
		t.Errorf("stdout: %q, %v", stdout.String(), err)
	}

	dir := t.TempDir()
	o.output = filepath.Join(dir, "out.csv")
	old := strings.Repeat("old\n", 1000)
	if err := os.WriteFile(o.output, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []bool{false, true} {
		w, finish, err := o.open(e)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, "new\n")
		if err := finish(ok); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(o.output)
		switch {
		case ok && (err != nil || string(b) != "new\n"):
			t.Errorf("finish(true): %q, %v", b, err)
		case !ok && (err != nil || string(b) != old):
			t.Errorf("finish(false) left %.20q…, %v; want the old file", b, err)
		}
		outputOnly(t, dir, "out.csv")
	}
	// A new file is made only by a command that succeeds.
	o.output = filepath.Join(dir, "new.csv")
	w, finish, err = o.open(e)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "half\n")
	if err := finish(false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.output); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("finish(false) made %s: %v", o.output, err)
	}
	outputOnly(t, dir, "out.csv")

	o.output = filepath.Join(dir, "no", "such", "dir")
	if _, _, err := o.open(e); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open in a missing directory: %v", err)
	}
	if stdout.String() != "to stdout\n" {
		t.Errorf("stdout written to with --output: %q", stdout.String())
	}
}

// outputOnly checks that dir holds exactly the files names (no temporary
// file left over).
func outputOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if err != nil || strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("%s holds %q (%v), want %q", dir, got, err, names)
	}
}

// TestWriteOutputFile: the writer of plots replaces a file only when the
// whole output was written, keeps the file's mode, replaces the file a
// symbolic link points to rather than the link, and leaves no temporary
// file behind.
func TestWriteOutputFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pic.svg")
	if err := os.WriteFile(path, []byte("old picture"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := writeOutputFile(path, func(w io.Writer) error {
		io.WriteString(w, strings.Repeat("x", 1<<20)) // more than the buffer: on disk already
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("failed write: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "old picture" {
		t.Errorf("after a failed write: %.20q…, %v; want the old picture", b, err)
	}
	outputOnly(t, dir, "pic.svg")

	if err := writeOutputFile(path, func(w io.Writer) error { _, err := io.WriteString(w, "new picture"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "new picture" {
		t.Errorf("after a write: %q, %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want the old file's -rw-------", fi.Mode(), err)
	}
	outputOnly(t, dir, "pic.svg")

	link := filepath.Join(dir, "link.svg")
	if err := os.Symlink("pic.svg", link); err != nil {
		t.Fatal(err)
	}
	if err := writeOutputFile(link, func(w io.Writer) error { _, err := io.WriteString(w, "via the link"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "via the link" {
		t.Errorf("the link's file: %q, %v", b, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi.Mode(), err)
	}
	outputOnly(t, dir, "link.svg", "pic.svg")

	// A write error of a new file leaves nothing.
	fresh := filepath.Join(dir, "fresh.png")
	if err := writeOutputFile(fresh, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("failed write of a new file: %v", err)
	}
	outputOnly(t, dir, "link.svg", "pic.svg")

	// The coverage plot goes through it: an existing picture is replaced
	// by a complete one.
	png := filepath.Join(dir, "plot.png")
	if err := os.WriteFile(png, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeCoveragePlot(plotTestGrid(), png, ""); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("plot over an existing file: %.8q, %v", b, err)
	}
	outputOnly(t, dir, "link.svg", "pic.svg", "plot.png")
}

// TestOutputFailureKeepsSpecialFiles: when a command fails, --output
// removes the file it wrote so no half output is left, but a named pipe or
// a device given as --output (/dev/null, /dev/stdout as root) is not the
// command's to delete.
func TestOutputFailureKeepsSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	special := map[string]func(string) error{
		"fifo": func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"null": func(p string) error { return syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|3) }, // like /dev/null; needs CAP_MKNOD
	}
	for name, mk := range special {
		path := filepath.Join(dir, name)
		if err := mk(path); err != nil {
			t.Logf("cannot make a %s here: %v", name, err)
			continue
		}
		o := &outputFlags{format: newChoice(formatCSV, formatCSV), output: path}
		w, finish, err := o.open(e)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, "half\n")
		finish(false)
		if fi, err := os.Lstat(path); err != nil || fi.Mode().IsRegular() {
			t.Errorf("the %s given as --output was removed when the command failed: %v", name, err)
		}
	}
}
