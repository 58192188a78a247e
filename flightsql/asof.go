//go:build duckdb_arrow

package flightsql

// Reading a table as of a version. A table reference written as the
// quoted identifier "cpu@v12" reads table cpu as version 12 left it, as
// Delta Lake and Spark read t@v12. DuckDB's parser takes the quoted name
// as any other table name (a BASE_TABLE named cpu@v12, with catalog,
// schema, alias and position), so the reference is found, pruned by its
// WHERE conjuncts and rewritten to a relation over that version's
// segments exactly as a reference to the newest state is: only the
// snapshot differs. The same table may be read at several versions, and
// at the newest, in one statement (each is a relation of its own).
//
// The version comes from tableformat.Table.StateAt, so the keep window
// (table property tsflight.keep-snapshots) decides what is readable:
// StateAt's refusal of an expired version, and of a version the table has
// not reached, reaches the client as NOT_FOUND with StateAt's message.
// Table names are letters, digits and underscores
// (flightserver.ValidateTableName), so "@" in a reference always starts a
// version.
//
// DuckDB's own time-travel clause, FROM t AT (VERSION => n), parses too
// but is refused with a pointer to the quoted form: the rewrite replaces
// the name with a subquery, which takes no AT clause.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tsflight/tsflight/flightserver"
)

// versionMark separates a table's name from a version in a reference.
const versionMark = "@"

// tableAt is what a table reference reads: a table at its newest version
// (or the version a statement ticket pins), or, for a reference
// "name@vN", at version N.
type tableAt struct {
	table   string // the table's name in the root
	asOf    bool   // named at a version
	version uint64 // the version named, with asOf
	// key names the relation in the rewritten statement: the table's
	// name, or name@v and the digits as written. References with one key
	// share one relation (DuckDB matches its name without ASCII case, as
	// it matches theirs).
	key string
}

// resolveTable reports which table, and which version of it, r names.
// ok is false when r names no table of the root (a CTE, DuckDB's own
// catalog, a typo). An error means r names a table with a malformed
// version suffix.
func resolveTable(r *tableRef, names []string) (at tableAt, ok bool, err error) {
	base, suffix, asOf := strings.Cut(r.name, versionMark)
	plain := *r
	plain.name = base
	name, ok := ourTable(&plain, names)
	if !ok {
		return tableAt{}, false, nil
	}
	if !asOf {
		return tableAt{table: name, key: name}, true, nil
	}
	v, err := parseVersionSuffix(r.name, suffix)
	if err != nil {
		return tableAt{}, true, err
	}
	return tableAt{table: name, asOf: true, version: v, key: name + versionMark + asciiLower(suffix)}, true, nil
}

// parseVersionSuffix reads the text after "@" in reference ref: v (or V)
// and a decimal version number.
func parseVersionSuffix(ref, suffix string) (uint64, error) {
	digits, ok := strings.CutPrefix(asciiLower(suffix), "v")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, invalidf(
			"table reference %q: %q is not a version; name a table at a version as a quoted identifier, the table's name, @v and the version number: \"cpu@v12\"",
			truncateName(ref), truncateName(versionMark+suffix))
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, invalidf("table reference %q: version %s is out of range (at most %d)", truncateName(ref), truncateName(digits), uint64(math.MaxUint64))
	}
	return v, nil
}

// asOfError is the status of a version StateAt refuses: NOT_FOUND for a
// version expired under the keep window or not reached yet, with
// StateAt's message naming the version and the window or the newest
// version.
func asOfError(at tableAt, err error) error {
	return flightserver.Status(fmt.Errorf("table %s at version %d: %w", at.table, at.version, err))
}

// checkAtClauses refuses DuckDB's AT (VERSION => …) and AT (TIMESTAMP =>
// …) clauses on table references.
func checkAtClauses(stmt map[string]any) error {
	var bad error
	walk(stmt, func(m map[string]any) {
		if bad != nil || str(m["type"]) != "BASE_TABLE" {
			return
		}
		at, _ := m["at_clause"].(map[string]any)
		if at == nil {
			return
		}
		name := truncateName(str(m["table_name"]))
		bad = invalidf(
			"%s AT (%s => …) is not supported in tsflight SQL; read a table at a version by naming it as a quoted identifier with the version: \"%s@v12\" reads version 12",
			name, truncateName(str(at["unit"])), name)
	})
	return bad
}

// parseErrorHint adds to a DuckDB parser error a hint for an unquoted
// reference at a version (FROM cpu@v12), which DuckDB reads as an
// operator.
func parseErrorHint(msg string) string {
	if strings.Contains(msg, `at or near "@"`) {
		return msg + `; to read a table at a version, quote the name with the version: FROM "cpu@v12"`
	}
	return msg
}
