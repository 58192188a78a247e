//go:build duckdb_arrow

package flightsql

import (
	"context"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
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
	// MemoryLimit is DuckDB's memory_limit setting, e.g. "4GB" ("" =
	// DuckDB's default, 80% of RAM).
	MemoryLimit string
	// MaxPrepared bounds the open prepared statements (0 = 4096); the
	// least recently used is closed when a new one would exceed it.
	MaxPrepared int
	// PreparedIdle closes prepared statements unused for this long (0 =
	// 1 hour).
	PreparedIdle time.Duration
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

// DefaultOptions returns fresh options.
func DefaultOptions() *Options { return &Options{MetadataCache: true} }

// Server is the Flight SQL side of a tsflight root: it implements
// flightsql.Server over the tables of a flightserver.Service. Register
// the value of Service, which also routes plain Flight calls to the
// flightserver.Service.
type Server struct {
	flightsql.BaseServer
	svc     *flightserver.Service
	opts    Options
	log     hclog.Logger
	alloc   memory.Allocator
	engine  *engine
	segCols segColumns

	prepared preparedStore
	ready    readyCache
	parsed   analysisCache
	verified analysisCache // rewritten texts that passed verifyRewrite, by SHA-256
	cancelMu sync.Mutex
	running  map[string]context.CancelFunc // statement id → cancel
	// cancelled are statement ids cancelled before they ran, and when.
	cancelled map[string]time.Time
}

// New starts the embedded DuckDB and returns the Flight SQL server of svc.
// Close releases DuckDB.
func New(ctx context.Context, svc *flightserver.Service, opts *Options) (*Server, error) {
	o := *opts
	if o.MaxResultRows < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "MaxResultRows must not be negative, got %d", o.MaxResultRows)
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Alloc == nil {
		o.Alloc = memory.DefaultAllocator
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 1 << 16
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 8 << 20
	}
	if o.MaxPrepared <= 0 {
		o.MaxPrepared = 4096
	}
	if o.PreparedIdle <= 0 {
		o.PreparedIdle = time.Hour
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	eng, err := newEngine(ctx, svc.Root(), &o)
	if err != nil {
		return nil, err
	}
	s := &Server{svc: svc, opts: o, log: o.Logger, alloc: o.Alloc, engine: eng, running: map[string]context.CancelFunc{}, cancelled: map[string]time.Time{}}
	s.Alloc = o.Alloc
	s.prepared.init(o.MaxPrepared, o.PreparedIdle)
	if err := s.registerSqlInfo(); err != nil {
		eng.close()
		return nil, err
	}
	return s, nil
}

// Close shuts DuckDB down. Call it after the gRPC server has stopped.
func (s *Server) Close() error {
	s.ready.closeAll()
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
