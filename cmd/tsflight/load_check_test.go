package main

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// Tests of the check against the table's schema: files that do not fit
// are refused before anything is sent, and nulls in a non-nullable column
// as they are sent.

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
