//go:build duckdb_arrow

package flightsql

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// queryPlan is a statement made ready to run on one DuckDB connection:
// the views and tables to create first, then the (rewritten) text.
type queryPlan struct {
	text     string
	setup    []string
	versions map[string]uint64
	tables   []tablePlan
	params   int // positional parameters in the rewritten text
	declared int // positional parameters in the original text
	// consumed are the parameter numbers of the original text used by
	// table-function calls, which the rewritten text no longer holds.
	consumed map[int]bool
	// direct, when set, answers the statement from a last-value index
	// (lastdirect.go); DuckDB only describes it.
	direct *directLast
}

// bindArgs returns the values to bind to the rewritten text: args without
// those the table functions consumed (parameters written "?" are numbered
// in order, so the rest keep their order), NULL-padded to the text's
// parameter count (which types the statement when no values are bound).
func (p *queryPlan) bindArgs(args []any) []any {
	out := make([]any, 0, p.params)
	for i, a := range args {
		if !p.consumed[i+1] {
			out = append(out, a)
		}
	}
	for len(out) < p.params {
		out = append(out, nil)
	}
	return out
}

// tablePlan is what one table contributes to a query.
type tablePlan struct {
	Name     string
	Version  uint64
	Segments int // live segments in the snapshot
	Planned  int // segments the view reads
	// LastValues says the view reads the table's last-value index (the
	// newest row per entity) instead of segments; Direct that the rows
	// come from the index without DuckDB running the statement
	// (lastdirect.go).
	LastValues, Direct bool
	// Ref is the reference's name when it names a version (cpu@v12).
	Ref string
}

// Catalog and schema names tsflight advertises: every table lives in
// tsflight.main.
const (
	catalogName = "tsflight"
	schemaName  = "main"
)

// planQuery analyses q and plans it against table snapshots: the newest
// ones, or those of pinned (table → version) when pinned is set. args are
// the positional parameter values.
func (s *Server) planQuery(ctx context.Context, sess *session, q string, args []any, pinned map[string]uint64) (*queryPlan, error) {
	a := s.parsed.get(q)
	if a == nil {
		var err error
		if a, err = analyze(ctx, sess, q); err != nil {
			return nil, err
		}
		s.parsed.put(q, a)
	}
	if pinned == nil && a.params > len(args) && len(args) > 0 {
		return nil, invalidf("the statement has %d parameters, %d were bound", a.params, len(args))
	}
	p := &queryPlan{versions: map[string]uint64{}, params: a.params, declared: a.params, consumed: map[int]bool{}}
	names, err := s.tableNamesFor(a)
	if err != nil {
		return nil, err
	}
	// Group the references by the relation they read: a table at its
	// newest (or pinned) version, or a table at a version named in the
	// reference ("cpu@v12", asof.go).
	byKey := map[string][]*tableRef{}
	targets := map[string]tableAt{}
	type edit struct {
		at, n int
		with  string
	}
	var edits []edit
	// spans are where each reference's table name is written: a relation
	// whose references can all be located is read through a subquery
	// written in their place (no view to create, which costs DuckDB as
	// much as a small query); otherwise through a temporary view, and
	// qualified references are rewritten to its bare name.
	spans := map[*tableRef]int{}
	inline := map[string]bool{}
	for _, r := range a.refs {
		at, ok, err := resolveTable(r, names)
		switch {
		case r.cte && (!ok || err != nil || at.asOf):
			continue // a common table expression in scope
		case err != nil:
			return nil, err
		case !ok:
			// Not a table of the root: DuckDB's own catalog (pg_settings,
			// duckdb_logs, information_schema) is not for clients.
			return nil, unknownTable(r, names)
		}
		if r.shadowed {
			// Read through a bare name, the reference would read the CTE.
			return nil, invalidf("the qualified reference to table %s is hidden by a common table expression named %s; give the CTE another name", at.key, r.name)
		}
		if _, seen := byKey[at.key]; !seen {
			inline[at.key] = !a.cteNames[asciiLower(at.key)]
			targets[at.key] = at
		}
		byKey[at.key] = append(byKey[at.key], r)
		n := 0
		if r.loc >= 0 && r.loc < len(q) {
			if parts, m, ok := qualifiedName(q[r.loc:]); ok && asciiEqualFold(parts[len(parts)-1], r.name) {
				n = m
			}
		}
		if n == 0 {
			inline[at.key] = false
			if r.catalog != "" || r.schema != "" {
				return nil, invalidf("cannot locate the qualified reference to table %s in the statement; use the bare name", at.key)
			}
			continue
		}
		spans[r] = n
	}
	keys := make([]string, 0, len(byKey))
	for key := range byKey {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	// One snapshot per table and version for the whole statement.
	type stateKey struct {
		table   string
		asOf    bool
		version uint64
	}
	states := map[stateKey]*tableformat.State{}
	stateOf := func(at tableAt) (*tableformat.Table, *tableformat.State, error) {
		tb, err := s.table(ctx, at.table)
		if err != nil {
			return nil, nil, err
		}
		k := stateKey{at.table, at.asOf, at.version}
		if st, ok := states[k]; ok {
			return tb, st, nil
		}
		st := tb.State()
		switch {
		case at.asOf:
			// The version is in the text: every execution of the
			// statement reads it, while the keep window holds it.
			if st, err = tb.StateAt(ctx, at.version); err != nil {
				return nil, nil, asOfError(at, err)
			}
		default:
			if v, ok := pinned[at.table]; ok && v != st.Version {
				if st, err = tb.StateAt(ctx, v); err != nil {
					// NOT_FOUND, as for every version pinned elsewhere
					// (docs/design.md, retention): run the query again.
					return nil, nil, reqerr.Errorf(tableformat.ErrNotFound, "table %s: version %d of this statement's snapshot is gone (execute the query again for the newest): %v", at.table, v, err)
				}
			}
			p.versions[at.table] = st.Version
		}
		states[k] = st
		return tb, st, nil
	}
	// What the rewritten statement may name: the planned files (in
	// read_parquet) and the tables, temporary views and tables of the plan.
	planned, runNames := map[string]bool{}, map[string]bool{}
	for _, key := range keys {
		at := targets[key]
		tb, st, err := stateOf(at)
		if err != nil {
			return nil, err
		}
		segs, lastValues := s.pruneTable(ctx, tb, st, byKey[key], a.cteNames[asciiLower(key)], args)
		if lastValues && len(keys) == 1 && len(byKey[key]) == 1 && len(a.funcs) == 0 {
			p.direct = directFor(tb, st, byKey[key][0])
		}
		rel, files, err := s.relationSQL(at.table, st, segs)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			planned[f] = true
		}
		runNames[asciiLower(key)] = true
		for _, r := range byKey[key] {
			n, ok := spans[r]
			switch {
			case inline[key] && r.alias != "":
				edits = append(edits, edit{r.loc, n, "(" + rel + ")"})
			case inline[key]:
				edits = append(edits, edit{r.loc, n, "(" + rel + ") AS " + sqlIdent(key)})
			case ok && (r.catalog != "" || r.schema != ""):
				edits = append(edits, edit{r.loc, n, sqlIdent(key)})
			}
		}
		if !inline[key] {
			p.setup = append(p.setup, "CREATE OR REPLACE TEMP VIEW "+sqlIdent(key)+" AS "+rel)
		}
		tp := tablePlan{Name: at.table, Version: st.Version, Segments: len(st.Segments), Planned: len(segs), LastValues: lastValues, Direct: p.direct != nil}
		if lastValues {
			tp.Planned = 0
		}
		if at.asOf {
			tp.Ref = key
		}
		p.tables = append(p.tables, tp)
	}
	for i, f := range a.funcs {
		tmp := fmt.Sprintf("__tsflight_%s_%d", f.name, i+1)
		runNames[tmp] = true
		stmts, err := s.tableFunction(ctx, f, tmp, args, names, stateOf)
		if err != nil {
			return nil, err
		}
		p.setup = append(p.setup, stmts...)
		if f.loc < 0 || f.loc >= len(q) {
			return nil, invalidf("cannot locate the call of %s in the statement", f.name)
		}
		n, ok := callSpan(q[f.loc:])
		if !ok {
			return nil, invalidf("cannot locate the call of %s in the statement", f.name)
		}
		edits = append(edits, edit{f.loc, n, sqlIdent(tmp)})
		for _, ve := range f.args {
			if ve.kind == 'p' {
				p.consumed[ve.param] = true
			}
		}
		for _, ve := range f.entity {
			if ve.kind == 'p' {
				p.consumed[ve.param] = true
			}
		}
	}
	p.params -= len(p.consumed)
	if p.params != 0 || p.declared != 0 {
		p.direct = nil
		for i := range p.tables {
			p.tables[i].Direct = false
		}
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].at > edits[j].at })
	text := q
	for i, e := range edits {
		if i > 0 && e.at+e.n > edits[i-1].at {
			return nil, invalidf("overlapping table references in the statement")
		}
		text = text[:e.at] + e.with + text[e.at+e.n:]
	}
	// The rewrite works on text; check that what will run is what was
	// allowed (a second review found a comment that moved a parenthesis),
	// with no rewrite too (the check is where the rules are enforced on
	// exactly the text DuckDB runs).
	// Checks are remembered by the text's hash: a query re-run on the same
	// table versions is checked once.
	if key := sha256.Sum256([]byte(text)); s.verified.get(string(key[:])) == nil {
		if err := verifyRewrite(ctx, sess, text, runNames, planned); err != nil {
			return nil, err
		}
		s.verified.put(string(key[:]), verifiedRewrite)
	}
	p.text = text
	return p, nil
}

// verifiedRewrite marks a rewritten text in Server.verified.
var verifiedRewrite = &analysis{}

// tableNamesFor returns the table names planQuery resolves a's references
// against. Listing the root (a directory read and two stats per table) is
// the catalog's cost, paid only when needed: a statement that names no
// table (SELECT 1) gets none; one whose every reference names, exactly and
// in our catalog, a table of the root gets those names (resolving against
// the whole listing gives the same: an exact name wins); anything else
// (names that match only without case, unknown names, whose error lists
// the tables, table functions) gets the whole listing.
func (s *Server) tableNamesFor(a *analysis) ([]string, error) {
	if len(a.refs) == 0 && len(a.funcs) == 0 {
		return nil, nil
	}
	if len(a.funcs) == 0 {
		exact := make([]string, 0, len(a.refs))
		for _, r := range a.refs {
			base, _, _ := strings.Cut(r.name, versionMark)
			if !ourQualifier(r) || !s.cat.IsTable(base) {
				exact = nil
				break
			}
			exact = append(exact, base)
		}
		if exact != nil {
			slices.Sort(exact)
			return slices.Compact(exact), nil
		}
	}
	return s.tableNames()
}

// ourQualifier reports whether a reference's catalog and schema are ours:
// none, main, tsflight, tsflight.main.
func ourQualifier(r *tableRef) bool {
	switch {
	case r.catalog == "" && (r.schema == "" || asciiEqualFold(r.schema, schemaName) || asciiEqualFold(r.schema, catalogName)):
	case asciiEqualFold(r.catalog, catalogName) && (r.schema == "" || asciiEqualFold(r.schema, schemaName)):
	default:
		return false
	}
	return true
}

// ourTable reports which table a reference names, if it is one of ours:
// bare, main.t, tsflight.t or tsflight.main.t, matched exactly or, failing
// that, case-insensitively (as DuckDB matches names).
func ourTable(r *tableRef, names []string) (string, bool) {
	if !ourQualifier(r) {
		return "", false
	}
	if _, ok := slices.BinarySearch(names, r.name); ok {
		return r.name, true
	}
	found := ""
	for _, n := range names {
		if asciiEqualFold(n, r.name) {
			if found != "" {
				return "", false // ambiguous: let DuckDB complain
			}
			found = n
		}
	}
	return found, found != ""
}

// unknownTable is the error of a reference to no table of the root.
func unknownTable(r *tableRef, names []string) error {
	full := r.name
	if r.schema != "" {
		full = r.schema + "." + full
	}
	if r.catalog != "" {
		full = r.catalog + "." + full
	}
	list := strings.Join(names, ", ")
	if len(names) > 20 {
		list = strings.Join(names[:20], ", ") + fmt.Sprintf(", … (%d in all)", len(names))
	}
	if len(names) == 0 {
		list = "none yet"
	}
	return reqerr.Errorf(tableformat.ErrNotFound, "table %q does not exist (tables: %s)", truncateName(full), list)
}
