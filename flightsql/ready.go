//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	bindings "github.com/duckdb/duckdb-go-bindings"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
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

// readyQuery is a statement GetFlightInfo started for its DoGet.
type readyQuery struct {
	sess   *session
	plan   *queryPlan
	schema *arrow.Schema
	query  string
	born   time.Time

	cancel context.CancelFunc // interrupts the execution
	done   chan struct{}      // closed when rdr and err are set
	rdr    array.RecordReader
	err    error
	log    hclog.Logger // for a panic while starting (nil: not logged)
}

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
				r.err = status.Error(codes.Internal, "internal error starting the query (see the server log)")
			}
		}()
		r.rdr, r.err = r.sess.execute(ctx, ps, nil)
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

// close stops the execution and frees everything.
func (r *readyQuery) close() {
	r.cancel()
	<-r.done
	if r.rdr != nil {
		r.rdr.Release()
	}
	r.sess.close()
}

// readyCache holds prepared queries by statement id, at most readyMax of
// them for at most readyTTL.
type readyCache struct {
	mu sync.Mutex
	m  map[string]*readyQuery
}

const readyMax = 256

// readyTTL is how long a started query waits for its DoGet (a variable so
// that tests can shorten it).
var readyTTL = time.Minute

func (c *readyCache) put(id string, r *readyQuery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*readyQuery{}
	}
	now := time.Now()
	for k, v := range c.m {
		if now.Sub(v.born) > readyTTL {
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
	// A FlightInfo whose ticket is never fetched must not leave its query
	// running: interrupt and free it when it expires.
	time.AfterFunc(readyTTL, func() {
		if r := c.take(id, r.query); r != nil {
			r.close()
		}
	})
}

// take removes and returns the prepared query of id, if it is there and
// was prepared for query.
func (c *readyCache) take(id, query string) *readyQuery {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[id]
	if !ok {
		return nil
	}
	delete(c.m, id)
	if r.query != query || time.Since(r.born) > readyTTL {
		r.close()
		return nil
	}
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

// prepareReady plans q (no parameters) on a new connection and prepares
// it. It returns nil, nil when the statement's result types cannot be
// known before it runs; the caller then describes it by running it.
func (s *Server) prepareReady(ctx context.Context, q string) (*readyQuery, error) {
	sess, plan, ps, err := s.prepareOn(ctx, q, nil, nil)
	if err != nil {
		return nil, err
	}
	sc := (*arrow.Schema)(nil)
	if plan.params == 0 {
		sc, err = sess.describePrepared(ps)
	}
	if sc == nil {
		bindings.DestroyPrepare(&ps)
		sess.close()
		if err == nil || err == errUntyped {
			return nil, nil
		}
		return nil, sqlStatus(err)
	}
	rq := &readyQuery{sess: sess, plan: plan, schema: sc, query: q, born: time.Now(), log: s.log}
	rq.start(ps)
	return rq, nil
}

// analysisCache remembers what DuckDB's parser said about a statement
// text: the same text always parses the same, and dashboards and prepared
// statements send the same texts again and again.
type analysisCache struct {
	mu sync.Mutex
	m  map[string]*analysis
}

const analysisMax = 1024

func (c *analysisCache) get(q string) *analysis {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

func (c *analysisCache) put(q string, a *analysis) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= analysisMax {
		c.m = map[string]*analysis{}
	}
	c.m[q] = a
}
