//go:build duckdb_arrow

package flightsql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// The table functions ts_coverage(table, start, end [, entity]) and
// ts_gaps(table, start, end [, entity]) answer from the same code as the
// Flight actions coverage and gaps, on the snapshot the rest of the query
// sees. A call is computed before the query runs and replaced in the text
// by a temporary table holding its answer, so its arguments must be
// constants or parameters. entity is a struct literal {'col': value, ...},
// a JSON object string, or, for a table with one entity column, its value.
// table may name a version as a FROM reference does: 'cpu@v12' (asof.go).
// Both ask the table on the pinned snapshot: ts_coverage's one row is
// the coverage action's answer (flightserver.CoverageAnswer) written as
// SQL literals; ts_gaps, up to tsGapsMax rows, is bulk-loaded
// (tsfunc_load.go).

// Result columns, in order.
var (
	coverageColumns = []string{"table_name", "version", "start", "end", "intervals", "identities", "expected", "covered", "ratio"}
	gapsColumns     = []string{"gap_start", "gap_end", "end_inclusive", "intervals"}
)

// tableFunction computes one call and returns the statements that create
// its temporary table tmp.
func (s *Server) tableFunction(ctx context.Context, f *funcCall, tmp string, args []any, names []string,
	stateOf func(tableAt) (*tableformat.Table, *tableformat.State, error)) ([]string, error) {
	usage := f.name + "(table, start, end [, entity])"
	if f.bad != "" {
		return nil, invalidf("%s: %s; usage: %s", f.name, f.bad, usage)
	}
	nargs := len(f.args)
	if f.entity != nil {
		nargs++
	}
	if nargs < 3 || nargs > 4 {
		return nil, invalidf("%s takes 3 or 4 arguments, got %d; usage: %s", f.name, nargs, usage)
	}
	if f.unbound(args) {
		// Preparing: parameters have no values yet. An empty table of the
		// right columns gives the statement its schema.
		idx := "TIMESTAMPTZ"
		if v, ok := resolveValue(f.args[0], args); ok {
			if table, ok := v.(string); ok {
				if at, ok, err := resolveTable(&tableRef{name: table}, names); ok && err == nil {
					if _, st, err := stateOf(at); err == nil {
						idx = indexSQLType(st.Index().Kind.Type)
					}
				}
			}
		}
		if f.name == "ts_coverage" {
			return tempTable(tmp, coverageColumns, nil, []string{"VARCHAR", "UBIGINT", idx, idx, "UBIGINT", "UBIGINT", "UBIGINT", "UBIGINT", "DOUBLE"}), nil
		}
		return tempTable(tmp, gapsColumns, nil, []string{idx, idx, "BOOLEAN", "UBIGINT"}), nil
	}
	vals := make([]any, len(f.args))
	for i, a := range f.args {
		v, ok := resolveValue(a, args)
		if !ok {
			return nil, invalidf("%s: argument %d is an unbound parameter", f.name, i+1)
		}
		vals[i] = v
	}
	table, ok := vals[0].(string)
	if !ok {
		return nil, invalidf("%s: the table argument must be a string naming a table", f.name)
	}
	// 'cpu@v12' names a version, as in FROM (asof.go).
	at, ok, err := resolveTable(&tableRef{name: table}, names)
	switch {
	case err != nil:
		return nil, invalidf("%s: %s", f.name, status.Convert(err).Message())
	case !ok:
		return nil, reqerr.Errorf(tableformat.ErrNotFound, "%s: table %q does not exist", f.name, truncateName(table))
	}
	tb, st, err := stateOf(at)
	if err != nil {
		return nil, err
	}
	q, err := callQuery(f, st, vals, args)
	if err != nil {
		return nil, err
	}
	if f.name == "ts_gaps" {
		return s.gapsTable(ctx, tmp, tb, st, q)
	}
	rep, err := tb.Coverage(ctx, st, q)
	if err != nil {
		return nil, s.sqlStatus(err)
	}
	c := flightserver.NewCoverageAnswer(at.table, st.Version, q, rep)
	idx := indexSQLType(st.Index().Kind.Type)
	row := []string{sqlString(c.Table), u64(c.Version), indexLiteral(c.Start, idx), indexLiteral(c.End, idx),
		u64(c.Intervals), u64(c.Identities), u64(c.Expected), u64(c.Covered), "CAST(" + sqlString(strconv.FormatFloat(c.Ratio, 'g', -1, 64)) + " AS DOUBLE)"}
	return tempTable(tmp, coverageColumns, [][]string{row}, nil), nil
}

// callQuery reads a call's range and entity, by the rules of the coverage
// actions' start, end and entity members.
func callQuery(f *funcCall, st *tableformat.State, vals, args []any) (tableformat.CoverageQuery, error) {
	var q tableformat.CoverageQuery
	for i, key := range []string{"start", "end"} {
		v, err := indexBound(st, vals[i+1])
		if err != nil {
			return q, invalidf("%s: %s: %v", f.name, key, err)
		}
		if i == 0 {
			q.Start = v
		} else {
			q.End = v
		}
	}
	ent, err := entityOf(f, st, vals, args)
	if err != nil {
		return q, err
	}
	if ent != nil {
		if q.Entity, err = entityIdentity(st, ent); err != nil {
			return q, invalidf("%s: %v", f.name, err)
		}
	}
	return q, nil
}

// entityOf returns the entity argument of a call as {column: value}, nil
// for none (no fourth argument, or NULL).
func entityOf(f *funcCall, st *tableformat.State, vals, args []any) (map[string]any, error) {
	switch {
	case f.entity != nil:
		ent := map[string]any{}
		for k, ve := range f.entity {
			v, ok := resolveValue(ve, args)
			if !ok {
				return nil, invalidf("%s: entity %s is an unbound parameter", f.name, k)
			}
			ent[k] = v
		}
		return ent, nil
	case len(vals) == 4 && vals[3] != nil:
		ent, err := entityArg(st, vals[3])
		if err != nil {
			return nil, invalidf("%s: entity: %v", f.name, err)
		}
		return ent, nil
	}
	return nil, nil
}

// gapsTable answers a ts_gaps call from the table layer: the gaps of the
// snapshot st, as the gaps action lists them (tableformat.Table.ListGaps,
// the arguments read by the action's rules), go to DuckDB in one bulk
// load (stageGaps) rather than through the action's JSON and SQL
// literals. Its statements copy the staged rows into tmp and drop the
// staging table.
func (s *Server) gapsTable(ctx context.Context, tmp string, tb *tableformat.Table, st *tableformat.State, q tableformat.CoverageQuery) ([]string, error) {
	q.Limit = tsGapsMax
	// Only the list: the walk stops at the gap after the maximum (a range
	// of millions of gaps is refused after tsGapsMax+1 of them) and when
	// ctx ends.
	gaps, truncated, err := tb.ListGaps(ctx, st, q)
	if err == nil {
		err = ctx.Err() // cancelled after the walk's last look
	}
	if err != nil {
		return nil, s.sqlStatus(err)
	}
	if truncated {
		// A table function's rows are the answer: never cut them short.
		return nil, reqerr.Errorf(reqerr.ErrResourceExhausted, "ts_gaps: the range has more than %d gaps, the most one call returns; narrow the range or name an entity", tsGapsMax)
	}
	idx := indexSQLType(st.Index().Kind.Type)
	types := []string{idx, idx, "BOOLEAN", "UBIGINT"}
	if len(gaps) == 0 {
		return tempTable(tmp, gapsColumns, nil, types), nil
	}
	stage, err := s.stageGaps(ctx, st.Index().Kind.Type, gaps)
	if err != nil {
		return nil, err
	}
	return []string{
		"CREATE OR REPLACE TEMP TABLE " + sqlIdent(tmp) + " AS SELECT * FROM " + sqlIdent(stage),
		"DROP TABLE IF EXISTS " + sqlIdent(stage),
	}, nil
}

// tsGapsMax is the most gaps one ts_gaps call returns: the gaps action's
// largest limit (a variable so that tests can lower it). More is
// RESOURCE_EXHAUSTED, never a silently shortened result.
var tsGapsMax = flightserver.MaxGapsLimit

// unbound reports whether a parameter argument has no value (when a
// statement is prepared, before parameters are bound).
func (f *funcCall) unbound(args []any) bool {
	for _, a := range f.args {
		if a.kind == 'p' && a.param > len(args) {
			return true
		}
	}
	for _, a := range f.entity {
		if a.kind == 'p' && a.param > len(args) {
			return true
		}
	}
	return false
}

func u64(v uint64) string { return fmt.Sprintf("CAST(%d AS UBIGINT)", v) }

func indexSQLType(t tableformat.IndexType) string {
	switch t {
	case tableformat.IndexInt64:
		return "BIGINT"
	case tableformat.IndexUInt64:
		return "UBIGINT"
	}
	return "TIMESTAMPTZ"
}

// indexLiteral turns an index value of an action's JSON answer into SQL.
func indexLiteral(raw json.RawMessage, typ string) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return "CAST(" + sqlString(s) + " AS " + typ + ")"
		}
	}
	return "CAST(" + string(raw) + " AS " + typ + ")"
}

// tempTable creates tmp holding rows; types are needed when rows is empty.
func tempTable(tmp string, cols []string, rows [][]string, types []string) []string {
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = sqlIdent(c)
	}
	if len(rows) == 0 {
		sel := make([]string, len(cols))
		for i := range cols {
			sel[i] = "CAST(NULL AS " + types[i] + ") AS " + quoted[i]
		}
		return []string{"CREATE OR REPLACE TEMP TABLE " + sqlIdent(tmp) + " AS SELECT " + strings.Join(sel, ", ") + " WHERE false"}
	}
	var out []string
	const perStatement = 1000
	for start := 0; start < len(rows); start += perStatement {
		end := min(start+perStatement, len(rows))
		var b strings.Builder
		if start == 0 {
			b.WriteString("CREATE OR REPLACE TEMP TABLE " + sqlIdent(tmp) + " AS SELECT * FROM (VALUES ")
		} else {
			b.WriteString("INSERT INTO " + sqlIdent(tmp) + " VALUES ")
		}
		for i, r := range rows[start:end] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + strings.Join(r, ", ") + ")")
		}
		if start == 0 {
			b.WriteString(") AS v(" + strings.Join(quoted, ", ") + ")")
		}
		out = append(out, b.String())
	}
	return out
}

// boundJSON turns a start or end argument into the coverage actions' form.
func boundJSON(st *tableformat.State, v any) (any, error) {
	switch st.Index().Kind.Type {
	case tableformat.IndexTimestamp:
		switch x := v.(type) {
		case time.Time:
			return x.UTC().Format(time.RFC3339Nano), nil
		case string:
			_, t, ok := parseTime(x)
			if !ok {
				return nil, fmt.Errorf("%q is not a timestamp", x)
			}
			return t.Format(time.RFC3339Nano), nil
		}
		return nil, fmt.Errorf("want a timestamp, got %v", v)
	default:
		switch x := v.(type) {
		case int64, uint64:
			return x, nil
		}
		return nil, fmt.Errorf("want an integer, got %v", v)
	}
}

// indexBound reads a start or end argument as a value of st's index,
// by the rules of the gaps action's start and end (the JSON boundJSON
// writes, read back): an RFC 3339 timestamp, or an integer in the range
// of the index type.
func indexBound(st *tableformat.State, v any) (tableformat.IndexValue, error) {
	b, err := boundJSON(st, v)
	if err != nil {
		return tableformat.IndexValue{}, err
	}
	ix := st.Index()
	switch x := b.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return tableformat.IndexValue{}, fmt.Errorf("%q is not an RFC 3339 timestamp (for example 2024-06-01T00:00:00Z)", x)
		}
		return tableformat.TimeValue(t), nil
	case int64:
		if ix.Kind.Type == tableformat.IndexInt64 {
			return tableformat.Int64Value(x), nil
		}
		if x < 0 {
			return tableformat.IndexValue{}, fmt.Errorf("%d is not an unsigned 64-bit integer (the index %q is uint64)", x, ix.Column)
		}
		return tableformat.Uint64Value(uint64(x)), nil
	case uint64:
		if ix.Kind.Type == tableformat.IndexUInt64 {
			return tableformat.Uint64Value(x), nil
		}
		if x > math.MaxInt64 {
			return tableformat.IndexValue{}, fmt.Errorf("%d is not a 64-bit integer (the index %q is int64)", x, ix.Column)
		}
		return tableformat.Int64Value(int64(x)), nil
	}
	return tableformat.IndexValue{}, fmt.Errorf("want a bound of the index, got %v", v)
}

// entityIdentity reads an entity argument as the identity it names, by
// the rules of the coverage actions' "entity" member, each value taken in
// its JSON form: a value for every entity column and no other, a string
// for a string column, an integer (or a string of one) in range for an
// integer column.
func entityIdentity(st *tableformat.State, ent map[string]any) (tableformat.Identity, error) {
	ix := st.Index()
	if len(ix.EntityColumns) == 0 {
		return nil, errors.New("entity: the table has no entity columns; leave entity out")
	}
	for col := range ent {
		if !slices.Contains(ix.EntityColumns, col) {
			return nil, fmt.Errorf("entity: %q is not an entity column (entity columns: %s)", col, strings.Join(ix.EntityColumns, ", "))
		}
	}
	id := make(tableformat.Identity, len(ix.EntityColumns))
	for i, col := range ix.EntityColumns {
		v, ok := ent[col]
		if !ok {
			return nil, fmt.Errorf("entity: missing a value for entity column %q (give one for each of %s)", col, strings.Join(ix.EntityColumns, ", "))
		}
		if st.Schema() == nil {
			return nil, errors.New("entity: the table has no data yet")
		}
		f, ok := st.Schema().Column(col)
		if !ok {
			return nil, fmt.Errorf("entity: the table has no column %q", col)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("entity.%s: %v", col, err)
		}
		s := string(raw)
		quoted := raw[0] == '"'
		if quoted {
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("entity.%s: %v", col, err)
			}
		}
		switch f.Type.Kind {
		case tableformat.TypeUtf8:
			if !quoted {
				return nil, fmt.Errorf("entity.%s: expected a string, got %s", col, raw)
			}
			id[i] = tableformat.EntityValue{Type: tableformat.EntityUtf8, Str: s}
		case tableformat.TypeInt32:
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("entity.%s: %s is not a 32-bit integer", col, raw)
			}
			id[i] = tableformat.EntityValue{Type: tableformat.EntityInt32, Int: n}
		case tableformat.TypeInt64:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("entity.%s: %s is not a 64-bit integer", col, raw)
			}
			id[i] = tableformat.EntityValue{Type: tableformat.EntityInt64, Int: n}
		default:
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("entity.%s: %s is not an unsigned 64-bit integer", col, raw)
			}
			id[i] = tableformat.EntityValue{Type: tableformat.EntityUInt64, Uint: n}
		}
	}
	return id, nil
}

// entityArg reads the fourth argument: a JSON object string or the value
// of the table's only entity column.
func entityArg(st *tableformat.State, v any) (map[string]any, error) {
	if s, ok := v.(string); ok && strings.HasPrefix(strings.TrimSpace(s), "{") {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("not a JSON object: %v", err)
		}
		return m, nil
	}
	cols := st.Index().EntityColumns
	if len(cols) != 1 {
		return nil, fmt.Errorf("the table has %d entity columns; name them: {'column': value, ...}", len(cols))
	}
	return map[string]any{cols[0]: v}, nil
}
