//go:build !duckdb_arrow

package main

import (
	"context"
	"errors"
)

// runDuck needs DuckDB, which only builds with -tags duckdb_arrow.
func runDuck(context.Context, []string) error {
	return errors.New("tsbench was built without -tags duckdb_arrow: the DuckDB peer needs it (bench/run builds it so)")
}
