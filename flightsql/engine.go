//go:build duckdb_arrow

package flightsql

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
)

// engine is the embedded DuckDB database every query runs in. It holds no
// table data: each query gets its own connection, on which the tables the
// query names are temporary views over exactly the Parquet segments its
// plan selected, and the connection is closed when the query's result has
// been streamed.
type engine struct {
	connector *duckdb.Connector
}

// newEngine opens an in-memory DuckDB that may read files under root only.
// Settings are applied once to the whole database and then locked, so that
// no statement can widen them.
func newEngine(ctx context.Context, root string, opts *Options) (*engine, error) {
	c, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, fmt.Errorf("starting DuckDB: %w", err)
	}
	e := &engine{connector: c}
	conn, err := c.Connect(ctx)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("starting DuckDB: %w", err)
	}
	defer conn.Close()
	settings := []string{
		"SET GLOBAL TimeZone = 'UTC'",
		"SET GLOBAL autoinstall_known_extensions = false",
		"SET GLOBAL autoload_known_extensions = false",
		"SET GLOBAL allowed_directories = [" + sqlString(strings.TrimSuffix(root, "/")+"/") + "]",
		"SET GLOBAL enable_external_access = false",
	}
	if opts.Threads > 0 {
		settings = append(settings, fmt.Sprintf("SET GLOBAL threads = %d", opts.Threads))
	}
	if opts.MemoryLimit != "" {
		settings = append(settings, "SET GLOBAL memory_limit = "+sqlString(opts.MemoryLimit))
	}
	settings = append(settings, "SET GLOBAL lock_configuration = true")
	for _, s := range settings {
		if err := execConn(ctx, conn, s); err != nil {
			c.Close()
			return nil, fmt.Errorf("configuring DuckDB (%s): %w", s, err)
		}
	}
	return e, nil
}

func (e *engine) close() error { return e.connector.Close() }

// session is one query's DuckDB connection.
type session struct {
	conn  driver.Conn
	arrow *duckdb.Arrow
}

func (e *engine) open(ctx context.Context) (*session, error) {
	conn, err := e.connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ar, err := duckdb.NewArrowFromConn(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &session{conn: conn, arrow: ar}, nil
}

func (s *session) close() error { return s.conn.Close() }

func (s *session) exec(ctx context.Context, q string) error { return execConn(ctx, s.conn, q) }

// query runs q with positional arguments and returns its result as Arrow.
func (s *session) query(ctx context.Context, q string, args []any) (array.RecordReader, error) {
	return s.arrow.QueryContext(ctx, q, args...)
}

// scalar runs q and returns the first column of its first row.
func (s *session) scalar(ctx context.Context, q string, args ...driver.NamedValue) (driver.Value, error) {
	qc, ok := s.conn.(driver.QueryerContext)
	if !ok {
		return nil, fmt.Errorf("DuckDB connection cannot query")
	}
	rows, err := qc.QueryContext(ctx, q, args)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(vals); err != nil {
		return nil, err
	}
	return vals[0], nil
}

// prepare returns DuckDB's prepared statement for q (for its parameter
// types); the caller closes it.
func (s *session) prepare(ctx context.Context, q string) (*duckdb.Stmt, error) {
	pc, ok := s.conn.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("DuckDB connection cannot prepare")
	}
	st, err := pc.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	ds, ok := st.(*duckdb.Stmt)
	if !ok {
		st.Close()
		return nil, fmt.Errorf("not a DuckDB statement")
	}
	return ds, nil
}

func execConn(ctx context.Context, conn driver.Conn, q string) error {
	ec, ok := conn.(driver.ExecerContext)
	if !ok {
		return fmt.Errorf("DuckDB connection cannot execute")
	}
	_, err := ec.ExecContext(ctx, q, nil)
	return err
}

// sqlString quotes s as an SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlIdent quotes s as an SQL identifier.
func sqlIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
