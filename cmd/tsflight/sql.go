//go:build duckdb_arrow

package main

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightsql"
)

// sqlBuilt says whether this binary speaks Flight SQL.
const sqlBuilt = true

// withSQL wraps svc with Flight SQL (DuckDB): this binary was built with
// the duckdb_arrow tag. The returned close releases DuckDB.
func withSQL(ctx context.Context, svc *flightserver.Service, log hclog.Logger, maxResultRows int64) (flight.FlightServer, func() error, error) {
	opts := flightsql.DefaultOptions()
	opts.Logger = log
	opts.Version = versionString()
	opts.MaxResultRows = maxResultRows
	set := sqlSettingsFrom(ctx)
	opts.Gate = set.gate
	if set.memoryLimit > 0 {
		opts.MemoryLimit = fmt.Sprintf("%d bytes", set.memoryLimit)
	}
	opts.MaxPreparedBytes = set.preparedBytes
	srv, err := flightsql.New(ctx, svc, opts)
	if err != nil {
		return nil, nil, err
	}
	if set.metrics != nil {
		if err := set.metrics.Register(srv.Collectors()...); err != nil {
			srv.Close()
			return nil, nil, fmt.Errorf("Flight SQL metrics: %w", err)
		}
	}
	return srv.Service(), srv.Close, nil
}
