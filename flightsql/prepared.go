//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	bindings "github.com/duckdb/duckdb-go-bindings"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// prepared is an open prepared statement: its text, schemas and the
// parameter rows bound last (one execution per row).
type prepared struct {
	query    string
	dataset  *arrow.Schema
	params   *arrow.Schema
	nparams  int
	rows     [][]any
	lastUsed time.Time
	// owner is the caller that prepared it (flightserver.Principal name;
	// "" without authentication): only that caller may use or close it.
	owner string
	// bytes is what the store accounts for it: the text and the bound
	// rows (see preparedBytes).
	bytes int64
}

// preparedStore holds the open prepared statements, bounded in number,
// in bytes (text and bound parameters) and in idle time. One owner holds
// at most a quarter of either bound.
type preparedStore struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	idle     time.Duration
	m        map[string]*prepared
	held     int64 // bytes of the statements in m
}

// init empties the store and sets its bounds; the byte bound is
// DefaultMaxPreparedBytes until limitBytes changes it.
func (p *preparedStore) init(max int, idle time.Duration) {
	p.max, p.maxBytes, p.idle, p.m, p.held = max, DefaultMaxPreparedBytes, idle, map[string]*prepared{}, 0
}

// limitBytes sets the byte bound (before the store is used).
func (p *preparedStore) limitBytes(n int64) { p.maxBytes = n }

// share is what one owner may hold: a quarter of the store.
func (p *preparedStore) share() (int, int64) { return max(1, p.max/4), max(1, p.maxBytes/4) }

// remove forgets the statement k (call with the lock held).
func (p *preparedStore) remove(k string) {
	if v, ok := p.m[k]; ok {
		p.held -= v.bytes
		delete(p.m, k)
	}
}

// expire drops the statements idle for longer than the idle time.
func (p *preparedStore) expire(now time.Time) {
	for k, v := range p.m {
		if now.Sub(v.lastUsed) > p.idle {
			p.remove(k)
		}
	}
}

// owned is the count and bytes of owner's statements.
func (p *preparedStore) owned(owner string) (n int, bytes int64) {
	for _, v := range p.m {
		if v.owner == owner {
			n++
			bytes += v.bytes
		}
	}
	return n, bytes
}

// evictOldest forgets the least recently used statement (of owner when
// mine) other than keep; it reports false when there is none.
func (p *preparedStore) evictOldest(mine bool, owner, keep string) bool {
	var oldest string
	for k, v := range p.m {
		if k != keep && (!mine || v.owner == owner) && (oldest == "" || v.lastUsed.Before(p.m[oldest].lastUsed)) {
			oldest = k
		}
	}
	if oldest == "" {
		return false
	}
	p.remove(oldest)
	return true
}

// errPreparedBytes refuses a statement that alone would pass its owner's
// byte share. The refusal is the store's answer (put, bind) and a status
// already: the store is used, and tested, as a unit.
func (p *preparedStore) errPreparedBytes(what string, n int64) error {
	_, share := p.share()
	return flightserver.Status(reqerr.Errorf(reqerr.ErrResourceExhausted, "%s would hold %s in the server, over the prepared-statement budget of %s per caller (a quarter of the server's %s, --sql-prepared-bytes): send a shorter text or bind fewer or smaller parameter rows",
		what, formatBytes(n), formatBytes(share), formatBytes(p.maxBytes)))
}

// put stores ps under h. When the store is full (in number or bytes) the
// least recently used statement goes, the oldest of ps's owner first once
// that owner holds a quarter of the store: one caller cannot push
// everyone else's statements out. A statement larger than an owner's
// byte share is refused.
func (p *preparedStore) put(h string, ps *prepared) error {
	ps.bytes = preparedBytes(ps.query, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	share, byteShare := p.share()
	if ps.bytes > byteShare {
		return p.errPreparedBytes("the statement's text", ps.bytes)
	}
	now := time.Now()
	ps.lastUsed = now
	p.expire(now)
	for n, b := p.owned(ps.owner); n >= share || b+ps.bytes > byteShare; n, b = p.owned(ps.owner) {
		p.evictOldest(true, ps.owner, "")
	}
	for len(p.m) >= p.max || p.held+ps.bytes > p.maxBytes {
		if !p.evictOldest(false, "", "") {
			break
		}
	}
	p.m[h] = ps
	p.held += ps.bytes
	return nil
}

// bind replaces the bound rows of ps (stored under h), whose values take
// rowBytes, evicting the least recently used other statements as put
// does to make room.
func (p *preparedStore) bind(h string, ps *prepared, rows [][]any, rowBytes int64) error {
	n := preparedBytes(ps.query, rowBytes)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[h] != ps {
		return errUnknownPrepared // closed or evicted meanwhile
	}
	_, byteShare := p.share()
	if n > byteShare {
		return p.errPreparedBytes("the statement with its bound parameters", n)
	}
	for _, b := p.owned(ps.owner); b-ps.bytes+n > byteShare; _, b = p.owned(ps.owner) {
		if !p.evictOldest(true, ps.owner, h) {
			break
		}
	}
	for p.held-ps.bytes+n > p.maxBytes {
		if !p.evictOldest(false, "", h) {
			break
		}
	}
	p.held += n - ps.bytes
	ps.bytes, ps.rows = n, rows
	ps.lastUsed = time.Now()
	return nil
}

// heldBytes is the bytes the store accounts for now.
func (p *preparedStore) heldBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// preparedBytes is what a statement with text q and bound values of
// rowBytes holds: the text twice (the statement and the analysis cache's
// key may be separate copies), the values and a fixed overhead for the
// schemas and the entry.
func preparedBytes(q string, rowBytes int64) int64 {
	return 2*int64(len(q)) + rowBytes + 1024
}

// valueBytes is what one bound row holds in Go: the slice, an interface
// per value and the bytes of strings and blobs.
func rowBytes(row []any) int64 {
	n := int64(24 + 16*len(row))
	for _, v := range row {
		switch x := v.(type) {
		case string:
			n += int64(len(x))
		case []byte:
			n += int64(len(x))
		case time.Time:
			n += 24
		case int64, uint64, float64:
			n += 8
		}
	}
	return n
}

// formatBytes renders n for a message: 256 MiB, 1.5 GiB, 900 bytes.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(math.Round(float64(n)/(1<<30)*10)/10, 'f', -1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(math.Round(float64(n)/(1<<20)*10)/10, 'f', -1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(math.Round(float64(n)/(1<<10)*10)/10, 'f', -1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// MaxParameterRows bounds the parameter rows bound to one prepared
// statement (each is one execution of it).
const MaxParameterRows = 10_000

// errUnknownPrepared is the answer for a handle that is not the caller's.
var errUnknownPrepared = reqerr.Errorf(tableformat.ErrNotFound, "unknown or expired prepared statement handle (prepare the statement again)")

func (p *preparedStore) get(ctx context.Context, h []byte) (*prepared, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, ok := p.m[string(h)]
	if ok && time.Since(ps.lastUsed) > p.idle {
		p.remove(string(h))
		ok = false
	}
	if !ok || ps.owner != callerName(ctx) {
		return nil, errUnknownPrepared
	}
	ps.lastUsed = time.Now()
	return ps, nil
}

func (p *preparedStore) drop(ctx context.Context, h []byte) {
	p.mu.Lock()
	if ps, ok := p.m[string(h)]; ok && ps.owner == callerName(ctx) {
		p.remove(string(h))
	}
	p.mu.Unlock()
}

// callerName names the caller of ctx's call ("" without authentication).
func callerName(ctx context.Context) string {
	if p, ok := guard.PrincipalFromContext(ctx); ok && p.Via != "none" {
		return p.Via + ":" + p.ID // ids, not names: two tokens may share a name
	}
	return ""
}

func errNoTransactions() error {
	return invalidf("tsflight has no transactions (SqlInfo FLIGHT_SQL_SERVER_TRANSACTION is NONE): send the request without a transaction id")
}

// CreatePreparedStatement plans the query (refusing anything but a query)
// and returns its dataset and parameter schemas; is_update is false.
func (s *Server) CreatePreparedStatement(ctx context.Context, req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	var res flightsql.ActionCreatePreparedStatementResult
	if len(req.GetTransactionId()) > 0 {
		return res, errNoTransactions()
	}
	q := req.GetQuery()
	d, err := s.describe(ctx, q, nil, nil)
	if err != nil {
		return res, err
	}
	params := paramSchema(d.plan, d.params)
	h := newID()
	if err := s.prepared.put(h, &prepared{query: q, dataset: d.schema, params: params, nparams: d.plan.declared, owner: callerName(ctx)}); err != nil {
		return res, err
	}
	isUpdate := false
	return flightsql.ActionCreatePreparedStatementResult{Handle: []byte(h), DatasetSchema: d.schema, ParameterSchema: params, IsUpdate: &isUpdate}, nil
}

// paramSchema is the parameter schema of a prepared statement: one field
// per "?" of the original text, typed as DuckDB inferred it (types are of
// the rewritten text's parameters).
func paramSchema(plan *queryPlan, types []bindings.Type) *arrow.Schema {
	fields := make([]arrow.Field, plan.declared)
	// The rewritten text's parameters are the original ones that no table
	// function consumed, in order (those keep utf8: they are parsed).
	next := 0
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("parameter_%d", i+1), Type: arrow.BinaryTypes.String, Nullable: true}
		if plan.consumed[i+1] {
			continue
		}
		if next < len(types) {
			if at := arrowParamType(types[next]); at != nil {
				fields[i].Type = at
			}
		}
		next++
	}
	return arrow.NewSchema(fields, nil)
}

// arrowParamType is the Arrow type clients should bind for a DuckDB
// parameter type; nil keeps utf8, which DuckDB casts to anything.
func arrowParamType(t bindings.Type) arrow.DataType {
	switch t {
	case bindings.TypeBoolean:
		return arrow.FixedWidthTypes.Boolean
	case bindings.TypeTinyInt:
		return arrow.PrimitiveTypes.Int8
	case bindings.TypeSmallInt:
		return arrow.PrimitiveTypes.Int16
	case bindings.TypeInteger:
		return arrow.PrimitiveTypes.Int32
	case bindings.TypeBigInt:
		return arrow.PrimitiveTypes.Int64
	case bindings.TypeUTinyInt:
		return arrow.PrimitiveTypes.Uint8
	case bindings.TypeUSmallInt:
		return arrow.PrimitiveTypes.Uint16
	case bindings.TypeUInteger:
		return arrow.PrimitiveTypes.Uint32
	case bindings.TypeUBigInt:
		return arrow.PrimitiveTypes.Uint64
	case bindings.TypeFloat:
		return arrow.PrimitiveTypes.Float32
	case bindings.TypeDouble:
		return arrow.PrimitiveTypes.Float64
	case bindings.TypeBlob:
		return arrow.BinaryTypes.Binary
	case bindings.TypeDate:
		return arrow.FixedWidthTypes.Date32
	case bindings.TypeTimestamp, bindings.TypeTimestampS, bindings.TypeTimestampMS, bindings.TypeTimestampNS:
		// Milliseconds: the Flight SQL JDBC driver writes a bound
		// java.sql.Timestamp as epoch milliseconds whatever unit the
		// schema declares. Other clients bind their own types.
		return &arrow.TimestampType{Unit: arrow.Millisecond}
	case bindings.TypeTimestampTZ:
		return &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	}
	return nil
}

// ClosePreparedStatement forgets a prepared statement.
func (s *Server) ClosePreparedStatement(ctx context.Context, req flightsql.ActionClosePreparedStatementRequest) error {
	s.prepared.drop(ctx, req.GetPreparedStatementHandle())
	return nil
}

// DoPutPreparedStatementQuery binds parameter rows: each row of the
// stream is one execution, their results streamed in order. The handle
// stays the same.
func (s *Server) DoPutPreparedStatementQuery(ctx context.Context, cmd flightsql.PreparedStatementQuery, rdr flight.MessageReader, _ flight.MetadataWriter) ([]byte, error) {
	h := cmd.GetPreparedStatementHandle()
	ps, err := s.prepared.get(ctx, h)
	if err != nil {
		return nil, err
	}
	var rows [][]any
	var held int64 // bytes of rows
	_, byteShare := s.prepared.share()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if int(rec.NumCols()) != ps.nparams {
			return nil, invalidf("the statement has %d parameters, the bound batch has %d columns", ps.nparams, rec.NumCols())
		}
		// Every bound row is one execution, planned on its own, and the
		// rows stay until the statement closes: any read token may bind
		// them (the fifth review held 3.5 GB with 32 M rows).
		if len(rows)+int(rec.NumRows()) > MaxParameterRows {
			return nil, reqerr.Errorf(reqerr.ErrResourceExhausted, "more than %d parameter rows bound to one prepared statement; each row is one execution: bind fewer, or send the values in the query (IN lists, a VALUES join)", MaxParameterRows)
		}
		// A dictionary index beyond its dictionary would panic the value
		// conversion.
		for c, col := range rec.Columns() {
			if err := array.ValidateFull(col); err != nil {
				return nil, invalidf("parameter %d (%s): %v", c+1, rec.Schema().Field(c).Name, err)
			}
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			row := make([]any, rec.NumCols())
			for c := range row {
				v, err := goValue(rec.Column(c), r)
				if err != nil {
					return nil, invalidf("parameter %d (%s): %v", c+1, rec.Schema().Field(c).Name, err)
				}
				row[c] = v
			}
			rows = append(rows, row)
			// Refuse as soon as the rows pass the caller's share, not
			// after holding all of them.
			if held += rowBytes(row); preparedBytes(ps.query, held) > byteShare {
				return nil, s.prepared.errPreparedBytes("the statement with its bound parameters", preparedBytes(ps.query, held))
			}
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, invalidf("reading the parameters: %v", err)
	}
	if ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err := s.prepared.bind(string(h), ps, rows, held); err != nil {
		return nil, err
	}
	return h, nil
}

// boundRows returns the parameter rows to execute with (call with the
// store's lock held: a concurrent DoPut may bind new rows).
func (ps *prepared) boundRows() ([][]any, error) {
	if ps.nparams == 0 {
		return [][]any{nil}, nil
	}
	if len(ps.rows) == 0 {
		return nil, invalidf("the statement has %d parameters and none are bound", ps.nparams)
	}
	return ps.rows, nil
}

// GetFlightInfoPreparedStatement plans the statement once per bound
// parameter row; its one endpoint runs the rows in order.
func (s *Server) GetFlightInfoPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	ps, err := s.prepared.get(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	s.prepared.mu.Lock()
	rows, err := ps.boundRows()
	s.prepared.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.flightInfo(ctx, ps.query, rows, desc)
}

// GetSchemaPreparedStatement returns the dataset schema.
func (s *Server) GetSchemaPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	ps, err := s.prepared.get(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(ps.dataset, s.alloc)}, nil
}

// DoGetPreparedStatement serves a client that sends the prepared
// statement command as a ticket.
func (s *Server) DoGetPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	info, err := s.GetFlightInfoPreparedStatement(ctx, cmd, nil)
	if err != nil {
		return nil, nil, err
	}
	t, err := flightsql.GetStatementQueryTicket(info.Endpoint[0].Ticket)
	if err != nil {
		return nil, nil, internalf("%v", err)
	}
	return s.DoGetStatement(ctx, t)
}

// DoPutPreparedStatementUpdate refuses: tsflight SQL is read-only.
func (s *Server) DoPutPreparedStatementUpdate(context.Context, flightsql.PreparedStatementUpdate, flight.MessageReader) (int64, error) {
	return 0, errReadOnly("executing a prepared statement as an update")
}

// DoPutCommandStatementUpdate refuses: tsflight SQL is read-only.
func (s *Server) DoPutCommandStatementUpdate(_ context.Context, cmd flightsql.StatementUpdate) (int64, error) {
	return 0, errReadOnly(firstWord(cmd.GetQuery()))
}

// CancelFlightInfo stops the queries of a FlightInfo's endpoints: running
// ones are interrupted, the others refuse to start.
func (s *Server) CancelFlightInfo(_ context.Context, req *flight.CancelFlightInfoRequest) (flight.CancelFlightInfoResult, error) {
	info := req.GetInfo()
	if info == nil || len(info.Endpoint) == 0 {
		return flight.CancelFlightInfoResult{}, invalidf("CancelFlightInfo: the request carries no FlightInfo endpoints")
	}
	now := time.Now()
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	for k, t := range s.cancelled {
		if now.Sub(t) > 24*time.Hour {
			delete(s.cancelled, k)
		}
	}
	for _, ep := range info.Endpoint {
		t, err := flightsql.GetStatementQueryTicket(ep.GetTicket())
		var h stmtHandle
		if err != nil || jsonUnmarshal(t.GetStatementHandle(), &h) != nil || !isStatementID(h.ID) {
			return flight.CancelFlightInfoResult{Status: flight.CancelStatusNotCancellable}, nil
		}
		if cancel, ok := s.running[h.ID]; ok {
			cancel()
		}
		if rq := s.ready.take(h.ID, h.Query, h.rowKey()); rq != nil {
			rq.close() // started by GetFlightInfo, not fetched yet
		}
		if len(s.cancelled) >= maxCancelled {
			// Full (of ids clients sent; any read token may cancel): forget
			// some; a forgotten id only lets a ticket nobody fetched run.
			for k := range s.cancelled {
				delete(s.cancelled, k)
				if len(s.cancelled) < maxCancelled/2 {
					break
				}
			}
		}
		s.cancelled[h.ID] = now
	}
	return flight.CancelFlightInfoResult{Status: flight.CancelStatusCancelled}, nil
}

// maxCancelled bounds the cancelled statement ids remembered (24 bytes
// each, plus the time).
const maxCancelled = 1 << 16

// isStatementID reports whether id has the form newID makes: only such ids
// are remembered as cancelled (a forged 40 KB id is not).
func isStatementID(id string) bool {
	if len(id) != 24 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
