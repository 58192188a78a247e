//go:build duckdb_arrow

package flightsql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
	"unsafe"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/tsflight/tsflight/tableformat"
)

// Loading ts_gaps' rows. A call can answer 500,000 rows (tsGapsMax). As
// INSERT … VALUES statements of CAST literals, a thousand rows each,
// DuckDB spent some 50 µs a row parsing and binding them, and a cancel
// stopped little: the statements that began after it ran to their end
// (an interrupt that reaches DuckDB before a statement executes is lost). Instead the rows
// are appended to a staging table by a DuckDB appender, one vector of
// 2048 rows at a time, written straight into DuckDB's memory with nothing
// to parse, and the request's context is checked between vectors. What
// is left for the query's setup is a copy of the table, one statement
// that DuckDB interrupts.
//
// The statements a table function returns run later on the query's own
// connection (Server.setup), which a table function does not see, and
// that connection's temporary tables are its own. So the staging table is
// an ordinary table of the engine's database, created and filled on a
// connection of its own under a random name no client statement can reach
// (verifyRewrite admits only the plan's names); the setup copies it into
// the query's temporary table and drops it. When the setup never gets
// that far (the plan failed later, or the query was cancelled first), the
// staging connection drops it when the request's context ends.

// stagePrefix starts the name of every staging table.
const stagePrefix = "__tsflight_stage_"

// stageGaps creates a staging table of gaps (columns gapsColumns, the index
// columns of SQL type indexSQLType(typ)) and returns its name.
func (s *Server) stageGaps(ctx context.Context, typ tableformat.IndexType, gaps []tableformat.Span) (string, error) {
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", internalf("ts_gaps: naming a staging table: %v", err)
	}
	name := stagePrefix + hex.EncodeToString(nonce[:])
	sess, err := s.engine.open(ctx)
	if err != nil {
		return "", s.sqlStatus(err)
	}
	idx := indexSQLType(typ)
	ddl := "CREATE TABLE " + sqlIdent(name) + " (" + sqlIdent(gapsColumns[0]) + " " + idx + ", " + sqlIdent(gapsColumns[1]) + " " + idx + ", " +
		sqlIdent(gapsColumns[2]) + " BOOLEAN, " + sqlIdent(gapsColumns[3]) + " UBIGINT)"
	// The drop must run whatever became of the request (its context may
	// be cancelled). The connection keeps DuckDB's database alive, so it
	// is safe even after the engine closed.
	drop := func() {
		_ = sess.exec(context.Background(), "DROP TABLE IF EXISTS "+sqlIdent(name))
		sess.close()
	}
	err = sess.exec(ctx, ddl)
	if err == nil {
		err = appendGaps(ctx, sess, name, typ, gaps)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		drop()
		return "", s.sqlStatus(err)
	}
	context.AfterFunc(ctx, drop)
	return name, nil
}

// appendGaps appends gaps to table through an appender on sess, a vector
// at a time, and stops with ctx's error when ctx ends.
func appendGaps(ctx context.Context, sess *session, table string, typ tableformat.IndexType, gaps []tableformat.Span) error {
	var app bindings.Appender
	if bindings.AppenderCreateExt(sess.conn, "", "main", table, &app) == bindings.StateError {
		err := appenderError(app)
		bindings.AppenderDestroy(&app)
		return err
	}
	defer bindings.AppenderDestroy(&app)
	kinds := []bindings.Type{bindings.TypeTimestampTZ, bindings.TypeTimestampTZ, bindings.TypeBoolean, bindings.TypeUBigInt}
	switch typ {
	case tableformat.IndexInt64:
		kinds[0], kinds[1] = bindings.TypeBigInt, bindings.TypeBigInt
	case tableformat.IndexUInt64:
		kinds[0], kinds[1] = bindings.TypeUBigInt, bindings.TypeUBigInt
	}
	types := make([]bindings.LogicalType, len(kinds))
	for i, k := range kinds {
		types[i] = bindings.CreateLogicalType(k)
	}
	chunk := bindings.CreateDataChunk(types)
	for i := range types {
		bindings.DestroyLogicalType(&types[i])
	}
	defer bindings.DestroyDataChunk(&chunk)
	size := int(bindings.VectorSize())
	for lo := 0; lo < len(gaps); lo += size {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := gaps[lo:min(lo+size, len(gaps))]
		bindings.DataChunkReset(chunk)
		if err := fillGaps(chunk, typ, batch, size); err != nil {
			return err
		}
		bindings.DataChunkSetSize(chunk, bindings.IdxT(len(batch)))
		if bindings.AppendDataChunk(app, chunk) == bindings.StateError {
			return appenderError(app)
		}
	}
	if bindings.AppenderClose(app) == bindings.StateError {
		return appenderError(app)
	}
	return nil
}

// fillGaps writes batch (at most size rows) into chunk's vectors.
func fillGaps(chunk bindings.DataChunk, typ tableformat.IndexType, batch []tableformat.Span, size int) error {
	vector := func(i int) unsafe.Pointer {
		return bindings.VectorGetData(bindings.DataChunkGetVector(chunk, bindings.IdxT(i)))
	}
	incl := unsafe.Slice((*bool)(vector(2)), size)
	ivs := unsafe.Slice((*uint64)(vector(3)), size)
	for i, g := range batch {
		incl[i], ivs[i] = g.EndInclusive, g.Intervals
	}
	switch typ {
	case tableformat.IndexUInt64:
		starts, ends := unsafe.Slice((*uint64)(vector(0)), size), unsafe.Slice((*uint64)(vector(1)), size)
		for i, g := range batch {
			starts[i], ends[i] = g.Start.Uint, g.End.Uint
		}
	case tableformat.IndexInt64:
		starts, ends := unsafe.Slice((*int64)(vector(0)), size), unsafe.Slice((*int64)(vector(1)), size)
		for i, g := range batch {
			starts[i], ends[i] = g.Start.Int, g.End.Int
		}
	default:
		starts, ends := unsafe.Slice((*int64)(vector(0)), size), unsafe.Slice((*int64)(vector(1)), size)
		for i, g := range batch {
			a, ok1 := timestampMicros(g.Start)
			b, ok2 := timestampMicros(g.End)
			if !ok1 || !ok2 {
				return invalidf("ts_gaps: the gap %s has a bound SQL cannot hold as a timestamp (years 0 to 9999); narrow the range", g)
			}
			starts[i], ends[i] = a, b
		}
	}
	return nil
}

// timestampMicros is v as DuckDB's TIMESTAMPTZ holds it: microseconds
// since the epoch, the nanoseconds dropped (rounded down, as DuckDB reads
// the fraction of a timestamp's text). ok is false for a value that is not
// a timestamp or lies outside the years 0 to 9999, which the text form
// this function replaced (an RFC 3339 string) could not express to DuckDB
// either.
func timestampMicros(v tableformat.IndexValue) (int64, bool) {
	if v.Type != tableformat.IndexTimestamp || v.Time.Before(firstStamp) || !v.Time.Before(pastStamps) {
		return 0, false
	}
	return v.Time.UnixMicro(), true
}

// The years timestampMicros accepts: [0000-01-01, 10000-01-01).
var (
	firstStamp = time.Date(0, time.January, 1, 0, 0, 0, 0, time.UTC)
	pastStamps = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// appenderError is the error an appender reports.
func appenderError(app bindings.Appender) error {
	if app.Ptr == nil {
		return errors.New("DuckDB: cannot create an appender")
	}
	ed := bindings.AppenderErrorData(app)
	if err := errorData(&ed); err != nil {
		return err
	}
	return errors.New("DuckDB: the appender failed")
}
