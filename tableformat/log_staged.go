package tableformat

import (
	"context"
	"strconv"
)

// A staged commit has its files written ahead: the commit's temporary file
// and the next CURRENT's, both fsynced, so that a writer can fsync them at
// the same time as the segment and sidecar the commit names, instead of
// one after another (an append's fsyncs are most of its time). Only the
// link, the log directory's fsync and the rename of CURRENT remain for
// commitStaged, which follows the steps of commit; the order that makes a
// commit durable is unchanged (the files a commit names are durable before
// its link, the link before CURRENT).
type stagedCommit struct {
	v         uint64
	data      []byte
	tmp       string // the commit, fsynced
	curTmp    string // "<v>\n", fsynced
	discarded bool
}

// stage writes the temporary files of commit v.
func (l *logStore) stage(v uint64, data []byte) (*stagedCommit, error) {
	s := &stagedCommit{v: v, data: data, tmp: commitTempName(v), curTmp: LogDir + "/CURRENT.tmp-" + randomHex()}
	var errCommit, errCurrent error
	both(func() { errCommit = l.writeDurable(s.tmp, data) },
		func() { errCurrent = l.writeDurable(s.curTmp, []byte(strconv.FormatUint(v, 10)+"\n")) })
	if errCommit != nil || errCurrent != nil {
		s.discard(l)
		if errCommit != nil {
			return nil, errCommit
		}
		return nil, errCurrent
	}
	return s, nil
}

// discard removes the staged files (writeDurable removed any that failed).
func (s *stagedCommit) discard(l *logStore) {
	if s.discarded {
		return
	}
	s.discarded = true
	l.removeQuietly(s.tmp)
	l.removeQuietly(s.curTmp)
}

// commitStaged makes the staged commit commit st.Version+1, as commit
// does, and publishes its CURRENT.
func (l *logStore) commitStaged(ctx context.Context, st *State, s *stagedCommit) error {
	defer s.discard(l)
	if err := ctx.Err(); err != nil {
		return err
	}
	expected := st.versionOrZero()
	if s.v != expected+1 {
		return &ConflictError{Expected: s.v - 1, Found: expected}
	}
	cur, err := l.readCurrent()
	if err != nil {
		return err
	}
	if cur > expected {
		return &ConflictError{Expected: expected, Found: cur}
	}
	return l.link(st, s.tmp, s.data, cur, s.curTmp)
}

// renameCurrent publishes the fsynced temporary file tmp, holding v, as
// CURRENT (publishCurrent with the file written ahead), unless CURRENT is
// already at v or beyond.
func (l *logStore) renameCurrent(tmp string, v uint64) error {
	if cur, err := l.readCurrent(); err == nil && cur >= v {
		return nil
	}
	if err := l.fs.Rename(tmp, currentPath); err != nil {
		return storageErr("publish CURRENT", err)
	}
	if err := l.fs.SyncDir(LogDir); err != nil {
		return storageErr("sync log directory after publishing CURRENT", err)
	}
	return nil
}
