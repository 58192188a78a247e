//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// Options configure a Server. Use DefaultOptions and change fields.
type Options struct {
	// Logger receives per-query plans (debug level: tables, segments
	// planned and pruned) and errors; nil discards.
	Logger hclog.Logger
	// Alloc allocates the result batches the server builds (merged DuckDB
	// chunks, metadata); nil means memory.DefaultAllocator. Tests pass a
	// checked allocator.
	Alloc memory.Allocator
	// BatchRows is the target number of rows of a result batch (0 =
	// 65536); a batch also stops growing at BatchBytes.
	BatchRows int
	// BatchBytes bounds the buffers of one result batch (0 = 8 MiB, half
	// the ADBC driver's default 16 MiB message limit).
	BatchBytes int
	// Threads is DuckDB's worker thread count (0 = DuckDB's default, the
	// number of cores).
	Threads int
	// MemoryLimit is DuckDB's memory_limit setting, e.g. "4GB" or
	// "67108864 bytes" ("" = DefaultMemoryLimit: a quarter of the
	// machine's or the cgroup's memory, not DuckDB's own default of 80%,
	// which left no room for the Go heap, Arrow buffers and the page
	// cache). It bounds DuckDB's buffer manager: operators that can spill
	// (sorts, hash aggregates and joins, windows) write to a private
	// temporary directory beyond it; a query that needs more than it and
	// cannot spill fails with ResourceExhausted naming --sql-memory-limit.
	MemoryLimit string
	// MaxTempSize is DuckDB's max_temp_directory_size, how much the spill
	// directory may hold ("" = DuckDB's default, 90% of the free space
	// of the disk holding $TMPDIR).
	MaxTempSize string
	// MaxPrepared bounds the open prepared statements (0 = 4096); the
	// least recently used is closed when a new one would exceed it.
	MaxPrepared int
	// MaxPreparedBytes bounds what the open prepared statements hold, in
	// bytes: their texts and bound parameter rows (0 =
	// DefaultMaxPreparedBytes). One caller (token) holds at most a
	// quarter; its least recently used statements are closed to make
	// room, and one statement larger than a quarter is refused with
	// ResourceExhausted.
	MaxPreparedBytes int64
	// PreparedIdle closes prepared statements unused for this long (0 =
	// 1 hour).
	PreparedIdle time.Duration
	// Gate, when set, is the gRPC server's flightserver.Gate: a query
	// GetFlightInfo starts ahead of its DoGet counts against its MaxCalls
	// while it waits (when the gate is full the query is not started
	// ahead; the DoGet runs it). nil: not counted.
	Gate *guard.Gate
	// TicketTimeout is how long a query GetFlightInfo started ahead for
	// its ticket waits for the DoGet (0 = 15 s). One not fetched by then
	// is interrupted and freed, as it is when the connection that asked
	// for it closes; the ticket stays valid, and a later DoGet runs the
	// query itself.
	TicketTimeout time.Duration
	// Version is reported as the server version (SqlInfo 1); "" = "dev".
	Version string
	// MaxResultRows bounds the rows one query execution (all its
	// parameter rows together) may return (0 = no limit). A query that
	// would return more ends with ResourceExhausted after the rows up to
	// the limit, never with a silently shortened result.
	MaxResultRows int64
	// MetadataCache lets DuckDB keep Parquet footers in memory between
	// queries (safe: segments never change once written). false = off;
	// DefaultOptions turns it on.
	MetadataCache bool
}

// DefaultMaxPreparedBytes is the default of Options.MaxPreparedBytes,
// 256 MiB: thousands of ordinary statements (a dashboard's are a few KiB),
// 64 MiB per caller; before the bound, 250 texts of 8 MiB left by a gone
// client held 2.1 GiB for the idle hour.
const DefaultMaxPreparedBytes = 256 << 20

// DefaultMemoryLimit is the default of Options.MemoryLimit, in bytes: a
// quarter of the physical memory, or of the cgroup's memory.max when that
// is lower, and at least 128 MiB. The rest is for the Go heap (whose soft
// limit is serve's --memory-limit), the Arrow buffers in flight, DuckDB's
// allocations outside its buffer manager, and the page cache the Parquet
// reads rely on.
func DefaultMemoryLimit() int64 {
	total := physicalMemory()
	if raw, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	if total <= 0 {
		return 1 << 30 // unknown: 1 GiB
	}
	return max(total/4, 128<<20)
}

// physicalMemory is MemTotal of /proc/meminfo in bytes (0 if unknown).
func physicalMemory() int64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n << 10 // kB
				}
			}
		}
	}
	return 0
}

// DefaultOptions returns fresh options.
func DefaultOptions() *Options { return &Options{MetadataCache: true} }

// Server is the Flight SQL side of a tsflight root: it implements
// flightsql.Server over the tables of a flightserver.Service. Register
// the value of Service, which also routes plain Flight calls to the
// flightserver.Service.
type Server struct {
	flightsql.BaseServer
	svc     *flightserver.Service
	cat     *catalog.Catalog // the tables, read without the Flight service
	opts    Options
	log     hclog.Logger
	alloc   memory.Allocator
	engine  *engine
	pool    connPool // the engine's connections for queries (pool.go)
	segCols segColumns

	prepared preparedStore
	ready    readyCache
	parsed   analysisCache
	verified analysisCache // rewritten texts that passed verifyRewrite, by SHA-256
	cancelMu sync.Mutex
	running  map[string]context.CancelFunc // statement id → cancel
	// cancelled are statement ids cancelled before they ran, and when.
	cancelled map[string]time.Time
	// queriesRunning counts the DoGets running a query (metrics.go).
	queriesRunning atomic.Int64
	duckMem        duckMemory
}

// New starts the embedded DuckDB and returns the Flight SQL server of svc.
// Close releases DuckDB.
func New(ctx context.Context, svc *flightserver.Service, opts *Options) (*Server, error) {
	o := *opts
	if o.MaxResultRows < 0 {
		return nil, flightserver.Status(invalidf("MaxResultRows must not be negative, got %d", o.MaxResultRows))
	}
	flightserver.DefaultBasics(&o.Logger, &o.Alloc, &o.BatchRows)
	if o.BatchBytes <= 0 {
		o.BatchBytes = 8 << 20
	}
	if o.MaxPrepared <= 0 {
		o.MaxPrepared = 4096
	}
	if o.TicketTimeout <= 0 {
		o.TicketTimeout = readyTTL
	}
	if o.MaxPreparedBytes <= 0 {
		o.MaxPreparedBytes = DefaultMaxPreparedBytes
	}
	if o.PreparedIdle <= 0 {
		o.PreparedIdle = time.Hour
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.MemoryLimit == "" {
		o.MemoryLimit = fmt.Sprintf("%d bytes", DefaultMemoryLimit())
	}
	eng, err := newEngine(ctx, svc.Root(), &o)
	if err != nil {
		return nil, err
	}
	s := &Server{svc: svc, cat: svc.Catalog(), opts: o, log: o.Logger, alloc: o.Alloc, engine: eng, running: map[string]context.CancelFunc{}, cancelled: map[string]time.Time{}}
	s.Alloc = o.Alloc
	s.pool.eng = eng
	s.ready.ttl = o.TicketTimeout
	s.prepared.init(o.MaxPrepared, o.PreparedIdle)
	s.prepared.limitBytes(o.MaxPreparedBytes)
	if err := s.registerSqlInfo(); err != nil {
		eng.close()
		return nil, err
	}
	return s, nil
}

// Close shuts DuckDB down. Call it after the gRPC server has stopped.
func (s *Server) Close() error {
	s.ready.closeAll()
	s.pool.close()
	return s.engine.close()
}

// Service returns the flight.FlightServer to register: Flight SQL commands
// reach this server, everything else (path descriptors, tsflight tickets
// and actions, ListFlights) the flightserver.Service.
func (s *Server) Service() flight.FlightServer {
	return &router{FlightServer: flightsql.NewFlightServerWithAllocator(s, s.alloc), svc: s.svc}
}

func (s *Server) registerSqlInfo() error {
	i32 := func(v int32) int32 { return v }
	info := map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:                        "tsflight",
		flightsql.SqlInfoFlightSqlServerVersion:                     s.opts.Version,
		flightsql.SqlInfoFlightSqlServerArrowVersion:                arrow.PkgVersion,
		flightsql.SqlInfoFlightSqlServerReadOnly:                    false, // bulk ingest writes
		flightsql.SqlInfoFlightSqlServerSql:                         true,
		flightsql.SqlInfoFlightSqlServerSubstrait:                   false,
		flightsql.SqlInfoFlightSqlServerSubstraitMinVersion:         "",
		flightsql.SqlInfoFlightSqlServerSubstraitMaxVersion:         "",
		flightsql.SqlInfoFlightSqlServerTransaction:                 i32(int32(flightsql.SqlTransactionNone)),
		flightsql.SqlInfoFlightSqlServerCancel:                      true,
		flightsql.SqlInfoFlightSqlServerBulkIngestion:               true,
		flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported: false,
		flightsql.SqlInfoFlightSqlServerStatementTimeout:            i32(0),
		flightsql.SqlInfoFlightSqlServerTransactionTimeout:          i32(0),
		flightsql.SqlInfoDDLCatalog:                                 false,
		flightsql.SqlInfoDDLSchema:                                  false,
		flightsql.SqlInfoDDLTable:                                   false,
		flightsql.SqlInfoIdentifierCase:                             i32(int32(flightsql.SqlCaseSensitivityCaseInsensitive)),
		flightsql.SqlInfoIdentifierQuoteChar:                        `"`,
		flightsql.SqlInfoQuotedIdentifierCase:                       i32(int32(flightsql.SqlCaseSensitivityCaseInsensitive)),
		flightsql.SqlInfoAllTablesAreASelectable:                    true,
		flightsql.SqlInfoNullOrdering:                               i32(int32(flightsql.SqlNullOrderingSortAtEnd)),
		flightsql.SqlInfoSearchStringEscape:                         `\`,
		flightsql.SqlInfoExtraNameChars:                             "",
		flightsql.SqlInfoSupportsColumnAliasing:                     true,
		flightsql.SqlInfoNullPlusNullIsNull:                         true,
		flightsql.SqlInfoSupportsTableCorrelationNames:              true,
		flightsql.SqlInfoSupportsDifferentTableCorrelationNames:     false,
		flightsql.SqlInfoSupportsExpressionsInOrderBy:               true,
		flightsql.SqlInfoSupportsOrderByUnrelated:                   true,
		flightsql.SqlInfoSupportsLikeEscapeClause:                   true,
		flightsql.SqlInfoSupportsNonNullableColumns:                 true,
		flightsql.SqlInfoSupportsIntegrityEnhancementFacility:       false,
		flightsql.SqlInfoSchemaTerm:                                 "schema",
		flightsql.SqlInfoProcedureTerm:                              "procedure",
		flightsql.SqlInfoCatalogTerm:                                "catalog",
		flightsql.SqlInfoCatalogAtStart:                             true,
		flightsql.SqlInfoSelectForUpdateSupported:                   false,
		flightsql.SqlInfoStoredProceduresSupported:                  false,
		flightsql.SqlInfoCorrelatedSubqueriesSupported:              true,
		flightsql.SqlInfoTransactionsSupported:                      false,
		flightsql.SqlInfoBatchUpdatesSupported:                      false,
		flightsql.SqlInfoSavePointsSupported:                        false,
		flightsql.SqlInfoNamedParametersSupported:                   false,
		flightsql.SqlInfoStoredFunctionsUsingCallSyntaxSupported:    false,
		// Bit sets, as the Flight SQL enums number them.
		flightsql.SqlInfoSupportedGroupBy:            i32(1<<0 | 1<<1),               // unrelated, beyond select
		flightsql.SqlInfoSupportedGrammar:            i32(1<<0 | 1<<1 | 1<<2),        // minimum, core, extended
		flightsql.SqlInfoANSI92SupportedLevel:        i32(1<<0 | 1<<1),               // entry, intermediate
		flightsql.SqlInfoOuterJoinsSupportLevel:      i32(2),                         // full outer joins
		flightsql.SqlInfoSupportedSubqueries:         i32(1<<0 | 1<<1 | 1<<2 | 1<<3), // comparisons, exists, in, quantified
		flightsql.SqlInfoSupportedUnions:             i32(1<<0 | 1<<1),               // union, union all
		flightsql.SqlInfoDefaultTransactionIsolation: i32(0),                         // none
	}
	for id, v := range info {
		if err := s.RegisterSqlInfo(id, v); err != nil {
			return err
		}
	}
	return nil
}
