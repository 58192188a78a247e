// Package catalog maps table names to tables: one directory per table
// under a root, each a table of package tableformat, reached only through
// the storage seam (tableformat/storage), so that the same catalog runs
// on the local disk, in memory, under injected faults or on any other
// storage.FS. It validates names, lists and tells apart tables, phantoms
// (what a create that never committed leaves) and other directories, and
// caches one open handle per table, refreshed on every use so that other
// writers' commits are seen.
//
// Errors wrap tableformat's categories (ErrInvalidInput for a bad name,
// ErrNotFound for a missing table, ErrStorage for a root that cannot be
// read); a failure about one table is a *TableError naming it. The
// servers map the categories to their protocol's codes in one place.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// Catalog is the tables under one root. It is safe for concurrent use.
type Catalog struct {
	root storage.FS
	opts *tableformat.Options

	mu     sync.Mutex
	tables map[string]*tableformat.Table
}

// New returns the catalog of the tables under root; opts are the options
// every table is opened and created with (nil: tableformat's defaults).
func New(root storage.FS, opts *tableformat.Options) *Catalog {
	return &Catalog{root: root, opts: opts, tables: map[string]*tableformat.Table{}}
}

// Options are the options the catalog's tables are opened with.
func (c *Catalog) Options() *tableformat.Options { return c.opts }

// TableFS is the storage of table name: its directory under the root.
// The name must be valid (ValidateName).
func (c *Catalog) TableFS(name string) (storage.FS, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	fsys, err := storage.Sub(c.root, name)
	if err != nil {
		return nil, &TableError{Name: name, Err: fmt.Errorf("%w: %w", tableformat.ErrInvalidInput, err)}
	}
	return fsys, nil
}

// TableError is a failure about one table: it names the table and wraps
// the cause (and so its category).
type TableError struct {
	Name string
	Err  error
}

func (e *TableError) Error() string { return "table " + QuoteName(e.Name) + ": " + e.Err.Error() }
func (e *TableError) Unwrap() error { return e.Err }

// NotFound is the error of a table that does not exist.
func NotFound(name string) error {
	return &TableError{Name: name, Err: tableformat.ErrNotFound}
}

// Open returns the handle of table name, refreshed to its newest version.
// A table whose directory was removed (dropped by hand) is not found, not
// corrupt: its handle is forgotten.
func (c *Catalog) Open(ctx context.Context, name string) (*tableformat.Table, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	tb, ok := c.tables[name]
	c.mu.Unlock()
	if ok {
		if !c.HoldsLog(name) {
			c.mu.Lock()
			if c.tables[name] == tb {
				delete(c.tables, name)
			}
			c.mu.Unlock()
			return nil, NotFound(name)
		}
		if _, err := tb.Refresh(ctx); err != nil {
			return nil, &TableError{Name: name, Err: err}
		}
		return tb, nil
	}
	if !c.HoldsLog(name) {
		return nil, NotFound(name)
	}
	fsys, err := c.TableFS(name)
	if err != nil {
		return nil, err
	}
	tb, err = tableformat.Open(ctx, fsys, c.opts)
	if err != nil {
		if errors.Is(err, tableformat.ErrNotFound) {
			return nil, NotFound(name)
		}
		return nil, &TableError{Name: name, Err: err}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.tables[name]; ok {
		return prev, nil
	}
	c.tables[name] = tb
	return tb, nil
}

// Create makes table name and caches its handle. A table that exists is
// tableformat.ErrAlreadyExists; a bad request (name, options) is
// ErrInvalidInput, without the table's name in front.
func (c *Catalog) Create(ctx context.Context, name string, co tableformat.CreateOptions) (*tableformat.Table, error) {
	fsys, err := c.TableFS(name)
	if err != nil {
		return nil, err
	}
	tb, err := tableformat.Create(ctx, fsys, co, c.opts)
	if err != nil {
		if errors.Is(err, tableformat.ErrInvalidInput) {
			return nil, err
		}
		// Already there, damaged, or out of space: name the table.
		return nil, &TableError{Name: name, Err: err}
	}
	c.mu.Lock()
	c.tables[name] = tb
	c.mu.Unlock()
	return tb, nil
}

// Cached returns the open handle of table name, if the catalog holds one.
func (c *Catalog) Cached(name string) (*tableformat.Table, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tb, ok := c.tables[name]
	return tb, ok
}

// Names lists the directories under the root that hold a table log
// directory, sorted, phantoms included (Tables leaves them out; a check
// reports them).
func (c *Catalog) Names() ([]string, error) {
	entries, err := c.root.List(".")
	if err != nil {
		return nil, rootError(err)
	}
	var out []string
	for _, n := range entries {
		if ValidateName(n) == nil && c.isDir(n) && c.HoldsLog(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// rootError is a failure to read the root as a storage error, without the
// root's location (clients are not told where the root is).
func rootError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%w: reading the root directory: %w", tableformat.ErrStorage, err)
}

// Tables lists the tables under the root, sorted: what Names lists but
// phantoms. A damaged table is listed: what is wrong with it is for
// whoever opens it to report.
func (c *Catalog) Tables() ([]string, error) {
	names, err := c.Names()
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if !c.Phantom(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// IsTable reports whether Tables would list name, without listing the
// root.
func (c *Catalog) IsTable(name string) bool {
	return ValidateName(name) == nil && c.isDir(name) && c.HoldsLog(name) && !c.Phantom(name)
}

// isDir reports whether name under the root is a directory itself (not a
// link to one).
func (c *Catalog) isDir(name string) bool {
	fi, err := c.root.Stat(name)
	return err == nil && fi.IsDir && !fi.Symlink
}

// HoldsLog reports whether directory name under the root holds a table
// log directory.
func (c *Catalog) HoldsLog(name string) bool {
	_, err := c.root.Stat(path.Join(name, tableformat.LogDir))
	return err == nil
}

// Phantom reports whether table directory name holds a log directory with
// neither CURRENT nor a commit file: what a create that failed before its
// first commit was durable (no space left on the device, say) leaves
// behind. It is no table: listings leave it out, opening it is not found
// (tableformat.Open finds no commits) and a create of the name succeeds in
// it. Anything that might be a table (CURRENT present, a commit file, a
// log directory that cannot be read) is not a phantom: opening it says
// what is wrong.
func (c *Catalog) Phantom(name string) bool {
	// CURRENT is tableformat's current-version file (an on-disk name
	// that does not change). Its presence settles it without listing a
	// log that may hold many thousands of commits (IsTable asks this on
	// every SQL statement that names a table).
	logDir := path.Join(name, tableformat.LogDir)
	if _, err := c.root.Stat(path.Join(logDir, "CURRENT")); err == nil {
		return false
	}
	entries, err := c.root.List(logDir)
	if err != nil {
		return false
	}
	return !slices.ContainsFunc(entries, func(n string) bool { return n == "CURRENT" || isCommitFile(n) })
}

// isCommitFile reports whether n is the name of a commit file in the log
// directory: the version, zero-padded to at least ten digits, and .json
// (tableformat.CommitPath).
func isCommitFile(n string) bool {
	v, ok := strings.CutSuffix(n, ".json")
	if !ok || len(v) < 10 {
		return false
	}
	for _, r := range v {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
