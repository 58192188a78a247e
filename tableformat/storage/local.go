package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LocalFS is an [FS] over a directory of the local file system.
//
// Paths are converted with [path/filepath.Localize] and joined under the
// root, so a path valid on one system but not representable on this one (a
// backslash on Windows, say) is rejected with [ErrInvalidPath] too. Files are
// created with mode 0o644 and missing directories with 0o755.
//
// Errors are the ones of package os (an *os.PathError or *os.LinkError, so
// errors.Is with fs.ErrNotExist and fs.ErrExist works), with the paths in
// them rewritten relative to the root.
//
// A LocalFS is safe for concurrent use; it holds no state besides its root.
type LocalFS struct {
	root   string // cleaned root directory
	prefix string // root followed by exactly one separator
}

var _ FS = (*LocalFS)(nil)

// Local returns an FS over the directory root. The directory need not exist
// yet: it is created, like any missing parent, by the first call that
// creates a file or directory under it.
func Local(root string) *LocalFS {
	root = filepath.Clean(root)
	prefix := root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return &LocalFS{root: root, prefix: prefix}
}

// Root returns the directory the FS works in, cleaned.
func (l *LocalFS) Root() string { return l.root }

// path validates name and returns its local path under the root.
func (l *LocalFS) path(op, name string) (string, error) {
	if err := checkPath(op, name); err != nil {
		return "", err
	}
	p, err := filepath.Localize(name)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", op, name, ErrInvalidPath)
	}
	return filepath.Join(l.root, p), nil
}

// rel turns a local path under the root back into a path relative to it.
// Other paths are returned unchanged.
func (l *LocalFS) rel(p string) string {
	if p == l.root {
		return "."
	}
	if r, ok := strings.CutPrefix(p, l.prefix); ok {
		return filepath.ToSlash(r)
	}
	return p
}

// fix rewrites the paths of an error from package os relative to the root.
func (l *LocalFS) fix(err error) error {
	switch e := err.(type) {
	case *fs.PathError:
		return &fs.PathError{Op: e.Op, Path: l.rel(e.Path), Err: e.Err}
	case *os.LinkError:
		return &os.LinkError{Op: e.Op, Old: l.rel(e.Old), New: l.rel(e.New), Err: e.Err}
	}
	return err
}

// ReadFile implements [FS].
func (l *LocalFS) ReadFile(name string) ([]byte, error) {
	p, err := l.path("read", name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, l.fix(err)
	}
	return b, nil
}

// Open implements [FS]. Opening a directory fails.
func (l *LocalFS) Open(name string) (Reader, error) {
	p, err := l.path("open", name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, l.fix(err)
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = pathErr("open", name, errIsDir)
	}
	if err != nil {
		f.Close()
		return nil, l.fix(err)
	}
	return &localReader{l: l, f: f, size: fi.Size()}, nil
}

// Stat implements [FS]. Symbolic links are followed.
func (l *LocalFS) Stat(name string) (FileInfo, error) {
	p, err := l.path("stat", name)
	if err != nil {
		return FileInfo{}, err
	}
	link, err := os.Lstat(p)
	if err != nil {
		return FileInfo{}, l.fix(err)
	}
	fi := link
	if link.Mode()&os.ModeSymlink != 0 {
		if fi, err = os.Stat(p); err != nil {
			return FileInfo{}, l.fix(err)
		}
	}
	return FileInfo{Size: fi.Size(), ModTime: fi.ModTime(), IsDir: fi.IsDir(), Symlink: link.Mode()&os.ModeSymlink != 0}, nil
}

// Create implements [FS].
func (l *LocalFS) Create(name string) (File, error) {
	return l.create("create", name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
}

// CreateExclusive implements [FS].
func (l *LocalFS) CreateExclusive(name string) (File, error) {
	return l.create("create", name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
}

func (l *LocalFS) create(op, name string, flag int) (File, error) {
	p, err := l.path(op, name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		// Most likely a missing parent: create it and try once more. Doing
		// it only on failure saves a MkdirAll on the common path.
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, l.fix(err)
		}
		f, err = os.OpenFile(p, flag, 0o644)
	}
	if err != nil {
		return nil, l.fix(err)
	}
	return &localFile{l: l, f: f}, nil
}

// Link implements [FS] with a hard link (os.Link).
func (l *LocalFS) Link(oldname, newname string) error {
	po, err := l.path("link", oldname)
	if err != nil {
		return err
	}
	pn, err := l.path("link", newname)
	if err != nil {
		return err
	}
	err = os.Link(po, pn)
	if errors.Is(err, fs.ErrNotExist) {
		// Either oldname or the parent of newname is missing. Only the
		// latter is ours to fix.
		if _, serr := os.Lstat(po); serr != nil {
			return l.fix(err)
		}
		if err := os.MkdirAll(filepath.Dir(pn), 0o755); err != nil {
			return l.fix(err)
		}
		err = os.Link(po, pn)
	}
	return l.fix(err)
}

// Rename implements [FS] with os.Rename. The parent of newname must exist.
func (l *LocalFS) Rename(oldname, newname string) error {
	po, err := l.path("rename", oldname)
	if err != nil {
		return err
	}
	pn, err := l.path("rename", newname)
	if err != nil {
		return err
	}
	if oldname == "." || newname == "." {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errRoot}
	}
	return l.fix(os.Rename(po, pn))
}

// Remove implements [FS] with os.Remove, which removes empty directories
// too. The root itself cannot be removed.
func (l *LocalFS) Remove(name string) error {
	p, err := l.path("remove", name)
	if err != nil {
		return err
	}
	if name == "." {
		return pathErr("remove", name, errRoot)
	}
	return l.fix(os.Remove(p))
}

// List implements [FS].
func (l *LocalFS) List(dir string) ([]string, error) {
	p, err := l.path("list", dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(p) // sorted by name
	if err != nil {
		return nil, l.fix(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// MkdirAll implements [FS].
func (l *LocalFS) MkdirAll(dir string) error {
	p, err := l.path("mkdir", dir)
	if err != nil {
		return err
	}
	return l.fix(os.MkdirAll(p, 0o755))
}

// SyncDir implements [FS] by opening the directory and calling fsync on it.
// Errors are reported as they are, including on systems that cannot sync a
// directory: a commit that relies on SyncDir must not silently lose it.
func (l *LocalFS) SyncDir(dir string) error {
	p, err := l.path("syncdir", dir)
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return l.fix(err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.IsDir() {
		err = pathErr("syncdir", dir, errNotDir)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return l.fix(err)
}

// localFile is a File of a LocalFS.
type localFile struct {
	l *LocalFS
	f *os.File
}

func (w *localFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	return n, w.l.fix(err)
}

func (w *localFile) Sync() error  { return w.l.fix(w.f.Sync()) }
func (w *localFile) Close() error { return w.l.fix(w.f.Close()) }

// localReader is a Reader of a LocalFS. io.EOF is passed through as is.
type localReader struct {
	l    *LocalFS
	f    *os.File
	size int64
}

func (r *localReader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	return n, r.l.fix(err)
}

func (r *localReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.f.ReadAt(p, off)
	return n, r.l.fix(err)
}

func (r *localReader) Seek(offset int64, whence int) (int64, error) {
	n, err := r.f.Seek(offset, whence)
	return n, r.l.fix(err)
}

func (r *localReader) Close() error { return r.l.fix(r.f.Close()) }
func (r *localReader) Size() int64  { return r.size }
