//go:build duckdb_arrow

package flightsql

// The function guard: tsflight SQL is read-only for every caller, and a
// read token must not be able to change the shared DuckDB engine or reach
// files through it. DuckDB refuses statements other than SELECT, and its
// file access is confined to the root, but a SELECT can still call table
// functions with side effects (enable_logging writes files and records
// every client's queries, checkpoint, enable_profiling, …) or that read
// files and engine state behind the catalog's back (read_csv, glob,
// duckdb_settings, duckdb_secrets, query('…') running any text). So table
// functions are allowed by name, and the few scalar functions with side
// effects or that reveal settings are refused.

import (
	"context"
	"sort"
	"strings"
)

// allowedTableFunctions are the table functions a query may call: pure
// generators and tsflight's own coverage functions.
var allowedTableFunctions = map[string]bool{
	"ts_coverage":        true,
	"ts_gaps":            true,
	"range":              true,
	"generate_series":    true,
	"unnest":             true,
	"repeat":             true,
	"repeat_row":         true,
	"json_each":          true,
	"json_tree":          true,
	"pg_timezone_names":  true,
	"icu_calendar_names": true,
}

// refusedScalarFunctions have side effects on the shared engine or reveal
// its settings (file paths, limits), or are macros whose body calls such a
// function or a table function not allowed (DuckDB expands macros after
// the check sees their name; TestGuardCoversMacros derives this list from
// duckdb_functions() and fails when DuckDB adds one).
var refusedScalarFunctions = map[string]bool{
	"write_log":       true,
	"current_setting": true,
	"setseed":         true,
	"sleep_ms":        true,
	// The statement DuckDB runs is the rewritten one: its text names the
	// root's path and segment files.
	"current_query": true,
	// Binds (and so reads files for, and evaluates settings in) the SQL
	// text it is given as a string, past every check here (the fourth
	// review read files and settings through its plan).
	"json_serialize_plan": true,
	// macros
	"pg_sleep":             true, // sleep_ms
	"get_block_size":       true, // pragma_database_size()
	"pg_get_viewdef":       true, // duckdb_views()
	"pg_get_constraintdef": true, // duckdb_constraints()
	"format_type":          true, // duckdb_types()
}

// checkFunctions refuses a statement that calls a table function not
// allowed, or a refused scalar function, anywhere in it (subqueries, CTEs
// and arguments included).
func checkFunctions(stmt map[string]any) error {
	var bad error
	walk(stmt, func(m map[string]any) {
		if bad != nil {
			return
		}
		switch {
		case str(m["type"]) == "SHOW_REF":
			bad = invalidf(
				"SHOW, DESCRIBE and SUMMARIZE are not available in tsflight SQL (they show the engine's own objects); list tables and columns with the Flight SQL catalog calls or the describe-table action")
		case str(m["type"]) == "TABLE_FUNCTION":
			fn, _ := m["function"].(map[string]any)
			name := asciiLower(str(fn["function_name"]))
			if !allowedTableFunctions[name] {
				bad = invalidf(
					"table function %s is not available in tsflight SQL (it could read files or change the engine other clients share); the table functions are %s",
					truncateName(name), strings.Join(tableFunctionNames(), ", "))
			}
		case str(m["class"]) == "FUNCTION":
			name := asciiLower(str(m["function_name"]))
			if refusedScalarFunctions[name] {
				bad = invalidf(
					"function %s is not available in tsflight SQL (it changes or reveals the state of the engine other clients share)", name)
			}
		}
	})
	return bad
}

func tableFunctionNames() []string {
	names := make([]string, 0, len(allowedTableFunctions))
	for n := range allowedTableFunctions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func truncateName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// verifyRewrite parses text, the statement a plan will run after its
// rewrite, and checks it against what the analysis allowed: one SELECT
// whose table references are CTEs in scope or names of the plan (tables
// read through temporary views, ts_coverage and ts_gaps results), whose
// table functions are allowed ones or read_parquet over planned files only,
// and which calls no refused function. A failure means the rewrite and
// DuckDB read the text differently: the statement is refused.
func verifyRewrite(ctx context.Context, sess *session, text string, names, files map[string]bool) error {
	stmt, err := parseOne(ctx, sess, text)
	if err != nil {
		return err
	}
	markCTERefs(stmt, map[string]bool{})
	var bad string
	walk(stmt, func(m map[string]any) {
		if bad != "" {
			return
		}
		switch {
		case str(m["type"]) == "TABLE_FUNCTION":
			fn, _ := m["function"].(map[string]any)
			name := asciiLower(str(fn["function_name"]))
			switch {
			case name == "read_parquet":
				if !plannedParquet(fn, files) {
					bad = "a read_parquet of files the plan did not choose"
				}
			case name == "ts_coverage" || name == "ts_gaps" || !allowedTableFunctions[name]:
				bad = "table function " + truncateName(name)
			}
		case str(m["type"]) == "SHOW_REF":
			bad = "SHOW"
		case str(m["type"]) == "BASE_TABLE":
			if !isTrue(m[cteRefMark]) && (str(m["catalog_name"]) != "" || str(m["schema_name"]) != "" || !names[asciiLower(str(m["table_name"]))]) {
				bad = "table " + truncateName(str(m["table_name"]))
			}
		case str(m["class"]) == "FUNCTION" && refusedScalarFunctions[asciiLower(str(m["function_name"]))]:
			bad = "function " + str(m["function_name"])
		}
	})
	if bad != "" {
		return invalidf(
			"the statement does not read the same once rewritten (%s appeared): check comments, quotes and dollar-quoted strings around the table names and ts_coverage/ts_gaps calls", bad)
	}
	return nil
}

// plannedParquet reports whether a read_parquet call is the one a
// relation writes: a list of planned files, and at most union_by_name.
func plannedParquet(fn map[string]any, files map[string]bool) bool {
	children, _ := fn["children"].([]any)
	if len(children) == 0 {
		return false
	}
	list, _ := children[0].(map[string]any)
	if str(list["class"]) != "FUNCTION" || str(list["function_name"]) != "list_value" {
		return false
	}
	items, _ := list["children"].([]any)
	for _, it := range items {
		c, _ := it.(map[string]any)
		v, _ := c["value"].(map[string]any)
		path, ok := v["value"].(string)
		if str(c["class"]) != "CONSTANT" || !ok || !files[path] {
			return false
		}
	}
	for _, opt := range children[1:] {
		o, _ := opt.(map[string]any)
		left, _ := o["left"].(map[string]any)
		cols, _ := left["column_names"].([]any)
		if str(o["class"]) != "COMPARISON" || len(cols) != 1 || cols[0] != "union_by_name" || !constantOnly(o["right"]) {
			return false
		}
	}
	return true
}

// constantOnly reports whether an expression holds constants and casts
// only.
func constantOnly(v any) bool {
	ok := true
	walk(v, func(m map[string]any) {
		if c := str(m["class"]); c != "" && c != "CONSTANT" && c != "CAST" {
			ok = false
		}
	})
	return ok
}
