package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tests of the last command on the fixture of cli_fixture_test.go, whose
// newest rows are step 89 of both hosts (version 3).

func TestLast(t *testing.T) {
	f := newCLIFixture(t)
	a, b := cliRow{89, "a"}, cliRow{89, "b"}
	header := "ts,host,value,n"

	// The table format: aligned, numbers right-aligned, and a count.
	want := cliText(
		"ts                    host  value    n",
		"--------------------  ----  -----  ---",
		"2024-06-01T00:14:50Z  a       8.9   89",
		"2024-06-01T00:14:50Z  b     22.25  -89",
		"(2 rows)",
	)
	if out := f.ok(t, "last", cliTable); out != want {
		t.Errorf("last:\n%s\nwant:\n%s", out, want)
	}
	if out := f.ok(t, "last", "--format", "csv", cliTable); out != cliText(header, a.csv(), b.csv()) {
		t.Errorf("last --format csv:\n%s", out)
	}
	if out := f.ok(t, "last", "--format", "json", cliTable); out != cliText(a.json(), b.json()) {
		t.Errorf("last --format json:\n%s", out)
	}
	if out := f.ok(t, "last", "--max-rows", "1", cliTable); !strings.HasSuffix(out, "\n(2 rows, first 1 shown; --max-rows 0 shows all, --format csv|json|parquet writes all)\n") {
		t.Errorf("last --max-rows 1:\n%s", out)
	}
	// --entity and --columns.
	if out := f.ok(t, "last", "--entity", "host=b", "--format", "csv", cliTable); out != cliText(header, b.csv()) {
		t.Errorf("last --entity host=b:\n%s", out)
	}
	if out := f.ok(t, "last", "--columns", "n,host", "--format", "csv", cliTable); out != cliText("n,host", "89,a", "-89,b") {
		t.Errorf("last --columns n,host:\n%s", out)
	}
	if out := f.ok(t, "last", "--columns", "n", "--columns", "ts", "--entity", "host=a", "--format", "json", cliTable); out != cliText(`{"n":89,"ts":"2024-06-01T00:14:50Z"}`) {
		t.Errorf("last --columns n --columns ts --entity host=a --format json:\n%s", out)
	}
	if out := f.ok(t, "last", "--entity", "host=nobody", "--format", "csv", cliTable); out != cliText(header) {
		t.Errorf("last --entity host=nobody:\n%s", out)
	}
	if out := f.ok(t, "last", "--entity", "host=nobody", cliTable); !strings.HasSuffix(out, "\n(0 rows)\n") {
		t.Errorf("last --entity host=nobody (table):\n%s", out)
	}
	// --output writes the file, and nothing to standard output.
	path := filepath.Join(t.TempDir(), "last.csv")
	if out := f.ok(t, "last", "--format", "csv", "--output", path, cliTable); out != "" {
		t.Errorf("last --output: stdout %q", out)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != cliText(header, a.csv(), b.csv()) {
		t.Errorf("last --output: %q, %v", data, err)
	}

	// A table without entity columns has no newest row per entity.
	f.ok(t, "create", "--index-column", "ts", "--granularity", "10s", "flat")
	f.failAll(t, "last", []cliFailure{
		{2, []string{"missing the table name"}, nil},
		{2, []string{`unexpected argument`}, []string{cliTable, "extra"}},
		{2, []string{`invalid value "host" for flag --entity: "host" is not COLUMN=VALUE`}, []string{"--entity", "host", cliTable}},
		{2, []string{`invalid value "parquet" for flag --format: must be one of table|csv|json`}, []string{"--format", "parquet", cliTable}},
		{2, []string{"--max-rows must not be negative"}, []string{"--max-rows", "-1", cliTable}},
		{1, []string{`table "nope": not found`, "(not found)"}, []string{"nope"}},
		{1, []string{`entity: "dc" is not an entity column (entity columns: host)`, "(invalid argument)"}, []string{"--entity", "dc=1", cliTable}},
		{1, []string{`last: columns: unknown column "nope"`, "(invalid argument)"}, []string{"--columns", "nope", cliTable}},
		{1, []string{`last: table "flat" has no entity columns`, "(invalid argument)"}, []string{"flat"}},
	})
	// A failed command leaves an --output file as it was.
	f.fail(t, 1, []string{"not found"}, "last", "--output", path, "nope")
	if data, err := os.ReadFile(path); err != nil || string(data) != cliText(header, a.csv(), b.csv()) {
		t.Errorf("--output after a failed last: %q, %v", data, err)
	}
}

// TestLastPyarrow: pyarrow reads the last action's result as the docs
// show, pa.ipc.open_stream(result.body.to_pybytes()).read_all(), and gets
// INVALID_ARGUMENT as ArrowInvalid.
func TestLastPyarrow(t *testing.T) {
	f := newCLIFixture(t)
	script := `import json
import pyarrow as pa
import pyarrow.flight as fl

client = fl.connect("` + f.server + `")

def last(body):
    [result] = list(client.do_action(fl.Action("last", json.dumps(body).encode())))
    return pa.ipc.open_stream(result.body.to_pybytes()).read_all()

full = last({"table": "m"})
one = last({"table": "m", "entity": {"host": "b"}, "columns": ["ts", "n"]})
try:
    last({"table": "m", "columns": ["nope"]})
    refused = "not refused"
except pa.ArrowInvalid as e:
    refused = "refused" if 'unknown column "nope"' in str(e) else str(e)
print(full.num_rows, ",".join(full.column("host").to_pylist()), ",".join(one.schema.names),
      one.column("ts")[0].as_py().isoformat(), one.column("n")[0].as_py(), refused)
`
	demoRunPython(t, script, "2 a,b ts,n 2024-06-01T00:14:50+00:00 -89 refused")
}
