//go:build duckdb_arrow

package flightsql

// Tests of the function guard and of the rewrite check, with the queries
// two security reviews used to get past them.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
)

func TestCallSpan(t *testing.T) {
	for s, want := range map[string]int{
		"ts_gaps('a', 'b') rest":          len("ts_gaps('a', 'b')"),
		"ts_gaps('(', ')') x":             len("ts_gaps('(', ')')"),
		"ts_gaps('it''s)') x":             len("ts_gaps('it''s)')"),
		"ts_gaps(E'\\') x', 'y') z":       len("ts_gaps(E'\\') x', 'y')"),
		"ts_gaps('a' /* ) */ ) x":         len("ts_gaps('a' /* ) */ )"),
		"ts_gaps('a' /* /* ) */ ) */ ) x": len("ts_gaps('a' /* /* ) */ ) */ )"),
		"ts_gaps('a' -- )\n ) x":          len("ts_gaps('a' -- )\n )"),
		"ts_gaps('a', $x$ ) $x$) x":       len("ts_gaps('a', $x$ ) $x$)"),
		"ts_gaps('a', $$ ) $$) x":         len("ts_gaps('a', $$ ) $$)"),
		"ts_gaps('a', $1) x":              len("ts_gaps('a', $1)"),
		`ts_gaps("q)", 'a') x`:            len(`ts_gaps("q)", 'a')`),
		"ts_gaps /* ( */ ('a') x":         len("ts_gaps /* ( */ ('a')"),
		"ts_gaps(('a'), (select 1)) x":    len("ts_gaps(('a'), (select 1))"),
		// DuckDB ends a line comment at \r too.
		"ts_gaps('a', -- c \r ')' ) x": len("ts_gaps('a', -- c \r ')' )"),
		// 1E'…' is the number 1 and an escape string; aE'…' an identifier
		// and a plain string.
		"ts_gaps(1E'\\') x', 'y') z": len("ts_gaps(1E'\\') x', 'y')"),
		"ts_gaps(aE'\\') x":          len("ts_gaps(aE'\\')"),
	} {
		if got, ok := callSpan(s); !ok || got != want {
			t.Errorf("callSpan(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"ts_gaps('a'", "ts_gaps('a' /* ) ", "ts_gaps('a', $x$ ) x", "ts_gaps('a)"} {
		if n, ok := callSpan(s); ok {
			t.Errorf("callSpan(%q) = %d, want no call (unterminated)", s, n)
		}
	}
}

// The queries of the security reviews, each of which once read DuckDB's
// settings, its logs or files, now refused or harmless.
func TestGuardHoldsAgainstReviewQueries(t *testing.T) {
	s, ctx := startCPU(t, 1)
	root := s.root
	for _, c := range []struct {
		q     string
		code  codes.Code
		frags []string
	}{
		// A comment or a dollar-quoted string moving the end of a ts_gaps
		// call in the text rewrite.
		{"SELECT name, value FROM ts_gaps('cpu', '2024-01-01T00:00:00Z', '2024-01-02T00:00:00Z' /* ) , duckdb_settings() -- */ ) LIMIT 5", codes.InvalidArgument, []string{"name"}},
		// CTEs out of scope, or naming themselves.
		{"WITH pg_settings AS (SELECT * FROM pg_settings) SELECT name, setting FROM pg_settings", codes.NotFound, []string{`table "pg_settings" does not exist`}},
		{"SELECT name, setting FROM (WITH pg_settings AS (SELECT 1) SELECT * FROM pg_settings) x, pg_settings", codes.NotFound, []string{`"pg_settings"`}},
		{"WITH duckdb_logs AS (SELECT * FROM duckdb_logs) SELECT * FROM duckdb_logs", codes.NotFound, []string{`"duckdb_logs"`}},
		{`WITH "` + root + `/cpu/_timeseries_log/0000000001.json" AS (SELECT * FROM '` + root + `/cpu/_timeseries_log/0000000001.json') SELECT * FROM "` + root + `/cpu/_timeseries_log/0000000001.json"`, codes.NotFound, []string{"does not exist"}},
		{`SELECT count(*) FROM (WITH "` + root + `/cpu/data/**/*.parquet" AS (SELECT 1) SELECT 1), '` + root + `/cpu/data/**/*.parquet'`, codes.NotFound, []string{"does not exist"}},
		// The third review: names folded by Unicode rules (Kelvin sign,
		// dotted capital I) where DuckDB folds ASCII only; a \r ending a
		// comment; a qualified reference hidden by a CTE; SHOW; the
		// rewritten text through current_query().
		{"WITH \"pg_sett\u0130ngs\" AS (SELECT 1) SELECT name, setting FROM pg_settings", codes.NotFound, []string{`"pg_settings"`}},
		{"WITH \"duc\u212Adb_logs\" AS (SELECT 1) SELECT count(*) FROM duckdb_logs", codes.NotFound, []string{`"duckdb_logs"`}},
		{`WITH "` + root + "/[c\u212A]pu/**/*.parquet\" AS (SELECT 1) SELECT count(*) FROM \"" + root + `/[ck]pu/**/*.parquet"`, codes.NotFound, []string{"does not exist"}},
		{"WITH cpu AS (SELECT 1 AS q) SELECT count(*) FROM tsflight.main.cpu", codes.InvalidArgument, []string{"hidden by a common table expression named cpu"}},
		{"SELECT * FROM (SHOW databases)", codes.InvalidArgument, []string{"SHOW, DESCRIBE and SUMMARIZE are not available"}},
		{"SHOW ALL TABLES", codes.InvalidArgument, nil},
		{"SELECT current_query()", codes.InvalidArgument, []string{"current_query"}},
		// The fourth review: json_serialize_plan binds the SQL it is given.
		{"SELECT json_serialize_plan('SELECT current_setting(''allowed_directories'') AS x', optimize := true)", codes.InvalidArgument, []string{"function json_serialize_plan is not available"}},
		// Macros over refused functions.
		{"SELECT pg_sleep(0)", codes.InvalidArgument, []string{"function pg_sleep is not available"}},
		{"SELECT get_block_size('memory')", codes.InvalidArgument, []string{"get_block_size"}},
		{"SELECT format_type(1, 1)", codes.InvalidArgument, []string{"format_type"}},
	} {
		_, err := s.query(ctx, c.q)
		wantCode(t, c.q, err, c.code, c.frags...)
	}
	// The dollar-quoted variant is now what DuckDB reads it as: one string,
	// the entity of the ts_gaps call, whose answer is gaps and nothing else.
	// So is the \r variant: DuckDB ends the comment at \r, and the string
	// after it is the entity.
	for _, q := range []string{
		"SELECT * FROM ts_gaps('cpu', '2024-01-01T00:00:00Z', '2024-01-02T00:00:00Z', $x$h1) , (SELECT value FROM duckdb_settings() WHERE name = 'allowed_directories') --$x$)",
		"SELECT * FROM ts_gaps('cpu', '2024-01-01T00:00:00Z', '2024-01-02T00:00:00Z', -- c \r '\n) g, (SELECT 42 AS hidden) h --' ) g LIMIT 1",
	} {
		r := s.mustQuery(ctx, q)
		var cols []string
		for _, f := range r.schema.Fields() {
			cols = append(cols, f.Name)
		}
		r.release()
		if got := strings.Join(cols, ","); got != "gap_start,gap_end,end_inclusive,intervals" {
			t.Errorf("%q: columns %s, want the gaps of ts_gaps only", q, got)
		}
	}
	// An error about a rewritten statement does not quote it (it holds the
	// root's path and segment files).
	_, err := s.query(ctx, "SELECT * FROM cpu WHERE host = 1::INTERVAL")
	wantCode(t, "a binder error in a rewritten statement", err, codes.InvalidArgument, "INTERVAL")
	if strings.Contains(err.Error(), s.root) || strings.Contains(err.Error(), ".parquet") {
		t.Errorf("the error quotes the rewritten text: %v", err)
	}
	// What is allowed still works, comments and dollar quotes included.
	s.wantScalars(ctx, map[string]string{
		"SELECT count(*) FROM ts_gaps('cpu', '2024-01-01T00:00:00Z' /* ) */, '2024-01-02T00:00:00Z')":        "",
		"WITH RECURSIVE r AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM r WHERE x < 5) SELECT sum(x) FROM r": "15",
		"WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a) SELECT count(*) FROM b, cpu":                      "7200",
		"SELECT count(*) FROM cpu WHERE host <> $$it's ) here$$ -- )":                                        "7200",
	})
}

// TestVerifyRewrite checks the last line of defence directly: a rewritten
// statement naming anything the plan did not is refused.
func TestVerifyRewrite(t *testing.T) {
	ctx, sess := engineSession(t)
	names := map[string]bool{"cpu": true, "__tsflight_ts_gaps_1": true}
	files := map[string]bool{"/root/cpu/data/a.parquet": true}
	for text, ok := range map[string]bool{
		"SELECT * FROM cpu": true,
		"SELECT * FROM (SELECT * FROM read_parquet(['/root/cpu/data/a.parquet'])) AS cpu": true,
		"SELECT * FROM read_parquet(['/root/cpu/data/a.parquet'], union_by_name = true)":  true,
		"WITH x AS (SELECT 1) SELECT * FROM x, \"__tsflight_ts_gaps_1\"":                  true,
		"SELECT * FROM cpu, duckdb_settings()":                                            false,
		"SELECT * FROM read_parquet(['/etc/passwd'])":                                     false,
		"SELECT * FROM read_parquet(['/root/cpu/data/a.parquet'], filename = true)":       false,
		"SELECT * FROM read_parquet(list_value((SELECT '/root/cpu/data/a.parquet')))":     false,
		"SELECT * FROM cpu, pg_settings":                                                  false,
		"SELECT * FROM main.cpu":                                                          false,
		"SELECT * FROM ts_gaps('cpu', 1, 2)":                                              false,
		"SELECT pg_sleep(1) FROM cpu":                                                     false,
	} {
		err := verifyRewrite(ctx, sess, text, names, files)
		if (err == nil) != ok {
			t.Errorf("verifyRewrite(%s) = %v, want ok=%v", text, err, ok)
		}
	}
}

// TestGuardCoversMacros derives from DuckDB's own catalog the macros whose
// body calls a table function that is not allowed or a refused scalar
// function (directly or through another such macro), and requires each to
// be refused: a DuckDB upgrade that adds one fails here.
func TestGuardCoversMacros(t *testing.T) {
	ctx, sess := engineSession(t)
	list := func(q string) []string {
		out, err := sess.scalarString(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(out, "\n")
	}
	tableFuncs := list("SELECT string_agg(DISTINCT function_name, chr(10)) FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro')")
	macros := list("SELECT string_agg(function_name || chr(9) || macro_definition, chr(10)) FROM duckdb_functions() WHERE function_type = 'macro'")
	bad := map[string]bool{}
	for _, f := range tableFuncs {
		if !allowedTableFunctions[f] {
			bad[f] = true
		}
	}
	for f := range refusedScalarFunctions {
		bad[f] = true
	}
	call := regexp.MustCompile(`(?i)([a-z_][a-z0-9_]*)"?\s*\(`)
	for changed := true; changed; {
		changed = false
		for _, m := range macros {
			name, def, _ := strings.Cut(m, "\t")
			if bad[name] {
				continue
			}
			for _, c := range call.FindAllStringSubmatch(def, -1) {
				if bad[strings.ToLower(c[1])] && strings.ToLower(c[1]) != name {
					bad[name], changed = true, true
					break
				}
			}
		}
	}
	var missing []string
	for _, m := range macros {
		name, _, _ := strings.Cut(m, "\t")
		if bad[name] && !refusedScalarFunctions[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("macros that call refused functions but are not refused: %v", missing)
	}
}

// BenchmarkVerifyRewrite measures the rewrite check on a statement reading
// 24 planned segments, against the analysis of the statement as sent
// (which every query pays once): the check is one more parse.
func BenchmarkVerifyRewrite(b *testing.B) {
	ctx, sess := engineSession(b)
	files := map[string]bool{}
	var list []string
	for i := range 24 {
		f := fmt.Sprintf("/var/lib/tsflight/cpu/data/_managed/append/%08d-0000-4000-8000-000000000000.parquet", i)
		files[f] = true
		list = append(list, "'"+f+"'")
	}
	q := "SELECT hostname, max(usage_user) FROM cpu WHERE ts >= '2016-01-01T00:00:00Z' AND ts < '2016-01-01T12:00:00Z' GROUP BY hostname ORDER BY 2 DESC LIMIT 5"
	text := strings.Replace(q, "FROM cpu", "FROM (SELECT ts, hostname, usage_user FROM read_parquet(["+strings.Join(list, ", ")+"])) AS cpu", 1)
	names := map[string]bool{"cpu": true}
	b.Run("analyze-as-sent", func(b *testing.B) {
		for b.Loop() {
			if _, err := analyze(ctx, sess, q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify-rewritten", func(b *testing.B) {
		for b.Loop() {
			if err := verifyRewrite(ctx, sess, text, names, files); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// engineSession opens an engine on a temporary root and one session of it,
// both closed when tb ends.
func engineSession(tb testing.TB) (context.Context, *session) {
	tb.Helper()
	ctx := context.Background()
	e, err := newEngine(ctx, tb.TempDir(), DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	sess, err := e.open(ctx)
	if err != nil {
		e.close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		sess.close()
		e.close()
	})
	return ctx, sess
}

// A statement ticket is the client's to edit: a forged result schema once
// made the server allocate terabytes of NULLs (fourth review). It is now
// an error of that DoGet, and the server goes on.
func TestForgedTicketSchemaIsRefused(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	q := "SELECT CAST(NULL AS INTEGER) AS a FROM range(2048)"
	forge := func(typ arrow.DataType) *flight.FlightInfo {
		tk, err := flightsql.CreateStatementQueryTicket(mustJSON(t, stmtHandle{ID: newID(), Query: q,
			Schema: flight.SerializeSchema(arrow.NewSchema([]arrow.Field{{Name: "a", Type: typ, Nullable: true}}, nil), s.cliMem)}))
		if err != nil {
			t.Fatal(err)
		}
		return &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tk}}}}
	}
	_, err := s.fetch(ctx, forge(&arrow.FixedSizeBinaryType{ByteWidth: 1<<31 - 1}))
	wantCode(t, "a ticket whose schema makes NULLs of fixed_size_binary(2^31-1)", err, codes.InvalidArgument, "ticket's schema", "fixed_size_binary", "bytes a batch")
	// A schema DuckDB could have produced is honoured.
	r, err := s.fetch(ctx, forge(arrow.PrimitiveTypes.Float64))
	if err != nil {
		t.Fatal(err)
	}
	if r.rows != 2048 || !arrow.TypeEqual(r.schema.Field(0).Type, arrow.PrimitiveTypes.Float64) {
		t.Fatalf("a float64 NULL column: %d rows of %s", r.rows, r.schema.Field(0).Type)
	}
	r.release()
	if got := s.scalar(ctx, "SELECT 41 + 1"); got != "42" {
		t.Fatalf("the server after the forged ticket: %s", got)
	}

	// A ticket carrying more parameter rows than a prepared statement may
	// bind (sixth review: 21 M rows fit a 64 MiB ticket).
	tk, err := flightsql.CreateStatementQueryTicket(mustJSON(t, stmtHandle{ID: newID(), Query: "SELECT 1 AS one", Rows: make([][]wireValue, MaxParameterRows+1)}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.fetch(ctx, &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tk}}}})
	wantCode(t, "a ticket with 10,001 parameter rows", err, codes.ResourceExhausted, "10001 parameter rows; at most 10000")

	// A GetTables filter pattern is bounded (each table name is matched
	// against it).
	long := strings.Repeat("%_", 600)
	info, err := s.client.GetTables(ctx, &flightsql.GetTablesOpts{TableNameFilterPattern: &long})
	if err == nil {
		_, err = s.fetch(ctx, info)
	}
	wantCode(t, "a 1,200-byte table name pattern", err, codes.InvalidArgument, "filter pattern of 1200 bytes")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGuardReviewedScalars lists DuckDB's scalar functions whose names
// speak of SQL, plans, settings, files, logs, queries or the catalog, and
// requires each to be refused or reviewed harmless below: a DuckDB upgrade
// adding such a function fails here until someone looks at it (the fourth
// review read files through json_serialize_plan).
func TestGuardReviewedScalars(t *testing.T) {
	harmless := map[string]string{
		"current_catalog": "a name", "current_database": "a name", "current_query_id": "a number",
		"current_schema": "a name", "current_schemas": "names", "in_search_path": "a boolean",
		"getvariable":            "NULL: variables are set by statements, which are refused",
		"has_database_privilege": "a constant", "has_schema_privilege": "a constant",
		"json_deserialize_sql": "text from JSON, not run", "json_serialize_sql": "parses only",
		"json_extract_path": "JSON", "json_extract_path_text": "JSON",
		"log": "math", "log10": "math", "log2": "math",
		"parse_dirname": "string", "parse_dirpath": "string", "parse_filename": "string", "parse_path": "string",
		"parse_duckdb_log_message": "parses its argument",
		"pg_conversion_is_visible": "a constant", "pg_is_other_temp_schema": "a constant", "pg_my_temp_schema": "a constant",
		"pg_ts_config_is_visible": "a constant", "pg_ts_template_is_visible": "a constant",
		"uuid_extract_version": "of its argument", "version": "DuckDB's version",
	}
	ctx, sess := engineSession(t)
	out, err := sess.scalarString(ctx, `SELECT string_agg(DISTINCT function_name, ' ' ORDER BY function_name) FROM duckdb_functions()
		WHERE function_type IN ('scalar', 'macro', 'aggregate')
		AND regexp_matches(function_name, 'sql|plan|setting|secret|file|log|query|exec|env|variable|path|read|glob|attach|extension|checkpoint|profil|schema|catalog|database|version|config|option|memory|temp|dir')`)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Fields(out) {
		if _, ok := harmless[name]; !ok && !refusedScalarFunctions[name] {
			t.Errorf("scalar function %s is neither refused nor reviewed harmless", name)
		}
	}
}

// A panic in a result stream's goroutine (outside the handler, where no
// middleware recovers it) ends that call with INTERNAL, not the process.
func TestStreamPanicEndsTheCallOnly(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	boom := func() { panic("boom in a result stream") }
	streamTestHook.Store(&boom)
	_, err := s.query(ctx, "SELECT 1")
	streamTestHook.Store(nil)
	wantCode(t, "a query whose stream panics", err, codes.Internal, "internal error streaming the result")
	if got := s.scalar(ctx, "SELECT 41 + 1"); got != "42" {
		t.Fatalf("the server after the panic: %s", got)
	}
	if !strings.Contains(s.logs.String(), "boom in a result stream") {
		t.Error("the panic was not logged")
	}
}
