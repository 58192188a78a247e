package flightserver

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// Options configure a Service. Use DefaultOptions and change fields.
type Options struct {
	// Root is the directory holding one subdirectory per table. Required.
	Root string
	// Logger receives request errors and table repairs; nil discards.
	Logger hclog.Logger
	// Alloc, when set, allocates the Arrow buffers of incoming streams and
	// of appends (tests use a checked allocator); nil means
	// memory.DefaultAllocator for incoming streams and the table package's
	// recycling pool for appends. Scans use the pool unless ScanAlloc is
	// set.
	Alloc memory.Allocator
	// ScanAlloc, when set, allocates scan output (tests use a checked
	// allocator); nil keeps the table package's pool.
	ScanAlloc memory.Allocator
	// BatchRows is the least number of rows per DoGet batch but a stream's
	// last; batches hold fewer than twice as many (0 = 65536).
	BatchRows int
	// MaxEndpoints caps the endpoints one FlightInfo splits a scan into
	// (0 = GOMAXPROCS: more parallel streams than cores only add memory).
	MaxEndpoints int
	// ScanParallelism is the segments one DoGet decodes at once (0 = 1:
	// a scan's parallelism comes from its endpoints, which clients fetch
	// at once; a second decoder per stream only competed with the others
	// and with the client for the cores, and cost memory).
	ScanParallelism int
	// ScanSlots is how many segments all DoGets together decode at once
	// (0 = GOMAXPROCS): parallel streams share the CPU instead of each
	// bringing its own workers, which bounds the server's memory.
	ScanSlots int
	// StreamBudget bounds the memory all DoGet streams hold together
	// (0 = DefaultStreamBudget, negative = no bound): the batches their
	// scans have decoded, the groups being merged and what gRPC holds
	// because a client has not read it yet. A stream's scan decodes only
	// while the budget allows; a stream is never failed for the budget,
	// it waits (see streammem.go and docs/reliability.md).
	StreamBudget int64
	// StallTimeout is how long a DoGet client may read nothing while
	// other streams wait for the stream budget before its connection is
	// closed (0 = DefaultStallTimeout, negative = never). Without budget
	// pressure a stalled client is left alone (its request deadline
	// still applies). Closing needs connections from Gate.Listener.
	StallTimeout time.Duration
	// AppendRetries bounds how often an append rebases after losing a
	// commit race (0 = 64).
	AppendRetries int
	// CompactMemory bounds the rows one compaction run by the compact
	// action holds (tableformat.CompactOptions.MemoryBytes; 0 =
	// DefaultMaintenanceMemoryBytes, 64 MiB; below
	// tableformat.MinCompactMemoryBytes makes New fail): a compaction a
	// client asks for must not take more of the server than one in the
	// background. tsflight serve sets it from --maintenance-memory.
	CompactMemory int64
	// MaxResultSize bounds the Arrow IPC stream an action answers with in
	// its one result (the last action), in bytes (0 = DefaultMaxMsgSize);
	// a larger answer is refused with ResourceExhausted naming its size.
	// Keep it at most the server's gRPC send limit (Limits.MaxSendMsgSize,
	// which gRPC enforces with MsgHeaderAllowance added); tsflight serve
	// sets both from --max-send-msg-size.
	MaxResultSize int
	// ScanCacheBytes bounds the scan cache (0 = no cache): the decoded
	// columns of segments DoGet read whole, kept so that reading a table
	// again skips decoding its Parquet, the least recently used dropped
	// first (tableformat.ScanCache). The answers are the same with or
	// without it. Its memory comes from ScanAlloc (or the scan pool) and
	// is freed by Close. tsflight serve sets it from --scan-cache-bytes
	// (default DefaultScanCacheBytes).
	ScanCacheBytes int64
	// Table tunes how tables are opened (nil = tableformat.DefaultOptions
	// with Logger).
	Table *tableformat.Options
}

// DefaultStreamBudget is the default Options.StreamBudget: 1 GiB held by
// all DoGet streams together.
const DefaultStreamBudget = 1 << 30

// DefaultScanCacheBytes is the scan cache tsflight serve keeps unless
// --scan-cache-bytes says otherwise: 256 MiB holds a whole-table read of
// about 1.4 M TSBS cpu rows decoded (864,000 rows take 154 MB), a
// quarter of the default stream budget.
const DefaultScanCacheBytes = 256 << 20

// DefaultOptions returns fresh options for root.
func DefaultOptions(root string) *Options { return &Options{Root: root} }

// Service is the Arrow Flight service of a tsflight root. It implements
// flight.FlightServer; Flight SQL wraps it (see package flightsql).
type Service struct {
	flight.BaseFlightServer
	opts   Options
	log    hclog.Logger
	alloc  memory.Allocator
	cat    *catalog.Catalog
	slots  chan struct{}
	budget *byteBudget
	cache  *tableformat.ScanCache // nil: no scan cache
	// zeroCopy is set once GRPCOptions installed the zero-copy codec.
	zeroCopy atomic.Bool
	maint    *maintainer
	traffic  traffic // counted for the metrics (metrics_service.go)
}

// DefaultBatchRows is the least number of rows per DoGet batch when the
// options leave it unset.
const DefaultBatchRows = 1 << 16

// DefaultBasics fills in the options both servers share when unset: a
// logger that discards, the default allocator and DefaultBatchRows.
func DefaultBasics(logger *hclog.Logger, alloc *memory.Allocator, batchRows *int) {
	if *logger == nil {
		*logger = hclog.NewNullLogger()
	}
	if *alloc == nil {
		*alloc = memory.DefaultAllocator
	}
	if *batchRows <= 0 {
		*batchRows = DefaultBatchRows
	}
}

// New returns the service for opts.Root, creating the directory if needed.
func New(opts *Options) (*Service, error) {
	o := *opts
	if o.Root == "" {
		return nil, Status(invalidf("the root directory is not set"))
	}
	if err := CheckLocalRoot(o.Root); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, Status(err)
	}
	o.Root = root
	DefaultBasics(&o.Logger, &o.Alloc, &o.BatchRows)
	if o.MaxEndpoints <= 0 {
		o.MaxEndpoints = runtime.GOMAXPROCS(0)
	}
	if o.AppendRetries <= 0 {
		o.AppendRetries = 64
	}
	switch {
	case o.CompactMemory == 0:
		o.CompactMemory = DefaultMaintenanceMemoryBytes
	case o.CompactMemory < tableformat.MinCompactMemoryBytes:
		return nil, Status(invalidf("CompactMemory must be at least %d bytes (1 MiB; 0 = %d), got %d", tableformat.MinCompactMemoryBytes, DefaultMaintenanceMemoryBytes, o.CompactMemory))
	}
	if o.Table == nil {
		o.Table = tableformat.DefaultOptions()
		o.Table.Logger = o.Logger.Named("table")
	}
	if o.ScanParallelism <= 0 {
		o.ScanParallelism = 1
	}
	if o.ScanSlots <= 0 {
		o.ScanSlots = runtime.GOMAXPROCS(0)
	}
	if o.StreamBudget == 0 {
		o.StreamBudget = DefaultStreamBudget
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.ScanCacheBytes < 0 {
		return nil, Status(invalidf("ScanCacheBytes must not be negative (0 = no cache), got %d", o.ScanCacheBytes))
	}
	s := &Service{opts: o, log: o.Logger, alloc: o.Alloc, slots: make(chan struct{}, o.ScanSlots),
		budget: newByteBudget(o.StreamBudget, o.StallTimeout, o.Logger.Named("stream-budget"))}
	s.cat = catalog.New(storage.Local(root), o.Table)
	s.maint = newMaintainer()
	if o.ScanCacheBytes > 0 {
		s.cache = tableformat.NewScanCache(o.ScanCacheBytes, s.scanAlloc())
	}
	return s, nil
}

// Close frees what the service keeps between calls (the scan cache's
// arrays; batches streams still send are freed when they are written).
// Call it once the gRPC server has stopped; the service still answers
// after Close, without a cache.
func (s *Service) Close() {
	if s.cache != nil {
		s.cache.Close()
	}
}

// ScanCacheStats returns the scan cache's figures (all zero without a
// cache).
func (s *Service) ScanCacheStats() tableformat.ScanCacheStats {
	if s.cache == nil {
		return tableformat.ScanCacheStats{}
	}
	return s.cache.Stats()
}

// Root returns the absolute root directory.
func (s *Service) Root() string { return s.opts.Root }

// Table opens (or returns the cached handle of) the named table, refreshed
// to its newest version.
func (s *Service) Table(ctx context.Context, name string) (*tableformat.Table, error) {
	tb, err := s.cat.Open(ctx, name)
	if err != nil {
		return nil, Status(err)
	}
	return tb, nil
}

// TableNames lists the tables under the root, sorted: damaged ones too
// (opening them says what is wrong), not the phantom directories a create
// that never committed leaves behind (see catalog.Catalog.Phantom).
func (s *Service) TableNames() ([]string, error) {
	names, err := s.cat.Tables()
	return names, Status(err)
}

// IsTable reports whether name, exactly, is one of the names TableNames
// lists, without listing the root.
func (s *Service) IsTable(name string) bool { return s.cat.IsTable(name) }

// Catalog is the service's catalog of tables.
func (s *Service) Catalog() *catalog.Catalog { return s.cat }

// scanAlloc is the allocator of scan output and of the batches DoGet
// merges from it.
func (s *Service) scanAlloc() memory.Allocator {
	if s.opts.ScanAlloc != nil {
		return s.opts.ScanAlloc
	}
	return tableformat.ScanAllocator()
}

// RecommendedGCPercent is the garbage-collection percentage (Go's GOGC)
// tsflight serve runs with. Scans recycle their large buffers, so most of
// a streaming server's heap is live data in flight and the collector has
// little to do; the default of 100 lets the heap grow to twice that before
// a collection, 50 to one and a half times. Streaming a 20 M-row table to
// two parallel readers (BenchmarkFlightDoGet), 50 held the server at about
// 205 MiB RSS instead of 260 MiB, at the same speed (measured when this was
// chosen; DoGet has needed less memory since).
const RecommendedGCPercent = 50

// streamBytesHeld is the bytes on the DoGet streams' accounts (for tests).
func (s *Service) streamBytesHeld() int64 { return s.budget.held.Load() }
