//go:build !duckdb_arrow

package main

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"

	"github.com/tsflight/tsflight/flightserver"
)

// sqlBuilt says whether this binary speaks Flight SQL.
const sqlBuilt = false

// withSQL serves plain Flight only: this binary was built without the
// duckdb_arrow tag, so it has no DuckDB and no Flight SQL.
func withSQL(_ context.Context, svc *flightserver.Service, log hclog.Logger, _ int64) (flight.FlightServer, func() error, error) {
	log.Warn("built without the duckdb_arrow tag: Flight SQL is off, plain Flight only (build with: go build -tags duckdb_arrow ./cmd/tsflight)")
	return svc, func() error { return nil }, nil
}
