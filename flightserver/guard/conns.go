package guard

// Connections: each call's context carries the life of the connection it
// came in on (ConnContext), and, when the server listens through
// Gate.Listener, a way to close that connection. The stream budget closes
// the connection of a client that stopped reading while others wait
// (streammem.go): gRPC frees what it holds for a stream whose client does
// not read only when the connection goes.

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/stats"
)

// Listener returns l with its connections registered with the gate, so
// that the server can close one itself. Serve gRPC on it, with the gate's
// ServerOptions.
func (g *Gate) Listener(l net.Listener) net.Listener {
	return &gateListener{Listener: l, reg: &g.conns}
}

// connRegistry holds the open connections of a gate's listeners, by their
// address pair (what gRPC's stats handler is told of a connection).
type connRegistry struct {
	mu    sync.Mutex
	byKey map[string]net.Conn
}

func connKeyOf(local, remote net.Addr) string {
	if local == nil || remote == nil {
		return ""
	}
	return local.String() + "|" + remote.String()
}

func (r *connRegistry) add(c net.Conn) {
	k := connKeyOf(c.LocalAddr(), c.RemoteAddr())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = map[string]net.Conn{}
	}
	r.byKey[k] = c
}

func (r *connRegistry) remove(k string, c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey[k] == c {
		delete(r.byKey, k)
	}
}

func (r *connRegistry) find(k string) net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byKey[k]
}

type gateListener struct {
	net.Listener
	reg *connRegistry
}

func (l *gateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &gateConn{Conn: c, reg: l.reg, key: connKeyOf(c.LocalAddr(), c.RemoteAddr())}
	l.reg.add(gc)
	return gc, nil
}

type gateConn struct {
	net.Conn
	reg  *connRegistry
	key  string
	once sync.Once
}

func (c *gateConn) Close() error {
	c.once.Do(func() { c.reg.remove(c.key, c) })
	return c.Conn.Close()
}

// connStats is a gRPC stats handler that gives each connection a context
// cancelled when the connection ends: the contexts of its calls carry it
// (see ConnContext).
type connStats struct{ g *Gate }

type connKey struct{}

type connLife struct {
	ctx    context.Context
	cancel context.CancelFunc
	conn   net.Conn // nil: not from Gate.Listener
	peer   string
}

func (h connStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	conn, cancel := context.WithCancel(ctx)
	l := &connLife{ctx: conn, cancel: cancel}
	if info != nil {
		if info.RemoteAddr != nil {
			l.peer = info.RemoteAddr.String()
		}
		if h.g != nil {
			l.conn = h.g.conns.find(connKeyOf(info.LocalAddr, info.RemoteAddr))
		}
	}
	return context.WithValue(conn, connKey{}, l)
}

func (connStats) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, end := s.(*stats.ConnEnd); end {
		if l, ok := ctx.Value(connKey{}).(*connLife); ok {
			l.cancel()
		}
	}
}

func (connStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connStats) HandleRPC(context.Context, stats.RPCStats)                       {}

// ConnContext returns the context of the connection a call's ctx came in
// on, cancelled when that connection closes (the peer went away, or
// keepalive dropped it), for work a call leaves running after it returns.
// It reports false on a server without the Gate's ServerOptions.
func ConnContext(ctx context.Context) (context.Context, bool) {
	if l, ok := ctx.Value(connKey{}).(*connLife); ok {
		return l.ctx, true
	}
	return nil, false
}

// connCloser returns a function that closes the connection of a call's
// ctx (nil when the server cannot: no Gate.Listener) and the peer's
// address.
func ConnCloser(ctx context.Context) (func(), string) {
	l, ok := ctx.Value(connKey{}).(*connLife)
	if !ok {
		return nil, ""
	}
	if l.conn == nil {
		return nil, l.peer
	}
	c := l.conn
	return func() { c.Close() }, l.peer
}
