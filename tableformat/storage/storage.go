package storage

import (
	"errors"
	"io"
	"io/fs"
	"time"
)

// FS is the storage seam of a table. Every path is slash-separated and
// relative to the root of the FS, and must satisfy [io/fs.ValidPath]; "."
// names the root itself. Implementations report a missing file with an error
// for which errors.Is(err, fs.ErrNotExist) holds, and an existing one (for
// CreateExclusive and Link) with fs.ErrExist.
//
// The methods are the primitives a crash-safe commit is built from; none of
// them is atomic beyond what its comment promises, and none makes anything
// durable on its own: file contents become durable with [File.Sync], and the
// creation, rename, link or removal of a name with [FS.SyncDir] on its parent.
type FS interface {
	// ReadFile returns the whole content of name.
	ReadFile(name string) ([]byte, error)
	// Open opens name for random-access reading.
	Open(name string) (Reader, error)
	// Stat describes name.
	Stat(name string) (FileInfo, error)
	// Create creates or truncates name for writing. Missing parent
	// directories are created.
	Create(name string) (File, error)
	// CreateExclusive creates name for writing and fails with fs.ErrExist
	// when it already exists (O_CREAT|O_EXCL). Missing parent directories
	// are created.
	CreateExclusive(name string) (File, error)
	// Link makes newname a second name of the file oldname. It fails with
	// fs.ErrExist when newname already exists, so the appearance of
	// newname is atomic and exclusive. Missing parents of newname are
	// created.
	Link(oldname, newname string) error
	// Rename moves oldname to newname, replacing newname atomically if it
	// exists.
	Rename(oldname, newname string) error
	// Exchange swaps the entries a and b, which must both exist, in one
	// atomic step (Linux renameat2 with RENAME_EXCHANGE): after it, a names
	// what b named and b what a named, and no moment exists where either
	// name is missing. Both must be directories or both files. It fails
	// with an error wrapping [ErrExchangeUnsupported] when the file system
	// cannot do it, and then changes nothing. Like Rename, it is durable
	// only after SyncDir of the parents.
	Exchange(a, b string) error
	// Remove deletes the file name.
	Remove(name string) error
	// List returns the names (not paths) of the entries directly inside
	// dir, sorted. Directories are listed too.
	List(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string) error
	// SyncDir makes durable the entries of dir that were created, renamed,
	// linked or removed before the call.
	SyncDir(dir string) error
}

// File is a file open for writing.
type File interface {
	io.Writer
	// Sync makes the content written so far durable.
	Sync() error
	// Close releases the file. It does not sync.
	Close() error
}

// Reader is a file open for reading.
type Reader interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
	// Size is the length of the file when it was opened.
	Size() int64
}

// FileInfo describes a file.
type FileInfo struct {
	Size    int64
	ModTime time.Time
	IsDir   bool
	// Symlink reports that the name itself is a symbolic link (Size,
	// ModTime and IsDir describe its target). Only LocalFS has links.
	Symlink bool
}

// ErrInvalidPath is returned for a path that [io/fs.ValidPath] rejects.
var ErrInvalidPath = errors.New("storage: invalid path")

// ErrExchangeUnsupported is wrapped by [FS.Exchange] when the file system
// cannot exchange two names atomically.
var ErrExchangeUnsupported = errors.New("storage: atomic exchange is not supported by this file system")

// ErrCrashed is returned by every call on a [FaultFS] after an injected
// crash: the simulated process is gone, and nothing it does reaches storage.
var ErrCrashed = errors.New("storage: simulated crash")

// IsNotExist reports whether err says a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// IsExist reports whether err says a file already exists.
func IsExist(err error) bool { return errors.Is(err, fs.ErrExist) }
