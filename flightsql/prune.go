//go:build duckdb_arrow

package flightsql

import (
	"context"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tsflight/tsflight/tableformat"
)

// pruneTable returns the segments of st that the references can read: the
// union of each reference's plan. A reference with no usable conjuncts, or
// whose name may be a CTE's, reads every segment. When the table's one
// reference asks for the newest row per entity, it returns instead the
// file of the table's last-value index (one row per identity) and true.
func (s *Server) pruneTable(ctx context.Context, tb *tableformat.Table, st *tableformat.State, refs []*tableRef, maybeCTE bool, args []any) ([]tableformat.SegmentMeta, bool) {
	if maybeCTE || len(st.Segments) == 0 {
		return st.Segments, false
	}
	if len(refs) == 1 && refs[0].pruneOK && len(refs[0].conds) == 0 && latestApplies(st, refs[0].latest) {
		// The newest row per entity: the table's last-value index holds
		// exactly those rows, one per identity, in one small file.
		p, rows, err := tb.LastValuesFile(ctx, st)
		if err == nil {
			return []tableformat.SegmentMeta{{Path: p, Format: "parquet", RowCount: rows}}, true
		}
		s.log.Debug("the last-value index is not used", "error", err)
	}
	keep := map[string]bool{}
	for _, r := range refs {
		if r.pruneOK && len(r.conds) == 0 && latestApplies(st, r.latest) {
			segs, err := tb.LatestSegments(ctx, st)
			if err != nil {
				s.log.Debug("latest-row pruning skipped", "error", err)
				return st.Segments, false
			}
			for _, sg := range segs {
				keep[sg.Path] = true
			}
			continue
		}
		if !r.pruneOK || len(r.conds) == 0 {
			return st.Segments, false
		}
		set, none, ok := scanOptionsFor(st, r.conds, args)
		if none {
			continue
		}
		if !ok {
			return st.Segments, false
		}
		if err := set.plan(st, keep); err != nil {
			s.log.Debug("pruning skipped", "error", err)
			return st.Segments, false
		}
	}
	var out []tableformat.SegmentMeta
	for _, sg := range st.Segments {
		if keep[sg.Path] {
			out = append(out, sg)
		}
	}
	return out, false
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
// scanSet is the scans a reference needs: base, or, with values, one
// scan per value of an entity column (an IN list), their plans united.
type scanSet struct {
	base   tableformat.ScanOptions
	column string
	values []tableformat.EntityValue
}

// plan marks in keep the segments the scans read: one plan of st per scan
// (State.Plan).
func (ss scanSet) plan(st *tableformat.State, keep map[string]bool) error {
	scans := []tableformat.ScanOptions{ss.base}
	if len(ss.values) > 0 {
		scans = scans[:0]
		for _, v := range ss.values {
			o := ss.base
			o.Entities = maps.Clone(ss.base.Entities)
			if o.Entities == nil {
				o.Entities = map[string]tableformat.EntityValue{}
			}
			o.Entities[ss.column] = v
			scans = append(scans, o)
		}
	}
	for _, o := range scans {
		p, err := st.Plan(o)
		if err != nil {
			return err
		}
		for _, sg := range p.Segments() {
			keep[sg.Path] = true
		}
	}
	return nil
}

func scanOptionsFor(st *tableformat.State, conds []cond, args []any) (set scanSet, none, ok bool) {
	var opts tableformat.ScanOptions
	ix := st.Index()
	schema := st.Schema()
	if ix == nil || schema == nil {
		return set, false, false
	}
	step := indexStep(st)
	var lo, hi *tableformat.IndexValue
	raise := func(v tableformat.IndexValue) {
		if lo == nil || v.Compare(*lo) > 0 {
			lo = &v
		}
	}
	lower := func(v tableformat.IndexValue, ok bool) {
		if !ok { // no value above v: no upper bound
			return
		}
		if hi == nil || v.Compare(*hi) < 0 {
			hi = &v
		}
	}
	entities := map[string]tableformat.EntityValue{}
	var ins []tableformat.EntityValue // one IN list on an entity column
	var insCol string
	for _, c := range conds {
		if strings.EqualFold(c.column, ix.Column) {
			vals := convertAll(c.vals, func(ve valueExpr) (bound, bool) { return boundOf(st, ve, args) })
			if len(vals) == 0 {
				continue
			}
			switch c.op {
			case ">=", ">":
				raise(vals[0].low())
			case "<":
				lower(vals[0].high(), true)
			case "<=":
				lower(step(vals[0].high()))
			case "=":
				raise(vals[0].low())
				lower(step(vals[0].high()))
			case "between":
				raise(vals[0].low())
				lower(step(vals[1].high()))
			case "in":
				mn, mx := vals[0], vals[0]
				for _, v := range vals[1:] {
					if v.v.Compare(mn.v) < 0 {
						mn = v
					}
					if v.v.Compare(mx.v) > 0 {
						mx = v
					}
				}
				raise(mn.low())
				lower(step(mx.high()))
			}
			ok = true
			continue
		}
		if (c.op != "=" || len(c.vals) != 1) && c.op != "in" {
			continue
		}
		for _, ec := range ix.EntityColumns {
			if !strings.EqualFold(ec, c.column) {
				continue
			}
			f, _ := schema.Column(ec)
			list := convertAll(c.vals, func(ve valueExpr) (tableformat.EntityValue, bool) { return entityValueOf(f, ve, args) })
			switch {
			case len(list) == 0:
			case len(list) == 1:
				if prev, dup := entities[ec]; dup && prev.Compare(list[0]) != 0 {
					return set, true, true
				}
				entities[ec] = list[0]
				ok = true
			case ins == nil: // the first IN list of an entity column
				ins, insCol = list, ec
				ok = true
			}
		}
	}
	if _, fixed := entities[insCol]; fixed {
		ins = nil // an equality on the same column says more
	}
	if lo != nil && hi != nil && lo.Compare(*hi) >= 0 {
		return set, true, true
	}
	opts.Start, opts.End = lo, hi
	if len(entities) > 0 {
		opts.Entities = entities
	}
	return scanSet{base: opts, column: insCol, values: ins}, false, ok
}

// columnUnit is the precision DuckDB compares the index column's
// timestamps at: the column's unit, but at least microseconds for a zoned
// column (DuckDB's TIMESTAMPTZ holds microseconds).
func columnUnit(st *tableformat.State) time.Duration {
	if f, ok := st.Schema().Column(st.Index().Column); ok && f.Type.Kind == tableformat.TypeTimestamp {
		if f.Type.Timezone != nil && *f.Type.Timezone != "" && f.Type.Unit == tableformat.Nanos {
			return time.Microsecond
		}
		switch f.Type.Unit {
		case tableformat.Millis:
			return time.Millisecond
		case tableformat.Micros:
			return time.Microsecond
		}
	}
	return time.Nanosecond
}

// indexStep returns v plus the smallest step of the index column's values,
// so that an inclusive upper bound becomes an exclusive one even after a
// timestamp bound is floored to the column's unit; false when v is the
// largest value (there is no exclusive bound above it).
func indexStep(st *tableformat.State) func(tableformat.IndexValue) (tableformat.IndexValue, bool) {
	unit := columnUnit(st)
	return func(v tableformat.IndexValue) (tableformat.IndexValue, bool) {
		switch v.Type {
		case tableformat.IndexTimestamp:
			v.Time = v.Time.Add(unit)
		case tableformat.IndexInt64:
			if v.Int == math.MaxInt64 {
				return v, false
			}
			v.Int++
		default:
			if v.Uint == math.MaxUint64 {
				return v, false
			}
			v.Uint++
		}
		return v, true
	}
}

// bound is a value a conjunct compares the index with, as DuckDB will
// read it, and how far DuckDB's rounding of it to the compared type's
// precision may move it (TIMESTAMP_S rounds to seconds, the others to
// milliseconds or finer).
type bound struct {
	v     tableformat.IndexValue
	slack time.Duration
}

func (b bound) low() tableformat.IndexValue {
	v := b.v
	if v.Type == tableformat.IndexTimestamp {
		v.Time = v.Time.Add(-b.slack)
	}
	return v
}

func (b bound) high() tableformat.IndexValue {
	v := b.v
	if v.Type == tableformat.IndexTimestamp {
		v.Time = v.Time.Add(b.slack)
	}
	return v
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

// indexDuckType is the DuckDB type (as json_serialize_sql names it) of the
// index column read from the segments' Parquet: TIMESTAMP WITH TIME ZONE
// for a zoned column of any unit, TIMESTAMP_NS for a zoneless nanosecond
// column, TIMESTAMP for zoneless milli- and microseconds (DuckDB reads a
// Parquet TIMESTAMP(MILLIS) as TIMESTAMP; the table format has no second
// unit). TestPruningDifferential checks it against typeof.
func indexDuckType(st *tableformat.State) string {
	f, ok := st.Schema().Column(st.Index().Column)
	if !ok || f.Type.Kind != tableformat.TypeTimestamp {
		return ""
	}
	if f.Type.Timezone != nil && *f.Type.Timezone != "" {
		return "TIMESTAMP WITH TIME ZONE"
	}
	switch f.Type.Unit {
	case tableformat.Nanos:
		return "TIMESTAMP_NS"
	}
	return "TIMESTAMP"
}

// offsetApplies reports whether DuckDB 1.5.6 applies a UTC offset written
// in a string it casts to the timestamp type typ (a json_serialize_sql
// type id), moving the value to the UTC instant, rather than dropping the
// offset and keeping the wall clock. Measured by TestDuckDBOffsetRule:
// TIMESTAMPTZ and TIMESTAMP_NS apply it; TIMESTAMP, TIMESTAMP_MS and
// TIMESTAMP_S drop it.
func offsetApplies(typ string) bool {
	return typ == "TIMESTAMP WITH TIME ZONE" || typ == "TIMESTAMP_NS"
}

// convertAll converts every value with conv, or returns nil when one
// cannot be.
func convertAll[T any](vals []valueExpr, conv func(valueExpr) (T, bool)) []T {
	out := make([]T, 0, len(vals))
	for _, ve := range vals {
		v, good := conv(ve)
		if !good {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// boundOf reads a compared value the way DuckDB will. A string becomes the
// type it is cast to, or, compared as it is, the index column's type; a UTC
// offset written in it is applied or dropped as that type does
// (offsetApplies), DATE keeps the day. A parameter is bound as the type
// DuckDB inferred for it (see bindTime), so only a DATE cast changes its
// value.
func boundOf(st *tableformat.State, ve valueExpr, args []any) (bound, bool) {
	v, ok := resolveValue(ve, args)
	if !ok || v == nil {
		return bound{}, false
	}
	switch st.Index().Kind.Type {
	case tableformat.IndexTimestamp:
		target := ve.cast
		switch {
		case target == "" || target == "VARCHAR":
			if target = indexDuckType(st); target == "" {
				return bound{}, false
			}
		case target != "DATE" && !strings.HasPrefix(target, "TIMESTAMP"):
			return bound{}, false
		}
		var t time.Time
		switch x := v.(type) {
		case time.Time:
			t = x.UTC()
		case string:
			wall, instant, ok := parseTime(x)
			if !ok {
				return bound{}, false
			}
			t = wall
			if offsetApplies(target) {
				t = instant
			}
		default:
			return bound{}, false
		}
		// DuckDB rounds a value to its type's precision; when the value
		// is finer than that, the bound gets one unit of slack each way.
		unit := time.Microsecond
		switch target {
		case "DATE":
			return bound{v: tableformat.TimeValue(t.Truncate(24 * time.Hour))}, true
		case "TIMESTAMP_S":
			unit = time.Second
		case "TIMESTAMP_MS":
			unit = time.Millisecond
		case "TIMESTAMP_NS":
			unit = time.Nanosecond
		case "TIMESTAMP", "TIMESTAMP WITH TIME ZONE":
		default: // a type not measured (TIMESTAMP_US is TIMESTAMP): no pruning
			return bound{}, false
		}
		if ve.kind == 'p' { // bound as the column's type
			unit = columnUnit(st)
		}
		b := bound{v: tableformat.TimeValue(t)}
		if t.Sub(t.Truncate(unit)) != 0 {
			b.slack = unit
		}
		return b, true
	case tableformat.IndexInt64:
		if n, ok := v.(int64); ok && ve.kind != 's' {
			return bound{v: tableformat.Int64Value(n)}, true
		}
	case tableformat.IndexUInt64:
		switch n := v.(type) {
		case int64:
			if n >= 0 {
				return bound{v: tableformat.Uint64Value(uint64(n))}, true
			}
		case uint64:
			return bound{v: tableformat.Uint64Value(n)}, true
		}
	}
	return bound{}, false
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

// parseTime reads a timestamp literal as DuckDB does: ISO 8601 with a
// space or T, optional fraction and UTC offset. wall is the written date
// and time taken as UTC (what a zoneless type keeps); instant applies the
// offset (what TIMESTAMPTZ keeps; the session zone is UTC, so no offset
// means UTC).
func parseTime(s string) (wall, instant time.Time, ok bool) {
	s = strings.TrimSpace(s)
	if len(s) > 10 && (s[10] == 'T' || s[10] == 't') {
		s = s[:10] + " " + s[11:]
	}
	if strings.HasSuffix(s, " UTC") {
		s = strings.TrimSuffix(s, " UTC") + "Z"
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			wall = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
			return wall, t.UTC(), true
		}
	}
	return time.Time{}, time.Time{}, false
}
