package tableformat

import (
	"errors"
	"fmt"
	"strings"
)

// Error categories. Every error this package returns wraps exactly one of
// them, so that callers (and the one place in the servers that maps errors to
// gRPC status codes) can test with errors.Is and never parse messages.
var (
	// ErrInvalidInput: the caller asked for something malformed or
	// impossible (a bad name, an empty request, an invalid granularity).
	// Nothing was written.
	ErrInvalidInput = errors.New("invalid input")

	// ErrNotFound: the table (or a file it needs) does not exist.
	ErrNotFound = errors.New("not found")

	// ErrAlreadyExists: create of a table that already has commits.
	ErrAlreadyExists = errors.New("already exists")

	// ErrUnsupported: the table needs a protocol version or a feature this
	// build does not support; nothing was read past the compatibility
	// header and nothing was written. See [ProtocolError].
	ErrUnsupported = errors.New("unsupported table protocol or feature")

	// ErrNeedsUpgrade: a write on a table in the legacy format 6
	// (metadata with "format_version", written by timeseries-table-format
	// 0.5 and older), which is read-only until [Table.Upgrade] converts
	// it to protocol 7. Nothing was written.
	ErrNeedsUpgrade = errors.New("table needs upgrading")

	// ErrConflict: a commit lost an optimistic-concurrency race; the table
	// moved on since the writer's snapshot. Refresh and retry. See
	// [ConflictError].
	ErrConflict = errors.New("commit conflict")

	// ErrAmbiguousOutcome: a commit may or may not have taken effect (for
	// example the commit file was published but its directory could not be
	// synced). Reopen the table and reconcile before retrying.
	ErrAmbiguousOutcome = errors.New("ambiguous commit outcome")

	// ErrOverlap: an append would put a second row into an (identity,
	// index interval) that already holds one, inside the stream or against
	// committed data. Nothing was committed. See [OverlapError].
	ErrOverlap = errors.New("index interval overlap")

	// ErrCorrupt: what is on disk breaks the format's rules. See
	// [CorruptionError].
	ErrCorrupt = errors.New("corrupt table")

	// ErrStorage: the storage layer failed (I/O error, permission). The
	// operation had no effect unless the error also wraps
	// ErrAmbiguousOutcome.
	ErrStorage = errors.New("storage error")
)

// CorruptionError says what on disk is broken and where. It wraps
// [ErrCorrupt] and, when there is one, the underlying cause.
type CorruptionError struct {
	// Path is the table-relative file at fault ("" when it is the table
	// as a whole).
	Path string
	// Version is the commit version at fault, or 0.
	Version uint64
	// Reason says what rule is broken.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

func (e *CorruptionError) Error() string {
	var b strings.Builder
	b.WriteString("corrupt table")
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	if e.Version != 0 {
		fmt.Fprintf(&b, " (version %d)", e.Version)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the underlying cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

func corruptf(path string, version uint64, err error, format string, args ...any) error {
	return &CorruptionError{Path: path, Version: version, Reason: fmt.Sprintf(format, args...), Err: err}
}

// ConflictError is returned when a commit's expected version is no longer
// the table's newest version. It wraps [ErrConflict].
type ConflictError struct {
	// Expected is the version the writer built its commit on.
	Expected uint64
	// Found is the newest version seen when the conflict was detected.
	Found uint64
	// LostRace is true when the writer saw its expected version but another
	// writer created the next commit file first.
	LostRace bool
}

func (e *ConflictError) Error() string {
	if e.LostRace {
		return fmt.Sprintf("commit conflict: lost the race to create version %d (another writer committed it first)", e.Expected+1)
	}
	return fmt.Sprintf("commit conflict: expected table version %d, found %d", e.Expected, e.Found)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ProtocolError says why a table's compatibility header was refused. It
// wraps [ErrUnsupported], or [ErrCorrupt] for a header that breaks the
// monotonicity or naming rules.
type ProtocolError struct {
	// Version is the commit that carries the refused header (0 if none).
	Version uint64
	// Reason says what was refused.
	Reason string
	// Features lists the feature names at fault, if any.
	Features []string
	corrupt  bool
}

func (e *ProtocolError) Error() string {
	var b strings.Builder
	if e.corrupt {
		b.WriteString("invalid table protocol")
	} else {
		b.WriteString("unsupported table protocol")
	}
	if e.Version != 0 {
		fmt.Fprintf(&b, " in commit %d", e.Version)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if len(e.Features) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(e.Features, ", "))
	}
	return b.String()
}

// Is reports the category of the protocol error.
func (e *ProtocolError) Is(target error) bool {
	if e.corrupt {
		return target == ErrCorrupt
	}
	return target == ErrUnsupported
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

func storageErr(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrStorage, op, err)
}

// OverlapError reports rows that collide on (identity, index interval). It
// wraps [ErrOverlap].
type OverlapError struct {
	// Within is true for collisions inside one append's own input; false
	// for collisions with data committed at Version.
	Within  bool
	Version uint64
	// Count is the number of colliding (identity, interval) pairs.
	Count uint64
	// Example names one collision: identity and interval in the index's
	// own units (timestamps in RFC 3339).
	Example string
}

func (e *OverlapError) Error() string {
	if e.Within {
		return fmt.Sprintf("the input has more than one row in %d (identity, index interval) pairs, e.g. %s; at most one row per identity and interval is allowed", e.Count, e.Example)
	}
	return fmt.Sprintf("the input overlaps data already in the table (version %d) in %d (identity, index interval) pairs, e.g. %s; nothing was committed", e.Version, e.Count, e.Example)
}

// Is makes errors.Is(err, ErrOverlap) true.
func (e *OverlapError) Is(target error) bool { return target == ErrOverlap }
