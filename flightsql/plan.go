//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
		return nil, status.Errorf(codes.InvalidArgument, "the statement has %d parameters, %d were bound", a.params, len(args))
	}
	p := &queryPlan{versions: map[string]uint64{}, params: a.params, declared: a.params, consumed: map[int]bool{}}
	names, err := s.svc.TableNames()
	if err != nil {
		return nil, err
	}
	// Group the references by the table they name.
	byTable := map[string][]*tableRef{}
	type edit struct {
		at, n int
		with  string
	}
	var edits []edit
	// spans are where each reference's table name is written: a table
	// whose references can all be located is read through a subquery
	// written in their place (no view to create, which costs DuckDB as
	// much as a small query); otherwise through a temporary view, and
	// qualified references are rewritten to its bare name.
	spans := map[*tableRef]int{}
	inline := map[string]bool{}
	for _, r := range a.refs {
		name, ok := ourTable(r, names)
		if !ok {
			continue
		}
		if _, seen := byTable[name]; !seen {
			inline[name] = !a.cteNames[strings.ToLower(name)]
		}
		byTable[name] = append(byTable[name], r)
		n := 0
		if r.loc >= 0 && r.loc < len(q) {
			if parts, m, ok := qualifiedName(q[r.loc:]); ok && strings.EqualFold(parts[len(parts)-1], r.name) {
				n = m
			}
		}
		if n == 0 {
			inline[name] = false
			if r.catalog != "" || r.schema != "" {
				return nil, status.Errorf(codes.InvalidArgument, "cannot locate the qualified reference to table %s in the statement; use the bare name", name)
			}
			continue
		}
		spans[r] = n
	}
	tableNames := make([]string, 0, len(byTable))
	for name := range byTable {
		tableNames = append(tableNames, name)
	}
	sort.Strings(tableNames)
	states := map[string]*tableformat.State{}
	stateOf := func(name string) (*tableformat.Table, *tableformat.State, error) {
		tb, err := s.svc.Table(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		if st, ok := states[name]; ok {
			return tb, st, nil
		}
		st := tb.State()
		if v, ok := pinned[name]; ok && v != st.Version {
			if st, err = tb.StateAt(ctx, v); err != nil {
				return nil, nil, status.Errorf(codes.FailedPrecondition, "table %s: version %d of this statement's snapshot is gone: %v", name, v, err)
			}
		}
		states[name] = st
		p.versions[name] = st.Version
		return tb, st, nil
	}
	for _, name := range tableNames {
		tb, st, err := stateOf(name)
		if err != nil {
			return nil, err
		}
		segs := s.pruneTable(ctx, tb, st, byTable[name], a.cteNames[strings.ToLower(name)], args)
		rel, err := s.relationSQL(name, st, segs)
		if err != nil {
			return nil, err
		}
		for _, r := range byTable[name] {
			n, ok := spans[r]
			switch {
			case inline[name] && r.alias != "":
				edits = append(edits, edit{r.loc, n, "(" + rel + ")"})
			case inline[name]:
				edits = append(edits, edit{r.loc, n, "(" + rel + ") AS " + sqlIdent(name)})
			case ok && (r.catalog != "" || r.schema != ""):
				edits = append(edits, edit{r.loc, n, sqlIdent(name)})
			}
		}
		if !inline[name] {
			p.setup = append(p.setup, "CREATE OR REPLACE TEMP VIEW "+sqlIdent(name)+" AS "+rel)
		}
		p.tables = append(p.tables, tablePlan{Name: name, Version: st.Version, Segments: len(st.Segments), Planned: len(segs)})
	}
	for i, f := range a.funcs {
		tmp := fmt.Sprintf("__tsflight_%s_%d", f.name, i+1)
		stmts, err := s.tableFunction(ctx, f, tmp, args, names, stateOf)
		if err != nil {
			return nil, err
		}
		p.setup = append(p.setup, stmts...)
		if f.loc < 0 || f.loc >= len(q) {
			return nil, status.Errorf(codes.InvalidArgument, "cannot locate the call of %s in the statement", f.name)
		}
		n, ok := callSpan(q[f.loc:])
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "cannot locate the call of %s in the statement", f.name)
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
	sort.Slice(edits, func(i, j int) bool { return edits[i].at > edits[j].at })
	text := q
	for i, e := range edits {
		if i > 0 && e.at+e.n > edits[i-1].at {
			return nil, status.Error(codes.InvalidArgument, "overlapping table references in the statement")
		}
		text = text[:e.at] + e.with + text[e.at+e.n:]
	}
	p.text = text
	return p, nil
}

// ourTable reports which table a reference names, if it is one of ours:
// bare, main.t, tsflight.t or tsflight.main.t, matched exactly or, failing
// that, case-insensitively (as DuckDB matches names).
func ourTable(r *tableRef, names []string) (string, bool) {
	switch {
	case r.catalog == "" && (r.schema == "" || strings.EqualFold(r.schema, schemaName) || strings.EqualFold(r.schema, catalogName)):
	case strings.EqualFold(r.catalog, catalogName) && (r.schema == "" || strings.EqualFold(r.schema, schemaName)):
	default:
		return "", false
	}
	if _, ok := slices.BinarySearch(names, r.name); ok {
		return r.name, true
	}
	found := ""
	for _, n := range names {
		if strings.EqualFold(n, r.name) {
			if found != "" {
				return "", false // ambiguous: let DuckDB complain
			}
			found = n
		}
	}
	return found, found != ""
}

// pruneTable returns the segments of st that the references can read: the
// union of each reference's plan. A reference with no usable conjuncts, or
// whose name may be a CTE's, reads every segment.
func (s *Server) pruneTable(ctx context.Context, tb *tableformat.Table, st *tableformat.State, refs []*tableRef, maybeCTE bool, args []any) []tableformat.SegmentMeta {
	if maybeCTE || len(st.Segments) == 0 {
		return st.Segments
	}
	keep := map[string]bool{}
	for _, r := range refs {
		if r.pruneOK && len(r.conds) == 0 && latestApplies(st, r.latest) {
			segs, err := tb.LatestSegments(ctx, st)
			if err != nil {
				s.log.Debug("latest-row pruning skipped", "error", err)
				return st.Segments
			}
			for _, sg := range segs {
				keep[sg.Path] = true
			}
			continue
		}
		if !r.pruneOK || len(r.conds) == 0 {
			return st.Segments
		}
		opts, none, ok := scanOptionsFor(st, r.conds, args)
		if none {
			continue
		}
		if !ok {
			return st.Segments
		}
		segs, err := st.PlanScan(opts)
		if err != nil {
			s.log.Debug("pruning skipped", "error", err)
			return st.Segments
		}
		for _, sg := range segs {
			keep[sg.Path] = true
		}
	}
	var out []tableformat.SegmentMeta
	for _, sg := range st.Segments {
		if keep[sg.Path] {
			out = append(out, sg)
		}
	}
	return out
}

// latestApplies reports whether a DISTINCT ON shape asks for the newest row
// per group of entity columns: every DISTINCT ON column is an entity
// column, and the first ORDER BY key that is not one of them is the index
// column, descending, with NULLs last. Such a query needs only the
// segments holding some entity's newest interval.
func latestApplies(st *tableformat.State, shape *latestShape) bool {
	ix := st.Index()
	if shape == nil || ix == nil || len(ix.EntityColumns) == 0 {
		return false
	}
	isEntity := func(c string) bool {
		return slices.ContainsFunc(ix.EntityColumns, func(e string) bool { return strings.EqualFold(e, c) })
	}
	for _, c := range shape.distinct {
		if !isEntity(c) {
			return false
		}
	}
	for _, k := range shape.order {
		if isEntity(k.column) {
			continue
		}
		return strings.EqualFold(k.column, ix.Column) && k.desc && !k.nullsFirst
	}
	return false
}

// scanOptionsFor turns a reference's conjuncts into a range and entity
// filter. none reports a contradiction (the reference reads no row); ok
// false means nothing usable was found.
func scanOptionsFor(st *tableformat.State, conds []cond, args []any) (opts tableformat.ScanOptions, none, ok bool) {
	ix := st.Index()
	schema := st.Schema()
	if ix == nil || schema == nil {
		return opts, false, false
	}
	step := indexStep(st)
	var lo, hi *tableformat.IndexValue
	raise := func(v tableformat.IndexValue) {
		if lo == nil || v.Compare(*lo) > 0 {
			lo = &v
		}
	}
	lower := func(v tableformat.IndexValue) {
		if hi == nil || v.Compare(*hi) < 0 {
			hi = &v
		}
	}
	entities := map[string]tableformat.EntityValue{}
	for _, c := range conds {
		if strings.EqualFold(c.column, ix.Column) {
			vals := make([]tableformat.IndexValue, 0, len(c.vals))
			for _, ve := range c.vals {
				v, good := indexValueOf(ix.Kind.Type, ve, args)
				if !good {
					vals = nil
					break
				}
				vals = append(vals, v)
			}
			if len(vals) == 0 {
				continue
			}
			switch c.op {
			case ">=", ">":
				raise(vals[0])
			case "<":
				lower(vals[0])
			case "<=":
				lower(step(vals[0]))
			case "=":
				raise(vals[0])
				lower(step(vals[0]))
			case "between":
				raise(vals[0])
				lower(step(vals[1]))
			case "in":
				mn, mx := vals[0], vals[0]
				for _, v := range vals[1:] {
					if v.Compare(mn) < 0 {
						mn = v
					}
					if v.Compare(mx) > 0 {
						mx = v
					}
				}
				raise(mn)
				lower(step(mx))
			}
			ok = true
			continue
		}
		if c.op != "=" || len(c.vals) != 1 {
			continue
		}
		for _, ec := range ix.EntityColumns {
			if !strings.EqualFold(ec, c.column) {
				continue
			}
			f, _ := schema.Column(ec)
			ev, good := entityValueOf(f, c.vals[0], args)
			if !good {
				continue
			}
			if prev, dup := entities[ec]; dup && prev.Compare(ev) != 0 {
				return opts, true, true
			}
			entities[ec] = ev
			ok = true
		}
	}
	if lo != nil && hi != nil && lo.Compare(*hi) >= 0 {
		return opts, true, true
	}
	opts.Start, opts.End = lo, hi
	if len(entities) > 0 {
		opts.Entities = entities
	}
	return opts, false, ok
}

// indexStep returns v plus the smallest step of the index column's values,
// so that an inclusive upper bound becomes an exclusive one even after a
// timestamp bound is floored to the column's unit.
func indexStep(st *tableformat.State) func(tableformat.IndexValue) tableformat.IndexValue {
	unit := time.Nanosecond
	if f, ok := st.Schema().Column(st.Index().Column); ok && f.Type.Kind == tableformat.TypeTimestamp {
		switch f.Type.Unit {
		case tableformat.Millis:
			unit = time.Millisecond
		case tableformat.Micros:
			unit = time.Microsecond
		}
	}
	return func(v tableformat.IndexValue) tableformat.IndexValue {
		switch v.Type {
		case tableformat.IndexTimestamp:
			v.Time = v.Time.Add(unit)
		case tableformat.IndexInt64:
			if v.Int < math.MaxInt64 {
				v.Int++
			}
		default:
			if v.Uint < math.MaxUint64 {
				v.Uint++
			}
		}
		return v
	}
}

// resolveValue returns a value expression's Go value: a string, an int64,
// a float64, a time.Time, nil for NULL, or a bound parameter's value.
func resolveValue(ve valueExpr, args []any) (any, bool) {
	switch ve.kind {
	case 's':
		return ve.str, true
	case 'i':
		n, err := strconv.ParseInt(ve.str, 10, 64)
		return n, err == nil
	case 'f':
		f, err := strconv.ParseFloat(ve.str, 64)
		return f, err == nil
	case 'n':
		return nil, true
	case 'p':
		if ve.param < 1 || ve.param > len(args) {
			return nil, false
		}
		return args[ve.param-1], true
	}
	return nil, false
}

func indexValueOf(t tableformat.IndexType, ve valueExpr, args []any) (tableformat.IndexValue, bool) {
	v, ok := resolveValue(ve, args)
	if !ok || v == nil {
		return tableformat.IndexValue{}, false
	}
	switch t {
	case tableformat.IndexTimestamp:
		switch x := v.(type) {
		case time.Time:
			return tableformat.TimeValue(x.UTC()), true
		case string:
			if ve.cast != "" && !strings.HasPrefix(ve.cast, "TIMESTAMP") && ve.cast != "DATE" && ve.cast != "VARCHAR" {
				return tableformat.IndexValue{}, false
			}
			tm, ok := parseTime(x)
			return tableformat.TimeValue(tm), ok
		}
	case tableformat.IndexInt64:
		if n, ok := v.(int64); ok && ve.kind != 's' {
			return tableformat.Int64Value(n), true
		}
	case tableformat.IndexUInt64:
		switch n := v.(type) {
		case int64:
			if n >= 0 {
				return tableformat.Uint64Value(uint64(n)), true
			}
		case uint64:
			return tableformat.Uint64Value(n), true
		}
	}
	return tableformat.IndexValue{}, false
}

func entityValueOf(f *tableformat.Field, ve valueExpr, args []any) (tableformat.EntityValue, bool) {
	v, ok := resolveValue(ve, args)
	if !ok || v == nil || f == nil {
		return tableformat.EntityValue{}, false
	}
	switch f.Type.Kind {
	case tableformat.TypeUtf8:
		if s, ok := v.(string); ok && (ve.cast == "" || ve.cast == "VARCHAR") {
			return tableformat.EntityValue{Type: tableformat.EntityUtf8, Str: s}, true
		}
	case tableformat.TypeInt32:
		if n, ok := v.(int64); ok && n >= math.MinInt32 && n <= math.MaxInt32 {
			return tableformat.EntityValue{Type: tableformat.EntityInt32, Int: n}, true
		}
	case tableformat.TypeInt64:
		if n, ok := v.(int64); ok {
			return tableformat.EntityValue{Type: tableformat.EntityInt64, Int: n}, true
		}
	case tableformat.TypeUInt64:
		if n, ok := v.(int64); ok && n >= 0 {
			return tableformat.EntityValue{Type: tableformat.EntityUInt64, Uint: uint64(n)}, true
		}
	}
	return tableformat.EntityValue{}, false
}

var timeLayouts = []string{
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07",
	"2006-01-02 15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04Z07:00",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseTime reads a timestamp literal the way DuckDB does in a session
// whose time zone is UTC: ISO 8601 with a space or T, optional fraction
// and offset; no offset means UTC.
func parseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if len(s) > 10 && (s[10] == 'T' || s[10] == 't') {
		s = s[:10] + " " + s[11:]
	}
	if strings.HasSuffix(s, " UTC") {
		s = strings.TrimSuffix(s, " UTC") + "Z"
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// relationSQL is the SELECT reading one table's planned segments segs.
// Columns absent from every planned segment (added after those segments
// were written) are typed NULLs; union_by_name is used only when the
// planned segments' columns differ.
func (s *Server) relationSQL(name string, st *tableformat.State, segs []tableformat.SegmentMeta) (string, error) {
	var b strings.Builder
	b.WriteString("SELECT ")
	if st.Schema() == nil {
		// No data yet: the table has only its index column.
		typ := "TIMESTAMPTZ"
		switch st.Index().Kind.Type {
		case tableformat.IndexInt64:
			typ = "BIGINT"
		case tableformat.IndexUInt64:
			typ = "UBIGINT"
		}
		b.WriteString("CAST(NULL AS " + typ + ") AS " + sqlIdent(st.Index().Column) + " WHERE false")
		return b.String(), nil
	}
	as, err := tableformat.ArrowSchema(st.Schema())
	if err != nil {
		return "", err
	}
	files := make([]string, len(segs))
	present := map[string]bool{}
	var first []string
	same := true
	for i, sg := range segs {
		files[i] = filepath.Join(s.svc.Root(), name, filepath.FromSlash(sg.Path))
		cols, err := s.segCols.columns(files[i])
		if err != nil {
			return "", status.Errorf(codes.DataLoss, "table %s: segment %s: %v", name, sg.Path, err)
		}
		if i == 0 {
			first = cols
		} else if !slices.Equal(first, cols) {
			same = false
		}
		for _, c := range cols {
			present[c] = true
		}
	}
	for i, f := range as.Fields() {
		if i > 0 {
			b.WriteString(", ")
		}
		if present[f.Name] {
			b.WriteString(sqlIdent(f.Name))
			continue
		}
		typ, err := duckType(f.Type)
		if err != nil {
			return "", status.Errorf(codes.Unimplemented, "table %s: column %s: %v", name, f.Name, err)
		}
		b.WriteString("CAST(NULL AS " + typ + ") AS " + sqlIdent(f.Name))
	}
	if len(segs) == 0 {
		b.WriteString(" WHERE false")
		return b.String(), nil
	}
	b.WriteString(" FROM read_parquet([")
	for i, f := range files {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sqlString(f))
	}
	b.WriteString("]")
	if !same {
		b.WriteString(", union_by_name = true")
	}
	b.WriteString(")")
	return b.String(), nil
}

// duckType names the DuckDB type of an Arrow type, for typed NULLs.
func duckType(t arrow.DataType) (string, error) {
	switch t := t.(type) {
	case *arrow.BooleanType:
		return "BOOLEAN", nil
	case *arrow.Int8Type:
		return "TINYINT", nil
	case *arrow.Int16Type:
		return "SMALLINT", nil
	case *arrow.Int32Type:
		return "INTEGER", nil
	case *arrow.Int64Type:
		return "BIGINT", nil
	case *arrow.Uint8Type:
		return "UTINYINT", nil
	case *arrow.Uint16Type:
		return "USMALLINT", nil
	case *arrow.Uint32Type:
		return "UINTEGER", nil
	case *arrow.Uint64Type:
		return "UBIGINT", nil
	case *arrow.Float16Type, *arrow.Float32Type:
		return "FLOAT", nil
	case *arrow.Float64Type:
		return "DOUBLE", nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return "VARCHAR", nil
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType, *arrow.FixedSizeBinaryType:
		return "BLOB", nil
	case *arrow.Date32Type, *arrow.Date64Type:
		return "DATE", nil
	case *arrow.Time32Type, *arrow.Time64Type:
		return "TIME", nil
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return "TIMESTAMPTZ", nil
		}
		switch t.Unit {
		case arrow.Second:
			return "TIMESTAMP_S", nil
		case arrow.Millisecond:
			return "TIMESTAMP_MS", nil
		case arrow.Nanosecond:
			return "TIMESTAMP_NS", nil
		}
		return "TIMESTAMP", nil
	case *arrow.DurationType:
		return "INTERVAL", nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("DECIMAL(%d, %d)", t.Precision, t.Scale), nil
	case *arrow.ListType:
		e, err := duckType(t.Elem())
		return e + "[]", err
	case *arrow.LargeListType:
		e, err := duckType(t.Elem())
		return e + "[]", err
	case *arrow.StructType:
		parts := make([]string, t.NumFields())
		for i, f := range t.Fields() {
			ft, err := duckType(f.Type)
			if err != nil {
				return "", err
			}
			parts[i] = sqlIdent(f.Name) + " " + ft
		}
		return "STRUCT(" + strings.Join(parts, ", ") + ")", nil
	case *arrow.MapType:
		k, err := duckType(t.KeyType())
		if err != nil {
			return "", err
		}
		v, err := duckType(t.ItemType())
		return "MAP(" + k + ", " + v + ")", err
	}
	return "", fmt.Errorf("Arrow type %s has no SQL mapping", t)
}
