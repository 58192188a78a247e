//go:build duckdb_arrow

package flightsql

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	bindings "github.com/duckdb/duckdb-go-bindings"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/status"
)

// A query costs DuckDB a parse and a bind before it runs, and a Flight SQL
// client asks twice: GetFlightInfo (for the schema) and then DoGet.
// GetFlightInfo therefore prepares the query on its own connection, reads
// the schema from the prepared statement, and starts executing it at once,
// so that DuckDB works while the FlightInfo travels to the client and its
// DoGet comes back; that DoGet streams the result. Tickets stay stateless:
// a DoGet that finds nothing here (another server, a second fetch, an
// expired entry) plans the query again from the ticket.

// readyQuery is a statement GetFlightInfo started for its DoGet. While it
// waits for its DoGet it counts as a call against --max-calls (Gate.Hold),
// and it is interrupted and freed when its ticket expires (TicketTimeout)
// or when the connection that asked for it closes.
type readyQuery struct {
	sess   *session
	plan   *queryPlan
	schema *arrow.Schema
	query  string
	// args are the values bound (nil: none), key their ticket encoding
	// (a DoGet takes the query only for the same values).
	args []any
	key  string
	born time.Time

	release  func()      // ends the gate hold (nil: none)
	timer    *time.Timer // expiry
	stopConn func() bool // stops the watch on the asking connection

	cancel context.CancelFunc // interrupts the execution
	done   chan struct{}      // closed when rdr and err are set
	rdr    array.RecordReader
	err    error
	log    hclog.Logger // for a panic while starting (nil: not logged)
}

// started reports whether the query runs (false: a gate at its limit
// refused to hold it, and only the schema is known).
func (r *readyQuery) started() bool { return r.done != nil }

// start executes ps (which it then owns) in the background.
func (r *readyQuery) start(ps bindings.PreparedStatement) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		defer func() { // outside any handler: a panic would end the process
			if p := recover(); p != nil {
				if r.log != nil {
					r.log.Error("starting a query panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				}
				r.err = internalf("internal error starting the query (see the server log)")
			}
		}()
		r.rdr, r.err = r.sess.execute(ctx, ps, r.args)
	}()
}

// await waits for the execution's result; ctx (the DoGet's) interrupts
// it from then on. The reader owns the execution: releasing it stops it
// (the caller closes the session after). On failure await frees
// everything, the session included.
func (r *readyQuery) await(ctx context.Context) (array.RecordReader, error) {
	stop := context.AfterFunc(ctx, r.cancel)
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil || r.err != nil {
		stop()
		r.close()
		if err == nil {
			err = r.err
		}
		return nil, err
	}
	return &onRelease{RecordReader: r.rdr, fn: func() { stop(); r.cancel() }}, nil
}

// onRelease calls fn after releasing its reader.
type onRelease struct {
	array.RecordReader
	fn func()
}

func (o *onRelease) Release() {
	o.RecordReader.Release()
	o.fn()
}

// detach ends what watches a query waiting in the cache (expiry timer,
// connection watch) and its gate hold: once taken, it is a DoGet's, and
// that call counts itself.
func (r *readyQuery) detach() {
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.stopConn != nil {
		r.stopConn()
	}
	if r.release != nil {
		r.release()
	}
}

// close stops the execution and frees everything.
func (r *readyQuery) close() {
	r.detach()
	if r.done == nil {
		return // never started: nothing else is held
	}
	r.cancel()
	<-r.done
	if r.rdr != nil {
		r.rdr.Release()
	}
	r.sess.close()
}

// readyCache holds prepared queries by statement id, at most readyMax of
// them for at most ttl each.
type readyCache struct {
	mu  sync.Mutex
	m   map[string]*readyQuery
	ttl time.Duration
	// testHook, when set (by tests), is called with the statement id and
	// the reason ("expired", "connection closed") when a waiting query is
	// stopped.
	testHook func(id, why string)
	// beforePut, when set (by tests), is called with GetFlightInfo's
	// context once its query has started, before it is kept.
	beforePut func(ctx context.Context)
}

const readyMax = 256

// readyTTL is the default of Options.TicketTimeout: how long a query
// started ahead for a ticket waits for its DoGet (a variable so that
// tests can shorten it).
var readyTTL = 15 * time.Second

// put keeps r for its DoGet. conn, the context of the connection that
// asked for it (nil: unknown), stops and frees it when it ends, as the
// expiry does.
func (c *readyCache) put(id string, r *readyQuery, conn context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*readyQuery{}
	}
	now := time.Now()
	for k, v := range c.m {
		if now.Sub(v.born) > c.ttl {
			v.close()
			delete(c.m, k)
		}
	}
	for len(c.m) >= readyMax {
		var oldest string
		for k, v := range c.m {
			if oldest == "" || v.born.Before(c.m[oldest].born) {
				oldest = k
			}
		}
		c.m[oldest].close()
		delete(c.m, oldest)
	}
	c.m[id] = r
	stop := func(why string) func() {
		return func() {
			if r := c.remove(id, r); r != nil {
				if c.testHook != nil {
					c.testHook(id, why)
				}
				r.close()
			}
		}
	}
	// A FlightInfo whose ticket is never fetched must not leave its query
	// running: interrupt and free it when it expires, or when the client
	// that asked for it is gone.
	r.timer = time.AfterFunc(c.ttl, stop("expired"))
	if conn != nil {
		r.stopConn = context.AfterFunc(conn, stop("connection closed"))
	}
}

// remove removes r, stored under id, and returns it; nil when it is gone
// already (taken, cancelled or evicted).
func (c *readyCache) remove(id string, r *readyQuery) *readyQuery {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[id] != r {
		return nil
	}
	delete(c.m, id)
	return r
}

// take removes and returns the prepared query of id, if it is there and
// was prepared for query with the values of key (rowsKey).
func (c *readyCache) take(id, query, key string) *readyQuery {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[id]
	if !ok {
		return nil
	}
	delete(c.m, id)
	if r.query != query || r.key != key || time.Since(r.born) > c.ttl {
		r.close()
		return nil
	}
	r.detach()
	return r
}

func (c *readyCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.m {
		v.close()
		delete(c.m, k)
	}
}

// prepareReady plans q (no parameters) on a new connection, prepares it
// and starts it (unless the gate refuses to hold one more: see
// readyQuery.started). It returns nil, nil when the statement's result types cannot be
// known before it runs; the caller then describes it by running it.
// With parameter values (args, one row) see prepareReadyArgs.
func (s *Server) prepareReady(ctx context.Context, q string, args []any) (*readyQuery, error) {
	if args != nil {
		return s.prepareReadyArgs(ctx, q, args)
	}
	sess, plan, ps, err := s.prepareOn(ctx, q, nil, nil)
	if err != nil {
		return nil, err
	}
	sc := (*arrow.Schema)(nil)
	if plan.params == 0 {
		sc, err = sess.describePrepared(ps)
	}
	if sc == nil {
		sess.drop(&ps)
		sess.close()
		if err == nil || err == errUntyped {
			return nil, nil
		}
		return nil, s.sqlStatus(err)
	}
	rq := &readyQuery{sess: sess, plan: plan, schema: sc, query: q, born: time.Now(), log: s.log}
	if g := s.opts.Gate; g != nil {
		release, err := g.Hold()
		if err != nil {
			// The server runs its limit of calls: do not start ahead;
			// the DoGet runs the query (and is itself counted).
			sess.drop(&ps)
			sess.close()
			return &readyQuery{plan: plan, schema: sc, query: q, born: rq.born}, nil
		}
		rq.release = release
	}
	if plan.direct != nil {
		rdr, ok, err := plan.direct.rows(ctx, sc, s.alloc)
		if err != nil {
			if rq.release != nil {
				rq.release() // the gate hold taken above
			}
			sess.drop(&ps)
			sess.close()
			return nil, s.sqlStatus(err)
		}
		if ok {
			rq.startDirect(ps, rdr)
			return rq, nil
		}
	}
	rq.start(ps)
	return rq, nil
}

// analysisCache remembers what DuckDB's parser said about a statement
// text: the same text always parses the same, and dashboards and prepared
// statements send the same texts again and again.
type analysisCache struct {
	mu    sync.Mutex
	m     map[string]*analysis
	bytes int // of the keys
}

// The cache holds at most analysisMax entries and analysisMaxBytes of
// keys, and no text longer than analysisMaxKey: its keys are the clients'
// texts (1024 texts of 8 MiB would have held 8 GiB).
const (
	analysisMax      = 1024
	analysisMaxBytes = 16 << 20
	analysisMaxKey   = 64 << 10
)

func (c *analysisCache) get(q string) *analysis {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

func (c *analysisCache) put(q string, a *analysis) {
	if len(q) > analysisMaxKey {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= analysisMax || c.bytes+len(q) > analysisMaxBytes {
		c.m, c.bytes = map[string]*analysis{}, 0
	}
	if _, ok := c.m[q]; !ok {
		c.bytes += len(q)
	}
	c.m[q] = a
}

// prepareReadyArgs plans q with one row of parameter values, prepares it
// (or finds it prepared) and starts it with the values bound; the schema
// is that of the started result, which DuckDB types and names with the
// values bound (no separate LIMIT 0 description, no second plan for the
// DoGet). It returns nil, nil (the caller then describes the statement
// and the DoGet runs it) when the gate refuses to hold one more query or
// the plan answers from a last-value index.
func (s *Server) prepareReadyArgs(ctx context.Context, q string, args []any) (*readyQuery, error) {
	key, err := rowsKey(args)
	if err != nil {
		return nil, err
	}
	sess, plan, ps, err := s.prepareOn(ctx, q, args, nil)
	if err != nil {
		return nil, err
	}
	rq := &readyQuery{sess: sess, plan: plan, query: q, args: plan.bindArgs(args), key: key, born: time.Now(), log: s.log}
	if plan.direct == nil {
		if g := s.opts.Gate; g != nil {
			if rq.release, err = g.Hold(); err != nil {
				rq.release = nil
			}
		}
	}
	if plan.direct != nil || (s.opts.Gate != nil && rq.release == nil) {
		sess.drop(&ps)
		sess.close()
		return nil, nil
	}
	rq.start(ps)
	select {
	case <-rq.done:
	case <-ctx.Done():
		rq.close()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if rq.err != nil {
		err := rq.err
		rq.close()
		return nil, s.sqlStatus(err)
	}
	rq.schema = rq.rdr.Schema()
	return rq, nil
}

// rowsKey is the ticket encoding of one parameter row ("" for none).
func rowsKey(args []any) (string, error) {
	if args == nil {
		return "", nil
	}
	w, err := encodeArgs(args)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", internalf("%v", err)
	}
	return string(b), nil
}
