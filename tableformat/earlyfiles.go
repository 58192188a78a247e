// Files a group commit creates while it encodes its segment.

package tableformat

import (
	"strconv"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// A small append spends most of its time on file system calls that do not
// depend on the segment's bytes: creating the segment file (which on a
// file system that scans recently freed inodes costs as much as encoding
// 100 rows), writing the coverage sidecar (known before the segment is
// encoded), creating the commit's temporary file and writing the next
// CURRENT. A group commit starts them all on their own goroutines before
// it encodes, so that they overlap the encoding and each other; what must
// wait for the segment (its fsync, the commit's content) follows. The
// order that makes a commit durable does not change: every file the
// commit names, and its directory entry, is durable before the commit is
// linked, and the link before CURRENT.

// openingFile is a file being created on another goroutine. Its methods
// wait for the creation; if it failed they return its error.
type openingFile struct {
	ready chan struct{}
	f     storage.File
	err   error
}

// createAsync starts creating name exclusively.
func createAsync(fsys storage.FS, name string) *openingFile {
	o := &openingFile{ready: make(chan struct{})}
	go func() {
		defer close(o.ready)
		f, err := fsys.CreateExclusive(name)
		if err != nil {
			o.err = storageErr("create "+name, err)
			return
		}
		o.f = f
	}()
	return o
}

// wait returns the creation's error once it is done.
func (o *openingFile) wait() error {
	<-o.ready
	return o.err
}

func (o *openingFile) Write(p []byte) (int, error) {
	if err := o.wait(); err != nil {
		return 0, err
	}
	return o.f.Write(p)
}

func (o *openingFile) Sync() error {
	if err := o.wait(); err != nil {
		return err
	}
	return o.f.Sync()
}

func (o *openingFile) Close() error {
	if err := o.wait(); err != nil {
		return err
	}
	return o.f.Close()
}

// job is work running on its own goroutine.
type job struct {
	done chan struct{}
	err  error
}

func goJob(f func() error) *job {
	j := &job{done: make(chan struct{})}
	go func() {
		defer close(j.done)
		j.err = f()
	}()
	return j
}

// wait returns the job's error once it is done; a nil job is done.
func (j *job) wait() error {
	if j == nil {
		return nil
	}
	<-j.done
	return j.err
}

// earlyCommit is the part of commit v's staging that does not depend on
// its content: its temporary file, created, and the next CURRENT, written
// and fsynced.
type earlyCommit struct {
	v      uint64
	tmp    string
	file   *openingFile
	curTmp string
	cur    *job
}

// startCommit starts staging commit v.
func (l *logStore) startCommit(v uint64) *earlyCommit {
	e := &earlyCommit{v: v, tmp: commitTempName(v), curTmp: LogDir + "/CURRENT.tmp-" + randomHex()}
	e.file = createAsync(l.fs, e.tmp)
	e.cur = goJob(func() error { return l.writeDurable(e.curTmp, []byte(strconv.FormatUint(v, 10)+"\n")) })
	return e
}

// stage finishes staging commit v with data: the staged commit, as
// logStore.stage returns it. The early files are consumed either way.
func (e *earlyCommit) stage(l *logStore, data []byte) (*stagedCommit, error) {
	s := &stagedCommit{v: e.v, data: data, tmp: e.tmp, curTmp: e.curTmp}
	werr := e.file.wait()
	if werr == nil {
		werr = l.fillDurable(e.file.f, e.tmp, data)
	}
	cerr := e.cur.wait()
	if werr != nil || cerr != nil {
		s.discard(l)
		if werr != nil {
			return nil, werr
		}
		return nil, cerr
	}
	return s, nil
}

// abandon removes the early files once their work is done.
func (e *earlyCommit) abandon(l *logStore) {
	if err := e.file.wait(); err == nil {
		_ = e.file.f.Close()
	}
	l.removeQuietly(e.tmp)
	_ = e.cur.wait()
	l.removeQuietly(e.curTmp)
}
