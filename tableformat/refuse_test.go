package tableformat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// metaJSON returns an UpdateTableMeta action; extra is spliced into the
// metadata object (for example `,"format_version":6`).
func metaJSON(protocol int, reader, writer string, schema string, extra string) string {
	if schema == "" {
		schema = "null"
	}
	return fmt.Sprintf(`{"UpdateTableMeta":{"kind":{"TimeSeries":{"column":"ts","entity_columns":["host"],"kind":{"type":"timestamp","index_granularity":{"Seconds":10}}}},"logical_schema":%s,"created_at":"2026-01-01T00:00:00Z","protocol_version":%d,"required_reader_features":%s,"required_writer_features":%s%s}}`,
		schema, protocol, reader, writer, extra)
}

// v6Meta is format-6 metadata (timeseries-table-format 0.4.0's spelling).
const v6Meta = `{"UpdateTableMeta":{"kind":{"TimeSeries":{"column":"ts","entity_columns":["host"],"kind":{"type":"timestamp","bucket":{"Hours":1}}}},"logical_schema":null,"created_at":"2026-01-01T00:00:00Z","format_version":6}}`

const testSchema = `{"columns":[{"name":"ts","data_type":{"Timestamp":{"unit":"Nanos","timezone":"UTC"}},"nullable":false},{"name":"host","data_type":"Utf8","nullable":false},{"name":"v","data_type":"Int64","nullable":true}]}`

func segJSON(path string) string {
	return fmt.Sprintf(`{"AddSegment":{"path":%q,"format":"parquet","entity_layout":{"Single":[{"type":"utf8","value":"h1"}]},"index_min":{"type":"timestamp","value":"2024-01-01T00:00:00Z"},"index_max":{"type":"timestamp","value":"2024-01-01T01:00:00Z"},"row_count":10,"file_size":100,"coverage_path":"_coverage/segments/a.roar"}}`, path)
}

const covJSON = `{"UpdateTableCoverage":{"index_kind":{"type":"timestamp","index_granularity":{"Seconds":10}},"coverage_path":"_coverage/table/2-a.roar"}}`

func commitJSON(v int, actions ...string) string {
	return fmt.Sprintf(`{"version":%d,"base_version":%d,"timestamp":"2026-01-01T00:00:0%dZ","actions":[%s]}`, v, v-1, v%10, strings.Join(actions, ","))
}

// writeLog lays out a log by hand: commits[i] becomes version i+1, and
// CURRENT holds current (no CURRENT file when current is "").
func writeLog(t *testing.T, dir string, current string, commits ...string) {
	t.Helper()
	logDir := filepath.Join(dir, LogDir)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, c := range commits {
		if c == "" {
			continue // a hole
		}
		if err := os.WriteFile(filepath.Join(logDir, fmt.Sprintf("%010d.json", i+1)), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if current != "" {
		if err := os.WriteFile(filepath.Join(logDir, "CURRENT"), []byte(current), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// dirSnapshot maps every file under dir to its content.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	walkFiles(t, dir, func(p string, b []byte) { out[strings.TrimPrefix(p, dir)] = string(b) })
	return out
}

// sameSnapshot lists the files that differ between snapshots a and b,
// sorted and joined by ", "; "" when there are none.
func sameSnapshot(a, b map[string]string) string {
	var diffs []string
	add := func(p string) { diffs = append(diffs, p) }
	diffMaps(b, a, add, add)
	sort.Strings(diffs)
	return strings.Join(diffs, ", ")
}

var (
	createOK  = commitJSON(1, metaJSON(7, "[]", "[]", "", ""))
	schemaOK  = commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), segJSON("data/a.parquet"), covJSON)
	errorText = func(err error) string {
		if err == nil {
			return "<nil>"
		}
		return err.Error()
	}
)

// TestOpenRefuses: each broken or unsupported table is refused with its own
// category and a message that names the fault, and opening writes nothing.
func TestOpenRefuses(t *testing.T) {
	cases := []struct {
		name    string
		current string
		commits []string
		want    error
		msg     string
	}{
		{"unknown reader feature", "1", []string{commitJSON(1, metaJSON(7, `["time_travel"]`, "[]", "", ""))}, ErrUnsupported, "time_travel"},
		{"unknown reader feature checked before typed actions", "2", []string{createOK,
			commitJSON(2, `{"AddSegment":{"path":"../../etc/passwd","format":"csv"}}`, metaJSON(7, `["time_travel"]`, "[]", testSchema, ""))}, ErrUnsupported, "time_travel"},
		{"unknown reader feature checked before the schema", "1", []string{commitJSON(1, metaJSON(7, `["time_travel"]`, "[]", `{"columns":[{"name":"ts","data_type":"Float16","nullable":false}]}`, ""))}, ErrUnsupported, "time_travel"},
		{"protocol 6", "1", []string{commitJSON(1, metaJSON(6, "[]", "[]", "", ""))}, ErrUnsupported, "protocol version 6"},
		{"protocol 8", "1", []string{commitJSON(1, metaJSON(8, "[]", "[]", "", ""))}, ErrUnsupported, "protocol version 8"},
		// Format 6 opens (read-only, format6_test.go); these are not format 6.
		{"format_version 5", "1", []string{commitJSON(1, strings.Replace(v6Meta, `"format_version":6`, `"format_version":5`, 1))}, ErrUnsupported, "legacy format_version 5"},
		{"format_version and protocol_version", "1", []string{commitJSON(1, metaJSON(7, "[]", "[]", "", `,"format_version":6`))}, ErrCorrupt, `both the legacy field "format_version" and "protocol_version"`},
		{"format 6 with the protocol-7 index kind", "1", []string{commitJSON(1, strings.Replace(v6Meta, `"bucket"`, `"index_granularity"`, 1))}, ErrCorrupt, "protocol-7 spelling"},
		{"format 6 with a bucket_width timestamp kind", "1", []string{commitJSON(1, strings.Replace(v6Meta, `"bucket"`, `"bucket_width"`, 1))}, ErrCorrupt, `missing field "bucket"`},
		{"unknown format-6 index type", "1", []string{commitJSON(1, strings.Replace(v6Meta, `"type":"timestamp","bucket"`, `"type":"float","bucket"`, 1))}, ErrCorrupt, `unknown format-6 index type "float"`},
		{"format-6 metadata after protocol 7", "2", []string{createOK, commitJSON(2, strings.Replace(v6Meta, `{"Hours":1}`, `{"Seconds":10}`, 1))}, ErrCorrupt, "mixes format-6 and protocol-7"},
		{"format-6 coverage kind in a protocol-7 table", "2", []string{createOK, commitJSON(2, `{"UpdateTableCoverage":{"index_kind":{"type":"timestamp","bucket":{"Seconds":10}},"coverage_path":"_coverage/table/2-x.roar"}}`)}, ErrCorrupt, "not spelled in the table's format"},
		{"protocol-7 coverage kind in a format-6 table", "2", []string{commitJSON(1, v6Meta), commitJSON(2, `{"UpdateTableCoverage":{"index_kind":{"type":"timestamp","index_granularity":{"Hours":1}},"coverage_path":"_coverage/table/2-x.roar"}}`)}, ErrCorrupt, "not spelled in the table's format"},
		{"removed reader feature", "2", []string{commitJSON(1, metaJSON(7, `["schema_metadata"]`, `["schema_metadata"]`, "", "")), commitJSON(2, metaJSON(7, "[]", `["schema_metadata"]`, "", ""))}, ErrCorrupt, "reader features were removed: schema_metadata"},
		{"removed writer feature", "2", []string{commitJSON(1, metaJSON(7, `["schema_metadata"]`, `["schema_metadata"]`, "", "")), commitJSON(2, metaJSON(7, `["schema_metadata"]`, "[]", "", ""))}, ErrCorrupt, "writer features were removed: schema_metadata"},
		{"bad feature name", "1", []string{commitJSON(1, metaJSON(7, `["Schema-Metadata"]`, "[]", "", ""))}, ErrCorrupt, `"Schema-Metadata" does not match`},
		{"unsorted features", "1", []string{commitJSON(1, metaJSON(7, `["schema_metadata","schema_add_columns"]`, "[]", "", ""))}, ErrCorrupt, "not sorted"},
		{"duplicate feature", "1", []string{commitJSON(1, metaJSON(7, `["schema_metadata","schema_metadata"]`, "[]", "", ""))}, ErrCorrupt, "listed twice"},
		{"null feature list", "1", []string{commitJSON(1, metaJSON(7, "null", "[]", "", ""))}, ErrCorrupt, "required_reader_features must be a list"},
		{"empty CURRENT", " \n", []string{createOK}, ErrCorrupt, "CURRENT is empty"},
		{"non-numeric CURRENT", "two\n", []string{createOK}, ErrCorrupt, `CURRENT holds "two"`},
		{"truncated commit", "1", []string{createOK[:len(createOK)/2]}, ErrCorrupt, "0000000001.json"},
		{"malformed known action", "2", []string{createOK, commitJSON(2, `{"AddSegment":{"path":"data/a.parquet"}}`)}, ErrCorrupt, `missing field "format"`},
		{"action with two keys", "2", []string{createOK, commitJSON(2, `{"AddSegment":{},"RemoveSegment":{}}`)}, ErrCorrupt, "exactly one key"},
		{"missing intermediate commit", "3", []string{createOK, "", commitJSON(3, metaJSON(7, "[]", "[]", "", ""))}, ErrCorrupt, "commit 2 is missing but CURRENT says 3"},
		{"non-canonical segment path", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), segJSON("data/../x.parquet"), covJSON)}, ErrCorrupt, `"data/../x.parquet"`},
		{"absolute segment path", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), segJSON("/data/x.parquet"), covJSON)}, ErrCorrupt, "absolute"},
		{"backslash path", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), segJSON(`data\\x.parquet`), covJSON)}, ErrCorrupt, "backslash"},
		{"drive letter path", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), segJSON("C:/x.parquet"), covJSON)}, ErrCorrupt, "drive-letter"},
		{"version mismatch", "2", []string{createOK, strings.Replace(schemaOK, `"version":2`, `"version":3`, 1)}, ErrCorrupt, "file holds version 3"},
		{"base version mismatch", "2", []string{createOK, strings.Replace(schemaOK, `"base_version":1`, `"base_version":0`, 1)}, ErrCorrupt, "base_version is 0"},
		{"duplicate live segment", "3", []string{createOK, schemaOK, commitJSON(3, segJSON("data/a.parquet"))}, ErrCorrupt, `"data/a.parquet" is already live`},
		{"missing metadata", "1", []string{commitJSON(1, segJSON("data/a.parquet"))}, ErrCorrupt, "no table metadata"},
		{"coverage kind mismatch", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), segJSON("data/a.parquet"), strings.Replace(covJSON, `{"Seconds":10}`, `{"Seconds":20}`, 1))}, ErrCorrupt, "coverage pointer index kind"},
		{"segments without schema", "2", []string{createOK, commitJSON(2, segJSON("data/a.parquet"))}, ErrCorrupt, "segments but no logical schema"},
		{"index column not in schema", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", strings.Replace(testSchema, `"name":"ts"`, `"name":"time"`, 1), ""))}, ErrCorrupt, `index column "ts" is not in the schema`},
		{"identity type mismatch", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), strings.Replace(segJSON("data/a.parquet"), `{"type":"utf8","value":"h1"}`, `{"type":"int64","value":1}`, 1), covJSON)}, ErrCorrupt, `identity component "host" is int64`},
		{"layout without entities", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), strings.Replace(segJSON("data/a.parquet"), `{"Single":[{"type":"utf8","value":"h1"}]}`, `"NotApplicable"`, 1), covJSON)}, ErrCorrupt, "NotApplicable but the table has entity columns"},
		{"min after max", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), strings.Replace(segJSON("data/a.parquet"), "2024-01-01T01:00:00Z", "2023-01-01T00:00:00Z", 1), covJSON)}, ErrCorrupt, "is after index_max"},
		{"undeclared added column", "3", []string{createOK, schemaOK, commitJSON(3, metaJSON(7, "[]", "[]", strings.Replace(testSchema, `]}`, `,{"name":"x","data_type":"Float64","nullable":true}]}`, 1), ""))}, ErrCorrupt, "without declaring reader feature \"schema_add_columns\""},
		{"schema removed", "3", []string{createOK, schemaOK, commitJSON(3, metaJSON(7, "[]", "[]", "", ""))}, ErrCorrupt, "schema was removed"},
		{"column retyped", "3", []string{createOK, schemaOK, commitJSON(3, metaJSON(7, `["schema_add_columns"]`, "[]", strings.Replace(testSchema, `"Int64"`, `"Float64"`, 1), ""))}, ErrCorrupt, "other than adding columns"},
		{"generic table", "1", []string{commitJSON(1, strings.Replace(metaJSON(7, "[]", "[]", "", ""), `{"TimeSeries":{"column":"ts","entity_columns":["host"],"kind":{"type":"timestamp","index_granularity":{"Seconds":10}}}}`, `"Generic"`, 1))}, ErrCorrupt, "Generic"},
		{"u64 value overflow", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), strings.Replace(segJSON("data/a.parquet"), `"row_count":10`, `"row_count":18446744073709551616`, 1), covJSON)}, ErrCorrupt, "row_count"},
		{"float where integer", "2", []string{createOK, commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), strings.Replace(segJSON("data/a.parquet"), `"row_count":10`, `"row_count":10.0`, 1), covJSON)}, ErrCorrupt, "row_count"},
		{"unknown index kind field", "1", []string{commitJSON(1, strings.Replace(metaJSON(7, "[]", "[]", "", ""), `{"Seconds":10}}`, `{"Seconds":10},"extra":1}`, 1))}, ErrCorrupt, `unknown field "extra"`},
		{"duplicate JSON key", "1", []string{strings.Replace(createOK, `"version":1,`, `"version":1,"version":1,`, 1)}, ErrCorrupt, "duplicate field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLog(t, dir, c.current, c.commits...)
			before := dirSnapshot(t, dir)
			_, err := Open(context.Background(), storage.Local(dir), nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("Open error = %v, want category %v", err, c.want)
			}
			for _, other := range []error{ErrUnsupported, ErrNeedsUpgrade, ErrCorrupt} {
				if other != c.want && errors.Is(err, other) {
					t.Fatalf("error %v is also %v", err, other)
				}
			}
			t.Log(err)
			if !strings.Contains(errorText(err), c.msg) {
				t.Fatalf("error %q does not mention %q", err, c.msg)
			}
			if d := sameSnapshot(before, dirSnapshot(t, dir)); d != "" {
				t.Fatalf("Open changed files: %s", d)
			}
		})
	}
}

// TestOpenAccepts covers what must be tolerated: unknown actions when no
// unsupported reader feature is declared, whitespace around CURRENT, files
// left by others, supported features, removal of a non-live path.
func TestOpenAccepts(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, "  4  \n",
		commitJSON(1, metaJSON(7, "[]", "[]", "", `,"future_key":{"x":1}`)),
		commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), segJSON("data/a.parquet"), `{"Checkpoint":{"anything":[1,2]}}`, `"CommitInfo"`, covJSON),
		commitJSON(3, `{"RemoveSegment":{"path":"data/never-live.parquet"}}`, segJSON("data/b.parquet")),
		commitJSON(4, metaJSON(7, `["schema_add_columns"]`, "[]", strings.Replace(testSchema, `]}`, `,{"name":"x","data_type":"Float64","nullable":true}]}`, 1), "")),
	)
	if err := os.WriteFile(filepath.Join(dir, LogDir, "CURRENT.tmp"), []byte("9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := mustOpen(t, storage.Local(dir), nil)
	st := tb.State()
	if st.Version != 4 || len(st.Segments) != 2 || st.CoverageVersion != 2 || len(st.Meta.Schema.Columns) != 4 {
		t.Fatalf("state: version %d, %d segments, coverage v%d, %d columns", st.Version, len(st.Segments), st.CoverageVersion, len(st.Meta.Schema.Columns))
	}
	if !st.Meta.HasReaderFeature(FeatureSchemaAddColumns) {
		t.Fatal("feature not carried")
	}
	if st.RowCount() != 20 {
		t.Fatalf("row count %d", st.RowCount())
	}
}

// TestWriteRefusesUnsupportedWriterFeature: a table that can be read but
// needs a writer feature this build lacks refuses commits, writing nothing.
func TestWriteRefusesUnsupportedWriterFeature(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, "1", commitJSON(1, metaJSON(7, "[]", `["sorted_segments"]`, "", "")))
	tb, err := Open(context.Background(), storage.Local(dir), nil)
	if err != nil {
		t.Fatalf("reading must be allowed: %v", err)
	}
	before := dirSnapshot(t, dir)
	_, err = tb.Commit(context.Background(), 1, []Action{RemoveSegment{Path: "data/x.parquet"}})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "sorted_segments") {
		t.Fatalf("Commit error = %v, want ErrUnsupported naming sorted_segments", err)
	}
	if d := sameSnapshot(before, dirSnapshot(t, dir)); d != "" {
		t.Fatalf("refused commit changed files: %s", d)
	}
}

// TestUnreadableCommitAboveCurrent: a commit file above CURRENT that this
// build cannot read (newer protocol, legacy metadata, removed feature) is
// ignored by readers, like the reference ignores it, and blocks writers
// with a conflict instead of being overwritten.
func TestUnreadableCommitAboveCurrent(t *testing.T) {
	cases := map[string]string{
		"protocol 8":       commitJSON(2, metaJSON(8, "[]", "[]", "", "")),
		"unknown feature":  commitJSON(2, metaJSON(7, `["time_travel"]`, "[]", "", "")),
		"format_version":   commitJSON(2, metaJSON(7, "[]", "[]", "", `,"format_version":6`)),
		"removed feature":  commitJSON(2, metaJSON(7, "[]", "[]", "", "")),
		"version mismatch": strings.Replace(commitJSON(2, metaJSON(7, `["schema_metadata"]`, `["schema_metadata"]`, "", "")), `"version":2`, `"version":5`, 1),
	}
	for name, above := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeLog(t, dir, "1", commitJSON(1, metaJSON(7, `["schema_metadata"]`, `["schema_metadata"]`, "", "")), above)
			before := dirSnapshot(t, dir)
			opts := DefaultOptions()
			opts.OrphanGrace = time.Hour
			tb, err := Open(context.Background(), storage.Local(dir), opts)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if v := tb.State().Version; v != 1 {
				t.Fatalf("version %d, want 1", v)
			}
			_, err = tb.Commit(context.Background(), 1, marker("x"))
			var ce *ConflictError
			if !errors.As(err, &ce) || !ce.LostRace {
				t.Fatalf("commit over the unreadable file: %v, want a lost-race conflict", err)
			}
			if d := sameSnapshot(before, dirSnapshot(t, dir)); d != "" {
				t.Fatalf("files changed: %s", d)
			}
		})
	}
}

// TestNestingLimit: a commit must nest at most 127 levels, the deepest the
// reference reads; a deeper schema is refused before anything is written.
func TestNestingLimit(t *testing.T) {
	nested := func(depth int) Field {
		f := Field{Name: "leaf", Type: DataType{Kind: TypeInt64}, Nullable: true}
		for i := 0; i < depth; i++ {
			f = Field{Name: fmt.Sprintf("s%d", i), Type: DataType{Kind: TypeStruct, Fields: []Field{f}}, Nullable: true}
		}
		return f
	}
	// Each struct level adds 4 JSON levels; find the deepest that fits.
	ctx := context.Background()
	var okDepth int
	for depth := 20; depth < 40; depth++ {
		mem := storage.NewMem()
		tb := mustCreate(t, mem)
		m := tb.State().Meta.Clone()
		m.Schema = tsSchema(nested(depth))
		data, _ := (&Commit{Version: 2, BaseVersion: 1, Actions: []Action{UpdateTableMeta{Meta: *m}}}).MarshalJSON()
		_, err := tb.Commit(ctx, 1, []Action{UpdateTableMeta{Meta: *m}})
		if err == nil {
			okDepth = depth
			if data == nil || jsonDepth(data) > 127 {
				t.Fatalf("depth %d committed with JSON depth %d", depth, jsonDepth(data))
			}
			continue
		}
		if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "at most 127") {
			t.Fatalf("depth %d: %v", depth, err)
		}
		if _, serr := mem.Stat(CommitPath(2)); !storage.IsNotExist(serr) {
			t.Fatal("a refused commit was written")
		}
		break
	}
	if okDepth == 0 || okDepth == 39 {
		t.Fatalf("deepest committed depth %d: the limit was never reached or never allowed a commit", okDepth)
	}
}
