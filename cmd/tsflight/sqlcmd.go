package main

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

var sqlCmd = &command{
	Name:    "sql",
	Group:   "client",
	Summary: "run a SQL query (Flight SQL)",
	Usage:   "tsflight sql [--server URI] [--format table|csv|json|parquet] [--output FILE] \"QUERY\"",
	Help: `Runs one read-only SQL statement on the server's embedded DuckDB and
prints the result. Tables are the server's tables (catalog tsflight,
schema main); a query reads only the segments its time predicates need.
ts_coverage(table, start, end [, entity]) and ts_gaps(…) are table
functions with the answers of the coverage and gaps commands. The server
must be built with -tags duckdb_arrow.

Example:
  tsflight sql "SELECT hostname, max(usage_user) FROM cpu WHERE time >= '2016-01-01T06:00:00Z' GROUP BY ALL ORDER BY 2 DESC LIMIT 5"
  tsflight sql --format csv --output top.csv "SELECT * FROM ts_gaps('cpu', '2016-01-01', '2016-01-02')"`,
}

func init() { register(sqlCmd, runSQL) }

func runSQL(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(sqlCmd)
	server := serverFlag(fs)
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON, formatParquet)
	rest, err := fs.parse(e, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 0:
		return usagef("missing the query (quote it: tsflight sql \"SELECT …\")")
	case len(rest) > 1:
		return usagef("unexpected argument %q after the query (quote the whole query)", rest[1])
	case strings.TrimSpace(rest[0]) == "":
		return usagef("the query is empty")
	}
	if err := out.check(e); err != nil {
		return err
	}
	return withClient(ctx, server, func(ctx context.Context, c *client) error {
		info, err := c.sql.Execute(ctx, rest[0])
		if err != nil {
			return c.wrap(err)
		}
		return writeResult(ctx, e, c, out, info, func(ctx context.Context, t *flight.Ticket) (*flight.Reader, error) {
			return c.sql.DoGet(ctx, t)
		})
	})
}
