package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// file is a File of an FS: the content is kept in memory and stored as a
// whole by Sync and Close. A file made by CreateExclusive was claimed with
// an empty object and replaces it only while its ETag is the one its own
// last PUT got (If-Match).
type file struct {
	f         *FS
	name, key string

	mu        sync.Mutex
	buf       []byte
	stored    bool   // the object holds buf as it was at the last PUT
	storedLen int    // len(buf) at the last PUT
	etag      string // ETag of the last PUT (exclusive files only)
	exclusive bool
	closed    bool
}

func (w *file) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, pathErr("write", w.name, fs.ErrClosed)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// Sync stores the whole content written so far with one PUT, unless it is
// stored already. When Sync returns nil the content is durable: S3
// acknowledges a PUT only once the object is stored.
func (w *file) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return pathErr("sync", w.name, fs.ErrClosed)
	}
	return w.store("sync")
}

// Close stores what Sync has not stored yet, so the object appears with
// its whole content at the latest when Close returns. The interface does
// not ask Close to sync; here it does, since an object that is never put
// would never exist.
func (w *file) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return pathErr("close", w.name, fs.ErrClosed)
	}
	w.closed = true
	return w.store("close")
}

func (w *file) store(op string) error {
	if w.stored && w.storedLen == len(w.buf) {
		return nil
	}
	var (
		etag string
		err  error
	)
	if w.exclusive {
		etag, err = w.f.putCond(w.key, w.buf, w.etag)
		if errors.Is(err, errLost) {
			err = fmt.Errorf("%w: %w", errReplaced, err)
		}
	} else {
		etag, err = w.f.putUnconditional(w.key, w.buf)
	}
	if err != nil {
		return s3Err(op, w.name, err)
	}
	w.etag, w.stored, w.storedLen = etag, true, len(w.buf)
	return nil
}

// reader reads one version of an object with ranged GETs. ReadAt may be
// called concurrently; Read and Seek share an offset and may not.
type reader struct {
	f         *FS
	name, key string
	size      int64
	etag      string

	mu     sync.Mutex
	off    int64
	closed bool
}

func (r *reader) Size() int64 { return r.size }

func (r *reader) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// ReadAt is one GET with Range: bytes=off-end, If-Match the ETag seen by
// Open. It follows io.ReaderAt: fewer bytes than len(p) come with io.EOF.
func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if r.isClosed() {
		return 0, pathErr("read", r.name, fs.ErrClosed)
	}
	if off < 0 {
		return 0, pathErr("read", r.name, errors.New("negative offset"))
	}
	if off >= r.size || len(p) == 0 {
		if len(p) == 0 && off <= r.size {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.size-off)
	rng := fmt.Sprintf("bytes=%d-%d", off, off+want-1)
	var n int
	err := r.f.r.do(func(ctx context.Context) error {
		out, err := r.f.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &r.f.bucket, Key: &r.key, Range: &rng, IfMatch: aws.String(r.etag)}, noRetry)
		if err != nil {
			return err
		}
		defer out.Body.Close()
		n, err = io.ReadFull(out.Body, p[:want])
		return err
	})
	if err != nil {
		if classify(err) == precondition {
			err = fmt.Errorf("%w: %w", errReplaced, err)
		}
		return 0, s3Err("read", r.name, err)
	}
	if int64(n) < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

func (r *reader) Read(p []byte) (int, error) {
	r.mu.Lock()
	off := r.off
	r.mu.Unlock()
	if off >= r.size && !r.isClosed() {
		return 0, io.EOF
	}
	n, err := r.ReadAt(p, off)
	r.mu.Lock()
	r.off += int64(n)
	r.mu.Unlock()
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *reader) Seek(offset int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, pathErr("seek", r.name, fs.ErrClosed)
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, pathErr("seek", r.name, errors.New("invalid whence"))
	}
	if offset < 0 {
		return 0, pathErr("seek", r.name, errors.New("negative position"))
	}
	r.off = offset
	return offset, nil
}

func (r *reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return pathErr("close", r.name, fs.ErrClosed)
	}
	r.closed = true
	return nil
}
