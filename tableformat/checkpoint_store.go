package tableformat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// checkpointKeep is how many checkpoints a writer keeps: the newest one and
// two older ones, should the newest become unreadable.
const checkpointKeep = 3

// checkpointTempGrace is how old a temporary checkpoint file must be before
// a checkpoint writer removes it as the leftover of a crashed writer; a
// younger one may be a write in progress in another process.
const checkpointTempGrace = 15 * time.Minute

var (
	reCheckpointFile = regexp.MustCompile(`^[0-9]{20}\.checkpoint$`)
	// Temporary names avoid ".tmp-", the mark of the log temporaries that
	// vacuum manages: these are the checkpoint writers' own business.
	reCheckpointTemp = regexp.MustCompile(`^\.[0-9]{20}\.checkpoint\.partial-[0-9a-f]{16}$`)
)

// checkpointState is the checkpoint bookkeeping of one logStore.
type checkpointState struct {
	mu sync.Mutex
	// seedState and seedCov are the state and coverage section of the
	// checkpoint the last replay started from, until taken.
	seedState *State
	seedCov   []byte
	// known is the newest checkpoint this store started from or wrote (0:
	// none); maybeCheckpoint uses it to notice a checkpoint is overdue
	// without listing the directory on every commit.
	known uint64
}

// takeCheckpointSeed returns the state and the coverage section (nil when
// the checkpoint had none) of the checkpoint the newest replay or replayTo
// without a base started from, and forgets them; nil, nil when no
// checkpoint was used since the last call. The state is shared: it must not
// be modified. The coverage bytes are the table coverage of that state,
// what loadCoverage returned for it when the checkpoint was written
// (coverage.Set.Encode output, already decoded once without error), so
// that they can seed the coverage cache for it.
func (l *logStore) takeCheckpointSeed() (*State, []byte) {
	l.ckpt.mu.Lock()
	defer l.ckpt.mu.Unlock()
	st, cov := l.ckpt.seedState, l.ckpt.seedCov
	l.ckpt.seedState, l.ckpt.seedCov = nil, nil
	return st, cov
}

// listCheckpoints returns the versions of the checkpoint files, ascending,
// and the names of the temporary files, from one listing of the
// checkpoint directory. A missing directory is no checkpoints.
func (l *logStore) listCheckpoints() (versions []uint64, temps []string, err error) {
	names, err := l.fs.List(checkpointDir)
	if storage.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, storageErr("list "+checkpointDir, err)
	}
	for _, n := range names { // sorted, and the names are fixed-width
		switch {
		case reCheckpointFile.MatchString(n):
			v, err := strconv.ParseUint(strings.TrimSuffix(n, ".checkpoint"), 10, 64)
			if err == nil && v > 0 {
				versions = append(versions, v)
			}
		case reCheckpointTemp.MatchString(n):
			temps = append(temps, n)
		}
	}
	return versions, temps, nil
}

// loadCheckpoint returns the state of the newest valid checkpoint whose
// version is at most limit, or nil when there is none. Every checkpoint it
// passes over is logged with the reason; none of them is an error, since
// the caller replays the log instead. It records the checkpoint as the
// seed, and when limit is unbounded also as the newest known one.
func (l *logStore) loadCheckpoint(ctx context.Context, limit uint64) *State {
	versions, _, err := l.listCheckpoints()
	if err != nil {
		l.opts.logger().Warn("cannot list checkpoints; replaying the log from commit 1", "error", err)
		return nil
	}
	var digests logDigests
	for i := len(versions) - 1; i >= 0; i-- {
		v := versions[i]
		if v > limit {
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		st, cov, err := l.readCheckpoint(v, &digests)
		if err != nil {
			l.opts.logger().Warn("ignoring a checkpoint", "path", checkpointPath(v), "reason", err)
			continue
		}
		l.ckpt.mu.Lock()
		l.ckpt.seedState, l.ckpt.seedCov = st, cov
		if limit == maxVersion {
			l.ckpt.known = v
		}
		l.ckpt.mu.Unlock()
		return st
	}
	if limit == maxVersion {
		l.ckpt.mu.Lock()
		l.ckpt.known = 0
		l.ckpt.mu.Unlock()
	}
	return nil
}

const maxVersion = ^uint64(0)

// logDigests caches the digest of commit 1 while checkpoints are compared
// with the log.
type logDigests struct {
	origin commitDigest
	known  bool
}

// matchesLog reports (as an error saying why not) whether the commits a
// checkpoint header names are byte for byte the commits on disk now:
// commit 1, the table's identity, and commit h.version, the end of the
// chain it captures. A log that was rewound, replaced by another table or
// restored from a different backup fails.
func (l *logStore) matchesLog(h *checkpointHeader, cache *logDigests) error {
	return l.matchesLogAt(h.version, h.origin, h.tail, cache)
}

// matchesLogAt is matchesLog for any file that names commit 1 and commit
// version by their digests (checkpoints, last-value indexes).
func (l *logStore) matchesLogAt(version uint64, origin, tail commitDigest, cache *logDigests) error {
	if !cache.known {
		d, found, err := l.digestOnDisk(1)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("stale: the log has no commit 1")
		}
		cache.origin, cache.known = d, true
	}
	if cache.origin != origin {
		return fmt.Errorf("stale: commit 1 on disk is not the one the file was built from (another table?)")
	}
	if version == 1 {
		return nil
	}
	d, found, err := l.digestOnDisk(version)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("stale: the log has no commit %d (rewound?)", version)
	}
	if d != tail {
		return fmt.Errorf("stale: commit %d on disk is not the one the file was built from", version)
	}
	return nil
}

// readCheckpointHeader opens checkpoint v and reads its header; the caller
// closes the reader.
func (l *logStore) readCheckpointHeader(v uint64) (storage.Reader, checkpointHeader, error) {
	p := checkpointPath(v)
	r, err := l.fs.Open(p)
	if err != nil {
		return nil, checkpointHeader{}, storageErr("open "+p, err)
	}
	buf := make([]byte, checkpointHeaderSize)
	if _, err := r.ReadAt(buf, 0); err != nil {
		size := r.Size()
		r.Close()
		if err == io.EOF {
			return nil, checkpointHeader{}, fmt.Errorf("%d bytes, shorter than the %d-byte header", size, checkpointHeaderSize)
		}
		return nil, checkpointHeader{}, storageErr("read "+p, err)
	}
	h, err := parseCheckpointHeader(buf)
	if err != nil {
		r.Close()
		return nil, h, err
	}
	if h.version != v {
		r.Close()
		return nil, h, fmt.Errorf("the file holds version %d", h.version)
	}
	return r, h, nil
}

// readCheckpoint reads, decodes and validates checkpoint v. The header's
// digests are compared with the log before the rest of the file is read,
// so that a stale checkpoint costs two small reads; this only ever rejects,
// and acceptance still needs the checksum over the whole file, whose first
// bytes are the header just compared.
func (l *logStore) readCheckpoint(v uint64, cache *logDigests) (*State, []byte, error) {
	r, h, err := l.readCheckpointHeader(v)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	if err := l.matchesLog(&h, cache); err != nil {
		return nil, nil, err
	}
	data := make([]byte, r.Size())
	copy(data, h.raw[:])
	if _, err := r.ReadAt(data[checkpointHeaderSize:], checkpointHeaderSize); err != nil && len(data) > checkpointHeaderSize {
		return nil, nil, storageErr("read "+checkpointPath(v), err)
	}
	return decodeCheckpoint(data)
}

// writeCheckpoint writes the checkpoint of st with the coverage section cov
// (nil for none), with the commit discipline: a uniquely named temporary
// file, fsync, a hard link to the final name (which never replaces a
// file), fsync of the directory. Then the older checkpoints beyond the
// newest checkpointKeep are removed. Before anything is written the bytes
// are decoded again and compared with st, so that a codec that does not
// round-trip never writes a checkpoint.
func (l *logStore) writeCheckpoint(st *State, cov []byte) error {
	data, err := encodeCheckpoint(st, cov, l.opts.now())
	if err != nil {
		return err
	}
	back, _, err := decodeCheckpoint(data)
	if err != nil {
		return fmt.Errorf("the encoded checkpoint does not decode (not written): %w", err)
	}
	if !sameCheckpointState(back, st) {
		return fmt.Errorf("the encoded checkpoint decodes to another state (not written)")
	}
	final := checkpointPath(st.Version)
	tmp := fmt.Sprintf("%s/.%020d.checkpoint.partial-%s", checkpointDir, st.Version, randomHex())
	if exists, err := l.publishSidecar(checkpointDir, tmp, final, data); err != nil || exists {
		return err // exists: another writer checkpointed this version
	}
	l.ckpt.mu.Lock()
	l.ckpt.known = max(l.ckpt.known, st.Version)
	l.ckpt.mu.Unlock()
	l.pruneCheckpoints(st.Version)
	return nil
}

// publishSidecar writes data as final in dir (a subdirectory of the log
// directory, created when missing), with the commit discipline: the
// uniquely named temporary file tmp, fsync, a hard link to final (which
// never replaces a file), one fsync of dir for the new name and the
// removal of tmp. exists reports that final was already there (the
// same content from another writer, for files named by what they hold).
func (l *logStore) publishSidecar(dir, tmp, final string, data []byte) (exists bool, err error) {
	if _, err := l.fs.Stat(dir); storage.IsNotExist(err) {
		if err := l.fs.MkdirAll(dir); err != nil {
			return false, storageErr("create "+dir, err)
		}
		if err := l.fs.SyncDir(LogDir); err != nil {
			return false, storageErr("sync "+LogDir+" after creating "+dir, err)
		}
	} else if err != nil {
		return false, storageErr("stat "+dir, err)
	}
	if err := l.writeDurable(tmp, data); err != nil {
		return false, err
	}
	err = l.fs.Link(tmp, final)
	l.removeQuietly(tmp) // a linked final name keeps the file
	if err != nil {
		if storage.IsExist(err) {
			return true, nil
		}
		return false, storageErr("link "+final, err)
	}
	if err := l.fs.SyncDir(dir); err != nil {
		return false, storageErr("sync "+dir, err)
	}
	return false, nil
}

// pruneCheckpoints runs after checkpoint newest is durable. It removes the
// checkpoints at or below newest except the newest checkpointKeep of them;
// those above newest that are stale (their commits are not on disk: a
// rewound or replaced log), shorter than a header or not checkpoints at
// all (a file of an unknown format version is left to the build that
// wrote it); and temporary files older than checkpointTempGrace. Failures
// are logged.
func (l *logStore) pruneCheckpoints(newest uint64) {
	versions, temps, err := l.listCheckpoints()
	if err != nil {
		l.opts.logger().Warn("cannot list checkpoints to prune them", "error", err)
		return
	}
	var doomed []string
	var below []uint64
	var cache logDigests
	for _, v := range versions {
		if v <= newest {
			below = append(below, v)
			continue
		}
		r, h, err := l.readCheckpointHeader(v)
		if err == nil {
			err = l.matchesLog(&h, &cache)
			r.Close()
		}
		if err != nil && !errors.Is(err, errCheckpointFormat) && !errors.Is(err, ErrStorage) {
			doomed = append(doomed, checkpointPath(v))
		}
	}
	if len(below) > checkpointKeep {
		for _, v := range below[:len(below)-checkpointKeep] {
			doomed = append(doomed, checkpointPath(v))
		}
	}
	for _, n := range temps {
		p := checkpointDir + "/" + n
		if info, err := l.fs.Stat(p); err == nil && l.opts.now().Sub(info.ModTime) > checkpointTempGrace {
			doomed = append(doomed, p)
		}
	}
	removed := false
	for _, p := range doomed {
		if err := l.fs.Remove(p); err != nil && !storage.IsNotExist(err) {
			l.opts.logger().Warn("cannot remove an old checkpoint", "path", p, "error", err)
			continue
		}
		removed = true
	}
	if removed {
		if err := l.fs.SyncDir(checkpointDir); err != nil {
			l.opts.logger().Warn("cannot sync the checkpoint directory after pruning", "error", err)
		}
	}
}

// checkpointDue reports whether a checkpoint of version v should be
// written with interval n: v is a multiple of n (and not already known to
// be checkpointed), or the newest checkpoint is n or more versions behind
// (its multiple was committed by another process, a 0.9.0 writer or a
// handle without checkpoints). The second rule lists the directory only
// when the handle's own record says it is behind.
func (l *logStore) checkpointDue(v uint64, n uint64) bool {
	l.ckpt.mu.Lock()
	known := l.ckpt.known
	l.ckpt.mu.Unlock()
	if known >= v {
		return false
	}
	if v%n == 0 {
		return true
	}
	if v-known < n {
		return false
	}
	versions, _, err := l.listCheckpoints()
	if err != nil {
		return false
	}
	newest := uint64(0)
	for _, cv := range versions {
		if cv <= v {
			newest = cv
		}
	}
	if v-newest < n {
		l.ckpt.mu.Lock()
		l.ckpt.known = max(l.ckpt.known, newest)
		l.ckpt.mu.Unlock()
		return false
	}
	return true
}

// maybeCheckpoint is called by the committer right after the commit of
// st.Version succeeded. When a checkpoint is due (see checkpointDue and
// Options.CheckpointInterval) it writes one, with the table coverage of st
// as its coverage section when st has a coverage pointer and the coverage
// loads (without it otherwise). It never fails: a checkpoint is an
// optimisation, and problems are logged. A failed attempt is not retried
// before the next interval.
func (t *Table) maybeCheckpoint(ctx context.Context, st *State) {
	n := t.opts.CheckpointInterval
	if n <= 0 || st == nil || ctx.Err() != nil || !t.log.checkpointDue(st.Version, uint64(n)) {
		return
	}
	var cov []byte
	if st.Coverage != nil {
		c, err := t.loadCoverage(ctx, st)
		if err != nil {
			t.opts.logger().Warn("writing the checkpoint without its coverage section: the table coverage does not load", "version", st.Version, "error", err)
		} else {
			cov = c.encode()
		}
	}
	if err := t.log.writeCheckpoint(st, cov); err != nil {
		t.log.ckpt.mu.Lock()
		t.log.ckpt.known = max(t.log.ckpt.known, st.Version) // back off for one interval
		t.log.ckpt.mu.Unlock()
		t.opts.logger().Warn("could not write a checkpoint; opening the table replays more commits until the next one", "version", st.Version, "error", err)
	}
}

// replayLogTo is the state at version v replayed from commit 1, never from
// a checkpoint: what a checkpoint of version v must equal. (An empty State
// as the base makes replayTo start at commit 1 without looking for a
// checkpoint; applying commit 1 to it is applying it to nil.)
func (l *logStore) replayLogTo(ctx context.Context, v uint64) (*State, error) {
	if v == 0 {
		return nil, nil
	}
	return l.replayTo(ctx, &State{}, v)
}

// sameCheckpointState reports whether a and b are the same state as far as
// a checkpoint records it: version, metadata, live segments in order,
// coverage pointer and version, and both commit digests.
func sameCheckpointState(a, b *State) bool {
	if a.Version != b.Version || a.CoverageVersion != b.CoverageVersion || a.digest != b.digest || a.origin != b.origin {
		return false
	}
	if len(a.Segments) != len(b.Segments) || len(a.byPath) != len(b.byPath) {
		return false
	}
	for i := range a.Segments { // a nil and an empty list are the same
		if !reflect.DeepEqual(a.Segments[i], b.Segments[i]) {
			return false
		}
	}
	return reflect.DeepEqual(a.Meta, b.Meta) && reflect.DeepEqual(a.Coverage, b.Coverage)
}
