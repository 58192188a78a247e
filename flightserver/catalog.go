package flightserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// catalog maps table names to directories under the root and caches open
// table handles. A handle is refreshed on every use, so other processes'
// commits are seen.
type catalog struct {
	root string
	opts *tableformat.Options

	mu     sync.Mutex
	tables map[string]*tableformat.Table
}

func newCatalog(root string, opts *tableformat.Options) *catalog {
	return &catalog{root: root, opts: opts, tables: map[string]*tableformat.Table{}}
}

func (c *catalog) fs(name string) storage.FS { return storage.Local(filepath.Join(c.root, name)) }

// open returns the refreshed handle of table name.
func (c *catalog) open(ctx context.Context, name string) (*tableformat.Table, error) {
	if err := ValidateTableName(name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	tb, ok := c.tables[name]
	c.mu.Unlock()
	if ok {
		// A table whose directory was removed (dropped by hand) is gone,
		// not corrupt: forget the handle.
		if _, err := os.Stat(filepath.Join(c.root, name, tableformat.LogDir)); errors.Is(err, os.ErrNotExist) {
			c.mu.Lock()
			if c.tables[name] == tb {
				delete(c.tables, name)
			}
			c.mu.Unlock()
			return nil, Status(notFound(name))
		}
		if _, err := tb.Refresh(ctx); err != nil {
			return nil, Status(err)
		}
		return tb, nil
	}
	if _, err := os.Stat(filepath.Join(c.root, name, tableformat.LogDir)); errors.Is(err, os.ErrNotExist) {
		return nil, Status(notFound(name))
	}
	tb, err := tableformat.Open(ctx, c.fs(name), c.opts)
	if err != nil {
		if errors.Is(err, tableformat.ErrNotFound) {
			return nil, Status(notFound(name))
		}
		return nil, Status(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.tables[name]; ok {
		return prev, nil
	}
	c.tables[name] = tb
	return tb, nil
}

func notFound(name string) error {
	return &tableError{name: name, err: tableformat.ErrNotFound}
}

type tableError struct {
	name string
	err  error
}

func (e *tableError) Error() string { return "table " + quoteName(e.name) + ": " + e.err.Error() }
func (e *tableError) Unwrap() error { return e.err }

// create makes a new table.
func (c *catalog) create(ctx context.Context, name string, co tableformat.CreateOptions) (*tableformat.Table, error) {
	if err := ValidateTableName(name); err != nil {
		return nil, err
	}
	tb, err := tableformat.Create(ctx, c.fs(name), co, c.opts)
	if err != nil {
		if errors.Is(err, tableformat.ErrAlreadyExists) {
			return nil, Status(&tableError{name: name, err: err})
		}
		return nil, Status(err)
	}
	c.mu.Lock()
	c.tables[name] = tb
	c.mu.Unlock()
	return tb, nil
}

// names lists the directories under the root that hold a table log.
func (c *catalog) names() ([]string, error) {
	entries, err := os.ReadDir(c.root)
	if err != nil {
		return nil, Status(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || ValidateTableName(e.Name()) != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(c.root, e.Name(), tableformat.LogDir)); err == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
