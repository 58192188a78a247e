package storage

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory [FS] that models what survives a power loss.
//
// Every file is a node holding two contents: the current one, which reads
// see, and the durable one, as of its last [File.Sync] (empty for a file
// never synced). Every directory holds two sets of entries: the live ones,
// which reads, List and Stat see, and the durable ones, copied from the live
// ones by [MemFS.SyncDir]. Create, CreateExclusive, Link, Rename and Remove
// of a file change only the live entries. [MemFS.CrashClone] builds a new
// MemFS from the durable entries and contents alone.
//
// Directories are simpler: creating, renaming or removing one is durable at
// once, in both sets of entries of its parent.
//
// Like an inode, a node lives as long as a name or an open [File] refers to
// it: a File keeps writing into its node after the name is removed or
// replaced, and two names made by Link share one node.
//
// A MemFS is safe for concurrent use. Errors are *fs.PathError values (or
// *os.LinkError for a Rename that conflicts with its target), wrapping
// fs.ErrNotExist, fs.ErrExist, fs.ErrClosed or a plain error such as "is a
// directory".
type MemFS struct {
	mu   sync.Mutex
	root *memNode
}

var _ FS = (*MemFS)(nil)

// memNode is a file or a directory of a MemFS.
type memNode struct {
	isDir   bool
	modTime time.Time

	data   []byte // file: current content
	synced []byte // file: content as of the last Sync

	live    map[string]*memNode // directory: entries seen now
	durable map[string]*memNode // directory: entries as of the last SyncDir
}

func newDirNode(t time.Time) *memNode {
	return &memNode{
		isDir:   true,
		modTime: t,
		live:    map[string]*memNode{},
		durable: map[string]*memNode{},
	}
}

// NewMem returns an empty MemFS.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode(time.Now())}
}

// splitPath splits a valid path into its elements; "." has none.
func splitPath(name string) []string {
	if name == "." {
		return nil
	}
	return strings.Split(name, "/")
}

// walk returns the directory reached by following elems from the root,
// creating missing directories if create is set. name is for errors.
func (m *MemFS) walk(op, name string, elems []string, create bool) (*memNode, error) {
	d := m.root
	for _, e := range elems {
		c, ok := d.live[e]
		switch {
		case !ok && !create:
			return nil, pathErr(op, name, fs.ErrNotExist)
		case !ok:
			now := time.Now()
			c = newDirNode(now)
			d.live[e], d.durable[e] = c, c
			d.modTime = now
		case !c.isDir:
			return nil, pathErr(op, name, errNotDir)
		}
		d = c
	}
	return d, nil
}

// lookup returns the node named name.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	if err := checkPath(op, name); err != nil {
		return nil, err
	}
	dir, base, err := m.parent(op, name, false)
	if err == errRoot {
		return m.root, nil
	}
	if err != nil {
		return nil, err
	}
	n, ok := dir.live[base]
	if !ok {
		return nil, pathErr(op, name, fs.ErrNotExist)
	}
	return n, nil
}

// parent returns the directory that holds name and the last element of
// name. For the root it returns the bare error errRoot.
func (m *MemFS) parent(op, name string, create bool) (*memNode, string, error) {
	elems := splitPath(name)
	if len(elems) == 0 {
		return nil, "", errRoot
	}
	d, err := m.walk(op, name, elems[:len(elems)-1], create)
	return d, elems[len(elems)-1], err
}

// ReadFile implements [FS].
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("read", name)
	if err != nil {
		return nil, err
	}
	if n.isDir {
		return nil, pathErr("read", name, errIsDir)
	}
	return bytes.Clone(n.data), nil
}

// Open implements [FS]. The Reader reads a copy of the content at the time
// of the call; later writes do not show through it.
func (m *MemFS) Open(name string) (Reader, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.isDir {
		return nil, pathErr("open", name, errIsDir)
	}
	return &memReader{r: bytes.NewReader(bytes.Clone(n.data)), name: name}, nil
}

// Stat implements [FS].
func (m *MemFS) Stat(name string) (FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Size: int64(len(n.data)), ModTime: n.modTime, IsDir: n.isDir}, nil
}

// Create implements [FS]. Truncating an existing file empties the node
// shared by all its names; its durable content is kept until the next Sync.
func (m *MemFS) Create(name string) (File, error) {
	return m.create("create", name, false)
}

// CreateExclusive implements [FS].
func (m *MemFS) CreateExclusive(name string) (File, error) {
	return m.create("create", name, true)
}

func (m *MemFS) create(op, name string, excl bool) (File, error) {
	if err := checkPath(op, name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if name == "." {
		if excl {
			return nil, pathErr(op, name, fs.ErrExist)
		}
		return nil, pathErr(op, name, errIsDir)
	}
	dir, base, err := m.parent(op, name, true)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	n, ok := dir.live[base]
	switch {
	case ok && excl:
		return nil, pathErr(op, name, fs.ErrExist)
	case ok && n.isDir:
		return nil, pathErr(op, name, errIsDir)
	case ok:
		n.data = nil
		n.modTime = now
	default:
		n = &memNode{modTime: now}
		dir.live[base] = n
		dir.modTime = now
	}
	return &memFile{m: m, n: n, name: name}, nil
}

// Link implements [FS]. Both names then refer to the same node.
func (m *MemFS) Link(oldname, newname string) error {
	if err := checkPath("link", oldname); err != nil {
		return err
	}
	if err := checkPath("link", newname); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("link", oldname)
	if err != nil {
		return err
	}
	if n.isDir {
		return pathErr("link", oldname, errIsDir)
	}
	if newname == "." {
		return pathErr("link", newname, fs.ErrExist)
	}
	dir, base, err := m.parent("link", newname, true)
	if err != nil {
		return err
	}
	if _, ok := dir.live[base]; ok {
		return pathErr("link", newname, fs.ErrExist)
	}
	dir.live[base] = n
	dir.modTime = time.Now()
	return nil
}

// Rename implements [FS]. A file replaces a file; a directory replaces an
// empty directory. The parent of newname must exist.
func (m *MemFS) Rename(oldname, newname string) error {
	if err := checkPath("rename", oldname); err != nil {
		return err
	}
	if err := checkPath("rename", newname); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if oldname == "." || newname == "." {
		return fail(errRoot)
	}
	odir, obase, err := m.parent("rename", oldname, false)
	if err != nil {
		return err
	}
	n, ok := odir.live[obase]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	ndir, nbase, err := m.parent("rename", newname, false)
	if err != nil {
		return err
	}
	target, exists := ndir.live[nbase]
	switch {
	case target == n:
		return nil // same name, or two links to one file: nothing to do
	case n.isDir && strings.HasPrefix(newname, oldname+"/"):
		return fail(errIntoSelf)
	case exists && !n.isDir && target.isDir:
		return fail(errIsDir)
	case exists && n.isDir && !target.isDir:
		return fail(errNotDir)
	case exists && n.isDir && len(target.live) > 0:
		return fail(errNotEmpty)
	}
	now := time.Now()
	delete(odir.live, obase)
	ndir.live[nbase] = n
	if n.isDir {
		delete(odir.durable, obase)
		ndir.durable[nbase] = n
	}
	odir.modTime, ndir.modTime = now, now
	return nil
}

// Exchange implements [FS]: the two entries swap nodes. For directories
// the swap is durable at once (as a directory rename is); for files only
// after SyncDir of the parents.
func (m *MemFS) Exchange(a, b string) error {
	if err := checkPath("exchange", a); err != nil {
		return err
	}
	if err := checkPath("exchange", b); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error {
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: err}
	}
	if a == "." || b == "." {
		return fail(errRoot)
	}
	if strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/") {
		return fail(errIntoSelf)
	}
	adir, abase, err := m.parent("exchange", a, false)
	if err != nil {
		return err
	}
	bdir, bbase, err := m.parent("exchange", b, false)
	if err != nil {
		return err
	}
	na, ok := adir.live[abase]
	if !ok {
		return pathErr("exchange", a, fs.ErrNotExist)
	}
	nb, ok := bdir.live[bbase]
	if !ok {
		return pathErr("exchange", b, fs.ErrNotExist)
	}
	if na.isDir != nb.isDir {
		return fail(errNotDir)
	}
	adir.live[abase], bdir.live[bbase] = nb, na
	if na.isDir {
		adir.durable[abase], bdir.durable[bbase] = nb, na
	}
	now := time.Now()
	adir.modTime, bdir.modTime = now, now
	return nil
}

// Remove implements [FS]. Like os.Remove it removes an empty directory too;
// that removal is durable at once and takes along any durable entries the
// directory still had.
func (m *MemFS) Remove(name string) error {
	if err := checkPath("remove", name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("remove", name, false)
	if err == errRoot {
		return pathErr("remove", name, errRoot)
	}
	if err != nil {
		return err
	}
	n, ok := dir.live[base]
	switch {
	case !ok:
		return pathErr("remove", name, fs.ErrNotExist)
	case n.isDir && len(n.live) > 0:
		return pathErr("remove", name, errNotEmpty)
	case n.isDir:
		delete(dir.durable, base)
	}
	delete(dir.live, base)
	dir.modTime = time.Now()
	return nil
}

// List implements [FS].
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookup("list", dir)
	if err != nil {
		return nil, err
	}
	if !d.isDir {
		return nil, pathErr("list", dir, errNotDir)
	}
	return slices.Sorted(maps.Keys(d.live)), nil
}

// MkdirAll implements [FS]. It fails if a file is in the way.
func (m *MemFS) MkdirAll(dir string) error {
	if err := checkPath("mkdir", dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.walk("mkdir", dir, splitPath(dir), true)
	return err
}

// SyncDir implements [FS]: the durable entries of dir become its live ones.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookup("syncdir", dir)
	if err != nil {
		return err
	}
	if !d.isDir {
		return pathErr("syncdir", dir, errNotDir)
	}
	d.durable = maps.Clone(d.live)
	return nil
}

// CrashClone returns a new MemFS holding what a power loss would leave of m
// now: the durable entries of every directory, each file with its durable
// content, current and durable alike. Names that share a node in m share one
// in the clone. m is not changed, and Files open on m keep writing into m.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	files := map[*memNode]*memNode{}
	var clone func(d *memNode) *memNode
	clone = func(d *memNode) *memNode {
		c := newDirNode(d.modTime)
		for name, n := range d.durable {
			var cn *memNode
			switch {
			case n.isDir:
				cn = clone(n)
			case files[n] != nil:
				cn = files[n]
			default:
				cn = &memNode{
					modTime: n.modTime,
					data:    bytes.Clone(n.synced),
					synced:  bytes.Clone(n.synced),
				}
				files[n] = cn
			}
			c.live[name], c.durable[name] = cn, cn
		}
		return c
	}
	return &MemFS{root: clone(m.root)}
}

// SetModTime sets the modification time of the file or directory name, as
// Stat reports it. Later writes set it to the current time again.
func (m *MemFS) SetModTime(name string, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("setmodtime", name)
	if err != nil {
		return err
	}
	n.modTime = t
	return nil
}

// String lists every path of m, one a line, sorted: a directory with a
// trailing slash, a file with its current and durable sizes and a note when
// its name is not durable yet. Names that are durable but no longer live
// (removed or renamed without SyncDir) are listed too. Meant for test
// failure messages.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	var dump func(prefix string, d *memNode)
	dump = func(prefix string, d *memNode) {
		names := slices.Sorted(maps.Keys(d.live))
		for name := range d.durable {
			if _, ok := d.live[name]; !ok {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			p := prefix + name
			n, live := d.live[name]
			dn, durable := d.durable[name]
			switch {
			case live && n.isDir:
				fmt.Fprintf(&b, "%s/\n", p)
				dump(p+"/", n)
			case live:
				note := ""
				if !durable {
					note = " [name not synced]"
				} else if dn != n {
					note = " [name synced to another file]"
				}
				fmt.Fprintf(&b, "%s %d bytes, %d synced%s\n", p, len(n.data), len(n.synced), note)
			default:
				fmt.Fprintf(&b, "%s [gone, name not synced] %d synced\n", p, len(dn.synced))
			}
		}
	}
	dump("", m.root)
	return b.String()
}
