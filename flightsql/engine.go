//go:build duckdb_arrow

package flightsql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	bindings "github.com/duckdb/duckdb-go-bindings"
)

// engine is the embedded DuckDB database every query runs in. It holds no
// table data: each query gets its own connection, on which the tables the
// query names are temporary views over exactly the Parquet segments its
// plan selected, and the connection is closed when the query's result has
// been streamed.
//
// It talks to DuckDB's C API through duckdb-go-bindings rather than
// through duckdb-go's database/sql driver, because the driver materialises
// a whole result before returning its first chunk; a streaming result
// sends the first batch at once and holds only what is in flight.
type engine struct {
	db bindings.Database
	// spill is DuckDB's temporary directory, private to this engine
	// (DuckDB's default, .tmp under the working directory, would be
	// readable by queries as an allowed directory).
	spill string
	// oomHint is appended to DuckDB's out-of-memory errors: it names the
	// limit and the flag that sets it.
	oomHint string
	// root is the one directory DuckDB may read; errors scrub it.
	root string
}

// newEngine opens an in-memory DuckDB that may read files under root only.
// Settings are applied once to the whole database and then locked, so that
// no statement can widen them.
func newEngine(ctx context.Context, root string, opts *Options) (*engine, error) {
	var cfg bindings.Config
	if bindings.CreateConfig(&cfg) == bindings.StateError {
		return nil, errors.New("starting DuckDB: cannot create a configuration")
	}
	defer bindings.DestroyConfig(&cfg)
	var db bindings.Database
	var msg string
	if bindings.OpenExt("", &db, cfg, &msg) == bindings.StateError {
		return nil, fmt.Errorf("starting DuckDB: %s", msg)
	}
	e := &engine{db: db, root: root}
	spill, err := os.MkdirTemp("", "tsflight-duckdb-")
	if err != nil {
		e.close()
		return nil, fmt.Errorf("starting DuckDB: its temporary directory: %w", err)
	}
	e.spill = spill
	sess, err := e.open(ctx)
	if err != nil {
		e.close()
		return nil, err
	}
	defer sess.close()
	settings := []string{
		"SET GLOBAL TimeZone = 'UTC'",
		"SET GLOBAL temp_directory = " + sqlString(spill),
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
	if opts.MaxTempSize != "" {
		settings = append(settings, "SET GLOBAL max_temp_directory_size = "+sqlString(opts.MaxTempSize))
	}
	if opts.MetadataCache {
		settings = append(settings, "SET GLOBAL parquet_metadata_cache = true")
	}
	// Give memory back after a query: jemalloc's background purging and
	// a low per-thread flush threshold took the resident set 2 s after a
	// 2.3 GiB query from 620 MiB (DuckDB's defaults) to 97 MiB
	// (TestSQLMemoryRSS).
	settings = append(settings, "SET GLOBAL allocator_background_threads = true", "SET GLOBAL allocator_flush_threshold = '16MiB'")
	settings = append(settings, "SET GLOBAL lock_configuration = true")
	for _, s := range settings {
		if err := sess.exec(ctx, s); err != nil {
			e.close()
			return nil, fmt.Errorf("configuring DuckDB (%s): %w", s, err)
		}
	}
	limit, err := sess.scalarString(ctx, "SELECT current_setting('memory_limit')")
	if err != nil {
		e.close()
		return nil, fmt.Errorf("reading DuckDB's memory limit: %w", err)
	}
	e.oomHint = fmt.Sprintf(": the query needs more than the SQL engine's memory limit of %s (--sql-memory-limit); sorts, joins and hash aggregates spill to disk beyond it, other operators (list, string_agg, huge rows) cannot: narrow the query, aggregate less at once, or ask for a higher limit", limit)
	return e, nil
}

func (e *engine) close() error {
	bindings.Close(&e.db)
	if e.spill != "" {
		return os.RemoveAll(e.spill)
	}
	return nil
}

// session is one query's DuckDB connection. It runs one statement at a
// time; a streaming result must be released before the next.
type session struct {
	conn    bindings.Connection
	oomHint string
	root    string // the engine's root, which sqlStatusIn scrubs

	// Set for a connection of the pool (pool.go): its kept prepared
	// statements by text, least recently used first in order, the
	// client texts it ran, and whether something left it unfit for
	// another query (an error, an interrupt, a statement that created
	// something on it).
	pool   *connPool
	stmts  map[string]bindings.PreparedStatement
	order  []string
	ran    map[string]bool
	broken atomic.Bool
}

func (e *engine) open(context.Context) (*session, error) {
	var c bindings.Connection
	if bindings.Connect(e.db, &c) == bindings.StateError {
		return nil, errors.New("DuckDB: cannot open a connection")
	}
	return &session{conn: c, oomHint: e.oomHint, root: e.root}, nil
}

// close ends the session: a clean pooled connection goes back to its
// pool, any other is closed.
func (s *session) close() error {
	if s.reusable() && s.pool.put(s) {
		return nil
	}
	s.destroy()
	return nil
}

// guard interrupts the connection's running statement when ctx ends,
// until stop is called.
func (s *session) guard(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			s.broken.Store(true)
			bindings.Interrupt(s.conn)
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-exited
		})
	}
}

// exec runs a statement without a result. Such statements change the
// connection (views, tables, settings): it does not go back to the pool.
func (s *session) exec(ctx context.Context, q string) error {
	s.broken.Store(true)
	stop := s.guard(ctx)
	defer stop()
	var res bindings.Result
	st := bindings.Query(s.conn, q, &res)
	defer bindings.DestroyResult(&res)
	if st == bindings.StateError {
		return withContext(ctx, s.hint(resultError(&res)))
	}
	return nil
}

// hint adds the memory limit to an out-of-memory error.
func (s *session) hint(err error) error {
	var de *duckError
	if s.oomHint != "" && errors.As(err, &de) && de.typ == bindings.ErrorTypeOutOfMemory && !strings.Contains(de.msg, s.oomHint) {
		// DuckDB's own advice (SET threads, SET memory_limit) is not the
		// client's to follow: settings are locked.
		msg, _, _ := strings.Cut(de.msg, "\n")
		return &duckError{typ: de.typ, msg: strings.TrimRight(msg, " .") + s.oomHint}
	}
	return err
}

// prepared is a DuckDB prepared statement; the caller destroys it.
func (s *session) prepare(q string) (bindings.PreparedStatement, error) {
	var ps bindings.PreparedStatement
	if bindings.Prepare(s.conn, q, &ps) == bindings.StateError {
		err := s.hint(messageError(bindings.PrepareError(ps)))
		bindings.DestroyPrepare(&ps)
		return ps, err
	}
	return ps, nil
}

// paramTypes returns DuckDB's inferred types of ps's parameters.
func paramTypes(ps bindings.PreparedStatement) []bindings.Type {
	out := make([]bindings.Type, int(bindings.NParams(ps)))
	for i := range out {
		out[i] = bindings.ParamType(ps, bindings.IdxT(i+1))
	}
	return out
}

// bind binds positional arguments (see goValue for the Go types).
func bind(ps bindings.PreparedStatement, args []any) error {
	if n := int(bindings.NParams(ps)); len(args) != n {
		return &duckError{typ: bindings.ErrorTypeInvalidInput, msg: fmt.Sprintf("Invalid Input Error: the statement has %d parameters, %d values were bound", n, len(args))}
	}
	for i, a := range args {
		idx := bindings.IdxT(i + 1)
		var st bindings.State
		switch v := a.(type) {
		case nil:
			st = bindings.BindNull(ps, idx)
		case bool:
			st = bindings.BindBoolean(ps, idx, v)
		case int64:
			st = bindings.BindInt64(ps, idx, v)
		case uint64:
			st = bindings.BindUInt64(ps, idx, v)
		case float64:
			st = bindings.BindDouble(ps, idx, v)
		case string:
			st = bindings.BindVarchar(ps, idx, v)
		case []byte:
			st = bindings.BindBlob(ps, idx, v)
		case time.Time:
			st = bindTime(ps, idx, v)
		default:
			return fmt.Errorf("parameter %d: cannot bind Go type %T", i+1, a)
		}
		if st == bindings.StateError {
			return &duckError{typ: bindings.ErrorTypeInvalidInput, msg: fmt.Sprintf("Invalid Input Error: cannot bind parameter %d (%v) to type %d", i+1, a, bindings.ParamType(ps, idx))}
		}
	}
	return nil
}

// bindTime binds a timestamp as the type DuckDB inferred for the
// parameter (a naive timestamp column of any unit does not compare with
// TIMESTAMPTZ without a cast), and as TIMESTAMPTZ when it inferred none.
func bindTime(ps bindings.PreparedStatement, idx bindings.IdxT, t time.Time) bindings.State {
	var v bindings.Value
	switch bindings.ParamType(ps, idx) {
	case bindings.TypeTimestamp:
		v = bindings.CreateTimestamp(bindings.NewTimestamp(t.UnixMicro()))
	case bindings.TypeTimestampNS:
		v = bindings.CreateTimestampNS(bindings.NewTimestampNS(t.UnixNano()))
	case bindings.TypeTimestampMS:
		v = bindings.CreateTimestampMS(bindings.NewTimestampMS(t.UnixMilli()))
	case bindings.TypeTimestampS:
		v = bindings.CreateTimestampS(bindings.NewTimestampS(t.Unix()))
	case bindings.TypeDate:
		days := int32(t.UTC().Truncate(24*time.Hour).Unix() / 86400)
		v = bindings.CreateDate(bindings.NewDate(days))
	default:
		v = bindings.CreateTimestampTZ(bindings.NewTimestamp(t.UnixMicro()))
	}
	defer bindings.DestroyValue(&v)
	return bindings.BindValue(ps, idx, v)
}

// query runs q with positional arguments and streams its result as Arrow:
// the reader fetches DuckDB's chunks as it is read, and ctx interrupts the
// statement until the reader is released.
func (s *session) query(ctx context.Context, q string, args []any) (array.RecordReader, error) {
	ps, err := s.prepare(q)
	if err != nil {
		return nil, err
	}
	return s.execute(ctx, ps, args)
}

// queryCached is query with the prepared statement of text kept on the
// session (prepareCached); query is the client's text text was planned
// from.
func (s *session) queryCached(ctx context.Context, query, text string, args []any) (array.RecordReader, error) {
	ps, err := s.prepareCached(query, text)
	if err != nil {
		return nil, err
	}
	return s.execute(ctx, ps, args)
}

// columnNames returns the result column names of ps.
func columnNames(ps bindings.PreparedStatement) []string {
	names := make([]string, int(bindings.PreparedStatementColumnCount(ps)))
	for i := range names {
		names[i] = bindings.PreparedStatementColumnName(ps, bindings.IdxT(i))
	}
	return names
}

// errUntyped means a prepared statement's result types are not known
// before it runs (a parameter without context decides them).
var errUntyped = errors.New("the result types depend on the parameter values")

// describePrepared returns the Arrow schema ps's result will have, from
// the prepared statement alone, with the conversion options the result
// will use.
func (s *session) describePrepared(ps bindings.PreparedStatement) (*arrow.Schema, error) {
	n := int(bindings.PreparedStatementColumnCount(ps))
	names := make([]string, n)
	types := make([]bindings.LogicalType, n)
	defer func() {
		for i := range types {
			bindings.DestroyLogicalType(&types[i])
		}
	}()
	for i := range n {
		switch bindings.PreparedStatementColumnType(ps, bindings.IdxT(i)) {
		case bindings.TypeInvalid, bindings.TypeAny, bindings.TypeSQLNull, bindings.TypeStringLiteral, bindings.TypeIntegerLiteral:
			return nil, errUntyped
		}
		names[i] = bindings.PreparedStatementColumnName(ps, bindings.IdxT(i))
		types[i] = bindings.PreparedStatementColumnLogicalType(ps, bindings.IdxT(i))
	}
	var opts bindings.ArrowOptions
	bindings.ConnectionGetArrowOptions(s.conn, &opts)
	defer bindings.DestroyArrowOptions(&opts)
	sc, ed := bindings.NewArrowSchema(opts, types, names)
	if err := errorData(&ed); err != nil {
		return nil, err
	}
	return sc, nil
}

// execute binds args to ps and streams its result; the reader owns ps
// (and frees it with drop when released, as it does on error here).
func (s *session) execute(ctx context.Context, ps bindings.PreparedStatement, args []any) (array.RecordReader, error) {
	fail := func(err error) (array.RecordReader, error) {
		s.broken.Store(true)
		s.drop(&ps)
		return nil, withContext(ctx, s.hint(err))
	}
	if err := bind(ps, args); err != nil {
		return fail(err)
	}
	stop := s.guard(ctx)
	var pending bindings.PendingResult
	if bindings.PendingPreparedStreaming(ps, &pending) == bindings.StateError {
		err := messageError(bindings.PendingError(pending))
		bindings.DestroyPending(&pending)
		stop()
		return fail(err)
	}
	var res bindings.Result
	st := bindings.ExecutePending(pending, &res)
	bindings.DestroyPending(&pending)
	if st == bindings.StateError {
		err := resultError(&res)
		bindings.DestroyResult(&res)
		stop()
		return fail(err)
	}
	r := &chunkReader{ctx: ctx, res: res, ps: ps, stop: stop, refs: 1, sess: s}
	r.opts = bindings.ResultGetArrowOptions(&r.res)
	n := int(bindings.ColumnCount(&r.res))
	names := make([]string, n)
	types := make([]bindings.LogicalType, n)
	for i := range n {
		names[i] = bindings.ColumnName(&r.res, bindings.IdxT(i))
		types[i] = bindings.ColumnLogicalType(&r.res, bindings.IdxT(i))
	}
	sc, ed := bindings.NewArrowSchema(r.opts, types, names)
	for i := range types {
		bindings.DestroyLogicalType(&types[i])
	}
	if err := errorData(&ed); err != nil {
		s.broken.Store(true)
		r.Release()
		return nil, err
	}
	r.schema = sc
	return r, nil
}

// chunkReader is an array.RecordReader over a streaming DuckDB result.
// Batches live in C memory until released.
type chunkReader struct {
	ctx    context.Context
	sess   *session // for its out-of-memory hint
	res    bindings.Result
	ps     bindings.PreparedStatement
	opts   bindings.ArrowOptions
	stop   func()
	schema *arrow.Schema

	mu   sync.Mutex
	refs int
	cur  arrow.RecordBatch
	err  error
	done bool
}

func (r *chunkReader) Schema() *arrow.Schema { return r.schema }

func (r *chunkReader) Next() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done || r.err != nil {
		return false
	}
	for {
		chunk := bindings.FetchChunk(r.res)
		if chunk.Ptr == nil {
			r.done = true
			if msg := bindings.ResultError(&r.res); msg != "" {
				r.err = withContext(r.ctx, r.sess.hint(resultError(&r.res)))
			} else if err := r.ctx.Err(); err != nil {
				r.err = err
			}
			return false
		}
		size := bindings.DataChunkGetSize(chunk)
		if size == 0 {
			bindings.DestroyDataChunk(&chunk)
			continue
		}
		rec, ed := bindings.DataChunkToArrowArray(r.opts, r.schema, chunk)
		bindings.DestroyDataChunk(&chunk)
		if err := errorData(&ed); err != nil {
			r.err = err
			return false
		}
		r.cur = rec
		return true
	}
}

func (r *chunkReader) RecordBatch() arrow.RecordBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Record is RecordBatch (the older name in array.RecordReader).
func (r *chunkReader) Record() arrow.RecordBatch { return r.RecordBatch() }

func (r *chunkReader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *chunkReader) Retain() {
	r.mu.Lock()
	r.refs++
	r.mu.Unlock()
}

func (r *chunkReader) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refs <= 0 {
		return
	}
	r.refs--
	if r.refs > 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.stop()
	if !r.done || r.err != nil {
		// Released unread or failed: the connection is not known clean.
		r.sess.broken.Store(true)
	}
	bindings.DestroyArrowOptions(&r.opts)
	bindings.DestroyResult(&r.res)
	r.sess.drop(&r.ps)
}

// scalarString runs q (with args) and returns the first column of its
// first row as a string.
func (s *session) scalarString(ctx context.Context, q string, args ...any) (string, error) {
	rdr, err := s.query(ctx, q, args)
	if err != nil {
		return "", err
	}
	defer rdr.Release()
	if !rdr.Next() {
		if err := rdr.Err(); err != nil {
			return "", err
		}
		return "", errors.New("the statement returned no row")
	}
	col, ok := rdr.RecordBatch().Column(0).(*array.String)
	if !ok || col.Len() == 0 || col.IsNull(0) {
		return "", errors.New("the statement returned no string")
	}
	// The batch lives in C memory until released.
	v := strings.Clone(col.Value(0))
	// Read to the result's end, which leaves a pooled connection clean.
	for rdr.Next() {
	}
	return v, rdr.Err()
}

// duckError is an error DuckDB reported.
type duckError struct {
	typ bindings.ErrorType
	msg string
}

func (e *duckError) Error() string { return e.msg }

func resultError(res *bindings.Result) error {
	return &duckError{typ: bindings.ResultErrorType(res), msg: bindings.ResultError(res)}
}

func errorData(ed *bindings.ErrorData) error {
	defer bindings.DestroyErrorData(ed)
	if !bindings.ErrorDataHasError(*ed) {
		return nil
	}
	return &duckError{typ: bindings.ErrorDataErrorType(*ed), msg: bindings.ErrorDataMessage(*ed)}
}

// messagePrefixes name DuckDB's error types as its messages begin.
var messagePrefixes = map[string]bindings.ErrorType{
	"Parser Error":          bindings.ErrorTypeParser,
	"Binder Error":          bindings.ErrorTypeBinder,
	"Catalog Error":         bindings.ErrorTypeCatalog,
	"Conversion Error":      bindings.ErrorTypeConversion,
	"Invalid Input Error":   bindings.ErrorTypeInvalidInput,
	"Permission Error":      bindings.ErrorTypePermission,
	"INTERRUPT Error":       bindings.ErrorTypeInterrupt,
	"Out of Memory Error":   bindings.ErrorTypeOutOfMemory,
	"Not implemented Error": bindings.ErrorTypeNotImplemented,
	"Invalid Error":         bindings.ErrorTypeInvalid,
	"Syntax Error":          bindings.ErrorTypeSyntax,
	"IO Error":              bindings.ErrorTypeErrorIO,
}

// messageError types an error DuckDB gave only as text.
func messageError(msg string) error {
	prefix, _, _ := strings.Cut(msg, ":")
	typ, ok := messagePrefixes[prefix]
	if !ok {
		typ = bindings.ErrorTypeInternal
	}
	return &duckError{typ: typ, msg: msg}
}

// withContext reports a cancelled context rather than DuckDB's interrupt.
func withContext(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		var de *duckError
		if errors.As(err, &de) && de.typ == bindings.ErrorTypeInterrupt {
			return ctx.Err()
		}
	}
	return err
}

// sqlString quotes s as an SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlIdent quotes s as an SQL identifier.
func sqlIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
