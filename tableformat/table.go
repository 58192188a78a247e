package tableformat

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// Table is a handle on one table directory. It holds the snapshot it last
// loaded; [Table.Refresh] moves it forward. A Table is safe for concurrent
// use; commits through one handle are serialized, and commits from other
// handles or processes are detected by optimistic concurrency.
type Table struct {
	fs   storage.FS
	opts *Options
	log  logStore

	mu    sync.Mutex // serializes commits and refreshes
	state *State     // replaced, never mutated

	upgradeMu sync.Mutex // serializes Upgrade calls (upgrade.go)

	covCache coverageCache
	newest   newestCache // per-sidecar newest interval per identity
	last     lastCache   // the newest last-value index built (lastvalues.go)
	union    unionMarker // the segment-union marker is known to exist
	groups   appendGroups
	stamps   commitStamps // commit timestamps, for the keep window

	pastMu sync.Mutex
	past   map[uint64]*State // snapshots of older versions, for pinned reads
}

// CreateOptions describes a new table.
type CreateOptions struct {
	// Index is required.
	Index IndexSpec
	// Schema is optional: without it the first append adopts one.
	Schema *Schema
}

// Create makes a new table in fsys (whose root is the table directory) by
// committing version 1 with a single UpdateTableMeta. It fails with
// ErrAlreadyExists if the directory already holds commits.
func Create(ctx context.Context, fsys storage.FS, co CreateOptions, opts *Options) (*Table, error) {
	if opts == nil {
		opts = DefaultOptions()
	}
	if err := co.Index.Validate(); err != nil {
		return nil, err
	}
	meta := &TableMeta{
		Index:          &co.Index,
		Schema:         co.Schema,
		CreatedAt:      opts.now().UTC(),
		Protocol:       ProtocolVersion,
		ReaderFeatures: []string{},
		WriterFeatures: []string{},
	}
	meta.Index.EntityColumns = nonNil(slices.Clone(co.Index.EntityColumns))
	if co.Schema != nil && co.Schema.HasMetadata() {
		meta.ReaderFeatures = []string{FeatureSchemaMetadata}
		meta.WriterFeatures = []string{FeatureSchemaMetadata}
	}
	if err := meta.validate(); err != nil {
		if errors.Is(err, ErrInvalidInput) {
			return nil, err
		}
		return nil, invalidf("%v", err)
	}
	t := newTable(fsys, opts)
	st, _, err := t.log.replay(ctx, nil)
	if err != nil {
		return nil, err
	}
	if st != nil {
		return nil, fmt.Errorf("%w: the directory already holds a table at version %d", ErrAlreadyExists, st.Version)
	}
	if _, err := t.commitLocked(ctx, []Action{UpdateTableMeta{Meta: *meta}}); err != nil {
		var ce *ConflictError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("%w: another writer created the table first", ErrAlreadyExists)
		}
		return nil, err
	}
	return t, nil
}

// Open loads the table in fsys. An empty directory is ErrNotFound. Commit
// files found above CURRENT are valid commits whose publication was cut
// short; Open reads them and, unless opts.ReadOnly, rolls CURRENT forward.
func Open(ctx context.Context, fsys storage.FS, opts *Options) (*Table, error) {
	if opts == nil {
		opts = DefaultOptions()
	}
	t := newTable(fsys, opts)
	if _, err := t.Refresh(ctx); err != nil {
		return nil, err
	}
	if t.state == nil {
		return nil, fmt.Errorf("%w: no table here (the log has no commits)", ErrNotFound)
	}
	return t, nil
}

func newTable(fsys storage.FS, opts *Options) *Table {
	return &Table{fs: fsys, opts: opts, log: logStore{fs: fsys, opts: opts}}
}

// FS returns the table's storage.
func (t *Table) FS() storage.FS { return t.fs }

// State returns the snapshot the handle holds. It is immutable.
func (t *Table) State() *State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// Refresh loads the commits made since the handle's snapshot and returns
// the new snapshot. It first checks that the log still extends the
// snapshot: commit 1 (the table's identity) and the commit at the
// snapshot's version must be byte for byte the ones it was replayed from
// (a CURRENT behind the snapshot is fine while those commit files exist,
// as after a crash). When they are not (the directory was replaced: a
// restore from backup, a drop and re-create), the handle is rebuilt from a
// full replay of the new log, with every cache and past snapshot dropped,
// and a warning is logged.
func (t *Table) Refresh(ctx context.Context) (*State, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refreshLocked(ctx)
}

func (t *Table) refreshLocked(ctx context.Context) (*State, error) {
	base := t.state
	if base != nil {
		same, why, err := t.log.sameLog(base)
		if err != nil {
			return nil, err
		}
		if !same {
			// The directory holds another table (or another history) than
			// the one this handle replayed: rebuild from scratch and keep
			// nothing derived from the old log.
			t.opts.logger().Warn("the table directory no longer holds the log this handle loaded; reloading it from scratch", "handle_version", base.Version, "reason", why)
			base = nil
		}
	}
	st, rolled, err := t.log.replay(ctx, base)
	if err != nil {
		return nil, err
	}
	if base == nil && t.state != nil {
		if st == nil {
			return nil, fmt.Errorf("%w: the table directory no longer holds a table (the log has no commits)", ErrNotFound)
		}
		t.dropCaches()
	} else if st != t.state {
		t.remember(t.state)
	}
	// A replay that started from a checkpoint brings the table coverage
	// at the checkpoint's version: coverage loads extend it instead of
	// reading every sidecar.
	if seed, cov := t.log.takeCheckpointSeed(); seed != nil && cov != nil {
		if set, err := coverage.Decode(cov, len(seed.Index().EntityColumns) > 0); err == nil {
			t.covCache.put(seed, &segmentCoverage{spec: seed.Index(), domain: indexDomain(seed.Index()), set: set})
		}
	}
	t.state = st
	if rolled > 0 && !t.opts.ReadOnly && !st.Meta.NeedsUpgrade() { // a format-6 table is read-only
		if err := t.log.publishCurrent(st.Version); err != nil {
			t.opts.logger().Warn("could not roll CURRENT forward", "version", st.Version, "error", err)
		} else {
			t.opts.logger().Info("rolled CURRENT forward over commits whose publication was interrupted", "version", st.Version, "commits", rolled)
		}
	}
	return st, nil
}

// Commit writes actions as the next version on top of the handle's
// snapshot, which must be version expected; it returns the new version.
// Before anything is written it runs the writer compatibility check on the
// snapshot and on any metadata the actions install, and replays the actions
// on a copy of the snapshot so that an invalid commit is never written.
//
// Errors: ErrConflict (a *ConflictError) when the table moved on; refresh
// and rebuild the actions. ErrAmbiguousOutcome when the commit may or may
// not exist. ErrInvalidInput for actions that would break the format.
func (t *Table) Commit(ctx context.Context, expected uint64, actions []Action) (uint64, error) {
	st, err := t.commitState(ctx, expected, actions)
	if err != nil {
		return 0, err
	}
	return st.Version, nil
}

// commitState is Commit returning the state the commit made.
func (t *Table) commitState(ctx context.Context, expected uint64, actions []Action) (*State, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state.versionOrZero() != expected {
		return nil, &ConflictError{Expected: expected, Found: t.state.versionOrZero()}
	}
	if t.state != nil {
		if err := t.state.Meta.CheckWrite(); err != nil {
			return nil, err
		}
	}
	if _, err := t.commitLocked(ctx, actions); err != nil {
		return nil, err
	}
	return t.state, nil
}

func (t *Table) commitLocked(ctx context.Context, actions []Action) (uint64, error) {
	p, err := t.prepareCommit(t.state, actions)
	if err != nil {
		return 0, err
	}
	if err := t.finishCommitLocked(ctx, p, t.log.commit(ctx, t.state, p.data)); err != nil {
		return 0, err
	}
	return p.next.Version, nil
}

// preparedCommit is a commit built and validated on top of base, not yet
// written: its bytes and the state it makes.
type preparedCommit struct {
	base, next *State
	data       []byte
	at         time.Time     // the commit's timestamp
	staged     *stagedCommit // its files, when written ahead (commitPrepared)
}

// prepareCommit builds the commit of actions on top of base and replays it
// on a copy of base, so that an invalid commit is never written.
func (t *Table) prepareCommit(base *State, actions []Action) (*preparedCommit, error) {
	if len(actions) == 0 {
		return nil, invalidf("a commit needs at least one action")
	}
	for _, a := range actions {
		if u, ok := a.(UpdateTableMeta); ok {
			if err := u.Meta.CheckWrite(); err != nil {
				return nil, err
			}
		}
	}
	v := base.versionOrZero() + 1
	c := &Commit{Version: v, BaseVersion: v - 1, Timestamp: t.opts.now().UTC(), Actions: actions}
	data, err := c.MarshalJSON()
	if err != nil {
		return nil, err
	}
	next, err := base.apply(c, CommitPath(v))
	if err != nil {
		return nil, invalidf("the commit would not be valid: %v", err)
	}
	return &preparedCommit{base: base, next: next, data: data, at: c.Timestamp}, nil
}

// finishCommitLocked takes the outcome of writing p: on success the handle
// moves to p's state; on an ambiguous outcome it reloads to learn whether
// the commit landed.
func (t *Table) finishCommitLocked(ctx context.Context, p *preparedCommit, err error) error {
	if err != nil {
		if errors.Is(err, ErrAmbiguousOutcome) {
			// Learn whether the commit landed: a refresh reads it if it did.
			if _, rerr := t.refreshLocked(context.WithoutCancel(ctx)); rerr != nil {
				t.opts.logger().Warn("reload after an ambiguous commit failed", "error", rerr)
			}
		}
		return err
	}
	p.next.setDigest(digestOf(p.data))
	t.remember(t.state)
	t.state = p.next
	t.stamps.put(p.next.Version, p.at)
	// Every CheckpointInterval commits, the state is written beside the
	// log (checkpoint_store.go); a failure is logged, never the commit's.
	t.maybeCheckpoint(context.WithoutCancel(ctx), p.next)
	return nil
}

// stage writes p's commit file and the next CURRENT as fsynced temporary
// files, ahead of commitPrepared (see stagedCommit): the caller overlaps
// their fsyncs with those of the files the commit names. discard removes
// them when the commit is not made.
func (t *Table) stage(p *preparedCommit) error {
	s, err := t.log.stage(p.next.Version, p.data)
	if err != nil {
		return err
	}
	p.staged = s
	return nil
}

func (p *preparedCommit) discard(t *Table) {
	if p.staged != nil {
		p.staged.discard(&t.log)
		p.staged = nil
	}
}

// commitPrepared commits p (staged or not) if the handle still holds its
// base, and returns the new state; otherwise it is a conflict, and the
// caller prepares the commit again on the newer state.
func (t *Table) commitPrepared(ctx context.Context, p *preparedCommit) (*State, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != p.base {
		return nil, &ConflictError{Expected: p.base.versionOrZero(), Found: t.state.versionOrZero()}
	}
	if t.state != nil {
		if err := t.state.Meta.CheckWrite(); err != nil {
			return nil, err
		}
	}
	var err error
	if p.staged != nil {
		err = t.log.commitStaged(ctx, t.state, p.staged)
	} else {
		err = t.log.commit(ctx, t.state, p.data)
	}
	if err := t.finishCommitLocked(ctx, p, err); err != nil {
		return nil, err
	}
	return t.state, nil
}

// dropCaches forgets everything the handle derived from the log it held:
// coverage sidecars, newest intervals and the past snapshots StateAt
// serves, so that no read pinned to the old log survives its replacement.
func (t *Table) dropCaches() {
	t.covCache.clear()
	t.union.ready.Store(false)
	t.stamps.clear()
	t.newest.mu.Lock()
	t.newest.m = nil
	t.newest.mu.Unlock()
	t.last.clear()
	t.pastMu.Lock()
	t.past = nil
	t.pastMu.Unlock()
}

// StateAt returns the snapshot at version v, which must not be newer than
// the handle's (refresh first to read newer versions). The handle keeps
// the snapshots it moved on from and those StateAt rebuilt (pastStates of
// them); any other is rebuilt by replaying the log forward from the
// nearest older one kept (or from the start). Scans planned on one version
// stay on it while the table moves on.
//
// An older version is readable only while it is retained: while the
// commit that superseded it is younger than the keep window of the
// handle's snapshot ([State.KeepSnapshots]); an expired one is ErrNotFound
// naming when it was superseded (see retention.go), since vacuum may have
// deleted its files.
func (t *Table) StateAt(ctx context.Context, v uint64) (*State, error) {
	cur := t.State()
	if cur != nil && cur.Version == v {
		return cur, nil
	}
	if cur == nil || v == 0 || v > cur.Version {
		return nil, fmt.Errorf("%w: version %d does not exist (the table is at version %d)", ErrNotFound, v, cur.versionOrZero())
	}
	if err := t.checkRetained(cur, v); err != nil {
		return nil, err
	}
	t.pastMu.Lock()
	st, ok := t.past[v]
	t.pastMu.Unlock()
	if ok {
		return st, nil
	}
	st, err := t.log.replayTo(ctx, t.nearestPast(v), v)
	if err != nil {
		return nil, err
	}
	t.remember(st)
	return st, nil
}

// pastStates bounds the snapshots a handle keeps for pinned reads.
const pastStates = 16

// remember keeps st for StateAt. The handle remembers each snapshot it
// moves on from, because that is the version scans planned a moment ago
// are pinned to, and each one StateAt rebuilt; when full, the oldest
// version kept is dropped.
func (t *Table) remember(st *State) {
	if st == nil {
		return
	}
	t.pastMu.Lock()
	defer t.pastMu.Unlock()
	if t.past == nil {
		t.past = map[uint64]*State{}
	}
	if _, ok := t.past[st.Version]; !ok && len(t.past) >= pastStates {
		oldest := uint64(math.MaxUint64)
		for v := range t.past {
			oldest = min(oldest, v)
		}
		delete(t.past, oldest)
	}
	t.past[st.Version] = st
}

// nearestPast returns the newest remembered snapshot older than v (nil
// when none is), from which StateAt replays forward.
func (t *Table) nearestPast(v uint64) *State {
	t.pastMu.Lock()
	defer t.pastMu.Unlock()
	var best *State
	for pv, st := range t.past {
		if pv < v && (best == nil || pv > best.Version) {
			best = st
		}
	}
	return best
}
