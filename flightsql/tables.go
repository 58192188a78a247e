//go:build duckdb_arrow

package flightsql

import (
	"context"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/tableformat"
)

// table opens table name through the catalog, refreshed to its newest
// version; a failure is the status the Flight service would give.
func (s *Server) table(ctx context.Context, name string) (*tableformat.Table, error) {
	tb, err := s.cat.Open(ctx, name)
	if err != nil {
		return nil, flightserver.Status(err)
	}
	return tb, nil
}

// tableNames lists the catalog's tables, sorted (phantoms left out).
func (s *Server) tableNames() ([]string, error) {
	names, err := s.cat.Tables()
	if err != nil {
		return nil, flightserver.Status(err)
	}
	return names, nil
}
