package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

var addColumnsCmd = &command{
	Name:    "add-columns",
	Group:   "client",
	Summary: "add nullable columns to a table",
	Usage:   "tsflight add-columns [--server URI] TABLE NAME:TYPE...",
	Help: `Adds nullable columns in one metadata-only commit: no data is rewritten,
rows written before read NULL in the new columns, and later loads may
carry them or leave them out. Types are Arrow names: bool, int32, int64,
uint64, float32, float64, utf8 (or string), binary, fixed_size_binary[N],
timestamp[ms|us|ns] with an optional zone (timestamp[us, UTC]),
decimal128(P, S), decimal256(P, S).

Example:
  tsflight add-columns cpu temp_c:float64 'note:utf8'`,
}

func init() { register(addColumnsCmd, runAddColumns) }

func runAddColumns(ctx context.Context, e *env, args []string) error {
	server, format, table, specs, err := parseTableItems(addColumnsCmd, e, args, "the columns to add (NAME:TYPE …)")
	if err != nil {
		return err
	}
	type column struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Nullable bool   `json:"nullable"`
	}
	var cols []column
	for _, spec := range specs {
		name, typ, ok := strings.Cut(spec, ":")
		name, typ = strings.TrimSpace(name), strings.TrimSpace(typ)
		if !ok || name == "" || typ == "" {
			return usagef("column %q is not NAME:TYPE (e.g. temp_c:float64)", spec)
		}
		cols = append(cols, column{Name: name, Type: typ, Nullable: true})
	}
	type answer struct {
		Version int64 `json:"version"`
	}
	return tableOrJSONAction(ctx, e, server, format, "add-columns", map[string]any{"table": table, "columns": cols},
		func(w io.Writer, res answer) error {
			_, err := fmt.Fprintf(w, "added %d column(s) to %s (version %d)\n", len(cols), table, res.Version)
			return err
		})
}
