package storage

import (
	"bytes"
	"io/fs"
	"sync/atomic"
	"time"
)

// memFile is a File of a MemFS; it writes into its node whatever became of
// the name it was created with.
type memFile struct {
	m      *MemFS
	n      *memNode
	name   string
	closed bool // guarded by m.mu
}

func (f *memFile) Write(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return 0, pathErr("write", f.name, fs.ErrClosed)
	}
	f.n.data = append(f.n.data, p...)
	f.n.modTime = time.Now()
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.name, fs.ErrClosed)
	}
	f.n.synced = bytes.Clone(f.n.data)
	return nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

// memReader is a Reader of a MemFS over a private copy of the content.
// ReadAt may be called concurrently, like on an *os.File.
type memReader struct {
	r      *bytes.Reader
	name   string
	closed atomic.Bool
}

func (r *memReader) Read(p []byte) (int, error) {
	if r.closed.Load() {
		return 0, pathErr("read", r.name, fs.ErrClosed)
	}
	return r.r.Read(p)
}

func (r *memReader) ReadAt(p []byte, off int64) (int, error) {
	if r.closed.Load() {
		return 0, pathErr("read", r.name, fs.ErrClosed)
	}
	return r.r.ReadAt(p, off)
}

func (r *memReader) Seek(offset int64, whence int) (int64, error) {
	if r.closed.Load() {
		return 0, pathErr("seek", r.name, fs.ErrClosed)
	}
	return r.r.Seek(offset, whence)
}

func (r *memReader) Close() error {
	if r.closed.Swap(true) {
		return pathErr("close", r.name, fs.ErrClosed)
	}
	return nil
}

func (r *memReader) Size() int64 { return r.r.Size() }
