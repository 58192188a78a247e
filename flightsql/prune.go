//go:build duckdb_arrow

package flightsql

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tsflight/tsflight/tableformat"
)

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
