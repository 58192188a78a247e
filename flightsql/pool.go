//go:build duckdb_arrow

package flightsql

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	bindings "github.com/duckdb/duckdb-go-bindings"
)

// A query used to cost a new DuckDB connection and a prepare of its
// planned text twice (CreatePreparedStatement or GetFlightInfo describes
// it, the execution prepares it again), and a prepared statement executed
// again paid both every time. Queries therefore run on connections of a
// small pool, each holding the DuckDB prepared statements of the planned
// texts it ran last: a planned text names the exact segments it reads
// (inline read_parquet lists), so a new table version plans a new text and
// is prepared anew, and an unchanged one runs the statement DuckDB
// prepared before.
//
// Only a connection in a known clean state goes back to the pool: its
// statements all ended without error, none was interrupted, and the plans
// it ran created nothing on it (no temporary views or tables: those plans
// hold their setup in connection state). Any other connection is closed
// with its statements, as before. Interrupting a running statement is
// unchanged: each statement has its guard, which calls DuckDB's interrupt
// on the connection when the call's context ends.

const (
	// poolIdleMax bounds the idle connections kept.
	poolIdleMax = 4
	// sessionStmtMax bounds the prepared statements one connection keeps.
	sessionStmtMax = 16
	// sessionStmtMaxText bounds the planned text of a kept statement: a
	// plan over thousands of segments is long, and so is DuckDB's
	// statement of it (4 × 16 of them are kept at most).
	sessionStmtMaxText = 64 << 10
)

// connPool holds idle, clean DuckDB connections.
type connPool struct {
	eng  *engine
	mu   sync.Mutex
	idle []*session // most recently returned last
	// prepares counts the DuckDB prepares of statement texts the
	// sessions cache (metric sql_statements_prepared_total).
	prepares atomic.Int64
	closed   bool
}

// get returns a clean connection, preferring one that ran query (the
// client's text) last, so that its prepared statement is found again.
func (p *connPool) get(ctx context.Context, query string) (*session, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		i := n - 1
		for j := n - 1; j >= 0; j-- {
			if p.idle[j].ran[query] {
				i = j
				break
			}
		}
		s := p.idle[i]
		p.idle = slices.Delete(p.idle, i, i+1)
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	s, err := p.eng.open(ctx)
	if err != nil {
		return nil, err
	}
	s.pool = p
	s.stmts = map[string]bindings.PreparedStatement{}
	s.ran = map[string]bool{}
	return s, nil
}

// put takes back s (clean: see session.reusable); it reports false when
// s is not kept (the pool is full or closed).
func (p *connPool) put(s *session) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if len(p.idle) >= poolIdleMax {
		old := p.idle[0]
		p.idle = p.idle[1:]
		old.destroy()
	}
	p.idle = append(p.idle, s)
	return true
}

// idleCount is the number of idle connections (metric
// sql_connections_idle).
func (p *connPool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// close closes every idle connection; connections returned later are
// closed too.
func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.idle {
		s.destroy()
	}
	p.idle = nil
}

// prepareCached returns the prepared statement of text on s, prepared
// now or kept from an earlier statement (and then, for a pooled session,
// counted). query is the client's text the plan came from. Callers free
// the statement with drop, which keeps cached ones.
func (s *session) prepareCached(query, text string) (bindings.PreparedStatement, error) {
	if s.pool == nil || len(text) > sessionStmtMaxText {
		return s.prepare(text)
	}
	if ps, ok := s.stmts[text]; ok {
		s.touch(text)
		s.ran[query] = true
		return ps, nil
	}
	ps, err := s.prepare(text)
	if err != nil {
		s.broken.Store(true)
		return ps, err
	}
	s.pool.prepares.Add(1)
	if len(s.order) >= sessionStmtMax {
		old := s.order[0]
		s.order = s.order[1:]
		v := s.stmts[old]
		delete(s.stmts, old)
		bindings.DestroyPrepare(&v)
	}
	s.stmts[text] = ps
	s.order = append(s.order, text)
	if len(s.ran) >= 4*sessionStmtMax {
		clear(s.ran)
	}
	s.ran[query] = true
	return ps, nil
}

// touch makes text the most recently used statement.
func (s *session) touch(text string) {
	if i := slices.Index(s.order, text); i >= 0 {
		s.order = append(slices.Delete(s.order, i, i+1), text)
	}
}

// cached reports whether ps is one of s's kept statements.
func (s *session) cached(ps bindings.PreparedStatement) bool {
	for _, v := range s.stmts {
		if v.Ptr == ps.Ptr {
			return true
		}
	}
	return false
}

// drop frees ps unless s keeps it.
func (s *session) drop(ps *bindings.PreparedStatement) {
	if ps.Ptr == nil || s.cached(*ps) {
		return
	}
	bindings.DestroyPrepare(ps)
}

// reusable reports whether s may serve another query: pooled, and
// nothing went wrong on it.
func (s *session) reusable() bool {
	return s.pool != nil && !s.broken.Load()
}

// destroy frees s's statements and closes the connection.
func (s *session) destroy() {
	for k, v := range s.stmts {
		bindings.DestroyPrepare(&v)
		delete(s.stmts, k)
	}
	s.order = nil
	bindings.Disconnect(&s.conn)
}
