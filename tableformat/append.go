package tableformat

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/google/uuid"
)

// Segment and sidecar locations. NB: on-disk names; must not change.
const (
	appendDir          = "data/_managed/append"
	segmentCoverageDir = "_coverage/segments"
	tableCoverageDir   = "_coverage/table"
)

// AppendOptions tune one append. Use DefaultAppendOptions.
type AppendOptions struct {
	// Compression of the Parquet segment (zstd by default, as the
	// reference's newest writer).
	Compression compress.Compression
	// MaxRowsPerRowGroup closes a row group at this many rows
	// (DefaultAppendRowsPerRowGroup, 131,072, by default; must be
	// positive).
	MaxRowsPerRowGroup int64
	// MaxBytesPerRowGroup closes a row group once its encoded size reaches
	// this many bytes (128 MiB by default; 0 means no byte limit).
	MaxBytesPerRowGroup int64
	// GroupRows and GroupBytes bound a small append: one whose input has
	// at most GroupRows rows and GroupBytes bytes of Arrow buffers is read
	// into memory first, and small appends to one table handle that
	// arrive while another commits share the next segment and commit
	// (appendgroup.go). Defaults: 65,536 rows and 16 MiB. GroupRows 0
	// turns grouping off: every append writes its own segment.
	GroupRows, GroupBytes int64
	// GroupCompression is the codec of the segments small appends write
	// (Snappy by default; the zero value is Uncompressed). zstd's
	// compressor costs a 100-row append about a tenth of its CPU time for
	// a few hundred bytes; compaction rewrites small segments with
	// Compression anyway.
	GroupCompression compress.Compression
	// GroupPlainRows: a group's segment of at most this many rows is
	// written without dictionary encoding (4,096 by default; 0 or less
	// means always with). For a few hundred rows a dictionary costs more than
	// it saves: building it is most of the encoding (measured, 800 TSBS
	// rows of 21 columns: 2.3 ms to encode with dictionaries, 1.5 ms
	// without, 26 KB against 40 KB), and compaction rewrites small
	// segments with dictionaries anyway.
	GroupPlainRows int64
	// GroupWait bounds how long the leader of a group waits for the
	// appends it expects before it commits (2 ms by default; 0 never
	// waits). It expects as many as were in flight when the previous group
	// committed: that group's appends, whose writers are about to send
	// their next ones, and those queued behind it. Without the wait,
	// writers that take turns split into two halves whose groups alternate,
	// each commit carrying half of them. It waits at most half the previous
	// commit's duration, and never for a writer that is alone.
	GroupWait time.Duration
	// MaxRetries bounds how often a commit that lost a race to another
	// writer is rebased and retried (64 by default; 0 means never retry).
	// Retries wait a short random backoff that grows with each loss, so
	// that writers racing in step spread out.
	MaxRetries int
	// TableSnapshot makes the append write a full table coverage snapshot
	// (the union of every live segment's coverage) and point its commit at
	// it, byte for byte what the 0.9.0 package's append writes. By default
	// (false) the commit points at the segment-union marker instead and no
	// snapshot is written, because a snapshot's size, written again by
	// every append, grows with everything the table covers; the 0.9.0
	// package then rebuilds the union from the sidecars, and says so in
	// its log (see coverage_union.go). Set it only for a table that the
	// 0.9.0 package reads far more often than tsflight appends to it.
	TableSnapshot bool
	// CheckOnly makes Append read the whole stream and check it as it
	// would append it (schema, null keys, duplicate intervals within the
	// stream and against the table) without encoding, writing or
	// committing anything; the result then has Rows and Version (the
	// table's version checked against) only. The check a DoPut that
	// creates its table makes first, on a table in memory, is one.
	CheckOnly bool
	// noDictionary is set on the copy of the options a group's segment is
	// written with when GroupPlainRows says so.
	noDictionary bool
	// Alloc allocates the Arrow buffers of normalized batches and the
	// Parquet writer's buffers. nil means the package's recycling pool
	// (ScanAllocator): an append frees a few batches' worth of encoding
	// buffers per batch, and recycling them instead of leaving them to the
	// garbage collector made DoPut about 15% faster.
	Alloc memory.Allocator
}

// DefaultAppendRowsPerRowGroup is the row-group size of bulk appends:
// 131,072 rows. DuckDB prunes and parallelizes by row group (it does not
// read the page index), so a bulk load written as one row group of a
// million rows is read whole by a narrow query. Measured with
// BenchmarkTSBSLayouts and bench/layoutquery (864,000 TSBS rows, one
// segment, DuckDB 1.5.6 directly, load ~13 on 2 cores): geomean of six
// TSBS queries 23.6 / 23.9 / 22.6 / 33.2 ms for row groups of 64 Ki /
// 128 Ki / 256 Ki / 1 Mi rows, one host over an hour 47.9 / 28.8 / 45.0
// / 62.1 ms; the file 6.09 / 6.00 / 5.98 / 5.94 MB and the append's CPU
// 679 / 637 / 643 / 633 ms: no cost to size or speed worth the name. See
// docs/format/segments.md.
const DefaultAppendRowsPerRowGroup = 1 << 17

// DefaultAppendOptions returns a fresh AppendOptions with the defaults.
func DefaultAppendOptions() *AppendOptions {
	return &AppendOptions{
		Compression:         compress.Codecs.Zstd,
		MaxRowsPerRowGroup:  DefaultAppendRowsPerRowGroup,
		MaxBytesPerRowGroup: 128 << 20,
		MaxRetries:          64,
		GroupRows:           1 << 16,
		GroupBytes:          16 << 20,
		GroupCompression:    compress.Codecs.Snappy,
		GroupWait:           2 * time.Millisecond,
		GroupPlainRows:      4096,
	}
}

// AppendResult describes a committed append.
type AppendResult struct {
	// Version is the commit that added the segment.
	Version uint64
	// Segment is the segment as committed: the append's rows, and those of
	// the appends it was grouped with.
	Segment SegmentMeta
	// Rows is the number of rows this append added.
	Rows uint64
	// Grouped is the number of appends the commit holds (1 when the
	// append committed alone).
	Grouped int
	// Retries counts commits rebased after losing a race.
	Retries int
}

// Append writes the whole stream as one new segment and commits it. The
// rules are the reference's: the first append adopts the stream's schema
// (in the same commit); later appends match columns by name, allow the
// lossless widenings, require exact nullability, and may omit nullable
// payload columns once schema_add_columns is active. Zero-row batches are
// skipped and an empty stream is an error. At most one row may fall in each
// (identity, index interval), within the stream and against what the table
// already holds.
//
// Index bounds, row count and coverage are computed while the batches
// stream through. When another writer commits first, the append re-checks
// overlap against the new coverage and retries, up to opts.MaxRetries.
// On failure every file the attempt created is removed, except after an
// ambiguous commit outcome (ErrAmbiguousOutcome), when they are kept and
// the error names the segment.
func (t *Table) Append(ctx context.Context, rdr array.RecordReader, opts *AppendOptions) (*AppendResult, error) {
	if opts == nil {
		opts = DefaultAppendOptions()
	}
	if opts.MaxRowsPerRowGroup <= 0 {
		return nil, invalidf("MaxRowsPerRowGroup must be positive, got %d", opts.MaxRowsPerRowGroup)
	}
	mem := opts.Alloc
	if mem == nil {
		mem = scanPool
	}
	st, err := t.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Meta.CheckWrite(); err != nil {
		return nil, err
	}
	for i := range st.Segments {
		if st.Segments[i].CoveragePath == "" {
			return nil, corruptf("", st.Version, nil, "live segment %s has no coverage sidecar; appends need one for every segment", st.Segments[i].Path)
		}
	}
	norm, adopted, err := planSchema(st, rdr.Schema())
	if err != nil {
		return nil, err
	}
	canonicalSchema := st.Schema()
	if adopted != nil {
		canonicalSchema = adopted
	}

	if opts.CheckOnly {
		return t.checkStream(ctx, st, rdr, norm, mem)
	}
	if adopted == nil && opts.GroupRows > 0 {
		raw, small := bufferSmall(rdr, opts)
		if err := rdr.Err(); small && err != nil {
			for _, rec := range raw {
				rec.Release()
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr // the client went away
			}
			return nil, fmt.Errorf("%w: reading the input stream: %w", ErrInvalidInput, err)
		}
		if small {
			m, err := t.prepareMember(ctx, st, rdr.Schema(), raw, norm, opts)
			for _, rec := range raw {
				rec.Release()
			}
			if err != nil {
				return nil, err
			}
			return t.appendGrouped(m)
		}
		// Too big for a group: stream it, the batches read so far first.
		replay := &replayReader{RecordReader: rdr, held: raw}
		defer replay.release()
		rdr = replay
	}
	a := &appendAttempt{t: t, opts: opts, mem: mem, attempt: uuid.New()}
	defer a.cleanup()
	seg, err := a.writeSegment(ctx, st, rdr, norm)
	if err != nil {
		return nil, err
	}
	for retry := 0; ; retry++ {
		actions := []Action{}
		if adopted != nil {
			m := st.Meta.Clone()
			m.Schema = adopted
			if adopted.HasMetadata() {
				m.ReaderFeatures = addFeature(m.ReaderFeatures, FeatureSchemaMetadata)
				m.WriterFeatures = addFeature(m.WriterFeatures, FeatureSchemaMetadata)
			}
			actions = append(actions, UpdateTableMeta{Meta: *m})
		}
		cov, err := a.checkOverlap(ctx, st)
		if err != nil {
			return nil, err
		}
		actions = append(actions, AddSegment{Segment: seg})
		if opts.TableSnapshot {
			pointer, err := a.writeTableSnapshot(st, cov)
			if err != nil {
				return nil, err
			}
			actions = append(actions, UpdateTableCoverage{Coverage: pointer})
		} else if err := t.union.ensure(t); err != nil {
			// The segment-union marker must exist before a commit names
			// it (checked once per handle; a missing one is written again).
			return nil, err
		} else if !st.coverageIsUnion() {
			// The first tsflight append after a full snapshot (or none):
			// point the table at the marker.
			actions = append(actions, UpdateTableCoverage{Coverage: unionPointer(st.Index().Kind)})
		}
		if h := testHookBeforeCommit; h != nil && retry == 0 {
			h()
		}
		if err := a.checkFiles(); err != nil {
			return nil, err
		}
		next, err := t.commitState(ctx, st.Version, actions)
		if err == nil {
			a.committed = true
			t.covCache.put(next, cov)
			return &AppendResult{Version: next.Version, Segment: seg, Rows: seg.RowCount, Retries: retry, Grouped: 1}, nil
		}
		if errors.Is(err, ErrAmbiguousOutcome) {
			a.committed = true // keep every file: the commit may exist
			return nil, fmt.Errorf("%w (segment %s was kept; reopen the table to see whether it was committed)", err, seg.Path)
		}
		if !errors.Is(err, ErrConflict) {
			return nil, err
		}
		if retry >= opts.MaxRetries {
			return nil, fmt.Errorf("%w (the append gave up after %d retries: other writers kept committing first; nothing was committed)", err, retry)
		}
		if err := retryBackoff(ctx, retry); err != nil {
			return nil, err
		}
		// Another writer won this version: rebase on its commit.
		a.dropTableSnapshot()
		if st, err = t.Refresh(ctx); err != nil {
			return nil, err
		}
		if err := st.Meta.CheckWrite(); err != nil {
			return nil, err
		}
		if st.Schema() != nil {
			if adopted != nil && !st.Schema().Equal(adopted) {
				return nil, fmt.Errorf("%w: another writer adopted a different schema first; the input schema does not match the table's", ErrConflict)
			}
			if !st.Schema().Equal(canonicalSchema) && !schemaExtends(st.Schema(), canonicalSchema) {
				return nil, fmt.Errorf("%w: the table schema changed while appending", ErrConflict)
			}
			if adopted != nil {
				adopted = nil // the other writer's commit carries the same schema
			}
		}
	}
}

// retryBackoff waits before retry number retry+1 of a commit that lost a
// race: a random time up to 1 ms × 2^retry, at most 64 ms, or until ctx
// ends.
func retryBackoff(ctx context.Context, retry int) error {
	limit := time.Millisecond << min(retry, 6)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(limit)) + 1))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func addFeature(list []string, f string) []string {
	if slices.Contains(list, f) {
		return list
	}
	out := append(slices.Clone(list), f)
	slices.Sort(out)
	return out
}

// schemaExtends reports whether now is base plus nullable columns added at
// the end (our segment then reads null for them, which is allowed).
func schemaExtends(now, base *Schema) bool {
	return len(now.Columns) >= len(base.Columns) && slices.EqualFunc(base.Columns, now.Columns[:len(base.Columns)], Field.Equal)
}

// testHookBeforeCommit, when set by a test, runs once per append just
// before its first commit attempt (to stage a concurrent writer).
var testHookBeforeCommit func()
