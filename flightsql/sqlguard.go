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
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
// its settings (file paths, limits).
var refusedScalarFunctions = map[string]bool{
	"write_log":       true,
	"current_setting": true,
	"setseed":         true,
	"sleep_ms":        true,
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
		case str(m["type"]) == "TABLE_FUNCTION":
			fn, _ := m["function"].(map[string]any)
			name := strings.ToLower(str(fn["function_name"]))
			if !allowedTableFunctions[name] {
				bad = status.Errorf(codes.InvalidArgument,
					"table function %s is not available in tsflight SQL (it could read files or change the engine other clients share); the table functions are %s",
					truncateName(name), strings.Join(tableFunctionNames(), ", "))
			}
		case str(m["class"]) == "FUNCTION":
			name := strings.ToLower(str(m["function_name"]))
			if refusedScalarFunctions[name] {
				bad = status.Errorf(codes.InvalidArgument,
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
