package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Tests of the client commands tables, describe, create and add-columns,
// and of how every client command finds (or fails to find) its server.
// The fixture is in cli_fixture_test.go.

func TestCreate(t *testing.T) {
	f := newCLIServer(t)

	// --entity repeated and as a comma list, in order.
	if out := f.ok(t, "create", "--index-column", "ts", "--granularity", "10s", "--entity", "host", "--entity", "dc, rack", "m"); out != "created table m (version 1)\n" {
		t.Errorf("create m: %q", out)
	}
	d := f.describe(t, "m")
	wantIndex := map[string]any{"column": "ts", "type": "timestamp", "granularity": "10s",
		"entity_columns": []any{"host", "dc", "rack"}, "timezone": nil}
	if !reflect.DeepEqual(d["index"], wantIndex) || d["version"] != 1.0 || d["rows"] != 0.0 || !reflect.DeepEqual(d["schema"], []any{}) {
		t.Errorf("describe m: %v; want index %v, version 1, no rows, no schema", d, wantIndex)
	}

	// --timezone, and the json output (the server's answer).
	if out := f.ok(t, "create", "--index-column", "time", "--granularity", "1m", "--timezone", "Europe/Paris", "--format", "json", "tz"); out != "{\n  \"table\": \"tz\",\n  \"version\": 1\n}\n" {
		t.Errorf("create --format json tz: %q", out)
	}
	d = f.describe(t, "tz")
	wantIndex = map[string]any{"column": "time", "type": "timestamp", "granularity": "1m",
		"entity_columns": []any{}, "timezone": "Europe/Paris"}
	if !reflect.DeepEqual(d["index"], wantIndex) {
		t.Errorf("describe tz: index %v; want %v", d["index"], wantIndex)
	}

	// An integer index with an integer width.
	if out := f.ok(t, "create", "--index-column", "seq", "--index-type", "uint64", "--granularity", "100", "--entity", "sensor", "i"); out != "created table i (version 1)\n" {
		t.Errorf("create i: %q", out)
	}
	d = f.describe(t, "i")
	wantIndex = map[string]any{"column": "seq", "type": "uint64", "granularity": 100.0,
		"entity_columns": []any{"sensor"}, "timezone": nil}
	if !reflect.DeepEqual(d["index"], wantIndex) {
		t.Errorf("describe i: index %v; want %v", d["index"], wantIndex)
	}

	f.failAll(t, "create", []cliFailure{
		{1, []string{`table "m": already exists`, "(already exists)"}, []string{"--index-column", "ts", "--granularity", "10s", "m"}},
		{1, []string{`granularity "7q": unknown unit "q" (use s, m, h or d)`, "(invalid argument)"}, []string{"--index-column", "ts", "--granularity", "7q", "x"}},
		{1, []string{"granularity", "(invalid argument)"}, []string{"--index-column", "n", "--index-type", "int64", "--granularity", "10s", "x"}},
		{1, []string{`table name "bad-name" is not allowed`}, []string{"--index-column", "ts", "--granularity", "10s", "bad-name"}},
		{1, []string{`timezone "Mars/Olympus" is not an IANA time zone name`, "(invalid argument)"}, []string{"--index-column", "ts", "--granularity", "10s", "--timezone", "Mars/Olympus", "x"}},
		{2, []string{"--index-column is required"}, []string{"--granularity", "10s", "x"}},
		{2, []string{"--granularity is required (e.g. 10s)"}, []string{"--index-column", "ts", "x"}},
		{2, []string{"--timezone applies to timestamp indexes only (--index-type is int64)"}, []string{"--index-column", "n", "--index-type", "int64", "--granularity", "100", "--timezone", "UTC", "x"}},
		{2, []string{`invalid value "float64" for flag --index-type: must be one of timestamp|int64|uint64`}, []string{"--index-column", "n", "--index-type", "float64", "--granularity", "100", "x"}},
		{2, []string{`invalid value "a,,b" for flag --entity: empty name`}, []string{"--index-column", "ts", "--granularity", "10s", "--entity", "a,,b", "x"}},
		{2, []string{`invalid value "" for flag --entity: empty name`}, []string{"--index-column", "ts", "--granularity", "10s", "--entity", "", "x"}},
		{2, []string{`invalid value "yaml" for flag --format: must be one of table|json`}, []string{"--index-column", "ts", "--granularity", "10s", "--format", "yaml", "x"}},
		{2, []string{"missing the table name"}, []string{"--index-column", "ts", "--granularity", "10s"}},
		{2, []string{`unexpected argument "y" after the table name`}, []string{"--index-column", "ts", "--granularity", "10s", "x", "y"}},
		{2, []string{"the table name is empty"}, []string{"--index-column", "ts", "--granularity", "10s", ""}},
	})
	// The failures created nothing.
	if out := f.ok(t, "tables", "--format", "csv"); out != cliText("table,rows,bytes,columns", "i,0,0,0", "m,0,0,0", "tz,0,0,0") {
		t.Errorf("tables after the failed creates:\n%s", out)
	}
}

func TestDescribe(t *testing.T) {
	f := newCLIFixture(t)
	d := f.describe(t, cliTable)
	bytes := int64(d["bytes"].(float64))
	if bytes < 1024 || bytes >= 1<<20 {
		t.Fatalf("describe: %d bytes, want some KiB", bytes)
	}
	want := cliText(
		"table     m",
		"version   3",
		"index     ts (timestamp, granularity 10s)",
		"entities  host",
		"timezone  none (UTC)",
		fmt.Sprintf("data      160 rows in 2 segments, %.1f KiB", float64(bytes)/1024),
		"created   "+d["created_at"].(string),
		"protocol  7 (reader features: none; writer features: none)",
		"",
		"column  type                   nullable  role",
		"------  ---------------------  --------  ------",
		"ts      timestamp[ms, tz=UTC]  true      index",
		"host    utf8                   true      entity",
		"value   float64                true",
		"n       int64                  true",
	)
	if out := f.ok(t, "describe", cliTable); out != want {
		t.Errorf("describe:\n%s\nwant:\n%s", out, want)
	}
	wantCSV := cliText(
		"column,type,nullable,role",
		`ts,"timestamp[ms, tz=UTC]",true,index`,
		"host,utf8,true,entity",
		"value,float64,true,",
		"n,int64,true,",
	)
	if out := f.ok(t, "describe", "--format", "csv", cliTable); out != wantCSV {
		t.Errorf("describe --format csv:\n%s\nwant:\n%s", out, wantCSV)
	}
	// --output writes the file, not stdout.
	path := filepath.Join(t.TempDir(), "columns.csv")
	if out := f.ok(t, "describe", "--format", "csv", "--output", path, cliTable); out != "" {
		t.Errorf("describe --output: stdout %q", out)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != wantCSV {
		t.Errorf("describe --output: %q, %v; want %q", b, err, wantCSV)
	}

	// json is the server's answer, indented.
	out := f.ok(t, "describe", "--format", "json", cliTable)
	if !strings.HasPrefix(out, "{\n  \"bytes\": ") || !strings.HasSuffix(out, "\n}\n") {
		t.Errorf("describe --format json is not indented JSON:\n%s", out)
	}
	wantSchema := []any{
		map[string]any{"name": "ts", "type": "timestamp[ms, tz=UTC]", "nullable": true},
		map[string]any{"name": "host", "type": "utf8", "nullable": true},
		map[string]any{"name": "value", "type": "float64", "nullable": true},
		map[string]any{"name": "n", "type": "int64", "nullable": true},
	}
	if d["table"] != "m" || d["version"] != 3.0 || d["rows"] != 160.0 || d["segments"] != 2.0 || d["protocol_version"] != 7.0 ||
		!reflect.DeepEqual(d["schema"], wantSchema) || !reflect.DeepEqual(d["reader_features"], []any{}) {
		t.Errorf("describe --format json: %v", d)
	}

	// A table without data, an integer index (no time zone line), a time
	// zone.
	f.ok(t, "create", "--index-column", "seq", "--index-type", "int64", "--granularity", "5", "--entity", "a,b", "empty")
	f.ok(t, "create", "--index-column", "ts", "--granularity", "1h", "--timezone", "America/New_York", "zoned")
	for table, want := range map[string][]string{
		"empty": {
			"table     empty",
			"version   1",
			"index     seq (int64, granularity 5)",
			"entities  a, b",
			"data      0 rows in 0 segments, 0 B",
		},
		"zoned": {
			"table     zoned",
			"version   1",
			"index     ts (timestamp, granularity 1h)",
			"entities  none",
			"timezone  America/New_York",
			"data      0 rows in 0 segments, 0 B",
		},
	} {
		d := f.describe(t, table)
		want = append(want,
			"created   "+d["created_at"].(string),
			"protocol  7 (reader features: none; writer features: none)",
			"",
			"no columns yet: the first load (or DoPut) sets the schema")
		if out := f.ok(t, "describe", table); out != cliText(want...) {
			t.Errorf("describe %s:\n%s\nwant:\n%s", table, out, cliText(want...))
		}
		if out := f.ok(t, "describe", "--format", "csv", table); out != "column,type,nullable,role\n" {
			t.Errorf("describe --format csv %s: %q", table, out)
		}
	}

	f.fail(t, 1, []string{`table "nope": not found`, "(not found)"}, "describe", "nope")
	f.fail(t, 1, []string{`table name "no-pe" is not allowed`}, "describe", "no-pe")
	f.fail(t, 2, []string{"missing the table name"}, "describe")
	f.fail(t, 2, []string{`unexpected argument "n" after the table name`}, "describe", "m", "n")
	f.fail(t, 2, []string{`invalid value "parquet" for flag --format: must be one of table|csv|json`}, "describe", "--format", "parquet", "m")
}

func TestAddColumns(t *testing.T) {
	f := newCLIFixture(t)
	if out := f.ok(t, "add-columns", cliTable, "temp_c:float64", " note : utf8 ", "at:timestamp[us, UTC]"); out != "added 3 column(s) to m (version 4)\n" {
		t.Errorf("add-columns: %q", out)
	}
	want := cliText(
		"column,type,nullable,role",
		`ts,"timestamp[ms, tz=UTC]",true,index`,
		"host,utf8,true,entity",
		"value,float64,true,",
		"n,int64,true,",
		"temp_c,float64,true,",
		"note,utf8,true,",
		`at,"timestamp[us, tz=UTC]",true,`,
	)
	if out := f.ok(t, "describe", "--format", "csv", cliTable); out != want {
		t.Errorf("describe after add-columns:\n%s\nwant:\n%s", out, want)
	}
	d := f.describe(t, cliTable)
	if d["version"] != 4.0 || d["rows"] != 160.0 || !reflect.DeepEqual(d["reader_features"], []any{"schema_add_columns"}) {
		t.Errorf("describe after add-columns: %v", d)
	}
	// Rows written before read NULL in the new columns.
	if out := f.ok(t, "scan", "--columns", "ts,temp_c,note,at", "--entity", "host=a", "--end", cliTime(2), "--format", "csv", cliTable); out != cliText("ts,temp_c,note,at", cliTime(0)+",,,", cliTime(1)+",,,") {
		t.Errorf("scan of the new columns:\n%s", out)
	}
	if out := f.ok(t, "add-columns", "--format", "json", cliTable, "extra:int64"); out != "{\n  \"table\": \"m\",\n  \"version\": 5\n}\n" {
		t.Errorf("add-columns --format json: %q", out)
	}

	f.failAll(t, "add-columns", []cliFailure{
		{1, []string{`column "x": unknown type "quux" (use bool, int32`, "(invalid argument)"}, []string{cliTable, "x:quux"}},
		{1, []string{"value", "(invalid argument)"}, []string{cliTable, "value:float64"}},
		{1, []string{`table "nope": not found`, "(not found)"}, []string{"nope", "x:int64"}},
		{2, []string{`column "bad" is not NAME:TYPE (e.g. temp_c:float64)`}, []string{cliTable, "ok:int64", "bad"}},
		{2, []string{`column ":int64" is not NAME:TYPE`}, []string{cliTable, ":int64"}},
		{2, []string{`column "x:" is not NAME:TYPE`}, []string{cliTable, "x:"}},
		{2, []string{"missing the columns to add (NAME:TYPE …)"}, []string{cliTable}},
		{2, []string{"missing the table name"}, nil},
	})
	// A table without a schema yet.
	f.ok(t, "create", "--index-column", "ts", "--granularity", "10s", "fresh")
	f.fail(t, 1, []string{"the table has no schema yet"}, "add-columns", "fresh", "x:int64")
	// Nothing changed after the failures.
	if d := f.describe(t, cliTable); d["version"] != 5.0 || len(d["schema"].([]any)) != 8 {
		t.Errorf("after the failed add-columns: version %v, %d columns; want 5 and 8", d["version"], len(d["schema"].([]any)))
	}
}

func TestTables(t *testing.T) {
	f := newCLIServer(t)
	if out := f.ok(t, "tables"); out != cliText(
		"table  rows  bytes  columns",
		"-----  ----  -----  -------",
		"(no tables yet: tsflight create TABLE … then tsflight load TABLE FILE)",
	) {
		t.Errorf("tables on an empty root:\n%s", out)
	}
	if out := f.ok(t, "tables", "--format", "csv"); out != "table,rows,bytes,columns\n" {
		t.Errorf("tables --format csv on an empty root: %q", out)
	}
	if out := f.ok(t, "tables", "--format", "json"); out != "" {
		t.Errorf("tables --format json on an empty root: %q", out)
	}

	f = newCLIFixture(t)
	for _, name := range []string{"zeta", "alpha", "b_2"} {
		f.ok(t, "create", "--index-column", "ts", "--granularity", "1m", name)
	}
	bytes := int64(f.describe(t, cliTable)["bytes"].(float64))
	want := cliText(
		"table  rows  bytes  columns",
		"-----  ----  -----  -------",
		"alpha     0      0        0",
		"b_2       0      0        0",
		fmt.Sprintf("m       160  %5d        4", bytes),
		"zeta      0      0        0",
	)
	if bytes < 1000 || bytes > 99999 {
		t.Fatalf("table m: %d bytes, want 4 digits", bytes)
	}
	if out := f.ok(t, "tables"); out != want {
		t.Errorf("tables:\n%s\nwant:\n%s", out, want)
	}
	wantCSV := cliText("table,rows,bytes,columns", "alpha,0,0,0", "b_2,0,0,0", fmt.Sprintf("m,160,%d,4", bytes), "zeta,0,0,0")
	if out := f.ok(t, "tables", "--format", "csv"); out != wantCSV {
		t.Errorf("tables --format csv:\n%s\nwant:\n%s", out, wantCSV)
	}
	type row struct {
		Table   string `json:"table"`
		Rows    int64  `json:"rows"`
		Bytes   int64  `json:"bytes"`
		Columns int    `json:"columns"`
	}
	var got []row
	for _, line := range cliLines(t, f.ok(t, "tables", "--format", "json")) {
		var r row
		d := json.NewDecoder(strings.NewReader(line))
		d.DisallowUnknownFields()
		if err := d.Decode(&r); err != nil {
			t.Fatalf("tables --format json line %q: %v", line, err)
		}
		got = append(got, r)
	}
	if wantRows := []row{{"alpha", 0, 0, 0}, {"b_2", 0, 0, 0}, {"m", 160, bytes, 4}, {"zeta", 0, 0, 0}}; !reflect.DeepEqual(got, wantRows) {
		t.Errorf("tables --format json: %+v; want %+v", got, wantRows)
	}
	path := filepath.Join(t.TempDir(), "tables.csv")
	if out := f.ok(t, "tables", "--format", "csv", "--output", path); out != "" {
		t.Errorf("tables --output: stdout %q", out)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != wantCSV {
		t.Errorf("tables --output: %q, %v", b, err)
	}

	f.fail(t, 2, []string{`unexpected argument "m"`}, "tables", "m")
	f.fail(t, 2, []string{`invalid value "parquet" for flag --format: must be one of table|csv|json`}, "tables", "--format", "parquet")
	f.fail(t, 2, []string{"--max-rows must not be negative, got -1"}, "tables", "--max-rows", "-1")
}

// cliCommands are one valid invocation of each client command.
var cliCommands = [][]string{
	{"tables"},
	{"describe", cliTable},
	{"create", "--index-column", "ts", "--granularity", "10s", "x"},
	{"add-columns", cliTable, "x:int64"},
	{"scan", cliTable},
	{"sql", "SELECT 1"},
	{"coverage", "--start", "2024-06-01T00:00:00Z", "--end", "2024-06-01T01:00:00Z", cliTable},
	{"gaps", "--start", "2024-06-01T00:00:00Z", "--end", "2024-06-01T01:00:00Z", cliTable},
	{"vacuum", cliTable},
	{"check", cliTable},
	{"compact", "--dry-run", cliTable},
	{"rollback", "--dry-run", cliTable, "2"},
	{"upgrade", "--dry-run", cliTable},
	{"set-properties", cliTable, "owner=ops"},
	{"last", cliTable},
}

// withServer puts --server uri before a command's other arguments.
func withServer(args []string, uri string) []string {
	return append([]string{args[0], "--server", uri}, args[1:]...)
}

func TestServerUnreachable(t *testing.T) {
	addr := cliClosedPort(t)
	want := []string{"cannot reach a tsflight server at " + addr + " (is it running? set --server or TSFLIGHT_SERVER): "}
	for _, args := range cliCommands {
		// --server, and TSFLIGHT_SERVER when --server is absent.
		stdout, stderr, code := runCLI(t, nil, withServer(args, "grpc://"+addr)...)
		cliCheckFailure(t, args, stdout, stderr, code, exitUnavailable, want)
		stdout, stderr, code = runCLI(t, []string{"TSFLIGHT_SERVER=grpc://" + addr}, args...)
		cliCheckFailure(t, args, stdout, stderr, code, exitUnavailable, want)
	}
	// The other spellings of an address.
	for _, uri := range []string{"grpc+tcp://" + addr, addr, "grpc://" + addr + "/"} {
		stdout, stderr, code := runCLI(t, nil, "tables", "--server", uri)
		cliCheckFailure(t, []string{"tables"}, stdout, stderr, code, exitUnavailable, want)
	}
	_, port, _ := strings.Cut(addr, ":")
	stdout, stderr, code := runCLI(t, nil, "tables", "--server", ":"+port)
	cliCheckFailure(t, []string{"tables"}, stdout, stderr, code, exitUnavailable, want)
}

func TestServerFlag(t *testing.T) {
	f := newCLIFixture(t)
	closed := "grpc://" + cliClosedPort(t)
	// TSFLIGHT_SERVER is used when --server is absent, and --server wins.
	want := f.ok(t, "describe", "--format", "csv", cliTable)
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{[]string{"TSFLIGHT_SERVER=" + f.server}, []string{"describe", "--format", "csv", cliTable}},
		{[]string{"TSFLIGHT_SERVER=" + closed}, []string{"describe", "--server", f.server, "--format", "csv", cliTable}},
		{[]string{"TSFLIGHT_SERVER=nonsense"}, []string{"describe", "--server", f.server, "--format", "csv", cliTable}},
		{nil, []string{"describe", "--server", strings.TrimPrefix(f.server, "grpc://"), "--format", "csv", cliTable}},
		{nil, []string{"describe", "--server", "grpc+tcp://" + strings.TrimPrefix(f.server, "grpc://") + "/", "--format", "csv", cliTable}},
	} {
		stdout, stderr, code := runCLI(t, tc.env, tc.args...)
		if code != 0 || stderr != "" || stdout != want {
			t.Errorf("env %q, tsflight %q: exit %d, stdout %q, stderr %q", tc.env, tc.args, code, stdout, stderr)
		}
	}

	// Bad --server values are usage errors, for every command, from the
	// flag or the environment.
	for _, tc := range []struct{ uri, want string }{
		{"nonsense", `--server "nonsense" is not grpc://HOST:PORT`},
		{"grpc://127.0.0.1", `--server "grpc://127.0.0.1" is not grpc://HOST:PORT`},
		{"127.0.0.1:", `--server "127.0.0.1:" is not grpc://HOST:PORT`},
		{"http://" + f.srv.addr, `--server "http://` + f.srv.addr + `": unknown scheme "http" (use grpc://HOST:PORT or grpc+tls://HOST:PORT)`},
	} {
		for _, args := range cliCommands {
			stdout, stderr, code := runCLI(t, nil, withServer(args, tc.uri)...)
			cliCheckFailure(t, args, stdout, stderr, code, exitUsage, []string{tc.want})
		}
		stdout, stderr, code := runCLI(t, []string{"TSFLIGHT_SERVER=" + tc.uri}, "tables")
		cliCheckFailure(t, []string{"tables"}, stdout, stderr, code, exitUsage, []string{tc.want})
	}
	// Nothing was created by the refused commands.
	if out := f.ok(t, "tables", "--format", "csv"); strings.Count(out, "\n") != 2 {
		t.Errorf("tables after the refused commands:\n%s", out)
	}
}

func TestClientHelp(t *testing.T) {
	for _, args := range cliCommands {
		stdout, stderr, code := runCLI(t, nil, args[0], "--help")
		cmd := commands[args[0]]
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage:\n  "+cmd.Usage+"\n") ||
			!strings.Contains(stdout, "Example:\n") || !strings.Contains(stdout, "--server URI") || !strings.Contains(stdout, "env TSFLIGHT_SERVER") {
			t.Errorf("tsflight %s --help: exit %d, stderr %q, stdout:\n%s", args[0], code, stderr, stdout)
		}
	}
	stdout, _, _ := runCLI(t, nil, "--help")
	for _, args := range cliCommands {
		if !strings.Contains(stdout, "\n  "+args[0]+" ") {
			t.Errorf("tsflight --help does not list %s:\n%s", args[0], stdout)
		}
	}
}

// checkHelp: `tsflight NAME --help` exits 0 and prints c's usage first
// and each of frags, and `tsflight --help` lists the command.
func checkHelp(t *testing.T, c *command, frags ...string) {
	t.Helper()
	stdout, stderr, code := runCLI(t, nil, c.Name, "--help")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage:\n  "+c.Usage+"\n") {
		t.Fatalf("%s --help: %d %q\n%s", c.Name, code, stderr, stdout)
	}
	for _, f := range frags {
		if !strings.Contains(stdout, f) {
			t.Fatalf("%s --help does not say %q:\n%s", c.Name, f, stdout)
		}
	}
	stdout, _, _ = runCLI(t, nil, "--help")
	if !strings.Contains(stdout, "\n  "+c.Name+" ") {
		t.Fatalf("tsflight --help does not list %s:\n%s", c.Name, stdout)
	}
}
