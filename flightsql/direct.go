//go:build duckdb_arrow

package flightsql

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// Direct is the server's DuckDB used directly: the same engine, version
// and settings (UTC, file access confined to a root, Options.Threads,
// MemoryLimit, MetadataCache) on one connection, with none of tsflight's
// planning or pruning and no transport. Benchmarks use it as the
// reference "DuckDB reading the same Parquet files"; it is not safe for
// concurrent use.
type Direct struct {
	eng  *engine
	sess *session
}

// OpenDirect opens a DuckDB that may read (and write, for COPY) files
// under root only. opts nil means DefaultOptions.
func OpenDirect(ctx context.Context, root string, opts *Options) (*Direct, error) {
	if opts == nil {
		opts = DefaultOptions()
	}
	eng, err := newEngine(ctx, root, opts)
	if err != nil {
		return nil, err
	}
	sess, err := eng.open(ctx)
	if err != nil {
		eng.close()
		return nil, err
	}
	return &Direct{eng: eng, sess: sess}, nil
}

// Exec runs a statement without a result (CREATE VIEW, COPY, SET).
func (d *Direct) Exec(ctx context.Context, sql string) error {
	if d.sess == nil {
		return errors.New("flightsql: Direct is closed")
	}
	return d.sess.exec(ctx, sql)
}

// Query runs a query and streams its result chunk by chunk. Release the
// reader before the next call.
func (d *Direct) Query(ctx context.Context, sql string) (array.RecordReader, error) {
	if d.sess == nil {
		return nil, errors.New("flightsql: Direct is closed")
	}
	return d.sess.query(ctx, sql, nil)
}

// Close closes the connection and the database.
func (d *Direct) Close() error {
	if d.sess == nil {
		return nil
	}
	d.sess.close()
	d.sess = nil
	return d.eng.close()
}

// QuoteString quotes s as a SQL string literal, doubling its single
// quotes.
func QuoteString(s string) string { return sqlString(s) }
