//go:build duckdb_arrow

package flightsql

// Describing a planned statement: the schema its result will have, before
// it runs (FlightInfo and GetSchema answer with it, and the ADBC drivers
// hold DoGet's batches to it).

import (
	"context"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	bindings "github.com/duckdb/duckdb-go-bindings"
)

// description is what DuckDB says of a planned statement before it runs.
type description struct {
	schema *arrow.Schema
	params []bindings.Type // of the rewritten text's parameters
	plan   *queryPlan
	// untyped says the schema came from a run with the values bound:
	// DoGet's batches take their names and types from the ticket.
	untyped bool
}

// describe plans q with args and returns the result's schema without
// running it, the parameter types, and the plan (for its table versions).
// Without values the prepared statement's own types are the answer; with
// values DuckDB may type a parameter by its value, so the statement is
// bound to them under LIMIT 0.
func (s *Server) describe(ctx context.Context, q string, args []any, pinned map[string]uint64) (*description, error) {
	sess, plan, ps, err := s.prepareOn(ctx, q, args, pinned)
	if err != nil {
		return nil, err
	}
	defer sess.close()
	defer sess.drop(&ps)
	d := &description{params: paramTypes(ps), plan: plan}
	if len(args) == 0 {
		if d.schema, err = sess.describePrepared(ps); err == nil {
			return d, nil
		}
		if err != errUntyped {
			return nil, s.sqlStatus(err)
		}
	}
	nargs := plan.bindArgs(args)
	// LIMIT 0 lets DuckDB bind and type the query without running it.
	rdr, err := sess.queryCached(ctx, q, "SELECT * FROM (\n"+trimStatement(plan.text)+"\n) LIMIT 0", nargs)
	if err != nil {
		// A statement that cannot be a subquery: run it and keep the schema.
		if rdr, err = sess.query(ctx, plan.text, nargs); err != nil {
			return nil, s.sqlStatus(err)
		}
	}
	defer rdr.Release()
	for rdr.Next() { // LIMIT 0: read to its end, which leaves the connection clean
	}
	if err := rdr.Err(); err != nil {
		return nil, s.sqlStatus(err)
	}
	// The statement's own names (nesting renames repeated ones), and, for
	// the columns DuckDB could not name before the values were bound (it
	// calls them "unknown"), the names it gives them bound, as DoGet's
	// run of the bound statement does: "($1 + 1)".
	d.untyped = true
	d.schema = renamed(rdr.Schema(), boundNames(ps, rdr.Schema().Fields()))
	return d, nil
}

// renamed gives sc the column names the statement itself has: nesting it
// in SELECT * FROM (…) makes DuckDB rename repeated names (x, x_1).
func renamed(sc *arrow.Schema, names []string) *arrow.Schema {
	if len(names) != sc.NumFields() {
		return sc
	}
	fields := slices.Clone(sc.Fields())
	for i := range fields {
		fields[i].Name = names[i]
	}
	md := sc.Metadata()
	return arrow.NewSchema(fields, &md)
}

// trimStatement drops a trailing semicolon so the text can be nested.
func trimStatement(q string) string {
	q = strings.TrimRight(q, " \t\r\n")
	return strings.TrimRight(strings.TrimSuffix(q, ";"), " \t\r\n")
}

// boundNames returns the result column names of ps, the unbound
// statement, with those DuckDB could not name before its values were bound
// (an unaliased column a parameter types is "unknown") taken from bound,
// the columns of a run with the values bound. (bound's names alone would
// not do: nesting renames repeated names.)
func boundNames(ps bindings.PreparedStatement, bound []arrow.Field) []string {
	names := columnNames(ps)
	if len(names) != len(bound) {
		return names
	}
	for i := range names {
		if names[i] != "unknown" {
			continue // named by the text (an alias), or typed
		}
		switch bindings.PreparedStatementColumnType(ps, bindings.IdxT(i)) {
		case bindings.TypeInvalid, bindings.TypeAny, bindings.TypeSQLNull, bindings.TypeStringLiteral, bindings.TypeIntegerLiteral:
			names[i] = bound[i].Name
		}
	}
	return names
}
