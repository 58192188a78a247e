package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

var createCmd = &command{
	Name:    "create",
	Group:   "client",
	Summary: "create an empty table",
	Usage:   "tsflight create --index-column COL [--index-type timestamp|int64|uint64] --granularity G [--entity COL]... [--timezone TZ] TABLE",
	Help: `Creates an empty table. The index column orders the rows and is what
coverage counts: at most one row per entity per granularity interval.
Entity columns (--entity, repeated or comma-separated) name the series,
e.g. a host. The table takes its other columns from the first load.

--granularity is a count and a unit (10s, 1m, 1h, 1d) or a number of
seconds for timestamp indexes, a positive integer width for integer
indexes. --timezone is stored with the table (interval math stays UTC).

Example:
  tsflight create --index-column time --granularity 10s --entity hostname cpu
  tsflight load cpu cpu-2016-01-01.parquet`,
}

func init() { register(createCmd, runCreate) }

func runCreate(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(createCmd)
	server := serverFlag(fs)
	var indexColumn, granularity, timezone string
	indexType := newChoice("timestamp", "timestamp", "int64", "uint64")
	var entities listFlag
	fs.StringVar(&indexColumn, "index-column", "", "the index `column` (required)")
	fs.Var(indexType, "index-type", "index `type`: timestamp, int64 or uint64")
	fs.StringVar(&granularity, "granularity", "", "coverage interval (`G`: 10s, 1m, 1h, 1d, seconds, or an integer width; required)")
	fs.Var(&entities, "entity", "entity `column` (repeat, or separate with commas)")
	fs.StringVar(&timezone, "timezone", "", "IANA time `zone` stored with a timestamp index")
	format := newChoice("table", "table", "json")
	fs.Var(format, "format", "output `format`: table or json")
	table, err := parseTable(fs, e, args, nil)
	if err != nil {
		return err
	}
	switch {
	case indexColumn == "":
		return usagef("--index-column is required")
	case granularity == "":
		return usagef("--granularity is required (e.g. 10s)")
	case timezone != "" && indexType.value != "timestamp":
		return usagef("--timezone applies to timestamp indexes only (--index-type is %s)", indexType.value)
	}
	req := map[string]any{
		"table":        table,
		"index_column": indexColumn,
		"index_type":   indexType.value,
		"granularity":  granularity,
	}
	if len(entities) > 0 {
		req["entity_columns"] = []string(entities)
	}
	if timezone != "" {
		req["timezone"] = timezone
	}
	type answer struct {
		Version int64 `json:"version"`
	}
	return tableOrJSONAction(ctx, e, server, format, "create-table", req, func(w io.Writer, res answer) error {
		_, err := fmt.Fprintf(w, "created table %s (version %d)\n", table, res.Version)
		return err
	})
}

// listFlag collects a repeated flag whose values may also be
// comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return errors.New("empty name")
		}
		*l = append(*l, v)
	}
	return nil
}
