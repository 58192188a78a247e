package storage

import (
	"fmt"
	"path"
	"path/filepath"
)

// Sub returns the FS of directory dir inside fsys: every name given to it
// is dir/name in fsys. A catalog of tables keeps one directory per table
// under its root and hands each table the FS of its own directory.
//
// A LocalFS gives a LocalFS rooted at the directory (so its Root names
// it); any other FS is wrapped, so that an in-memory or fault-injecting
// FS under a catalog sees (and can fail) every call its tables make.
func Sub(fsys FS, dir string) (FS, error) {
	if err := checkPath("sub", dir); err != nil {
		return nil, err
	}
	if dir == "." {
		return fsys, nil
	}
	if l, ok := fsys.(*LocalFS); ok {
		p, err := filepath.Localize(dir)
		if err != nil {
			return nil, fmt.Errorf("sub %q: %w", dir, ErrInvalidPath)
		}
		return Local(filepath.Join(l.root, p)), nil
	}
	return &subFS{fs: fsys, dir: dir}, nil
}

// subFS is directory dir of fs.
type subFS struct {
	fs  FS
	dir string
}

var _ FS = (*subFS)(nil)

// full is name inside the directory, checked first so that a name that
// would climb out ("../x") is refused rather than joined away.
func (s *subFS) full(op, name string) (string, error) {
	if err := checkPath(op, name); err != nil {
		return "", err
	}
	return path.Join(s.dir, name), nil
}

func (s *subFS) ReadFile(name string) ([]byte, error) {
	p, err := s.full("read", name)
	if err != nil {
		return nil, err
	}
	return s.fs.ReadFile(p)
}

func (s *subFS) Open(name string) (Reader, error) {
	p, err := s.full("open", name)
	if err != nil {
		return nil, err
	}
	return s.fs.Open(p)
}

func (s *subFS) Stat(name string) (FileInfo, error) {
	p, err := s.full("stat", name)
	if err != nil {
		return FileInfo{}, err
	}
	return s.fs.Stat(p)
}

func (s *subFS) Create(name string) (File, error) {
	p, err := s.full("create", name)
	if err != nil {
		return nil, err
	}
	return s.fs.Create(p)
}

func (s *subFS) CreateExclusive(name string) (File, error) {
	p, err := s.full("create", name)
	if err != nil {
		return nil, err
	}
	return s.fs.CreateExclusive(p)
}

func (s *subFS) Link(oldname, newname string) error {
	o, err := s.full("link", oldname)
	if err != nil {
		return err
	}
	n, err := s.full("link", newname)
	if err != nil {
		return err
	}
	return s.fs.Link(o, n)
}

func (s *subFS) Rename(oldname, newname string) error {
	o, err := s.full("rename", oldname)
	if err != nil {
		return err
	}
	n, err := s.full("rename", newname)
	if err != nil {
		return err
	}
	return s.fs.Rename(o, n)
}

func (s *subFS) Exchange(a, b string) error {
	pa, err := s.full("exchange", a)
	if err != nil {
		return err
	}
	pb, err := s.full("exchange", b)
	if err != nil {
		return err
	}
	return s.fs.Exchange(pa, pb)
}

func (s *subFS) Remove(name string) error {
	p, err := s.full("remove", name)
	if err != nil {
		return err
	}
	return s.fs.Remove(p)
}

func (s *subFS) List(dir string) ([]string, error) {
	p, err := s.full("list", dir)
	if err != nil {
		return nil, err
	}
	return s.fs.List(p)
}

func (s *subFS) MkdirAll(dir string) error {
	p, err := s.full("mkdir", dir)
	if err != nil {
		return err
	}
	return s.fs.MkdirAll(p)
}

func (s *subFS) SyncDir(dir string) error {
	p, err := s.full("syncdir", dir)
	if err != nil {
		return err
	}
	return s.fs.SyncDir(p)
}
