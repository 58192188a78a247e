package tsbs

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Query is one TSBS query instance: its type's name and its SQL text.
type Query struct {
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

// queryNames are the TSBS cpu-only query types of the benchmark, in the
// order Queries returns them.
var queryNames = []string{"single-groupby-1-1-1", "single-groupby-5-8-1", "cpu-max-all-8",
	"double-groupby-1", "high-cpu-1", "lastpoint", "groupby-orderby-limit"}

// QueryNames returns the names of the seven query types, in the order
// of Queries.
func QueryNames() []string { return append([]string(nil), queryNames...) }

// Queries returns one instance of each of the seven TSBS query types
// over table, in the order of QueryNames. It is QueryInstances(table,
// 1)[0], or nil if p is not valid.
func (p Params) Queries(table string) []Query {
	if qs := p.QueryInstances(table, 1); len(qs) == 1 {
		return qs[0]
	}
	return nil
}

// QueryInstances returns n instances of the seven queries: the i-th
// element is instance i of every type, in the order of QueryNames, and
// instance 0 is what Queries returns. Each instance draws its own hosts
// and windows from the seed (lastpoint has none and is the same in
// every instance), so a benchmark can vary them from run to run as TSBS
// does, and the instances are a pure function of (Seed, Hosts, Start,
// Duration, i): every system is given the identical SQL text.
//
// The texts are DuckDB-compatible SQL over one denormalised table (the
// tags are columns) with a time column, following TSBS's SQL targets:
// hosts are chosen as hostname IN (...), as TSBS's ClickHouse queries
// do, and lastpoint is TimescaleDB's DISTINCT ON form. A window of
// length d starts at Start plus a uniform offset in [0, Duration − d],
// truncated to the second, so it lies inside the data; a window longer
// than the data is the data's whole span. Time bounds are RFC 3339
// string literals in UTC, as TSBS writes them, which DuckDB casts to the
// column's type. Hosts are drawn without replacement (all of them if
// there are fewer than asked for). table is inserted verbatim: give a
// plain identifier, the same for every system (for DuckDB over the
// Parquet files, a view of that name). QueryInstances returns nil if p
// is not valid or n < 1.
func (p Params) QueryInstances(table string, n int) [][]Query {
	if p.Validate() != nil || n < 1 {
		return nil
	}
	out := make([][]Query, n)
	for i := range out {
		out[i] = p.queryInstance(table, i)
	}
	return out
}

func (p Params) queryInstance(table string, inst int) []Query {
	r := newStream(derive(p.Seed, domQueries, uint64(inst)))
	start, end := p.Start.UTC(), p.End().UTC()
	window := func(d time.Duration) (time.Time, time.Time) {
		if d >= p.Duration {
			return start, end
		}
		off := time.Duration(r.uint64N(uint64(p.Duration-d) + 1)).Truncate(time.Second)
		from := start.Add(off)
		return from, from.Add(d)
	}
	hosts := func(n int) string {
		n = min(n, p.Hosts)
		seen := make(map[int]bool, n)
		list := make([]string, 0, n)
		for len(list) < n {
			h := r.intN(p.Hosts)
			if !seen[h] {
				seen[h] = true
				list = append(list, "'host_"+strconv.Itoa(h)+"'")
			}
		}
		return strings.Join(list, ", ")
	}
	lit := func(t time.Time) string { return "'" + t.Format(time.RFC3339Nano) + "'" }
	maxOf := func(n int) string {
		parts := make([]string, n)
		for i, f := range fieldColumns[:n] {
			parts[i] = fmt.Sprintf("max(%s) AS max_%s", f, f)
		}
		return strings.Join(parts, ", ")
	}
	var qs []Query
	add := func(name, sql string) { qs = append(qs, Query{name, sql}) }
	// single-groupby-M-H-T: the max of M fields per minute for H hosts
	// over T hours.
	singleGroupBy := func(m, h int, t time.Duration) string {
		from, to := window(t)
		return fmt.Sprintf("SELECT date_trunc('minute', time) AS minute, %s FROM %s WHERE hostname IN (%s) AND time >= %s AND time < %s GROUP BY minute ORDER BY minute",
			maxOf(m), table, hosts(h), lit(from), lit(to))
	}
	add("single-groupby-1-1-1", singleGroupBy(1, 1, time.Hour))
	add("single-groupby-5-8-1", singleGroupBy(5, 8, time.Hour))
	{ // cpu-max-all-8: the max of every field per hour for 8 hosts over 8 hours.
		from, to := window(8 * time.Hour)
		add("cpu-max-all-8", fmt.Sprintf("SELECT date_trunc('hour', time) AS hour, %s FROM %s WHERE hostname IN (%s) AND time >= %s AND time < %s GROUP BY hour ORDER BY hour",
			maxOf(numFields), table, hosts(8), lit(from), lit(to)))
	}
	{ // double-groupby-1: the mean of one field per host and hour, all hosts, 12 hours.
		from, to := window(12 * time.Hour)
		add("double-groupby-1", fmt.Sprintf("SELECT date_trunc('hour', time) AS hour, hostname, avg(usage_user) AS mean_usage_user FROM %s WHERE time >= %s AND time < %s GROUP BY hour, hostname ORDER BY hour, hostname",
			table, lit(from), lit(to)))
	}
	{ // high-cpu-1: the rows of one host with usage_user > 90 in 12 hours.
		from, to := window(12 * time.Hour)
		add("high-cpu-1", fmt.Sprintf("SELECT * FROM %s WHERE usage_user > 90.0 AND time >= %s AND time < %s AND hostname IN (%s)",
			table, lit(from), lit(to), hosts(1)))
	}
	// lastpoint: each host's newest row.
	add("lastpoint", fmt.Sprintf("SELECT DISTINCT ON (hostname) * FROM %s ORDER BY hostname, time DESC", table))
	{ // groupby-orderby-limit: the per-minute max of the last 5 minutes before a random end.
		_, to := window(time.Hour)
		add("groupby-orderby-limit", fmt.Sprintf("SELECT date_trunc('minute', time) AS minute, max(usage_user) AS max_usage_user FROM %s WHERE time < %s GROUP BY minute ORDER BY minute DESC LIMIT 5",
			table, lit(to)))
	}
	return qs
}
