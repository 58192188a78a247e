// Package tableformat reads and writes tsflight tables: directories in the
// log-structured time-series table format of timeseries-table-format
// (protocol 7), byte-compatible with its 0.9.0 Python package, so that a
// table written by either opens in the other.
//
// A table is a directory holding a transaction log (_timeseries_log/: a
// CURRENT pointer and one JSON commit per version), immutable Parquet
// segments and RoaringBitmap coverage sidecars. The on-disk format is
// described artifact by artifact in docs/format/.
//
// # Core types
//
//   - [Table] is a handle on one table directory. [Create] and [Open] return
//     one; [Table.Refresh] loads newer commits; [Table.Commit] writes the next
//     version under optimistic concurrency.
//   - [State] is an immutable snapshot at one version: [TableMeta] (index
//     spec, logical schema, protocol header), the live [SegmentMeta]s, the
//     coverage pointer and the table properties.
//   - [Action] is one log entry: [AddSegment], [RemoveSegment],
//     [UpdateTableMeta], [UpdateTableCoverage], or tsflight's
//     [SetTableProperties] (which the 0.9.0 loader skips).
//   - [Table.Append] writes one segment per append; small appends arriving
//     together share one (group commit). [Table.Compact] merges small
//     segments; [Table.Vacuum] deletes files no retained version needs.
//   - [Table.Scan] reads a snapshot as Arrow batches ([ScanOptions]: an
//     index range, columns, entities), pruning segments by the log's
//     statistics; [Table.Coverage] and [Table.Gaps] answer which (entity,
//     interval) pairs hold data from the coverage bitmaps alone. The
//     package's examples (ExampleCreate, ExampleTable_Append,
//     ExampleTable_Scan, ExampleTable_Coverage) walk through them.
//   - Package tableformat/catalog keeps many tables under one root, one
//     directory each, by name.
//   - Every CheckpointInterval commits the state is written beside the log
//     (a checkpoint), which Open reads instead of replaying every commit.
//   - storage.FS (package tableformat/storage) is the storage seam: a local
//     directory, an in-memory file system with a power-loss model, and a
//     fault-injecting wrapper for tests.
//
// # Compatibility
//
// Every read runs the reader check (protocol 7 and every required reader
// feature supported) and every write also the writer check, before any
// dependent payload is decoded, any input read or any file created. The
// loader inspects raw commit JSON for compatibility headers first, skips
// unknown actions when no unsupported reader feature is declared, and treats
// malformed known actions as corruption. Supported features: reader
// schema_add_columns and schema_metadata, writer schema_metadata.
//
// # Commits and crashes
//
// A commit is written to a temporary file, fsynced, and hard-linked to its
// version's name: the link is the exclusive create, so two writers never
// both win a version and no commit name ever points at a partial file. After
// the directory fsync the commit is durable and committed; CURRENT is then
// published as a hint. Readers roll forward over valid commit files above
// CURRENT, and writers and Open republish CURRENT, so a crash between the
// two steps never blocks later writers (it does in the reference).
//
// # Errors
//
// Every error wraps one category sentinel ([ErrInvalidInput], [ErrNotFound],
// [ErrAlreadyExists], [ErrUnsupported], [ErrNeedsUpgrade], [ErrConflict],
// [ErrAmbiguousOutcome], [ErrCorrupt], [ErrStorage]); test with errors.Is.
// [CorruptionError], [ConflictError] and [ProtocolError] carry details.
//
// # Caveats
//
// Only local storage with POSIX hard links, exclusive create and atomic
// rename is supported. Running writers of the reference implementation
// concurrently with tsflight writers on one table is not supported (see
// docs/format/current.md). A State must not be modified by callers.
package tableformat
