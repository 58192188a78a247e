package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
)

const (
	defaultListen   = "127.0.0.1:8815"
	defaultMsgSize  = guard.DefaultMaxMsgSize
	defaultShutdown = 30 * time.Second
	// headerAllowance is added to the message size flags: they bound a
	// record batch's body, and the gRPC message also carries its IPC header
	// and the FlightData framing.
	headerAllowance = guard.MsgHeaderAllowance
	// maxMsgSize keeps limit+allowance within gRPC's int32 message sizes.
	maxMsgSize = 1<<31 - 1 - headerAllowance
	// hardStopWait bounds the wait for cancelled calls after a hard stop.
	hardStopWait = 10 * time.Second
)

var serveCmd = &command{
	Name:    "serve",
	Group:   "server",
	Summary: "serve the tables under a root directory over Arrow Flight",
	Usage:   "tsflight serve --root DIR [--listen HOST:PORT] [flags]",
	Help: `Serves every table under --root (one table per subdirectory, created on
demand) over Arrow Flight: DoPut appends, GetFlightInfo/DoGet scan time
ranges, DoAction creates tables, describes them, reports coverage and gaps
and adds columns. The contract is in docs/flight.md. The same port speaks
Flight SQL (ADBC, JDBC): read-only SQL through an embedded DuckDB, catalog
metadata, prepared statements and bulk ingest (docs/flightsql.md), when the
binary was built with -tags duckdb_arrow.

When the port is bound it logs "tsflight listening on HOST:PORT" with the
real address, so --listen 127.0.0.1:0 picks a free port.

--root is a local directory: a URL (s3://…, file://…) is refused; mount
object storage and give the mount point. The port also answers the gRPC
health service (grpc.health.v1, no token needed): SERVING while it serves,
NOT_SERVING from the moment a shutdown begins.

SIGINT or SIGTERM stops accepting calls and lets the calls in flight finish.
After --shutdown-timeout (or on a second signal) the remaining calls are
cancelled: an interrupted DoPut commits nothing. The exit code is 0 after a
clean shutdown and 1 when calls had to be cancelled.

Limits (docs/reliability.md): --max-recv-msg-size bounds the largest
record batch a client may send (the body; 1 MiB is added for headers),
--max-send-msg-size the largest one the server sends; clients must allow
messages of that size too. --max-streams-per-conn bounds the calls one
connection has open (clients queue the rest), --max-calls the calls the
server runs at once (more are refused with RESOURCE_EXHAUSTED),
--request-timeout how long one call may run when its client set no
earlier deadline, and --max-result-rows the rows one SQL query may return
(more ends the query with RESOURCE_EXHAUSTED instead of a silently cut
result). --sql-memory-limit bounds DuckDB's memory (default a quarter of
the machine's or cgroup's; sorts, joins and aggregates spill to disk beyond
it, other queries needing more fail with RESOURCE_EXHAUSTED), and
--sql-prepared-bytes what open prepared statements hold (default 256 MiB,
a quarter per token). A query GetFlightInfo starts ahead of its DoGet
counts against --max-calls and is stopped when nobody fetched it within
15 s or its client's connection closes (a later DoGet runs it itself).
--stream-budget bounds the memory all DoGet streams hold together, decoded
batches and what gRPC holds for clients that have not read it (default
1 GiB): scans decode only while it allows. A client that stops reading
while other streams wait for the budget has its connection closed after
--stream-stall-timeout (default 15s). --scan-cache-bytes keeps decoded
segment columns so that reading a table again skips decoding its Parquet
(default 256 MiB, at most a quarter of --memory-limit when that is set;
0 = off).

Maintenance (docs/design.md): every --maintenance-interval (default 10s;
0 = off) and whenever an append leaves a table with
--maintenance-min-segments small segments of one size tier (default 8),
the server merges them into a larger sorted one, one group at a time,
reading at most --maintenance-rate bytes per second (default 32MiB),
while the table takes appends compacting at most
--maintenance-busy-share of the time (default 0.1), and
holding at most --maintenance-memory of rows (default 64MiB; more are
sorted in parts spilled to temporary files in $TMPDIR and merged); once a
table had no append for --maintenance-quiet-after (default 30s), all its
small segments are merged. The maintenance action shows what is pending
and pauses or resumes it; --maintenance-paused starts paused.

Authentication and TLS (docs/security.md): --auth-tokens FILE holds one
token per line (its SHA-256 hash, as tsflight token new writes it) with
its scope, read or write; clients send "authorization: Bearer TOKEN" or
handshake with Basic credentials whose password is the token. A missing,
unknown, revoked or expired token is UNAUTHENTICATED; a read token writing
is PERMISSION_DENIED. --tls-cert and --tls-key serve TLS, --tls-client-ca
requires client certificates. The files are read again on SIGHUP and when
they change. Without authentication the server listens only on loopback
addresses unless --insecure is given.

Operations (docs/operations.md): --http HOST:PORT serves /healthz
(liveness: 200, 503 once shutting down), /readyz (readiness: 200 when the
root can be listed, else 503 and the reason) and /metrics (Prometheus)
on a listener of its own, with TLS when the Flight port has it. Like
--listen it is refused beyond loopback addresses without authentication
(or --insecure); with tokens, /metrics asks for one.

--demo fills an empty root with the demo table cpu first (TSBS-like CPU
metrics of 200 hosts over 2016-01-01 at 10 s, with deliberate gaps). The
table appears only once complete: an interrupted --demo leaves no part of
it, and the next --demo writes it again.
Once listening, the server prints how to connect with the CLI, pyarrow,
ADBC and JDBC.

Example:
  tsflight serve --root ./data --demo
  tsflight serve --root ./data --listen 127.0.0.1:8815
  TSFLIGHT_ROOT=/var/lib/tsflight tsflight serve --log-format json
  tsflight serve --root ./data --listen 0.0.0.0:8815 --auth-tokens tokens --tls-cert server.pem --tls-key server.key`,
}

func init() { register(serveCmd, runServe) }

type serveConfig struct {
	root            string
	listen          string
	logLevel        *choice
	logFormat       *choice
	maxRecv         byteSize
	maxSend         byteSize
	shutdownTimeout time.Duration
	memoryLimit     byteSize
	gcPercent       int // -1: leave the runtime's (GOGC) setting
	heapFloor       byteSize
	streamsPerConn  int
	maxCalls        int
	requestTimeout  time.Duration
	maxResultRows   int64
	sqlMemoryLimit  byteSize // 0: flightsql's default
	sqlPrepared     byteSize // 0: flightsql's default
	streamBudget    byteSize // 0: flightserver's default
	scanCache       byteSize // 0: no scan cache
	stallTimeout    time.Duration
	maintInterval   time.Duration
	maintMinSegs    int
	maintRate       byteSize
	maintMemory     byteSize
	maintPaused     bool
	maintQuiet      time.Duration
	maintBusyShare  float64
	demo            bool
	sec             securityFlags
	inlineTokens    string   // TSFLIGHT_AUTH_TOKENS
	ops             opsFlags // --http (serve_http.go)
}

func parseServeFlags(e *env, args []string) (*serveConfig, error) {
	cfg := &serveConfig{
		logLevel:    newChoice("info", logLevels...),
		logFormat:   newChoice("text", "text", "json"),
		maxRecv:     defaultMsgSize,
		maxSend:     defaultMsgSize,
		gcPercent:   flightserver.RecommendedGCPercent,
		heapFloor:   flightserver.RecommendedHeapFloor,
		maintMemory: flightserver.DefaultMaintenanceMemoryBytes,
		scanCache:   flightserver.DefaultScanCacheBytes,
	}
	lim := guard.DefaultLimits()
	fs := newFlagSet(serveCmd)
	fs.StringVar(&cfg.root, "root", "", "`directory` holding the tables (created if missing; required)")
	fs.StringVar(&cfg.listen, "listen", defaultListen, "`address` to listen on; port 0 picks a free port")
	fs.Var(cfg.logLevel, "log-level", "log `level`: trace, debug, info, warn or error")
	fs.Var(cfg.logFormat, "log-format", "log `format`: text or json (one object per line)")
	fs.Var(&cfg.maxRecv, "max-recv-msg-size", "largest record batch a client may send (`size`: bytes, or with KiB, MiB, GiB)")
	fs.Var(&cfg.maxSend, "max-send-msg-size", "largest record batch (or last answer) the server sends (`size`)")
	fs.IntVar(&cfg.streamsPerConn, "max-streams-per-conn", int(lim.MaxStreamsPerConn), "calls one connection may have open at once (`n`); the client queues the rest")
	fs.IntVar(&cfg.maxCalls, "max-calls", lim.MaxCalls, "calls the server runs at once over all connections (`n`, -1 = no limit); more are refused with RESOURCE_EXHAUSTED")
	fs.DurationVar(&cfg.requestTimeout, "request-timeout", lim.RequestTimeout, "longest a call may run when its client set no earlier deadline (`duration`, -1s = no limit)")
	fs.Int64Var(&cfg.maxResultRows, "max-result-rows", 0, "rows one SQL query may return (`n`, 0 = no limit); a larger result ends with RESOURCE_EXHAUSTED")
	fs.Var(&cfg.sqlMemoryLimit, "sql-memory-limit", "memory the SQL engine (DuckDB) may use for its buffers (`size`, 0 = a quarter of the machine's or the cgroup's memory); sorts, joins and aggregates spill to a temporary directory beyond it, other queries that need more fail with RESOURCE_EXHAUSTED")
	fs.Var(&cfg.sqlPrepared, "sql-prepared-bytes", "bytes the open prepared statements may hold, texts and bound parameters (`size`, 0 = 256MiB); one token holds at most a quarter, its least recently used statements are closed to make room")
	fs.Var(&cfg.streamBudget, "stream-budget", "memory all DoGet streams together may hold: decoded batches and what gRPC holds for clients that have not read it (`size`, 0 = 1GiB); scans decode only while it allows, a stream is not failed for it")
	fs.Var(&cfg.scanCache, "scan-cache-bytes", "memory for decoded segment columns kept so that reading a table again skips decoding its Parquet (`size`, 0 = no cache; when not given and --memory-limit is set, at most a quarter of that); the least recently used are dropped first")
	fs.DurationVar(&cfg.stallTimeout, "stream-stall-timeout", flightserver.DefaultStallTimeout, "how long a DoGet client may read nothing while other streams wait for the stream budget before its connection is closed (`duration`, -1s = never)")
	fs.DurationVar(&cfg.maintInterval, "maintenance-interval", 10*time.Second, "how often background maintenance looks at every table to compact small segments (`duration`, 0 = no maintenance; appends that leave enough small segments wake it earlier)")
	fs.IntVar(&cfg.maintMinSegs, "maintenance-min-segments", 8, "small segments a table must have before maintenance compacts it (`n`)")
	fs.Var(&cfg.maintRate, "maintenance-rate", "bytes of segments per second maintenance may read and rewrite (`size`, 0 = 32MiB), so that compaction leaves the cores to queries and appends")
	fs.Var(&cfg.maintMemory, "maintenance-memory", "memory the rows of one compaction, in the background or asked for by the compact action, may hold (`size`, at least 1MiB): what does not fit is sorted in parts written LZ4-compressed to nameless temporary files in $TMPDIR (removed at once where a file system cannot create them nameless) and merged hour by hour")
	fs.DurationVar(&cfg.maintQuiet, "maintenance-quiet-after", 30*time.Second, "how long after its last append a table counts as quiet, when maintenance merges all its small segments instead of only those of one size tier (`duration`, -1s = never)")
	fs.Float64Var(&cfg.maintBusyShare, "maintenance-busy-share", flightserver.DefaultBusyShare, "while a table took an append in the last second, the share of the time maintenance may spend compacting it (`fraction`, above 0 and at most 1; 1 = no bound), so that appends keep the cores; a table with 16 times --maintenance-min-segments small segments is merged without it")
	fs.BoolVar(&cfg.maintPaused, "maintenance-paused", false, "start with maintenance paused (the maintenance action resumes it)")
	fs.Var(&cfg.memoryLimit, "memory-limit", "soft limit of the Go heap (`size`, 0 = none): the garbage collector works harder near it, to keep the process under a memory budget")
	fs.Var(&cfg.heapFloor, "heap-floor", "heap the garbage collector counts as live before it applies --gc-percent (`size`, 0 = none): with a small live heap, small appends otherwise start a collection every put or two; the floor is address space, not memory, but counts against --memory-limit")
	fs.IntVar(&cfg.gcPercent, "gc-percent", flightserver.RecommendedGCPercent, "heap growth, in `percent` of the live heap, that starts a garbage collection (Go's GOGC; -1 = keep GOGC from the environment, whose setting also wins over this default)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", defaultShutdown, "how long a shutdown waits for calls in flight before cancelling them (`duration`, 0 = at once)")
	fs.BoolVar(&cfg.demo, "demo", false, "when the root holds no tables, create the demo table cpu (200 hosts, one day at 10 s, with gaps) before serving")
	cfg.sec.register(fs)
	cfg.ops.register(fs)
	fs.fromEnv("root", "TSFLIGHT_ROOT")
	fs.fromEnv("listen", "TSFLIGHT_LISTEN")
	rest, err := fs.parse(e, args)
	if err != nil {
		return nil, err
	}
	gcSet, cacheSet := false, false
	fs.Visit(func(f *flag.Flag) {
		gcSet = gcSet || f.Name == "gc-percent"
		cacheSet = cacheSet || f.Name == "scan-cache-bytes"
	})
	if !cacheSet && cfg.memoryLimit > 0 {
		cfg.scanCache = min(cfg.scanCache, cfg.memoryLimit/4)
	}
	if !gcSet && e.getenv("GOGC") != "" {
		cfg.gcPercent = -1
	}
	switch {
	case len(rest) > 0:
		return nil, usagef("unexpected argument %q (flags start with --)", rest[0])
	case cfg.root == "":
		return nil, usagef("--root is required (or set TSFLIGHT_ROOT)")
	case flightserver.CheckLocalRoot(cfg.root) != nil: // "root s3://… is a URL …"
		return nil, usagef("--%s", status.Convert(flightserver.CheckLocalRoot(cfg.root)).Message())
	case cfg.listen == "":
		return nil, usagef("--listen is empty")
	case cfg.maxRecv < 1 || cfg.maxRecv > maxMsgSize:
		return nil, usagef("--max-recv-msg-size must be between 1 and %d bytes", maxMsgSize)
	case cfg.maxSend < 1 || cfg.maxSend > maxMsgSize:
		return nil, usagef("--max-send-msg-size must be between 1 and %d bytes", maxMsgSize)
	case cfg.streamsPerConn < 1:
		return nil, usagef("--max-streams-per-conn must be at least 1, got %d", cfg.streamsPerConn)
	case cfg.maxCalls == 0 || cfg.maxCalls < -1:
		return nil, usagef("--max-calls must be at least 1 (or -1 for no limit), got %d", cfg.maxCalls)
	case cfg.requestTimeout == 0:
		return nil, usagef("--request-timeout must be positive (or negative for no limit)")
	case cfg.maintInterval < 0:
		return nil, usagef("--maintenance-interval must not be negative (0 turns maintenance off), got %s", cfg.maintInterval)
	case cfg.maintMinSegs < 2:
		return nil, usagef("--maintenance-min-segments must be at least 2, got %d", cfg.maintMinSegs)
	case cfg.maintQuiet == 0:
		return nil, usagef("--maintenance-quiet-after must be positive, or negative for never, got 0")
	case !(cfg.maintBusyShare > 0 && cfg.maintBusyShare <= 1):
		return nil, usagef("--maintenance-busy-share must be above 0 and at most 1, got %v", cfg.maintBusyShare)
	case cfg.maintRate < 0:
		return nil, usagef("--maintenance-rate must not be negative, got %s", cfg.maintRate.String())
	case cfg.maintMemory < tableformat.MinCompactMemoryBytes:
		return nil, usagef("--maintenance-memory must be at least 1MiB, got %s", cfg.maintMemory.String())
	case cfg.maxResultRows < 0:
		return nil, usagef("--max-result-rows must not be negative, got %d", cfg.maxResultRows)
	case cfg.gcPercent < -1:
		return nil, usagef("--gc-percent must be -1 or more, got %d", cfg.gcPercent)
	case cfg.memoryLimit < 0:
		return nil, usagef("--memory-limit must not be negative")
	case cfg.memoryLimit > 0 && cfg.heapFloor >= cfg.memoryLimit:
		return nil, usagef("--heap-floor (%s) must be below --memory-limit (%s): the floor counts against the limit", cfg.heapFloor.String(), cfg.memoryLimit.String())
	case cfg.sqlMemoryLimit != 0 && cfg.sqlMemoryLimit < 16<<20:
		return nil, usagef("--sql-memory-limit must be at least 16MiB (or 0 for the default), got %s", cfg.sqlMemoryLimit.String())
	case cfg.streamBudget < 0:
		return nil, usagef("--stream-budget must not be negative")
	case cfg.scanCache < 0:
		return nil, usagef("--scan-cache-bytes must not be negative (0 = no cache)")
	case cfg.stallTimeout == 0:
		return nil, usagef("--stream-stall-timeout must be positive, or negative for never, got 0")
	case cfg.sqlPrepared < 0:
		return nil, usagef("--sql-prepared-bytes must not be negative")
	case cfg.shutdownTimeout < 0:
		return nil, usagef("--shutdown-timeout must not be negative")
	}
	cfg.inlineTokens = e.getenv("TSFLIGHT_AUTH_TOKENS")
	if err := cfg.sec.check(cfg.listen, cfg.inlineTokens); err != nil {
		return nil, err
	}
	if err := cfg.ops.check(&cfg.sec, cfg.inlineTokens); err != nil {
		return nil, err
	}
	return cfg, nil
}

// sqlSettings are the Flight SQL settings of the serve flags beyond
// withSQL's arguments. They travel in the context given to withSQL, so
// that the builds with and without Flight SQL share one withSQL
// signature (a binary without SQL ignores them).
type sqlSettings struct {
	gate          *guard.Gate
	metrics       *flightserver.Metrics // nil: no --http, no metrics
	memoryLimit   int64                 // bytes; 0 = flightsql's default
	preparedBytes int64                 // bytes; 0 = flightsql's default
}

type sqlSettingsKey struct{}

func withSQLSettings(ctx context.Context, s *sqlSettings) context.Context {
	return context.WithValue(ctx, sqlSettingsKey{}, s)
}

// sqlSettingsFrom returns the settings of ctx (zero settings if none).
func sqlSettingsFrom(ctx context.Context) *sqlSettings {
	if s, ok := ctx.Value(sqlSettingsKey{}).(*sqlSettings); ok {
		return s
	}
	return &sqlSettings{}
}

// limits returns the gRPC limits the flags ask for.
func (cfg *serveConfig) limits() *guard.Limits {
	l := guard.DefaultLimits()
	l.MaxRecvMsgSize = int(cfg.maxRecv)
	l.MaxSendMsgSize = int(cfg.maxSend)
	l.MaxStreamsPerConn = uint32(cfg.streamsPerConn)
	l.MaxCalls = cfg.maxCalls
	l.RequestTimeout = cfg.requestTimeout
	return l
}

func runServe(ctx context.Context, e *env, args []string) error {
	cfg, err := parseServeFlags(e, args)
	if err != nil {
		return err
	}
	log := newLogger(e.stderr, cfg.logLevel.value, cfg.logFormat.value)
	grpclog.SetLoggerV2(grpcLogger{log.Named("grpc")})
	sec, err := newSecurity(&cfg.sec, cfg.inlineTokens, log.Named("auth"))
	if err != nil {
		return err
	}

	opts := flightserver.DefaultOptions(cfg.root)
	opts.Logger = log.Named("flight")
	opts.StreamBudget = int64(cfg.streamBudget)
	opts.ScanCacheBytes = int64(cfg.scanCache)
	opts.StallTimeout = cfg.stallTimeout
	opts.CompactMemory = int64(cfg.maintMemory)
	opts.MaxResultSize = int(cfg.maxSend) // the last action's one message
	svc, err := flightserver.New(opts)
	if err != nil {
		return fmt.Errorf("root %s: %s", cfg.root, status.Convert(err).Message())
	}
	defer svc.Close() // the scan cache; runs after the server stopped
	demo, err := prepareDemo(ctx, cfg, svc, log)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	if err := checkBound(cfg.listen, lis.Addr(), sec.auth.Enabled(), cfg.sec.insecure); err != nil {
		lis.Close()
		return err
	}
	gate, err := guard.NewGate(cfg.limits())
	if err != nil {
		lis.Close()
		return err
	}
	var metrics *flightserver.Metrics // only with --http: without it nothing reads them
	if cfg.ops.addr != "" {
		if metrics, err = flightserver.NewMetrics(svc, &flightserver.MetricsOptions{Gate: gate}); err != nil {
			lis.Close()
			return err
		}
	}
	sqlCtx := withSQLSettings(ctx, &sqlSettings{gate: gate, metrics: metrics, memoryLimit: int64(cfg.sqlMemoryLimit), preparedBytes: int64(cfg.sqlPrepared)})
	service, closeSQL, err := withSQL(sqlCtx, svc, log.Named("sql"), cfg.maxResultRows)
	if err != nil {
		lis.Close()
		return fmt.Errorf("starting Flight SQL: %w", err)
	}
	defer closeSQL()
	var ops *opsServer
	if cfg.ops.addr != "" {
		if ops, err = startOps(cfg, sec, svc, metrics, log.Named("http")); err != nil {
			lis.Close()
			return err
		}
		defer ops.close() // before closeSQL: a scrape may ask DuckDB
	}
	conns := &connTracker{Listener: gate.Listener(lis), open: map[net.Conn]struct{}{}}
	inFlight := flightserver.NewCallLog(log.Named("rpc"))
	if cfg.memoryLimit > 0 {
		debug.SetMemoryLimit(int64(cfg.memoryLimit))
	}
	flightserver.SetHeapFloor(int64(cfg.heapFloor))
	if cfg.gcPercent >= 0 {
		debug.SetGCPercent(cfg.gcPercent)
	}
	gopts := append(gate.ServerOptions(sec.auth.Tap), svc.GRPCOptions()...) // zero-copy DoGet
	gopts = append(gopts, sec.serverOptions()...)
	if metrics != nil {
		// Interceptors in the options run before the middleware below, so
		// the metrics count the calls the middleware refuses too; the
		// calls the authentication tap refuses before them are told.
		gopts = append(gopts, metrics.ServerOptions()...)
		sec.auth.OnTapRefusal(metrics.CountRefused)
	}
	// The call log sees every call, refused ones too, and recovers panics;
	// the gate counts calls before anyone is authenticated, so a flood of
	// unauthenticated calls is bounded too.
	srv := flight.NewServerWithMiddleware([]flight.ServerMiddleware{inFlight.Middleware(), gate.Middleware(), sec.auth.Middleware()}, gopts...)
	srv.RegisterFlightService(service)
	health := flightserver.NewHealth() // grpc.health.v1: NOT_SERVING until Serve
	health.Register(srv)
	srv.InitListener(conns)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	log.Info("starting", append([]any{"version", versionString(), "root", svc.Root(),
		"max_recv_msg_size", cfg.maxRecv.String(), "max_send_msg_size", cfg.maxSend.String(),
		"shutdown_timeout", cfg.shutdownTimeout.String(), "max_calls", cfg.maxCalls,
		"max_streams_per_conn", cfg.streamsPerConn, "request_timeout", cfg.requestTimeout.String(),
		"max_result_rows", cfg.maxResultRows, "sql_memory_limit", cfg.sqlMemoryLimit.String(),
		"sql_prepared_bytes", cfg.sqlPrepared.String(), "stream_budget", cfg.streamBudget.String(), "scan_cache_bytes", cfg.scanCache.String(), "stream_stall_timeout", cfg.stallTimeout,
		"maintenance_interval", cfg.maintInterval, "maintenance_memory", cfg.maintMemory.String()}, sec.describe()...)...)
	sec.warnings(cfg.listen)
	hup, stopHUP := notifyHUP()
	defer stopHUP()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go sec.watch(watchCtx, hup)
	// Scripts and tests parse this line; keep "tsflight listening on ADDR".
	log.Info("tsflight listening on " + lis.Addr().String())
	printConnectHelp(e.stdout, connectInfo{addr: lis.Addr().String(), root: svc.Root(), demo: demo,
		tls: sec.tls != nil, tokens: sec.tokens != nil || sec.inline != nil})
	r := &running{log: log, srv: srv, served: make(chan error, 1), conns: conns, calls: inFlight, sigs: sigs, health: health}
	health.Serving()
	go func() { r.served <- srv.Serve() }()
	if cfg.maintInterval > 0 {
		mctx, stopMaint := context.WithCancel(ctx)
		maintDone := make(chan struct{})
		go func() {
			defer close(maintDone)
			_ = svc.RunMaintenance(mctx, &flightserver.MaintenanceOptions{Interval: cfg.maintInterval, MinSmallSegments: cfg.maintMinSegs,
				BytesPerSecond: int64(cfg.maintRate), QuietAfter: cfg.maintQuiet, BusyShare: cfg.maintBusyShare, Paused: cfg.maintPaused, MemoryBytes: int64(cfg.maintMemory)})
		}()
		defer func() { stopMaint(); <-maintDone }() // a compaction cut short commits nothing
	}

	select {
	case err := <-r.served:
		return fmt.Errorf("serving stopped: %w", err)
	case sig := <-sigs:
		ops.beginShutdown()
		return r.shutdown(sig.String(), cfg.shutdownTimeout)
	case <-ctx.Done():
		ops.beginShutdown()
		return r.shutdown(ctx.Err().Error(), cfg.shutdownTimeout)
	}
}

// prepareDemo writes the demo table for --demo when the root holds no
// tables, and reports whether the demo table is there to talk about. The
// table is written aside and moved into the root only when complete
// (writeDemoTable): an interrupted --demo leaves no partial table, which
// the next --demo would take for the root's own.
func prepareDemo(ctx context.Context, cfg *serveConfig, svc *flightserver.Service, log hclog.Logger) (bool, error) {
	if !cfg.demo {
		return false, nil
	}
	removeDemoLeftovers(svc.Root(), log)
	names, err := svc.TableNames()
	if err != nil {
		return false, fmt.Errorf("root %s: %w", cfg.root, err)
	}
	if len(names) > 0 {
		log.Info("--demo: the root already holds tables; not adding demo data", "tables", len(names))
		return slices.Contains(names, demoTable), nil
	}
	// SIGINT or SIGTERM abandons the demo table; a second one kills.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	start := time.Now()
	log.Info("--demo: writing the demo table", "table", demoTable, "hosts", demoHosts)
	rows, err := writeDemoTable(ctx, svc.Root(), log)
	if err != nil {
		if ctx.Err() != nil {
			return false, errors.New("interrupted while writing the demo table: nothing of it was kept")
		}
		return false, fmt.Errorf("writing the demo table: %s", status.Convert(err).Message())
	}
	log.Info("--demo: demo table written", "table", demoTable, "rows", rows, "took", time.Since(start).Round(time.Millisecond).String())
	return true, nil
}

// demoTempPrefix starts the name of the directory the demo table is
// written in: a leading '.' is no table name, so the catalog never lists
// it.
const demoTempPrefix = ".demo-"

// writeDemoTable writes the demo table in a temporary directory of root,
// through a service of its own, and renames it to root/cpu once complete.
// On failure the temporary directory is removed.
func writeDemoTable(ctx context.Context, root string, log hclog.Logger) (int64, error) {
	tmp, err := os.MkdirTemp(root, demoTempPrefix)
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp) // after the rename, an empty directory
	opts := flightserver.DefaultOptions(tmp)
	opts.Logger = log.Named("flight")
	svc, err := flightserver.New(opts)
	if err != nil {
		return 0, err
	}
	rows, err := writeDemo(ctx, svc)
	if err != nil {
		return 0, err
	}
	if err := os.Rename(filepath.Join(tmp, demoTable), filepath.Join(root, demoTable)); err != nil {
		return 0, err
	}
	return rows, nil
}

// removeDemoLeftovers removes the temporary directories of demo tables
// whose writing was killed.
func removeDemoLeftovers(root string, log hclog.Logger) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), demoTempPrefix) {
			dir := filepath.Join(root, e.Name())
			log.Info("--demo: removing an unfinished demo table", "dir", dir)
			if err := os.RemoveAll(dir); err != nil {
				log.Warn("--demo: cannot remove an unfinished demo table", "dir", dir, "error", err)
			}
		}
	}
}

// running is a server that is serving.
type running struct {
	log    hclog.Logger
	srv    flight.Server
	served chan error // the result of srv.Serve
	conns  *connTracker
	calls  *flightserver.CallLog
	sigs   <-chan os.Signal
	health *flightserver.Health
}

// shutdown stops accepting calls and waits for the calls in flight; after
// timeout, or on another signal, it closes every connection, which cancels
// the remaining calls, and waits for their handlers to return.
func (r *running) shutdown(why string, timeout time.Duration) error {
	// Health checks say NOT_SERVING from here on; open Watch streams
	// send it and end, so that they do not hold the graceful stop.
	r.health.Shutdown()
	r.log.Info("shutting down: no new calls, waiting for calls in flight",
		"reason", why, "in_flight", r.calls.InFlight(), "timeout", timeout.String())
	stopped := make(chan struct{})
	go func() {
		r.srv.Shutdown() // GracefulStop: returns when every handler has returned
		close(stopped)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-stopped:
		// A stop that came before Serve began makes Serve return
		// ErrServerStopped: that is the stop asked for, not a failure.
		if err := <-r.served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serving stopped: %w", err)
		}
		r.log.Info("stopped")
		return nil
	case <-timer.C:
		why = fmt.Sprintf("shutdown timeout of %s passed", timeout)
	case sig := <-r.sigs:
		why = "second signal " + sig.String()
	}
	n := r.calls.InFlight()
	r.log.Warn("stopping hard: cancelling calls in flight", "reason", why, "in_flight", n)
	r.conns.closeAll()
	select {
	case <-stopped:
		<-r.served
		r.log.Info("stopped")
	case <-time.After(hardStopWait):
		r.log.Error("calls did not return after cancellation; exiting anyway", "in_flight", r.calls.InFlight())
	}
	return fmt.Errorf("%s: cancelled %d call(s) in flight", why, n)
}

// connTracker is a listener that remembers its open connections so that a
// hard stop can close them: gRPC then cancels every call on them.
type connTracker struct {
	net.Listener
	mu   sync.Mutex
	open map[net.Conn]struct{}
	shut bool
}

func (l *connTracker) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		c.Close()
		return nil, errors.New("listener closed by a hard stop")
	}
	l.open[tc] = struct{}{}
	return tc, nil
}

func (l *connTracker) closeAll() {
	l.mu.Lock()
	l.shut = true
	open := make([]net.Conn, 0, len(l.open))
	for c := range l.open {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *connTracker
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
