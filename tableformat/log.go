package tableformat

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// Paths inside a table. NB: on-disk names; must not change.
const (
	// LogDir holds CURRENT and the commit files.
	LogDir      = "_timeseries_log"
	currentPath = LogDir + "/CURRENT"
	// orphanDir receives unreadable commit files found above the newest
	// commit (see Options.OrphanGrace). Readers never look inside it.
	orphanDir = LogDir + "/_orphaned"
)

// CommitPath returns the table-relative path of commit v: the version
// zero-padded to at least ten digits.
func CommitPath(v uint64) string { return fmt.Sprintf("%s/%010d.json", LogDir, v) }

// logStore reads and writes the transaction log of one table.
type logStore struct {
	fs   storage.FS
	opts *Options
	// ckpt is the checkpoint bookkeeping (checkpoint_store.go).
	ckpt checkpointState
}

// readCurrent returns the version in CURRENT, 0 when it does not exist.
func (l *logStore) readCurrent() (uint64, error) {
	data, err := l.fs.ReadFile(currentPath)
	if storage.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, storageErr("read CURRENT", err)
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return 0, corruptf(currentPath, 0, nil, "CURRENT is empty")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, corruptf(currentPath, 0, nil, "CURRENT holds %q, not a version number", preview([]byte(s)))
	}
	return v, nil
}

// readCommit loads and decodes commit v. A missing file is reported with
// an error satisfying storage.IsNotExist; protocol and upgrade errors are
// returned as they are; anything malformed is a CorruptionError.
func (l *logStore) readCommit(v uint64) (*Commit, error) {
	c, _, err := l.readCommitDigest(v)
	return c, err
}

// commitDigest identifies the raw bytes of one commit file.
type commitDigest [sha256.Size]byte

func digestOf(data []byte) commitDigest { return sha256.Sum256(data) }

// readCommitDigest is readCommit that also returns the digest of the raw
// commit bytes, which the state built from it keeps (see State.digest).
func (l *logStore) readCommitDigest(v uint64) (*Commit, commitDigest, error) {
	p := CommitPath(v)
	data, err := l.fs.ReadFile(p)
	if err != nil {
		if storage.IsNotExist(err) {
			return nil, commitDigest{}, err
		}
		return nil, commitDigest{}, storageErr("read "+p, err)
	}
	d := digestOf(data)
	c, err := decodeCommit(data)
	if err != nil {
		var pe *ProtocolError
		if errors.As(err, &pe) {
			pe.Version = v
			return nil, d, pe
		}
		if errors.Is(err, ErrNeedsUpgrade) {
			return nil, d, fmt.Errorf("%s: %w", p, err)
		}
		return nil, d, corruptf(p, v, err, "malformed commit")
	}
	if c.Version != v {
		return nil, d, corruptf(p, v, nil, "file holds version %d", c.Version)
	}
	return c, d, nil
}

// digestOnDisk returns the digest of commit file v as it is now; found is
// false when the file does not exist.
func (l *logStore) digestOnDisk(v uint64) (d commitDigest, found bool, err error) {
	p := CommitPath(v)
	data, err := l.fs.ReadFile(p)
	if storage.IsNotExist(err) {
		return d, false, nil
	}
	if err != nil {
		return d, false, storageErr("read "+p, err)
	}
	return digestOf(data), true, nil
}

// sameLog reports whether the log on disk still extends st: commit 1 (the
// table's identity; the format defines no table id) and commit st.Version
// (the end of the chain st was replayed from) must be byte for byte the
// commits st was built from. A table directory that was swapped for another
// table, restored from an older or different backup, or dropped and
// re-created fails this; commits appended on top of st, and CURRENT lagging
// behind st after a crash while the commit files are there, do not. When it
// returns false, why says what differs.
func (l *logStore) sameLog(st *State) (same bool, why string, err error) {
	if same, why, err := l.sameTail(st); err != nil || !same {
		return same, why, err
	}
	if st == nil || st.Version <= 1 || st.origin == (commitDigest{}) {
		return true, "", nil
	}
	d, found, err := l.digestOnDisk(1)
	if err != nil {
		return false, "", err
	}
	if !found || d != st.origin {
		return false, "commit 1 (the table's identity) is a different commit", nil
	}
	return true, "", nil
}

// replay brings base (nil to load the table from scratch) up to the newest
// commit: every commit up to CURRENT must exist and be valid; after that,
// valid commit files above CURRENT are rolled forward (the commit file is
// the commit; CURRENT is a hint that may lag after a crash). It returns the
// new state and how many commits were found above CURRENT.
//
// Without a base it starts from the newest valid checkpoint (see
// loadCheckpoint; one matching the commit files on disk, so never beyond
// the newest commit) and replays only the commits after it; without one,
// from commit 1. A checkpoint above CURRENT stands for commits above
// CURRENT and counts as rolled forward.
func (l *logStore) replay(ctx context.Context, base *State) (*State, uint64, error) {
	cur, err := l.readCurrent()
	if err != nil {
		return nil, 0, err
	}
	st := base
	from := uint64(0)
	var rolled uint64
	if st != nil {
		from = st.Version
	} else if ck := l.loadCheckpoint(ctx, maxVersion); ck != nil {
		st, from = ck, ck.Version
		if from > cur {
			rolled = from - cur
		}
	}
	for v := from + 1; v <= cur; v++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		c, d, err := l.readCommitDigest(v)
		if storage.IsNotExist(err) {
			return nil, 0, corruptf(CommitPath(v), v, nil, "commit %d is missing but CURRENT says %d", v, cur)
		}
		if err != nil {
			return nil, 0, err
		}
		if v == from+1 {
			st = st.replayCopy() // base may be shared; what follows is ours
		}
		if st, err = st.applyOwned(c, CommitPath(v)); err != nil {
			return nil, 0, err
		}
		st.setDigest(d)
	}
	for {
		v := uint64(1)
		if st != nil {
			v = st.Version + 1
		}
		c, d, err := l.readCommitDigest(v)
		if storage.IsNotExist(err) {
			break
		}
		if errors.Is(err, ErrStorage) {
			return nil, 0, err
		}
		var next *State
		if err == nil {
			if next, err = st.apply(c, CommitPath(v)); err == nil {
				next.setDigest(d)
			}
		}
		if err != nil {
			// Not a commit this build can roll forward over: torn, invalid,
			// or from a newer protocol. Read at the published version, as
			// the reference does; writers cannot create this version.
			l.opts.logger().Warn("ignoring a commit file above CURRENT that cannot be read", "path", CommitPath(v), "error", err)
			break
		}
		st = next
		if v > cur {
			rolled++
		}
	}
	return st, rolled, nil
}

// replayTo rebuilds the state at version v from base (an older snapshot,
// or nil to start from the newest valid checkpoint at or below v, or from
// commit 1 when there is none); every commit after base up to v must exist
// and be valid.
func (l *logStore) replayTo(ctx context.Context, base *State, v uint64) (*State, error) {
	st := base
	if st == nil {
		st = l.loadCheckpoint(ctx, v)
	}
	first := st.versionOrZero() + 1
	for n := first; n <= v; n++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, d, err := l.readCommitDigest(n)
		if storage.IsNotExist(err) {
			return nil, corruptf(CommitPath(n), n, nil, "commit %d is missing", n)
		}
		if err != nil {
			return nil, err
		}
		if n == first {
			st = st.replayCopy() // base may be shared; what follows is ours
		}
		if st, err = st.applyOwned(c, CommitPath(n)); err != nil {
			return nil, err
		}
		st.setDigest(d)
	}
	return st, nil
}

// publishCurrent points CURRENT at v: a uniquely named temporary file,
// fsync, rename over CURRENT, directory fsync. It never moves CURRENT
// backwards as far as it can see.
func (l *logStore) publishCurrent(v uint64) error {
	if cur, err := l.readCurrent(); err == nil && cur >= v {
		return nil
	}
	tmp := LogDir + "/CURRENT.tmp-" + randomHex()
	if err := l.writeDurable(tmp, []byte(strconv.FormatUint(v, 10)+"\n")); err != nil {
		return err
	}
	if err := l.fs.Rename(tmp, currentPath); err != nil {
		l.removeQuietly(tmp)
		return storageErr("publish CURRENT", err)
	}
	if err := l.fs.SyncDir(LogDir); err != nil {
		return storageErr("sync log directory after publishing CURRENT", err)
	}
	return nil
}

// writeDurable creates name exclusively with data and fsyncs it. On failure
// the file is removed.
func (l *logStore) writeDurable(name string, data []byte) error {
	f, err := l.fs.CreateExclusive(name)
	if err != nil {
		if !storage.IsExist(err) {
			l.removeQuietly(name) // the name is ours alone; leave nothing behind
		}
		return storageErr("create "+name, err)
	}
	return l.fillDurable(f, name, data)
}

// fillDurable writes data to f, created as name, fsyncs and closes it; on
// failure it removes name.
func (l *logStore) fillDurable(f storage.File, name string, data []byte) error {
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr != nil {
		l.removeQuietly(name)
		return storageErr("write "+name, werr)
	}
	return nil
}

func (l *logStore) removeQuietly(name string) {
	if err := l.fs.Remove(name); err != nil && !storage.IsNotExist(err) {
		l.opts.logger().Warn("could not remove temporary file", "path", name, "error", err)
	}
}

// commit writes the next commit on top of st, which the caller has
// validated. The steps:
//
//  1. CURRENT is read; if it is past st.Version the commit conflicts.
//  2. The commit is written to a uniquely named temporary file and fsynced.
//     Right before the link, commit st.Version on disk must still be the
//     commit st was built from (digest compare): if the directory was
//     replaced, the commit conflicts instead of landing on another log.
//  3. The temporary file is hard-linked to the commit's name. The link is
//     the exclusive create: it fails if another writer created that
//     version first, and the name never refers to a partial file.
//  4. The log directory is fsynced: from here the commit is durable and
//     committed (a failure of this step is an ambiguous outcome).
//  5. CURRENT is published. A failure here does not undo the commit; the
//     next open or commit rolls CURRENT forward.
func (l *logStore) commit(ctx context.Context, st *State, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	expected := st.versionOrZero()
	v := expected + 1
	cur, err := l.readCurrent()
	if err != nil {
		return err
	}
	if cur > expected {
		return &ConflictError{Expected: expected, Found: cur}
	}
	tmp := commitTempName(v)
	if err := l.writeDurable(tmp, data); err != nil {
		return err
	}
	defer l.removeQuietly(tmp)
	return l.link(st, tmp, data, cur, "")
}

func commitTempName(v uint64) string {
	return fmt.Sprintf("%s/.%010d.json.tmp-%s", LogDir, v, randomHex())
}

// link makes the fsynced temporary file tmp, holding data, commit
// st.Version+1 (steps 2 to 5 of commit; cur is the CURRENT it read). When
// curTmp is not empty it is an fsynced temporary file holding the new
// CURRENT, renamed over CURRENT instead of writing one.
func (l *logStore) link(st *State, tmp string, data []byte, cur uint64, curTmp string) error {
	expected := st.versionOrZero()
	v := expected + 1
	// Never write commit v on top of a different log: commit v-1 on disk
	// must be the one st was built from (the table directory may have been
	// replaced since). A mismatch is a conflict, so that the writer
	// refreshes, which rebuilds the handle on the new table, and rebases.
	if same, why, err := l.sameTail(st); err != nil {
		return err
	} else if !same {
		l.opts.logger().Warn("refusing to commit on top of a log that is no longer the one the handle holds", "version", v, "reason", why)
		return &ConflictError{Expected: expected, Found: cur}
	}
	target := CommitPath(v)
	for attempt := 0; ; attempt++ {
		err := l.fs.Link(tmp, target)
		if err == nil {
			break
		}
		if storage.IsExist(err) {
			if attempt == 0 && l.setAsideOrphan(st, v) {
				continue
			}
			return &ConflictError{Expected: expected, Found: v, LostRace: true}
		}
		// The link failed for another reason: did the name appear?
		got, rerr := l.fs.ReadFile(target)
		switch {
		case storage.IsNotExist(rerr):
			return storageErr("create "+target, err)
		case rerr == nil && bytes.Equal(got, data):
			// It was created after all.
		case rerr == nil:
			return &ConflictError{Expected: expected, Found: v, LostRace: true}
		default:
			return fmt.Errorf("%w: creating %s failed (%v) and its existence could not be checked: %w", ErrAmbiguousOutcome, target, err, rerr)
		}
		break
	}
	if err := l.fs.SyncDir(LogDir); err != nil {
		return fmt.Errorf("%w: commit %s is visible but the log directory could not be synced, so it may not survive a crash: %w", ErrAmbiguousOutcome, target, err)
	}
	var perr error
	if curTmp != "" {
		perr = l.renameCurrent(curTmp, v)
	} else {
		perr = l.publishCurrent(v)
	}
	if perr != nil {
		l.opts.logger().Warn("commit is durable but CURRENT was not updated; the next open rolls it forward", "version", v, "error", perr)
	}
	return nil
}

// sameTail reports whether commit st.Version on disk is still the one st
// was built from (one small file read).
func (l *logStore) sameTail(st *State) (bool, string, error) {
	if st == nil || st.digest == (commitDigest{}) {
		return true, "", nil
	}
	d, found, err := l.digestOnDisk(st.Version)
	if err != nil {
		return false, "", err
	}
	if !found {
		return false, fmt.Sprintf("commit %d, which the handle holds, no longer exists (the log is shorter)", st.Version), nil
	}
	if d != st.digest {
		return false, fmt.Sprintf("commit %d is no longer the commit the handle replayed", st.Version), nil
	}
	return true, "", nil
}

// setAsideOrphan handles a commit file found at version v when st is the
// newest state: if it is not a valid commit on top of st and is older than
// the grace period, it is moved into the orphan directory and true is
// returned so that the writer can try again.
func (l *logStore) setAsideOrphan(st *State, v uint64) bool {
	target := CommitPath(v)
	c, err := l.readCommit(v)
	if err == nil {
		if _, err = st.apply(c, target); err == nil {
			return false // a real commit: the writer lost the race
		}
	}
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		return false
	}
	info, serr := l.fs.Stat(target)
	if serr != nil || l.opts.now().Sub(info.ModTime) < l.opts.OrphanGrace {
		return false
	}
	dest := fmt.Sprintf("%s/%010d.json.%d", orphanDir, v, l.opts.now().UnixNano())
	if err := l.fs.MkdirAll(orphanDir); err != nil {
		return false
	}
	// Link then remove, so that no rename ever lands on a commit name.
	if err := l.fs.Link(target, dest); err != nil {
		return false
	}
	if err := l.fs.Remove(target); err != nil {
		return false
	}
	if err := l.fs.SyncDir(LogDir); err != nil {
		return false
	}
	_ = l.fs.SyncDir(orphanDir)
	l.opts.logger().Warn("set aside an unreadable commit file left by a crashed writer", "path", target, "moved_to", dest, "reason", ce.Error())
	return true
}

func (s *State) versionOrZero() uint64 {
	if s == nil {
		return 0
	}
	return s.Version
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
