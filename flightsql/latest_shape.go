//go:build duckdb_arrow

package flightsql

import (
	"encoding/json"
	"reflect"
	"strings"
)

// The "newest row per entity" shape of a SELECT (prune.go, lastdirect.go).

// latestShape is a SELECT DISTINCT ON (distinct) … ORDER BY order.
type latestShape struct {
	distinct []string   // column names of the DISTINCT ON targets
	order    []orderKey // the ORDER BY keys, in order
	// What the direct answer needs (lastdirect.go): top says the SELECT
	// is the statement itself, with no CTE; star a select list of one
	// plain *, items otherwise (the columns as written); limit the LIMIT
	// (-1: none; -2: an OFFSET or a LIMIT that is not a constant).
	top   bool
	star  bool
	items []string
	limit int64
}

// orderKey is one ORDER BY key that is a plain column.
type orderKey struct {
	column     string
	desc       bool
	nullsFirst bool
}

// latestOf recognises a SELECT that keeps the newest row per group of
// columns of its one table: DISTINCT ON (columns) with an ORDER BY of plain
// columns, no WHERE, GROUP BY, HAVING, QUALIFY or sample. Whether the
// columns are entity columns and the order puts the index first, newest
// first, is checked against the table when planning.
func latestOf(m map[string]any, r *tableRef) *latestShape {
	if m["where_clause"] != nil || m["having"] != nil || m["qualify"] != nil || m["sample"] != nil {
		return nil
	}
	if g, _ := m["group_expressions"].([]any); len(g) > 0 || str(m["aggregate_handling"]) != "STANDARD_HANDLING" {
		return nil
	}
	// Only plain columns (and *) in the select list: an aggregate or a
	// window function needs more than the newest rows, and an alias could
	// give ORDER BY a name that is not the column's.
	items, _ := m["select_list"].([]any)
	shape := &latestShape{limit: -1}
	plainStars := 0
	for _, it := range items {
		im, _ := it.(map[string]any)
		switch str(im["class"]) {
		case "STAR":
			for _, k := range []string{"replace_list", "rename_list"} {
				if l, _ := im[k].([]any); len(l) > 0 {
					return nil
				}
			}
			if ex, ok := im["expr"]; ok && ex != nil {
				return nil // COLUMNS(...) and friends
			}
			ex1, _ := im["exclude_list"].([]any)
			ex2, _ := im["qualified_exclude_list"].([]any)
			if len(ex1) == 0 && len(ex2) == 0 && !isTrue(im["columns"]) {
				plainStars++
			}
		case "COLUMN_REF":
			col, ok := ownColumn(im, r)
			if !ok || (str(im["alias"]) != "" && !asciiEqualFold(str(im["alias"]), col)) {
				return nil
			}
			shape.items = append(shape.items, col)
		default:
			return nil
		}
	}
	switch {
	case len(items) == 1 && plainStars == 1:
		shape.star = true
	case len(shape.items) != len(items):
		shape.items = nil // a * with EXCLUDE, or a mix: no direct answer
		shape.limit = -2
	}
	mods, _ := m["modifiers"].([]any)
	for _, x := range mods {
		mod, _ := x.(map[string]any)
		switch str(mod["type"]) {
		case "DISTINCT_MODIFIER":
			targets, _ := mod["distinct_on_targets"].([]any)
			for _, tg := range targets {
				col, ok := ownColumn(tg, r)
				if !ok {
					return nil
				}
				shape.distinct = append(shape.distinct, col)
			}
		case "ORDER_MODIFIER":
			orders, _ := mod["orders"].([]any)
			for _, o := range orders {
				om, _ := o.(map[string]any)
				col, ok := ownColumn(om["expression"], r)
				if !ok {
					return nil
				}
				shape.order = append(shape.order, orderKey{column: col, desc: str(om["type"]) == "DESCENDING",
					nullsFirst: strings.Contains(str(om["null_order"]), "FIRST")})
			}
		case "LIMIT_MODIFIER", "LIMIT_PERCENT_MODIFIER":
			// applies after DISTINCT ON: keeps a subset of the answer rows
			if shape.limit != -2 {
				shape.limit = constantLimit(mod)
			}
		default:
			return nil
		}
	}
	if len(shape.distinct) == 0 || len(shape.order) == 0 {
		return nil
	}
	return shape
}

// constantLimit reads a LIMIT modifier: its row count when it is a plain
// non-negative integer constant without OFFSET, else -2.
func constantLimit(mod map[string]any) int64 {
	if str(mod["type"]) != "LIMIT_MODIFIER" || mod["offset"] != nil {
		return -2
	}
	lim, _ := mod["limit"].(map[string]any)
	if str(lim["class"]) != "CONSTANT" {
		return -2
	}
	val, _ := lim["value"].(map[string]any)
	var n int64
	switch v := val["value"].(type) {
	case json.Number:
		var err error
		if n, err = v.Int64(); err != nil {
			return -2
		}
	case float64:
		if v != float64(int64(v)) || v > 1<<53 {
			return -2
		}
		n = int64(v)
	default:
		return -2
	}
	if isTrue(val["is_null"]) || n < 0 {
		return -2
	}
	return n
}

// sameNode reports whether a and b are the same parsed node (not equal
// ones: the same map).
func sameNode(a, b map[string]any) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// noCTE reports whether a SELECT node defines no common table expression.
func noCTE(m map[string]any) bool {
	cte, _ := m["cte_map"].(map[string]any)
	l, _ := cte["map"].([]any)
	return len(l) == 0
}
