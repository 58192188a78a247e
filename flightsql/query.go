//go:build duckdb_arrow

package flightsql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	bindings "github.com/duckdb/duckdb-go-bindings"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/flightserver/reqerr"
)

// stmtHandle is the statement handle inside a TicketStatementQuery: the
// text, the table versions the plan used (so that every endpoint and a
// re-run see one snapshot), and the bound parameter values. Tickets are
// stateless: any server over the same root can serve them.
type stmtHandle struct {
	ID       string            `json:"id"`
	Query    string            `json:"q"`
	Versions map[string]uint64 `json:"v,omitempty"`
	// Rows are the bound parameter rows, executed in order into one
	// stream (none: one execution without parameters).
	Rows [][]wireValue `json:"a,omitempty"`
	// Schema, when set, is the IPC schema the stream must have: with
	// several parameter rows, DuckDB types a column fed by a NULL parameter
	// as INTEGER where other rows give it its real type (see unifySchemas).
	Schema []byte `json:"s,omitempty"`
}

// rowKey is the key of a ticket's one parameter row in the ready cache
// ("" without parameters; see rowsKey).
func (h *stmtHandle) rowKey() string {
	if len(h.Rows) != 1 {
		return ""
	}
	b, _ := json.Marshal(h.Rows[0]) // strings only: cannot fail
	return string(b)
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// GetFlightInfoStatement plans a query and returns one endpoint whose
// ticket pins the plan's table versions.
func (s *Server) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if len(cmd.GetTransactionId()) > 0 {
		return nil, errNoTransactions()
	}
	return s.flightInfo(ctx, cmd.GetQuery(), [][]any{nil}, desc)
}

// GetSchemaStatement returns the schema a query's result will have.
func (s *Server) GetSchemaStatement(ctx context.Context, cmd flightsql.StatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if len(cmd.GetTransactionId()) > 0 {
		return nil, errNoTransactions()
	}
	d, err := s.describe(ctx, cmd.GetQuery(), nil, nil)
	if err != nil {
		return nil, err
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(d.schema, s.alloc)}, nil
}

// flightInfo plans q once per parameter row and returns one endpoint that
// runs every row in order. (One endpoint, not one per row: JDBC opens
// every endpoint at once, and the ADBC Go driver 1.12.0 races on shared
// call options when it fetches several.)
func (s *Server) flightInfo(ctx context.Context, q string, rows [][]any, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	info := &flight.FlightInfo{FlightDescriptor: desc, TotalRecords: -1, TotalBytes: -1, Ordered: true}
	if len(rows) == 1 {
		rq, err := s.prepareReady(ctx, q, rows[0])
		if err != nil {
			return nil, err
		}
		if rq != nil {
			h := stmtHandle{ID: newID(), Query: q, Versions: rq.plan.versions}
			info.Schema = flight.SerializeSchema(rq.schema, s.alloc)
			if rows[0] != nil {
				w, err := encodeArgs(rows[0])
				if err != nil {
					rq.close()
					return nil, err
				}
				// A DoGet that finds no started query runs it from the
				// ticket, in the FlightInfo's schema.
				h.Rows, h.Schema = [][]wireValue{w}, info.Schema
			}
			if info.Endpoint, err = s.endpointOf(&h); err != nil {
				rq.close()
				return nil, err
			}
			if s.ready.beforePut != nil {
				s.ready.beforePut(ctx)
			}
			if err := ctx.Err(); err != nil {
				// The client gave up while the query was being started:
				// no DoGet will come for it.
				rq.close()
				return nil, status.FromContextError(err).Err()
			}
			if rq.started() {
				conn, _ := guard.ConnContext(ctx)
				s.ready.put(h.ID, rq, conn)
			}
			return info, nil
		}
	}
	schemas := make([]*arrow.Schema, len(rows))
	var versions map[string]uint64
	untyped := false
	for i, args := range rows {
		d, err := s.describe(ctx, q, args, versions)
		if err != nil {
			return nil, err
		}
		schemas[i] = d.schema
		untyped = untyped || d.untyped
		if i == 0 {
			versions = d.plan.versions
		}
	}
	unified := unifySchemas(schemas, rows)
	info.Schema = flight.SerializeSchema(unified, s.alloc)
	h := stmtHandle{ID: newID(), Query: q, Versions: versions}
	if untyped {
		// DoGet's batches must match the FlightInfo exactly (names too:
		// the ADBC drivers compare schemas).
		h.Schema = info.Schema
	}
	for i, args := range rows {
		if !schemas[i].Equal(unified) {
			h.Schema = info.Schema
		}
		if args == nil {
			continue
		}
		w, err := encodeArgs(args)
		if err != nil {
			return nil, err
		}
		h.Rows = append(h.Rows, w)
	}
	var err error
	if info.Endpoint, err = s.endpointOf(&h); err != nil {
		return nil, err
	}
	return info, nil
}

// endpointOf is the one endpoint of a statement: its ticket carries h.
// The ticket does not expire: a query GetFlightInfo started ahead for it
// is stopped when nobody fetched it within TicketTimeout, and a later
// DoGet of the ticket runs the query itself (on the snapshot the ticket
// pins), so a slow client loses nothing but the head start.
func (s *Server) endpointOf(h *stmtHandle) ([]*flight.FlightEndpoint, error) {
	raw, err := json.Marshal(h)
	if err != nil {
		return nil, internalf("%v", err)
	}
	tkt, err := flightsql.CreateStatementQueryTicket(raw)
	if err != nil {
		return nil, internalf("%v", err)
	}
	return []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}}, nil
}

// unifySchemas is the one schema of several executions of a statement.
// The rows come from one bound batch, so they differ only in which values
// are NULL; DuckDB types a parameter bound to NULL without context as
// INTEGER, so the schema is that of the first row without NULLs (the
// first row if every row has one), all columns nullable. A column fed by
// a NULL then holds only NULLs, which conform converts.
func unifySchemas(schemas []*arrow.Schema, rows [][]any) *arrow.Schema {
	ref := 0
	for i, args := range rows {
		if !slices.Contains(args, nil) {
			ref = i
			break
		}
	}
	base := schemas[ref]
	fields := slices.Clone(base.Fields())
	for i := range fields {
		fields[i].Nullable = true
	}
	md := base.Metadata()
	return arrow.NewSchema(fields, &md)
}

// conform returns rec in target's schema: a column of another type that
// holds only NULLs becomes a NULL column of target's type; rec is
// released.
func conform(rec arrow.RecordBatch, target *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	if rec.Schema().Equal(target) {
		return rec, nil
	}
	defer rec.Release()
	if rec.Schema().NumFields() != target.NumFields() {
		return nil, fmt.Errorf("result has %d columns, the statement's schema %d", rec.Schema().NumFields(), target.NumFields())
	}
	cols := make([]arrow.Array, target.NumFields())
	for i, f := range target.Fields() {
		c := rec.Column(i)
		switch {
		case arrow.TypeEqual(c.DataType(), f.Type):
			c.Retain()
			cols[i] = c
		case c.NullN() == c.Len():
			// The target type comes from the ticket, which the client
			// holds: a forged fixed_size_binary(2^31-1) would have the
			// server allocate terabytes.
			if n := nullFillBytes(f.Type, c.Len()); n > maxNullFill {
				for _, c := range cols[:i] {
					c.Release()
				}
				return nil, fmt.Errorf("column %s: the statement's schema says %s, whose NULLs would take %d bytes a batch", f.Name, f.Type, n)
			}
			cols[i] = array.MakeArrayOfNull(mem, f.Type, c.Len())
		default:
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, fmt.Errorf("column %s is %s, the statement's schema says %s", f.Name, c.DataType(), f.Type)
		}
	}
	out := array.NewRecordBatch(target, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// maxNullFill bounds what conform allocates for one column of NULLs: more
// than any type DuckDB produces needs for a batch.
const maxNullFill = 64 << 20

// nullFillBytes is about what array.MakeArrayOfNull allocates for n NULLs
// of dt, saturating instead of overflowing.
func nullFillBytes(dt arrow.DataType, n int) int64 {
	mul := func(a, b int64) int64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		if a > math.MaxInt64/b {
			return math.MaxInt64
		}
		return a * b
	}
	add := func(a, b int64) int64 {
		if a > math.MaxInt64-b {
			return math.MaxInt64
		}
		return a + b
	}
	rows := int64(n)
	switch t := dt.(type) {
	case *arrow.FixedSizeBinaryType:
		return mul(int64(t.ByteWidth), rows)
	case *arrow.FixedSizeListType:
		return nullFillBytes(t.Elem(), int(min(mul(int64(t.Len()), rows), math.MaxInt32)))
	case *arrow.StructType:
		total := rows / 8
		for _, f := range t.Fields() {
			total = add(total, nullFillBytes(f.Type, n))
		}
		return total
	case arrow.FixedWidthDataType:
		return mul(int64(max(t.BitWidth(), 8)/8), rows)
	}
	return mul(8, rows+1) // offsets
}

// prepareOn plans q on a connection of the pool, creates what the plan
// needs and prepares the statement (or finds it prepared on that
// connection). The caller frees ps with sess.drop and closes sess.
func (s *Server) prepareOn(ctx context.Context, q string, args []any, pinned map[string]uint64) (*session, *queryPlan, bindings.PreparedStatement, error) {
	var ps bindings.PreparedStatement
	sess, err := s.pool.get(ctx, q)
	if err != nil {
		return nil, nil, ps, s.sqlStatus(err)
	}
	plan, err := s.planQuery(ctx, sess, q, args, pinned)
	if err == nil {
		err = s.setup(ctx, sess, plan)
	}
	if err == nil {
		if ps, err = sess.prepareCached(q, plan.text); err != nil {
			err = s.sqlStatus(err)
		}
	}
	if err != nil {
		sess.close()
		return nil, nil, ps, err
	}
	return sess, plan, ps, nil
}

// setup creates the plan's views and temporary tables. It looks at ctx
// before each statement: DuckDB forgets an interrupt that reaches it
// before a statement starts, so a statement begun after a cancel would
// otherwise run to its end.
func (s *Server) setup(ctx context.Context, sess *session, plan *queryPlan) error {
	for _, st := range plan.setup {
		if err := ctx.Err(); err != nil {
			return s.sqlStatus(err)
		}
		if err := sess.exec(ctx, st); err != nil {
			return s.sqlStatus(err)
		}
	}
	return nil
}

// DoGetStatement runs the query of a ticket on the snapshot it pins, once
// per bound parameter row, and streams the results in batches of about
// BatchRows rows.
func (s *Server) DoGetStatement(ctx context.Context, tkt flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	var h stmtHandle
	if err := json.Unmarshal(tkt.GetStatementHandle(), &h); err != nil || h.Query == "" {
		return nil, nil, invalidf("the ticket is not a tsflight statement ticket")
	}
	if len(h.Rows) > MaxParameterRows {
		// Tickets are the client's: the cap of DoPutPreparedStatementQuery
		// holds here too.
		return nil, nil, reqerr.Errorf(reqerr.ErrResourceExhausted, "the ticket carries %d parameter rows; at most %d (each row is one execution)", len(h.Rows), MaxParameterRows)
	}
	rows := [][]any{nil}
	if len(h.Rows) > 0 {
		rows = rows[:0]
		for _, w := range h.Rows {
			args, err := decodeArgs(w)
			if err != nil {
				return nil, nil, err
			}
			rows = append(rows, args)
		}
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	if !s.startRun(h.ID, cancel) {
		cancel()
		return nil, nil, reqerr.Errorf(context.Canceled, "the query was cancelled (CancelFlightInfo)")
	}
	fail := func(err error) (*arrow.Schema, <-chan flight.StreamChunk, error) {
		s.endRun(h.ID)
		cancel()
		return nil, nil, err
	}
	var sess *session
	var rdr array.RecordReader
	var target *arrow.Schema
	var err error
	var rq *readyQuery
	if len(h.Rows) <= 1 { // GetFlightInfo starts statements of at most one parameter row
		rq = s.ready.take(h.ID, h.Query, h.rowKey())
	}
	if rq != nil {
		// GetFlightInfo started it: wait for its result.
		s.logPlan(h.ID, rq.plan)
		if rdr, err = rq.await(ctx); err != nil {
			return fail(s.sqlStatus(err))
		}
		sess, target = rq.sess, rq.schema
	} else {
		if sess, err = s.pool.get(ctx, h.Query); err != nil {
			return fail(s.sqlStatus(err))
		}
		if rdr, err = s.run(ctx, sess, &h, rows[0]); err != nil {
			sess.close()
			return fail(err)
		}
		target = rdr.Schema()
	}
	if h.Schema != nil {
		if target, err = flight.DeserializeSchema(h.Schema, s.alloc); err != nil {
			rdr.Release()
			sess.close()
			return fail(invalidf("the ticket's schema is malformed: %v", err))
		}
	}
	ch := make(chan flight.StreamChunk, 1)
	go func() {
		defer close(ch)
		defer s.endRun(h.ID)
		defer cancel()
		defer sess.close()
		// This goroutine is outside the handler: a panic here would end
		// the process instead of the call. Turn it into the call's error.
		var current array.RecordReader // the reader being streamed, released on a panic
		defer func() {
			if p := recover(); p != nil {
				if current != nil {
					current.Release()
				}
				s.log.Error("result stream panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				sendChunk(parent, ch, flight.StreamChunk{Err: internalf("internal error streaming the result (see the server log)")})
			}
		}()
		if hook := streamTestHook.Load(); hook != nil {
			(*hook)()
		}
		budget := &rowBudget{max: s.opts.MaxResultRows}
		current = rdr
		ok := s.stream(ctx, rdr, target, ch, budget)
		current = nil
		rdr.Release()
		for _, args := range rows[1:] {
			if !ok {
				break
			}
			next, err := s.run(ctx, sess, &h, args)
			if err != nil {
				sendChunk(ctx, ch, flight.StreamChunk{Err: err})
				return
			}
			current = next
			ok = s.stream(ctx, next, target, ch, budget)
			current = nil
			next.Release()
		}
		if ctx.Err() != nil && parent.Err() == nil {
			// CancelFlightInfo stopped the query while the client still
			// reads: tell it, rather than ending the stream as if complete.
			sendChunk(parent, ch, flight.StreamChunk{Err: reqerr.Errorf(context.Canceled, "the query was cancelled (CancelFlightInfo)")})
		}
	}()
	return target, ch, nil
}

// streamTestHook, when set (by tests only), runs at the start of every
// result stream's goroutine.
var streamTestHook atomic.Pointer[func()]

// run plans one execution of a ticket's statement on sess, creates its
// views and starts it.
func (s *Server) run(ctx context.Context, sess *session, h *stmtHandle, args []any) (array.RecordReader, error) {
	plan, err := s.planQuery(ctx, sess, h.Query, args, h.Versions)
	if err == nil {
		err = s.setup(ctx, sess, plan)
	}
	if err != nil {
		return nil, err
	}
	s.logPlan(h.ID, plan)
	if plan.direct != nil {
		if rdr, ok, err := s.runDirect(ctx, sess, plan); err != nil || ok {
			return rdr, err
		}
	}
	rdr, err := sess.queryCached(ctx, h.Query, plan.text, plan.bindArgs(args))
	if err != nil {
		return nil, s.sqlStatus(err)
	}
	return rdr, nil
}

// logPlan logs, per table, the segments an execution planned and pruned.
func (s *Server) logPlan(id string, plan *queryPlan) {
	for _, t := range plan.tables {
		kv := []any{"query_id", id, "table", t.Name, "version", t.Version,
			"segments", t.Segments, "planned", t.Planned, "pruned", t.Segments - t.Planned, "last_values", t.LastValues, "direct", t.Direct}
		if t.Ref != "" {
			kv = append(kv, "ref", t.Ref)
		}
		s.log.Debug("sql plan", kv...)
	}
}

// sendChunk sends c unless ctx ends first (then c's data is released).
func sendChunk(ctx context.Context, ch chan<- flight.StreamChunk, c flight.StreamChunk) bool {
	select {
	case ch <- c:
		return true
	case <-ctx.Done():
		if c.Data != nil {
			c.Data.Release()
		}
		return false
	}
}

// rowBudget counts the rows a query execution has returned against
// Options.MaxResultRows (max 0: no limit).
type rowBudget struct {
	max, sent int64
}

// take admits rec's rows. When they would pass the limit it returns the
// rows still allowed (the caller sends that much of rec) and the error that
// then ends the stream.
func (b *rowBudget) take(rec arrow.RecordBatch) (int64, error) {
	n := rec.NumRows()
	if b.max <= 0 || b.sent+n <= b.max {
		b.sent += n
		return n, nil
	}
	keep := b.max - b.sent
	b.sent = b.max
	return keep, reqerr.Errorf(reqerr.ErrResourceExhausted, "the query returns more than the server's limit of %d rows (--max-result-rows); the first %d rows were sent: add a LIMIT, narrow the WHERE clause or aggregate", b.max, b.max)
}

// stream merges DuckDB's small chunks into batches of target's schema and
// sends them until the result ends (true), fails or ctx is cancelled. The
// chunks are grouped as DoGet groups scan batches (flightserver.Batcher):
// a batch of about BatchRows rows, under BatchBytes unless one chunk alone
// is larger.
func (s *Server) stream(ctx context.Context, rdr array.RecordReader, target *arrow.Schema, ch chan<- flight.StreamChunk, budget *rowBudget) bool {
	b := flightserver.NewBatcher(int64(s.opts.BatchRows), s.opts.BatchBytes)
	defer b.Release()
	send := func(c flight.StreamChunk) bool { return sendChunk(ctx, ch, c) }
	// sendGroup sends one group as one batch; errStreamEnded stops the
	// stream once its end (or an error) was sent or ctx was cancelled.
	sendGroup := func(group []arrow.RecordBatch) error {
		var rec arrow.RecordBatch
		var err error
		if len(group) == 1 {
			rec = group[0] // nothing to merge: send DuckDB's batch itself
		} else {
			rec, err = flightserver.ConcatBatches(group, s.alloc)
			for _, p := range group {
				p.Release()
			}
		}
		if err != nil {
			send(flight.StreamChunk{Err: internalf("merging result batches: %v", err)})
			return errStreamEnded
		}
		if rec, err = conform(rec, target, s.alloc); err != nil {
			// The target schema travels in the ticket, which the client
			// holds and may have edited.
			send(flight.StreamChunk{Err: invalidf("the result does not fit the ticket's schema (a ticket from GetFlightInfo is used as it came): %v", err)})
			return errStreamEnded
		}
		keep, over := budget.take(rec)
		if over == nil {
			n := rec.NumRows()
			if !send(flight.StreamChunk{Data: rec}) {
				return errStreamEnded
			}
			s.svc.CountRows(flightserver.ViaSQL, n)
			return nil
		}
		if keep > 0 {
			head := rec.NewSlice(0, keep)
			rec.Release()
			if !send(flight.StreamChunk{Data: head}) {
				return errStreamEnded
			}
			s.svc.CountRows(flightserver.ViaSQL, keep)
		} else {
			rec.Release()
		}
		send(flight.StreamChunk{Err: over})
		return errStreamEnded
	}
	for rdr.Next() {
		if b.Add(rdr.RecordBatch(), sendGroup) != nil {
			return false
		}
	}
	if err := rdr.Err(); err != nil {
		send(flight.StreamChunk{Err: s.sqlStatus(err)})
		return false
	}
	return b.Flush(sendGroup) == nil
}

// errStreamEnded tells a Batcher that stream sent the stream's end.
var errStreamEnded = errors.New("the result stream ended")

// startRun registers a running query so CancelFlightInfo can stop it; it
// reports false when the query was cancelled before it started.
func (s *Server) startRun(id string, cancel context.CancelFunc) bool {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	if _, gone := s.cancelled[id]; gone {
		return false
	}
	s.running[id] = cancel
	s.queriesRunning.Add(1)
	return true
}

// endRun ends what a startRun that reported true started.
func (s *Server) endRun(id string) {
	s.queriesRunning.Add(-1)
	s.cancelMu.Lock()
	delete(s.running, id)
	s.cancelMu.Unlock()
}
