// Compaction: many small segments (a table fed by frequent small appends)
// are merged into few large ones, sorted by (UTC hour of a timestamp index
// by default, entity columns, index; see compact_sort.go), in one
// commit that removes the sources and adds the outputs. The rows and the
// coverage stay exactly the same; only the files that hold them change.
//
// compact.go has the API and the commit loop, compact_plan.go the choice of
// groups, compact_write.go writing and verifying a group's outputs,
// compact_runs.go reading a group within its memory bound
// (compact_memory.go), compact_sort.go and compact_gather.go sorting rows
// in memory, compact_spill.go the temporary runs and compact_merge.go
// their merge.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// Compaction defaults.
const (
	// DefaultCompactTargetBytes is the size an output segment is rolled at,
	// and the most source bytes one group merges: 128 MiB, the row-group
	// byte limit appends use, so that an output has about as many bytes as
	// one full append row group.
	DefaultCompactTargetBytes = 128 << 20
	// DefaultCompactRowsPerRowGroup bounds the rows of an output row group.
	// Outputs are sorted by (time bucket, entity, index), so each row
	// group holds a narrow slice of time and of identities, and its
	// statistics (and the page index) let scans and SQL skip most of a
	// file. 65,536 rows is also the batch size scans decode, so a row
	// group is about one batch.
	DefaultCompactRowsPerRowGroup = 1 << 16
	// DefaultCompactMaxBytes bounds the source bytes one Compact call
	// merges (1 GiB, eight full groups), so that a background policy can
	// call it repeatedly and each call stays short.
	DefaultCompactMaxBytes = 1 << 30
	// DefaultCompactMemoryBytes bounds the decoded rows one compaction
	// holds (CompactOptions.MemoryBytes): 128 MiB. A group of small
	// segments compresses 10-25 times on disk, so its 128 MiB of sources
	// can decode to gigabytes; what does not fit is sorted a part at a
	// time into temporary runs and merged.
	DefaultCompactMemoryBytes = 128 << 20
	// MinCompactMemoryBytes is the smallest memory bound accepted (1 MiB).
	MinCompactMemoryBytes = 1 << 20
	// DefaultCompactSortBucket is the time bucket outputs are sorted by
	// first (CompactOptions.SortBucket): one hour, so that a row group of
	// 65,536 rows holds a few hours at most and a query of one entity over
	// an hour reads a few pages (measured: docs/format/segments.md).
	DefaultCompactSortBucket = time.Hour
)

// CompactOptions tune one [Table.Compact]. Use [DefaultCompactOptions];
// Compact(ctx, nil) uses the defaults. For a hand-built value the zero
// value of each field means what its comment says.
type CompactOptions struct {
	// TargetBytes is the size, in Parquet bytes, at which an output
	// segment is closed and the next one begun, and the most source bytes
	// (their recorded file_size) one group merges. 0 means
	// DefaultCompactTargetBytes (128 MiB); negative is refused.
	TargetBytes int64
	// SmallBytes: a live segment whose file_size is below it is a
	// candidate for merging. 0 (also the default) means TargetBytes/2, so
	// that any two candidates fit together in one group and a segment at
	// least half the target, already within a factor of two of the ideal
	// size, is left alone. Negative, or above TargetBytes, is refused.
	SmallBytes int64
	// MinSegments is the fewest sources a group may merge. 0 means 2;
	// 1 and negative values are refused (a group of one would rewrite a
	// small segment into another small segment, call after call).
	MinSegments int
	// MaxRowsPerRowGroup bounds the rows of each output row group. 0 means
	// DefaultCompactRowsPerRowGroup (65,536); negative is refused.
	MaxRowsPerRowGroup int64
	// SortBucket is the length of the UTC time buckets the rows of a
	// timestamp-indexed table are sorted by first: outputs hold their rows
	// by (bucket, entity columns, index), so that each row group covers a
	// narrow time range and, inside it, each entity's rows are contiguous.
	// 0 means DefaultCompactSortBucket (one hour). It must be a whole
	// number of seconds, at least one; shorter or fractional values, and
	// negative ones, are refused. Buckets are counted from the Unix epoch.
	// Integer indexes have no buckets: their rows are sorted by (entity
	// columns, index).
	SortBucket time.Duration
	// Compression of the output segments. The zero value is
	// compress.Codecs.Uncompressed; the default is zstd, as appends.
	Compression compress.Compression
	// DryRun plans and reports what would be merged, reading only the log
	// and the candidates' coverage sidecars; it writes and commits
	// nothing.
	DryRun bool
	// MaxRetries bounds how often a commit that lost a race is retried on
	// the newer version (64 by default, as appends; 0 means never retry).
	MaxRetries int
	// MaxGroups bounds the groups one call merges; 0 means no bound.
	MaxGroups int
	// MaxBytes bounds the source bytes one call merges (the first group
	// is always taken whole); 0 means no bound, the default is
	// DefaultCompactMaxBytes (1 GiB). A caller compacting in the
	// background calls again while CompactReport.Remaining is positive.
	MaxBytes int64
	// Alloc allocates the decoded rows and the Parquet writer's buffers;
	// nil means the package's recycling pool (ScanAllocator).
	Alloc memory.Allocator
	// MemoryBytes bounds the memory of the rows one group holds at a
	// time: decoded batches, the sort index, batches gathered for the
	// writer and the writer's open row group. 0 means
	// DefaultCompactMemoryBytes (128 MiB); below MinCompactMemoryBytes
	// (1 MiB) is refused. A group whose rows do not fit is sorted a part
	// at a time into temporary files (SpillDir) that are merged into the
	// outputs; one that fits is written straight from memory. Outside the
	// bound, and independent of the group's size: the Parquet page
	// buffers of the two sources being decoded, the dictionary pages of
	// the open output row group, and the group's coverage.
	MemoryBytes int64
	// SpillDir is the directory of the temporary runs; "" means
	// os.TempDir() ($TMPDIR). The files have no name (created without one
	// on Linux, else removed at once), so that nothing is left there even
	// when the process is killed; the first spill of a call removes
	// tsflight-compact-*.arrows files left there by killed processes. They
	// hold, LZ4-compressed, the rows that could not be written while the
	// group was read (see Compact): none when a table fed in time order has
	// buckets that fit the bound, else each row once when it was fed in
	// time order (TSBS rows: about 0.3 times their decoded size; see
	// CompactReport.SpillBytes).
	SpillDir string

	// planLegacy lets a dry run plan on a format-6 table (Upgrade's
	// report of its compaction step, before the log is converted).
	planLegacy bool
}

// DefaultCompactOptions returns a fresh CompactOptions with the defaults:
// 128 MiB targets, candidates below half of it (64 MiB; SmallBytes 0
// follows TargetBytes), at least 2 sources a group, 65,536 rows per row
// group, rows sorted by the hour first, zstd, 64 retries, at most 1 GiB of
// sources per call, no group bound, 128 MiB of memory, runs spilled to
// os.TempDir().
func DefaultCompactOptions() *CompactOptions {
	return &CompactOptions{
		MemoryBytes:        DefaultCompactMemoryBytes,
		TargetBytes:        DefaultCompactTargetBytes,
		MinSegments:        2,
		MaxRowsPerRowGroup: DefaultCompactRowsPerRowGroup,
		SortBucket:         DefaultCompactSortBucket,
		Compression:        compress.Codecs.Zstd,
		MaxRetries:         64,
		MaxBytes:           DefaultCompactMaxBytes,
	}
}

// resolve validates the options and fills in the zero values.
func (o *CompactOptions) resolve() (*CompactOptions, error) {
	if o == nil {
		o = DefaultCompactOptions()
	}
	r := *o
	switch {
	case r.TargetBytes < 0:
		return nil, invalidf("compact: TargetBytes must be positive (0 = %d), got %d", DefaultCompactTargetBytes, r.TargetBytes)
	case r.SmallBytes < 0:
		return nil, invalidf("compact: SmallBytes must not be negative (0 = TargetBytes/2), got %d", r.SmallBytes)
	case r.MinSegments < 0 || r.MinSegments == 1:
		return nil, invalidf("compact: MinSegments must be at least 2 (0 = 2), got %d", r.MinSegments)
	case r.MaxRowsPerRowGroup < 0:
		return nil, invalidf("compact: MaxRowsPerRowGroup must be positive (0 = %d), got %d", DefaultCompactRowsPerRowGroup, r.MaxRowsPerRowGroup)
	case r.SortBucket < 0 || (r.SortBucket > 0 && r.SortBucket < time.Second) || r.SortBucket%time.Second != 0:
		return nil, invalidf("compact: SortBucket must be a whole number of seconds, at least 1s (0 = %v), got %v", DefaultCompactSortBucket, r.SortBucket)
	case r.MaxRetries < 0:
		return nil, invalidf("compact: MaxRetries must not be negative, got %d", r.MaxRetries)
	case r.MaxGroups < 0:
		return nil, invalidf("compact: MaxGroups must not be negative (0 = no bound), got %d", r.MaxGroups)
	case r.MaxBytes < 0:
		return nil, invalidf("compact: MaxBytes must not be negative (0 = no bound), got %d", r.MaxBytes)
	case r.MemoryBytes != 0 && r.MemoryBytes < MinCompactMemoryBytes:
		return nil, invalidf("compact: MemoryBytes must be at least %d (1 MiB; 0 = %d), got %d", MinCompactMemoryBytes, DefaultCompactMemoryBytes, r.MemoryBytes)
	}
	if _, err := compress.GetCodec(r.Compression); err != nil {
		return nil, invalidf("compact: Compression %v is not supported: %v", r.Compression, err)
	}
	if r.TargetBytes == 0 {
		r.TargetBytes = DefaultCompactTargetBytes
	}
	if r.SmallBytes == 0 {
		r.SmallBytes = r.TargetBytes / 2
	}
	if r.SmallBytes > r.TargetBytes {
		return nil, invalidf("compact: SmallBytes %d is above TargetBytes %d (a candidate must fit in a group)", r.SmallBytes, r.TargetBytes)
	}
	if r.MinSegments == 0 {
		r.MinSegments = 2
	}
	if r.MaxRowsPerRowGroup == 0 {
		r.MaxRowsPerRowGroup = DefaultCompactRowsPerRowGroup
	}
	if r.SortBucket == 0 {
		r.SortBucket = DefaultCompactSortBucket
	}
	if r.Alloc == nil {
		r.Alloc = scanPool
	}
	if r.MemoryBytes == 0 {
		r.MemoryBytes = DefaultCompactMemoryBytes
	}
	return &r, nil
}

// CompactGroup is one merge: contiguous small segments in index order and
// the segments that replace them.
type CompactGroup struct {
	// Sources are the merged segments, ordered by index_min.
	Sources []string `json:"sources"`
	// SourceBytes sums their recorded file_size.
	SourceBytes uint64 `json:"source_bytes"`
	// Rows is the number of rows merged (from the log in a dry run).
	Rows uint64 `json:"rows"`
	// IndexMin and IndexMax bound the group's index window, in the
	// index's own units (RFC 3339 for timestamps).
	IndexMin string `json:"index_min"`
	IndexMax string `json:"index_max"`
	// Outputs are the new segments (none in a dry run).
	Outputs []string `json:"outputs"`
	// OutputBytes sums their sizes.
	OutputBytes uint64 `json:"output_bytes"`
}

// CompactReport says what a [Table.Compact] call merged, or would merge.
type CompactReport struct {
	// StartingVersion is the version the call planned on.
	StartingVersion uint64 `json:"starting_version"`
	// CommittedVersion is the version of the compaction commit (0 when
	// nothing was committed: a dry run, a no-op, an unknown outcome).
	CommittedVersion uint64 `json:"committed_version"`
	DryRun           bool   `json:"dry_run"`
	// NoOp is true when there was nothing to merge (no group of at least
	// MinSegments candidates, or every group lost its sources to another
	// compaction).
	NoOp bool `json:"no_op"`
	// Retries counts commits retried after losing a race.
	Retries int `json:"retries"`
	// Groups are the merges committed (or planned, in a dry run).
	Groups []CompactGroup `json:"groups"`
	// DroppedGroups counts groups written but not committed because
	// another writer removed one of their sources first (their files were
	// removed).
	DroppedGroups int `json:"dropped_groups"`
	// Remaining counts the candidate segments this call did not consider
	// because of MaxGroups or MaxBytes: call again while it is positive.
	Remaining int `json:"remaining"`
	// Totals over Groups.
	SourceSegments int    `json:"source_segments"`
	OutputSegments int    `json:"output_segments"`
	RowsRead       uint64 `json:"rows_read"`
	RowsWritten    uint64 `json:"rows_written"`
	BytesBefore    uint64 `json:"bytes_before"`
	BytesAfter     uint64 `json:"bytes_after"`
	// MemoryPeak is the most memory the call's rows held at once (Arrow
	// buffers and sort index; see CompactOptions.MemoryBytes).
	MemoryPeak uint64 `json:"memory_peak,omitempty"`
	// SpilledRuns counts the sorted runs written to temporary files
	// because a group's rows did not fit MemoryBytes, and SpillBytes
	// their bytes (0 when every group fitted).
	SpilledRuns int    `json:"spilled_runs,omitempty"`
	SpillBytes  uint64 `json:"spill_bytes,omitempty"`
}

// Compact merges small segments into large ones and commits the exchange
// in one commit.
//
// Planning: the candidates are the live segments with a recorded
// file_size below SmallBytes and a coverage sidecar whose pairs match
// their row count one for one (a segment holding rows without an index
// value, which the 0.9.0 package may write, is left as it is). They are
// sorted by index_min and packed greedily into groups of at most
// TargetBytes of sources, so that each output covers a compact window of
// the index; groups of fewer than MinSegments sources are not merged, and
// MaxGroups and MaxBytes end the plan early (Remaining says how many
// candidates were left for a later call).
//
// Each group's rows are read through the scan path, aligned to the
// current schema (segments written before add_columns read null in the
// newer columns), sorted by (entity columns…, index), and written as new
// segments under data/_managed/append/ with their coverage sidecars, rolled
// at TargetBytes, in row groups of MaxRowsPerRowGroup rows (fewer when a
// quarter of MemoryBytes cannot hold that many decoded). Before anything
// is committed each group is verified: the rows written equal the rows
// read and the rows the log records, and the union of the outputs'
// coverage equals the union of the sources' sidecars, identity by
// identity. A mismatch is an ErrCorrupt error and nothing is committed.
//
// All groups go in one commit: a RemoveSegment for every source and an
// AddSegment for every output; the table coverage pointer is left alone,
// since the coverage does not change (the reference's optimize commits the
// same shape). The table's lock is held only inside Commit, so appends
// go on meanwhile. When another writer commits first, Compact refreshes:
// groups whose sources are all still live are committed again as they
// are; a group that lost a source (another compaction merged it) is
// dropped and its files removed. It retries up to MaxRetries times.
//
// The replaced files stay on disk: older versions still name them, and
// removing them is for a cleanup of expired versions, not for Compact.
//
// Memory: a group's rows are read in batches and held up to MemoryBytes
// (rows, sort index, batches being gathered, the output's open row group;
// CompactReport.MemoryPeak says how much was held). A group whose rows fit
// is sorted in memory. Otherwise a full buffer writes its rows of the time
// buckets no source still to read reaches (sources are read in order of
// index_min), as long as they are at least half of it and nothing was
// spilled; else it is sorted and spilled as a run, an LZ4-compressed
// Arrow IPC stream in a temporary file of SpillDir (without a name, so
// that nothing outlives the call, not even a killed process), and the runs
// are merged into the outputs, each opened when the merge reaches its
// first time bucket, at most 16 at a time.
//
// Errors wrap the package's categories: invalid options are
// ErrInvalidInput naming the field; a cancelled ctx returns ctx.Err() with
// nothing committed. On any failure the files the call wrote are removed,
// except after an ambiguous commit outcome (ErrAmbiguousOutcome), when they
// are kept (the commit may exist) and the report of what was attempted is
// returned with the error.
func (t *Table) Compact(ctx context.Context, opts *CompactOptions) (*CompactReport, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := t.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Meta.CheckWrite(); err != nil && !(o.DryRun && o.planLegacy && st.Meta.NeedsUpgrade()) {
		return nil, err
	}
	plan, err := t.planCompaction(ctx, st, o)
	if err != nil {
		return nil, ctxOr(ctx, err)
	}
	rep := &CompactReport{StartingVersion: st.Version, DryRun: o.DryRun, Remaining: plan.remaining, Groups: []CompactGroup{}}
	if len(plan.groups) == 0 {
		rep.NoOp = true
		return rep, nil
	}
	if o.DryRun {
		for _, g := range plan.groups {
			rep.Groups = append(rep.Groups, g.report())
		}
		rep.total()
		return rep, nil
	}

	run := &compactRun{t: t, opts: o, acct: newCompactAccount(o.Alloc)}
	defer run.cleanup()
	defer run.note(rep)
	for _, g := range plan.groups {
		if err := run.writeGroup(ctx, st, g); err != nil {
			return nil, ctxOr(ctx, err)
		}
	}
	if err := run.syncParents(); err != nil {
		return nil, ctxOr(ctx, err)
	}

	groups := plan.groups
	for retry := 0; ; retry++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if h := testHookCompactBeforeCommit; h != nil {
			h(retry)
		}
		if err := run.checkFiles(groups); err != nil {
			return nil, err
		}
		v, err := t.Commit(ctx, st.Version, compactActions(groups))
		if err == nil {
			run.committed = true
			rep.CommittedVersion, rep.Retries = v, retry
			for _, g := range groups {
				rep.Groups = append(rep.Groups, g.report())
			}
			rep.total()
			return rep, nil
		}
		if errors.Is(err, ErrAmbiguousOutcome) {
			run.committed = true // keep every file: the commit may exist
			rep.Retries = retry
			for _, g := range groups {
				rep.Groups = append(rep.Groups, g.report())
			}
			rep.total()
			return rep, fmt.Errorf("%w (compaction of %d segments into %d: the new segments were kept; reopen the table to see whether it was committed)",
				err, rep.SourceSegments, rep.OutputSegments)
		}
		if !errors.Is(err, ErrConflict) {
			return nil, ctxOr(ctx, err)
		}
		if retry >= o.MaxRetries {
			return nil, fmt.Errorf("%w (the compaction gave up after %d retries: other writers kept committing first; nothing was committed)", err, retry)
		}
		if err := retryBackoff(ctx, retry); err != nil {
			return nil, err
		}
		next, err := t.Refresh(ctx)
		if err != nil {
			return nil, ctxOr(ctx, err)
		}
		if err := next.Meta.CheckWrite(); err != nil {
			return nil, err
		}
		if !next.Schema().Equal(st.Schema()) && !schemaExtends(next.Schema(), st.Schema()) {
			return nil, fmt.Errorf("%w: the table schema changed while compacting; nothing was committed", ErrConflict)
		}
		// Keep the groups whose sources are all still live; the others
		// were taken by another writer (a compaction): drop them.
		kept := groups[:0:0]
		for _, g := range groups {
			if g.allLive(next) {
				kept = append(kept, g)
				continue
			}
			run.drop(g)
			rep.DroppedGroups++
		}
		groups, st = kept, next
		if len(groups) == 0 {
			rep.NoOp, rep.Retries = true, retry+1
			return rep, nil
		}
	}
}

// testHookCompactBeforeCommit, when set by a test, runs before each commit
// attempt of a compaction (retry counts them from 0).
var testHookCompactBeforeCommit func(retry int)

// ctxOr returns ctx's error when ctx ended (the failure is its doing),
// else err.
func ctxOr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// compactActions is the commit of the given groups: per group a
// RemoveSegment for each source, then an AddSegment for each output.
func compactActions(groups []*compactGroup) []Action {
	var out []Action
	for _, g := range groups {
		for i := range g.sources {
			out = append(out, RemoveSegment{Path: g.sources[i].Path})
		}
		for i := range g.outputs {
			out = append(out, AddSegment{Segment: g.outputs[i]})
		}
	}
	return out
}

// note fills in what the call's memory account and spills saw.
func (r *compactRun) note(rep *CompactReport) {
	rep.MemoryPeak = uint64(max(r.acct.peak.Load(), 0))
	rep.SpilledRuns, rep.SpillBytes = r.spillRuns, r.spillBytes
}

// total fills in the report's totals from its groups.
func (r *CompactReport) total() {
	for _, g := range r.Groups {
		r.SourceSegments += len(g.Sources)
		r.OutputSegments += len(g.Outputs)
		r.BytesBefore += g.SourceBytes
		r.BytesAfter += g.OutputBytes
		if !r.DryRun {
			r.RowsRead += g.Rows
			r.RowsWritten += g.Rows
		}
	}
}
