//go:build duckdb_arrow

package flightsql

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A statement is analysed with DuckDB's own parser (json_serialize_sql),
// never with a parser of ours: what DuckDB will run is exactly what the
// analysis saw. The analysis finds
//
//   - every table reference (BASE_TABLE) with its position in the text, so
//     that references qualified with the catalog or schema tsflight
//     advertises can be rewritten to the bare name of the per-query view;
//   - the calls of the table functions ts_coverage and ts_gaps;
//   - for every SELECT, the conjuncts of its WHERE clause that compare a
//     column of one of its FROM tables with a constant or a parameter:
//     those prune the segments a table's view reads.
//
// Anything the analysis does not recognise only means less pruning: a
// table reference without usable conjuncts reads every segment.

// analysis is what a statement reveals.
type analysis struct {
	refs  []*tableRef
	funcs []*funcCall
	// cteNames are the names of common table expressions: a reference to
	// one of those names may be the CTE rather than the table, so it
	// never prunes.
	cteNames map[string]bool
	params   int // highest positional parameter number
}

// tableRef is one reference to a table in a statement.
type tableRef struct {
	catalog, schema, name, alias string
	loc                          int // byte offset in the text; -1 unknown
	// conds are usable WHERE conjuncts on this reference's columns; nil
	// with pruneOK true means the reference reads everything anyway.
	conds []cond
	// cte is set when the reference names a common table expression in
	// scope where it stands (markCTERefs), not a table.
	cte bool
	// shadowed is set on a qualified reference where a CTE of the same
	// bare name is in scope.
	shadowed bool
	// pruneOK is false when the reference sits where row-level pruning
	// could change the answer (a positional join, say).
	pruneOK bool
	// latest is set when the reference is the only table of a SELECT
	// that keeps the newest row per group of columns and filters nothing:
	// DISTINCT ON (cols) … ORDER BY …, index DESC with no WHERE.
	latest *latestShape
}

// cond is "column op values": op is one of = < <= > >= in between.
type cond struct {
	column string
	op     string
	vals   []valueExpr
}

// valueExpr is a constant, a parameter or a cast of either.
type valueExpr struct {
	kind  byte // 's' string, 'i' integer, 'f' float, 'p' parameter, 'n' null
	str   string
	param int
	cast  string // DuckDB type id of an enclosing cast, if any
}

// funcCall is a call of ts_coverage or ts_gaps in a FROM clause.
type funcCall struct {
	name string
	loc  int
	args []valueExpr
	// entity arguments given as a struct literal: column → value
	entity map[string]valueExpr
	bad    string // why the arguments are unusable
}

// errReadOnly is the answer to any statement but a query.
func errReadOnly(what string) error {
	return invalidf(
		"tsflight SQL is read-only: %s is not supported. Query with SELECT; write with bulk ingest (ADBC adbc_ingest, Flight SQL CommandStatementIngest) or a Flight DoPut, and use the Flight actions create-table and add-columns for schema changes", what)
}

// analyze parses q with DuckDB and returns what it found.
func analyze(ctx context.Context, s *session, q string) (*analysis, error) {
	stmt, err := parseOne(ctx, s, q)
	if err != nil {
		return nil, err
	}
	a := &analysis{cteNames: map[string]bool{}}
	if err := checkFunctions(stmt); err != nil {
		return nil, err
	}
	if err := checkAtClauses(stmt); err != nil {
		return nil, err
	}
	markCTERefs(stmt, map[string]bool{})
	a.collect(stmt)
	a.constrain(stmt)
	return a, nil
}

// parseOne parses q, which must be one SELECT statement, with DuckDB's
// parser and returns the statement's JSON form.
func parseOne(ctx context.Context, s *session, q string) (map[string]any, error) {
	text, err := s.scalarString(ctx, "SELECT CAST(json_serialize_sql(CAST($1 AS VARCHAR)) AS VARCHAR)", q)
	if err != nil {
		return nil, sqlStatusIn(s.root, err)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, internalf("reading DuckDB's parse of the statement: %v", err)
	}
	if isTrue(root["error"]) {
		msg, _ := root["error_message"].(string)
		if strings.Contains(msg, "Only SELECT statements") {
			return nil, errReadOnly("a statement other than a query (" + firstWord(q) + ")")
		}
		return nil, invalidf("%s", parseErrorHint(msg)) // a parser error
	}
	stmts, _ := root["statements"].([]any)
	switch {
	case len(stmts) == 0:
		return nil, invalidf("the SQL text holds no statement")
	case len(stmts) > 1:
		return nil, invalidf("the SQL text holds %d statements; send one at a time", len(stmts))
	}
	stmt, _ := stmts[0].(map[string]any)
	return stmt, nil
}

func firstWord(q string) string {
	f := strings.Fields(strings.TrimLeft(q, "( \t\r\n"))
	if len(f) == 0 {
		return "empty statement"
	}
	return strings.ToUpper(f[0])
}

func isTrue(v any) bool { b, _ := v.(bool); return b }

// walk calls fn for every JSON object under v, parents first.
func walk(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(x)
		for _, c := range x {
			walk(c, fn)
		}
	case []any:
		for _, c := range x {
			walk(c, fn)
		}
	}
}

// cteRefMark marks, in DuckDB's parse, a table reference that names a
// common table expression in scope (markCTERefs).
const cteRefMark = "\x00tsflight: cte reference"

// cteShadowMark marks a qualified table reference (tsflight.main.cpu)
// where a CTE of the same bare name is in scope: the rewrite to a bare name
// would bind it to the CTE.
const cteShadowMark = "\x00tsflight: shadowed by a cte"

// markCTERefs marks the table references that name a CTE visible where
// they stand: a WITH's CTEs are visible to its query and to the CTEs after
// them; a CTE's body sees only the CTEs before it, and itself only when it
// is recursive (a RECURSIVE_CTE_NODE). Anything else is a table of the
// catalog, even when a CTE somewhere has its name: DuckDB binds such a
// reference to the catalog ("WITH pg_settings AS (SELECT * FROM
// pg_settings) …" reads the real one).
func markCTERefs(v any, visible map[string]bool) {
	switch x := v.(type) {
	case []any:
		for _, c := range x {
			markCTERefs(c, visible)
		}
	case map[string]any:
		vis := visible
		if cm, ok := x["cte_map"].(map[string]any); ok {
			if entries, _ := cm["map"].([]any); len(entries) > 0 {
				vis = copySet(visible)
				for _, e := range entries {
					em, _ := e.(map[string]any)
					markCTERefs(em["value"], vis) // before its own name is visible
					vis[asciiLower(str(em["key"]))] = true
				}
			}
		}
		if str(x["type"]) == "RECURSIVE_CTE_NODE" {
			vis = copySet(vis)
			vis[asciiLower(str(x["cte_name"]))] = true
		}
		if str(x["type"]) == "BASE_TABLE" && vis[asciiLower(str(x["table_name"]))] {
			if str(x["catalog_name"]) == "" && str(x["schema_name"]) == "" {
				x[cteRefMark] = true
			} else {
				x[cteShadowMark] = true
			}
		}
		for k, c := range x {
			if k != "cte_map" {
				markCTERefs(c, vis)
			}
		}
	}
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m)+4)
	for k := range m {
		out[k] = true
	}
	return out
}

// collect finds table references, table function calls, CTE names and
// parameters.
func (a *analysis) collect(stmt map[string]any) {
	walk(stmt, func(m map[string]any) {
		if cm, ok := m["cte_map"].(map[string]any); ok {
			entries, _ := cm["map"].([]any)
			for _, e := range entries {
				if em, ok := e.(map[string]any); ok {
					if k, ok := em["key"].(string); ok {
						a.cteNames[asciiLower(k)] = true
					}
				}
			}
		}
		switch str(m["type"]) {
		case "BASE_TABLE":
			renamed, _ := m["column_name_alias"].([]any)
			a.refs = append(a.refs, &tableRef{
				catalog: str(m["catalog_name"]), schema: str(m["schema_name"]),
				name: str(m["table_name"]), alias: str(m["alias"]),
				loc: location(m["query_location"]), cte: isTrue(m[cteRefMark]), shadowed: isTrue(m[cteShadowMark]),
				// Columns renamed in FROM (t(a, b)) would be matched by
				// their old names; a sample is drawn before WHERE.
				pruneOK: len(renamed) == 0 && m["sample"] == nil,
			})
		case "TABLE_FUNCTION":
			fn, _ := m["function"].(map[string]any)
			name := asciiLower(str(fn["function_name"]))
			if name != "ts_coverage" && name != "ts_gaps" {
				return
			}
			a.funcs = append(a.funcs, newFuncCall(name, location(m["query_location"]), fn))
		case "VALUE_PARAMETER":
			if n, err := strconv.Atoi(str(m["identifier"])); err == nil && n > a.params {
				a.params = n
			}
		}
	})
}

func newFuncCall(name string, loc int, fn map[string]any) *funcCall {
	f := &funcCall{name: name, loc: loc}
	if str(fn["schema"]) != "" || str(fn["catalog"]) != "" {
		f.bad = "it must not be qualified"
	}
	children, _ := fn["children"].([]any)
	for i, c := range children {
		cm, _ := c.(map[string]any)
		if i == 3 && str(cm["class"]) == "FUNCTION" && str(cm["function_name"]) == "struct_pack" {
			f.entity = map[string]valueExpr{}
			fields, _ := cm["children"].([]any)
			for _, fc := range fields {
				fm, _ := fc.(map[string]any)
				v, ok := constant(fm)
				if !ok || str(fm["alias"]) == "" {
					f.bad = "the entity struct must hold constants"
				}
				f.entity[str(fm["alias"])] = v
			}
			continue
		}
		v, ok := constant(cm)
		if !ok {
			f.bad = fmt.Sprintf("argument %d is not a constant or a parameter", i+1)
		}
		f.args = append(f.args, v)
	}
	return f
}

func str(v any) string { s, _ := v.(string); return s }

// location reads a query_location: DuckDB writes 2^64-1 for "unknown".
func location(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < 0 || i > 1<<31 {
		return -1
	}
	return int(i)
}

// constrain attaches to each table reference the WHERE conjuncts of the
// SELECT whose FROM clause holds it.
func (a *analysis) constrain(stmt map[string]any) {
	root, _ := stmt["node"].(map[string]any)
	byLoc := map[int][]*tableRef{}
	for _, r := range a.refs {
		byLoc[r.loc] = append(byLoc[r.loc], r)
	}
	walk(stmt, func(m map[string]any) {
		if str(m["type"]) != "SELECT_NODE" {
			return
		}
		var from []*tableRef
		ok := fromRefs(m["from_table"], byLoc, &from)
		// USING SAMPLE draws before WHERE filters: pruning would change
		// what is sampled.
		if !ok || m["sample"] != nil {
			for _, r := range from {
				r.pruneOK = false
			}
			return
		}
		single := len(from) == 1 && isBaseTable(m["from_table"])
		if single && from[0].pruneOK {
			from[0].latest = latestOf(m, from[0])
			if l := from[0].latest; l != nil {
				l.top = sameNode(m, root) && noCTE(m)
			}
		}
		for _, c := range conjuncts(m["where_clause"]) {
			col, cd, ok := comparison(c)
			if !ok {
				continue
			}
			var target *tableRef
			switch len(col) {
			case 1:
				if single {
					target = from[0]
				}
			case 2:
				for _, r := range from {
					if asciiEqualFold(col[0], r.visibleName()) {
						target = r
					}
				}
			}
			if target != nil {
				cd.column = col[len(col)-1]
				target.conds = append(target.conds, cd)
			}
		}
	})
}

// ownColumn reads a column reference of r: bare or qualified by its
// visible name.
func ownColumn(v any, r *tableRef) (string, bool) {
	m, _ := v.(map[string]any)
	col, ok := columnRef(m)
	switch {
	case !ok:
		return "", false
	case len(col) == 1:
		return col[0], true
	case len(col) == 2 && asciiEqualFold(col[0], r.visibleName()):
		return col[1], true
	}
	return "", false
}

func (r *tableRef) visibleName() string {
	if r.alias != "" {
		return r.alias
	}
	return r.name
}

func isBaseTable(v any) bool {
	m, _ := v.(map[string]any)
	return str(m["type"]) == "BASE_TABLE"
}

// fromRefs gathers the table references of a FROM clause, through joins
// but not into subqueries. It reports false when a join could make
// pruning by a WHERE conjunct change the answer.
func fromRefs(v any, byLoc map[int][]*tableRef, out *[]*tableRef) bool {
	m, _ := v.(map[string]any)
	switch str(m["type"]) {
	case "BASE_TABLE":
		for _, r := range byLoc[location(m["query_location"])] {
			if r.name == str(m["table_name"]) && r.alias == str(m["alias"]) {
				*out = append(*out, r)
			}
		}
		return true
	case "JOIN":
		okL := fromRefs(m["left"], byLoc, out)
		okR := fromRefs(m["right"], byLoc, out)
		// An ASOF join matches each row with the nearest row of the other
		// side: dropping rows there changes the match, not only what
		// survives WHERE. Positional and lateral joins likewise.
		switch str(m["ref_type"]) {
		case "REGULAR", "CROSS", "NATURAL":
		default:
			return false
		}
		return okL && okR
	}
	return true
}

// conjuncts splits an expression at its top-level ANDs.
func conjuncts(v any) []map[string]any {
	m, ok := v.(map[string]any)
	if !ok || m == nil {
		return nil
	}
	if str(m["type"]) == "CONJUNCTION_AND" {
		var out []map[string]any
		children, _ := m["children"].([]any)
		for _, c := range children {
			out = append(out, conjuncts(c)...)
		}
		return out
	}
	return []map[string]any{m}
}

var flipOp = map[string]string{"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

var compareOps = map[string]string{
	"COMPARE_EQUAL": "=", "COMPARE_LESSTHAN": "<", "COMPARE_LESSTHANOREQUALTO": "<=",
	"COMPARE_GREATERTHAN": ">", "COMPARE_GREATERTHANOREQUALTO": ">=",
}

// comparison recognises column-versus-constant conjuncts.
func comparison(m map[string]any) ([]string, cond, bool) {
	t := str(m["type"])
	if op, ok := compareOps[t]; ok {
		l, _ := m["left"].(map[string]any)
		r, _ := m["right"].(map[string]any)
		if col, ok := columnRef(l); ok {
			if v, ok := constant(r); ok {
				return col, cond{op: op, vals: []valueExpr{v}}, true
			}
		}
		if col, ok := columnRef(r); ok {
			if v, ok := constant(l); ok {
				return col, cond{op: flipOp[op], vals: []valueExpr{v}}, true
			}
		}
		return nil, cond{}, false
	}
	switch t {
	case "COMPARE_BETWEEN":
		in, _ := m["input"].(map[string]any)
		lo, _ := m["lower"].(map[string]any)
		hi, _ := m["upper"].(map[string]any)
		col, ok := columnRef(in)
		lv, ok1 := constant(lo)
		hv, ok2 := constant(hi)
		if ok && ok1 && ok2 {
			return col, cond{op: "between", vals: []valueExpr{lv, hv}}, true
		}
	case "COMPARE_IN":
		children, _ := m["children"].([]any)
		if len(children) < 2 {
			break
		}
		first, _ := children[0].(map[string]any)
		col, ok := columnRef(first)
		if !ok {
			break
		}
		var vals []valueExpr
		for _, c := range children[1:] {
			cm, _ := c.(map[string]any)
			v, ok := constant(cm)
			if !ok {
				return nil, cond{}, false
			}
			vals = append(vals, v)
		}
		return col, cond{op: "in", vals: vals}, true
	}
	return nil, cond{}, false
}

func columnRef(m map[string]any) ([]string, bool) {
	if str(m["class"]) != "COLUMN_REF" {
		return nil, false
	}
	names, _ := m["column_names"].([]any)
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, str(n))
	}
	return out, len(out) > 0
}

// constant recognises a literal, a parameter, or a cast of either.
func constant(m map[string]any) (valueExpr, bool) {
	switch str(m["class"]) {
	case "CONSTANT":
		val, _ := m["value"].(map[string]any)
		if isTrue(val["is_null"]) {
			return valueExpr{kind: 'n'}, true
		}
		typ, _ := val["type"].(map[string]any)
		switch id := str(typ["id"]); id {
		case "VARCHAR":
			s, ok := val["value"].(string)
			return valueExpr{kind: 's', str: s}, ok
		case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "HUGEINT", "UHUGEINT":
			n, ok := val["value"].(json.Number)
			return valueExpr{kind: 'i', str: string(n)}, ok
		case "DOUBLE", "FLOAT", "DECIMAL":
			n, ok := val["value"].(json.Number)
			return valueExpr{kind: 'f', str: string(n)}, ok
		}
	case "PARAMETER":
		n, err := strconv.Atoi(str(m["identifier"]))
		return valueExpr{kind: 'p', param: n}, err == nil && n > 0
	case "CAST":
		if isTrue(m["try_cast"]) {
			return valueExpr{}, false
		}
		child, _ := m["child"].(map[string]any)
		v, ok := constant(child)
		if !ok || v.cast != "" {
			return valueExpr{}, false
		}
		ct, _ := m["cast_type"].(map[string]any)
		v.cast = str(ct["id"])
		return v, true
	}
	return valueExpr{}, false
}
