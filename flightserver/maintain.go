// Background maintenance: compaction of the tables that small appends
// have filled with small segments.

package flightserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tsflight/tsflight/tableformat"
)

// MaintenanceOptions is the policy of RunMaintenance. Use
// DefaultMaintenanceOptions; the zero value of each field is documented.
type MaintenanceOptions struct {
	// Interval is how often every table is looked at (0 = 10 s). A table
	// is also looked at right after an append leaves it with enough small
	// segments to compact, at most once per second.
	Interval time.Duration
	// MinSmallSegments is how many small segments (smaller than the
	// compaction's SmallBytes) a table must have before it is compacted
	// (0 = 8): fewer cost scans little, and waiting lets a compaction
	// merge more at once.
	MinSmallSegments int
	// BytesPerSecond bounds the rate at which compaction reads segments,
	// in bytes of Parquet per second averaged over each merged group
	// (0 = 32 MiB/s; negative = no bound). It is what keeps compaction from
	// taking the cores that queries and appends need: on 2 cores a group
	// of 128 MiB is then spread over 4 s.
	BytesPerSecond int64
	// BusyShare bounds the share of the time compaction of a table may
	// run while that table takes appends (one within the last BusyWindow):
	// after a merged group that took d, the next waits d*(1-share)/share
	// (0 = DefaultBusyShare, 0.1; 1 or more, or negative = no bound). On 2
	// cores merging small segments costs about what appending them did,
	// so unbounded it takes the cores the appends need (measured, 8
	// writers of 100-row puts to one table: 124 k rows/s with maintenance
	// paused, 65 k with it unbounded, 102-106 k at a share of 0.25,
	// 117-124 k at 0.1). The bound yields to the backlog: once the table
	// has BusyBacklog times MinSmallSegments small segments, merging goes
	// at the byte rate alone, so that reads do not degrade without limit
	// under a write load that never stops; once the appends stop, so does
	// the bound.
	BusyShare float64
	// Compact is the compaction's options (nil = tableformat's defaults
	// with MaxGroups 1, so that the rate bound and a pause act between
	// groups). DryRun is ignored.
	Compact *tableformat.CompactOptions
	// QuietAfter is how long after its last append (through this server)
	// a table counts as quiet: then every small segment it has is merged,
	// whatever their number (0 = 30 s; negative = never). Until then only
	// segments of similar sizes are merged (see tierBound), which bounds
	// how often a row is rewritten while appends go on.
	QuietAfter time.Duration
	// Paused starts with maintenance paused for every table (the
	// maintenance action resumes it).
	Paused bool
	// MemoryBytes bounds the memory of the rows one compaction holds
	// (tableformat.CompactOptions.MemoryBytes, which it overrides): rows
	// beyond it are sorted in parts spilled to temporary files and merged.
	// 0 means Compact.MemoryBytes when that is set, else
	// DefaultMaintenanceMemoryBytes (64 MiB); a value below
	// tableformat.MinCompactMemoryBytes (1 MiB) makes RunMaintenance
	// return an error.
	MemoryBytes int64
}

const (
	// DefaultBusyShare is MaintenanceOptions.BusyShare's default.
	DefaultBusyShare = 0.1
	// BusyWindow is how recent a table's last append must be for the
	// table to count as busy (MaintenanceOptions.BusyShare).
	BusyWindow = time.Second
	// BusyBacklog: a busy table with this many times MinSmallSegments
	// small segments is merged without the BusyShare bound.
	BusyBacklog = 16
)

// DefaultMaintenanceMemoryBytes is the default memory bound of a
// background compaction: 64 MiB, so that maintenance takes a small share
// of a server whose streams have a budget of their own (--stream-budget).
const DefaultMaintenanceMemoryBytes = 64 << 20

// DefaultMaintenanceOptions returns a fresh policy with the defaults.
func DefaultMaintenanceOptions() *MaintenanceOptions {
	return &MaintenanceOptions{Interval: 10 * time.Second, MinSmallSegments: 8, BytesPerSecond: 32 << 20, MemoryBytes: DefaultMaintenanceMemoryBytes,
		BusyShare: DefaultBusyShare}
}

// check refuses a memory bound compaction would refuse.
func (o *MaintenanceOptions) check() error {
	if m := o.MemoryBytes; m < 0 || (m > 0 && m < tableformat.MinCompactMemoryBytes) {
		return fmt.Errorf("maintenance: MemoryBytes must be at least %d (1 MiB; 0 = %d), got %d", tableformat.MinCompactMemoryBytes, DefaultMaintenanceMemoryBytes, m)
	}
	return nil
}

func (o *MaintenanceOptions) resolve() MaintenanceOptions {
	r := *o
	if r.Interval <= 0 {
		r.Interval = 10 * time.Second
	}
	if r.MinSmallSegments <= 0 {
		r.MinSmallSegments = 8
	}
	if r.BytesPerSecond == 0 {
		r.BytesPerSecond = 32 << 20
	}
	switch {
	case r.BusyShare == 0:
		r.BusyShare = DefaultBusyShare
	case r.BusyShare < 0 || r.BusyShare > 1:
		r.BusyShare = 1
	}
	if r.QuietAfter == 0 {
		r.QuietAfter = 30 * time.Second
	}
	c := tableformat.DefaultCompactOptions()
	if o.Compact != nil {
		c = new(tableformat.CompactOptions)
		*c = *o.Compact
	}
	if c.MaxGroups <= 0 {
		c.MaxGroups = 1
	}
	switch {
	case r.MemoryBytes > 0:
		c.MemoryBytes = r.MemoryBytes
	case o.Compact == nil || o.Compact.MemoryBytes == 0:
		c.MemoryBytes = DefaultMaintenanceMemoryBytes
	}
	r.MemoryBytes = c.MemoryBytes
	c.DryRun = false
	r.Compact = c
	return r
}

// maintainer is the state of the maintenance of one Service.
type maintainer struct {
	mu        sync.Mutex
	on        bool // RunMaintenance is running
	opts      MaintenanceOptions
	pausedAll bool
	paused    map[string]bool
	tables    map[string]*tableMaintenance
	wake      chan struct{}
	// lastAppend is when each table handle last took an append.
	lastAppend map[*tableformat.Table]time.Time
}

// tableMaintenance is what maintenance did to one table.
type tableMaintenance struct {
	running   bool
	runs      int
	merged    int // source segments replaced
	lastRun   time.Time
	lastError string
	// lastValues is the version whose last-value index the loop last
	// persisted, lastValuesAt when it last tried (maintain_lastvalues.go).
	lastValues   uint64
	lastValuesAt time.Time
}

// MaintenanceInfo is the maintenance part of describe-table and the
// answer of the maintenance action, for one table.
type MaintenanceInfo struct {
	Table string `json:"table,omitempty"`
	// Enabled is false when the server runs no maintenance.
	Enabled bool `json:"enabled"`
	Paused  bool `json:"paused"`
	// Pending is the number of small segments the policy will compact: a
	// full size tier at once, or every small segment (when there are 2 or
	// more) once the table is quiet. 0 when paused.
	Pending int `json:"pending"`
	// SmallSegments and SmallBytes count the table's small segments.
	SmallSegments    int    `json:"small_segments"`
	SmallBytes       uint64 `json:"small_bytes"`
	MinSmallSegments int    `json:"min_small_segments"`
	Running          bool   `json:"running"`
	// Runs counts compactions committed since the server started, Merged
	// the small segments they replaced.
	Runs      int    `json:"runs"`
	Merged    int    `json:"merged"`
	LastRun   string `json:"last_run,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

func newMaintainer() *maintainer {
	return &maintainer{paused: map[string]bool{}, tables: map[string]*tableMaintenance{}, wake: make(chan struct{}, 1),
		lastAppend: map[*tableformat.Table]time.Time{}}
}

// RunMaintenance compacts the tables under the root as opts says until ctx
// ends, then returns once the compaction in progress (if any) has stopped;
// a compaction cut short commits nothing. It is meant to run on its own
// goroutine for the life of the server (tsflight serve does so). Only one
// may run per Service.
func (s *Service) RunMaintenance(ctx context.Context, opts *MaintenanceOptions) error {
	if opts == nil {
		opts = DefaultMaintenanceOptions()
	}
	if err := opts.check(); err != nil {
		return err
	}
	m := s.maint
	m.mu.Lock()
	if m.on {
		m.mu.Unlock()
		return errors.New("maintenance is already running")
	}
	m.on, m.opts, m.pausedAll = true, opts.resolve(), opts.Paused
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.on = false
		m.mu.Unlock()
	}()
	s.log.Info("maintenance: started", "interval", m.opts.Interval, "min_small_segments", m.opts.MinSmallSegments, "bytes_per_second", m.opts.BytesPerSecond, "busy_share", m.opts.BusyShare,
		"memory_bytes", m.opts.MemoryBytes, "paused", m.opts.Paused)
	tick := time.NewTicker(m.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.log.Info("maintenance: stopped")
			return nil
		case <-tick.C:
		case <-m.wake:
		}
		names, err := s.TableNames()
		if err != nil {
			s.log.Warn("maintenance: listing tables failed", "error", err)
			continue
		}
		for _, name := range names {
			if ctx.Err() != nil {
				break
			}
			s.maintainTable(ctx, name)
		}
	}
}

// poke asks the maintenance loop to look at the tables now (an append just
// left one with enough small segments).
func (m *maintainer) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// smallSegments counts st's segments below the compaction's size bound.
func (m *maintainer) smallSegments(st *tableformat.State) (n int, bytes uint64) {
	if m.opts.Compact == nil {
		return 0, 0 // maintenance never ran
	}
	small := m.smallBound()
	for i := range st.Segments {
		if fs := st.Segments[i].FileSize; fs != nil && int64(*fs) < small {
			n++
			bytes += *fs
		}
	}
	return n, bytes
}

// Size tiers. While a table takes appends, maintenance merges segments
// only once MinSmallSegments of them are below one tier bound (64 KiB,
// 512 KiB, 4 MiB, ... up to the small-segment bound, each MinSmallSegments
// times the last), the lowest such bound: a merged segment lands in a
// higher tier and is merged again only with segments grown to its size.
// A row is so rewritten about once per tier (five or six times from 100-row
// appends to 128 MiB segments), not once per compaction, as merging every
// small segment each time would (the write amplification of size-tiered
// compaction in Cassandra and of LSM levels).
const tierBase = 64 << 10

// tierBound returns the lowest tier bound under which st has at least
// MinSmallSegments segments, and how many it has there; 0 when none has.
func (m *maintainer) tierBound(st *tableformat.State) (bound int64, n int) {
	small := m.smallBound()
	sizes := make([]int64, 0, len(st.Segments))
	for i := range st.Segments {
		if fs := st.Segments[i].FileSize; fs != nil && int64(*fs) < small {
			sizes = append(sizes, int64(*fs))
		}
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	for b := int64(tierBase); ; b *= int64(m.opts.MinSmallSegments) {
		b = min(b, small)
		n := sort.Search(len(sizes), func(i int) bool { return sizes[i] >= b })
		if n >= m.opts.MinSmallSegments {
			return b, n
		}
		if b == small {
			return 0, 0
		}
	}
}

func (m *maintainer) smallBound() int64 {
	c := m.opts.Compact
	small := c.SmallBytes
	if small <= 0 {
		target := c.TargetBytes
		if target <= 0 {
			target = tableformat.DefaultCompactOptions().TargetBytes
		}
		small = target / 2
	}
	return small
}

// plan says what maintenance would compact in st now: the segments under
// the compaction's SmallBytes bound (bound), and how many there are.
// A quiet table merges every small segment (at least 2); a busy one the
// lowest full tier.
func (m *maintainer) plan(tb *tableformat.Table, st *tableformat.State) (bound int64, n int) {
	if b, k := m.tierBound(st); b > 0 {
		return b, k
	}
	small, _ := m.smallSegments(st)
	last, seen := m.lastAppend[tb]
	if m.opts.QuietAfter > 0 && small >= 2 && (!seen || time.Since(last) >= m.opts.QuietAfter) {
		return m.smallBound(), small
	}
	return 0, 0
}

func (m *maintainer) isPaused(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pausedAll || m.paused[name]
}

func (m *maintainer) entry(name string) *tableMaintenance {
	e := m.tables[name]
	if e == nil {
		e = &tableMaintenance{}
		m.tables[name] = e
	}
	return e
}

// maintainTable compacts one table, a group at a time, while it has at
// least MinSmallSegments small segments, maintenance is not paused and ctx
// lives, keeping to the rate bound.
func (s *Service) maintainTable(ctx context.Context, name string) {
	s.compactTable(ctx, name)
	// After the merges, so that the index is the merged table's and its
	// build never delays a merge decision (a busy table looks quiet once
	// its last append is QuietAfter old).
	s.keepLastValues(ctx, name)
}

// compactTable merges the small segments of table name while the policy
// finds some (see plan), pausing between merges (maintain_pause.go).
func (s *Service) compactTable(ctx context.Context, name string) {
	m := s.maint
	for ctx.Err() == nil && !m.isPaused(name) {
		tb, err := s.Table(ctx, name)
		if err != nil {
			return // damaged or gone: check and describe say why
		}
		st := tb.State()
		if st == nil || st.Meta.CheckWrite() != nil {
			return
		}
		m.mu.Lock()
		bound, _ := m.plan(tb, st)
		if bound == 0 {
			m.mu.Unlock()
			return
		}
		e := m.entry(name)
		e.running = true
		m.mu.Unlock()
		copts := *m.opts.Compact
		copts.SmallBytes = bound
		copts.MinSegments = 2
		if copts.Alloc == nil {
			copts.Alloc = s.scanAlloc() // the recycling pool, or what tests count
		}
		start := time.Now()
		rep, err := tb.Compact(ctx, &copts)
		took := time.Since(start)
		m.mu.Lock()
		e.running = false
		e.lastRun = time.Now()
		if err != nil {
			e.lastError = err.Error()
		} else {
			e.lastError = ""
		}
		if rep != nil && !rep.NoOp && rep.CommittedVersion > 0 {
			e.runs++
			e.merged += rep.SourceSegments
		}
		m.mu.Unlock()
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("maintenance: compaction failed", "table", name, "error", err)
			return
		case rep.NoOp:
			return // nothing the policy can merge (the small segments are alone in their windows)
		}
		s.log.Info("maintenance: compacted", "table", name, "version", rep.CommittedVersion, "segments", rep.SourceSegments, "into", rep.OutputSegments,
			"rows", rep.RowsWritten, "bytes_before", rep.BytesBefore, "bytes_after", rep.BytesAfter, "memory_peak", rep.MemoryPeak,
			"spilled_runs", rep.SpilledRuns, "spill_bytes", rep.SpillBytes, "took", took.Round(time.Millisecond))
		rate, share := m.pause(tb, rep.BytesBefore, took)
		if !m.wait(ctx, tb, rate, share) {
			return
		}
	}
}

// maintenanceInfo is the maintenance status of table name at st.
func (s *Service) maintenanceInfo(name string, st *tableformat.State) *MaintenanceInfo {
	m := s.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	info := &MaintenanceInfo{Table: name, Enabled: m.on, Paused: m.pausedAll || m.paused[name], MinSmallSegments: m.opts.MinSmallSegments}
	if !m.on || st == nil {
		return info
	}
	info.SmallSegments, info.SmallBytes = m.smallSegments(st)
	if !info.Paused {
		// What the policy will merge: a full tier now, or else every small
		// segment once the table is quiet.
		if _, n := m.tierBound(st); n > 0 {
			info.Pending = n
		} else if m.opts.QuietAfter > 0 && info.SmallSegments >= 2 {
			info.Pending = info.SmallSegments
		}
	}
	if e := m.tables[name]; e != nil {
		info.Running, info.Runs, info.Merged, info.LastError = e.running, e.runs, e.merged, e.lastError
		if !e.lastRun.IsZero() {
			info.LastRun = e.lastRun.UTC().Format(time.RFC3339Nano)
		}
	}
	return info
}

// describeWithMaintenance is describe-table's answer: the table's
// description and its maintenance status.
type describeWithMaintenance struct {
	*TableDescription
	Maintenance *MaintenanceInfo `json:"maintenance"`
}

// noteAppend is called after a committed append to tb: when it leaves the
// table with a tier to merge, the maintenance loop looks at once instead of
// at its next tick.
func (s *Service) noteAppend(tb *tableformat.Table) {
	m := s.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.on {
		return
	}
	m.lastAppend[tb] = time.Now()
	if st := tb.State(); st != nil {
		if b, _ := m.tierBound(st); b > 0 {
			m.poke()
		}
	}
}

// The maintenance action: status, pause and resume.

// ActionMaintenance names the maintenance action.
const ActionMaintenance = "maintenance"

type maintenanceRequest struct {
	// Table limits the answer (and a pause) to one table; empty means
	// every table (and the pause of all of them).
	Table string `json:"table,omitempty"`
	// Paused pauses (true) or resumes (false) maintenance; nil only reads.
	Paused *bool `json:"paused,omitempty"`
}

// MaintenanceResult is the answer of the maintenance action.
type MaintenanceResult struct {
	Enabled   bool               `json:"enabled"`
	PausedAll bool               `json:"paused_all"`
	Tables    []*MaintenanceInfo `json:"tables"`
}

func decodeMaintenanceRequest(body []byte) (*maintenanceRequest, error) {
	var req maintenanceRequest
	if err := decodeJSON(ActionMaintenance, body, &req); err != nil {
		return nil, err
	}
	if req.Table != "" {
		if err := ValidateTableName(req.Table); err != nil {
			return nil, err
		}
	}
	return &req, nil
}

func (s *Service) maintenanceAction(ctx context.Context, body []byte) (any, error) {
	req, err := decodeMaintenanceRequest(body)
	if err != nil {
		return nil, err
	}
	names := []string{req.Table}
	if req.Table == "" {
		if names, err = s.TableNames(); err != nil {
			return nil, err
		}
	}
	states := make(map[string]*tableformat.State, len(names))
	for _, name := range names {
		tb, err := s.Table(ctx, name)
		if err != nil {
			if req.Table != "" {
				return nil, err
			}
			continue // a damaged table: describe and check say why
		}
		states[name] = tb.State()
	}
	m := s.maint
	if req.Paused != nil {
		m.mu.Lock()
		if req.Table == "" {
			m.pausedAll = *req.Paused
			if !*req.Paused {
				clear(m.paused)
			}
		} else {
			m.paused[req.Table] = *req.Paused
		}
		m.mu.Unlock()
		s.log.Info("maintenance: paused", "table", req.Table, "paused", *req.Paused)
		if !*req.Paused {
			m.poke()
		}
	}
	m.mu.Lock()
	res := &MaintenanceResult{Enabled: m.on, PausedAll: m.pausedAll, Tables: []*MaintenanceInfo{}}
	m.mu.Unlock()
	sort.Strings(names)
	for _, name := range names {
		if st := states[name]; st != nil {
			res.Tables = append(res.Tables, s.maintenanceInfo(name, st))
		}
	}
	return res, nil
}
