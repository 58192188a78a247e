package flightserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
			return nil, Status(&tableError{name: name, err: err})
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
		return nil, Status(&tableError{name: name, err: err})
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
		if errors.Is(err, tableformat.ErrInvalidInput) {
			return nil, Status(err)
		}
		// Already there, damaged, or out of space: name the table.
		return nil, Status(&tableError{name: name, err: err})
	}
	c.mu.Lock()
	c.tables[name] = tb
	c.mu.Unlock()
	return tb, nil
}

// names lists the directories under the root that hold a table log
// directory, phantoms included (tableNames leaves them out; check reports
// them).
func (c *catalog) names() ([]string, error) {
	entries, err := os.ReadDir(c.root)
	if err != nil {
		return nil, Status(rootError(err))
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && ValidateTableName(e.Name()) == nil && c.holdsLog(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// rootError is a failure to read the root directory as a storage error,
// without the root's path (clients are not told where the root is).
func rootError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%w: reading the root directory: %w", tableformat.ErrStorage, err)
}

// tableNames lists the tables under the root, sorted: the directories names
// lists but phantoms. A damaged table is listed: what is wrong with it is
// for whoever opens it to report.
func (c *catalog) tableNames() ([]string, error) {
	names, err := c.names()
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if !c.phantom(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// isTable reports whether tableNames would list name.
func (c *catalog) isTable(name string) bool {
	if ValidateTableName(name) != nil {
		return false
	}
	if fi, err := os.Lstat(filepath.Join(c.root, name)); err != nil || !fi.IsDir() {
		return false
	}
	return c.holdsLog(name) && !c.phantom(name)
}

// holdsLog reports whether directory name under the root holds a table
// log directory (names and isTable both ask it).
func (c *catalog) holdsLog(name string) bool {
	_, err := os.Stat(filepath.Join(c.root, name, tableformat.LogDir))
	return err == nil
}

// phantom reports whether table directory name holds a log directory with
// neither CURRENT nor a commit file: what a create that failed before its
// first commit was durable (no space left on the device, say) leaves
// behind. It is no table: listings leave it out, opening it is NOT_FOUND
// (tableformat.Open finds no commits) and a create of the name succeeds in
// it. Anything that might be a table (CURRENT present, a commit file, a
// log directory that cannot be read) is not a phantom: opening it says
// what is wrong.
func (c *catalog) phantom(name string) bool {
	logDir := filepath.Join(c.root, name, tableformat.LogDir)
	// CURRENT is tableformat's currentPath (an on-disk name that does not
	// change).
	if _, err := os.Lstat(filepath.Join(logDir, "CURRENT")); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	f, err := os.Open(logDir)
	if err != nil {
		return false
	}
	defer f.Close()
	for {
		batch, err := f.Readdirnames(256)
		for _, n := range batch {
			if isCommitFile(n) {
				return false
			}
		}
		if err != nil {
			return errors.Is(err, io.EOF)
		}
	}
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

// Tables that cannot be read in listings. A listing (ListFlights, Flight
// SQL GetTables with schemas) never fails for one table: it lists the table
// with an empty schema that says what is wrong, and logs it. Opening the
// table by name keeps failing with the error.

// Table states of a TableProblem.
const (
	// TableDamaged: the table's log does not replay (DATA_LOSS): CURRENT is
	// unreadable or ahead of the commits, a commit is missing or malformed.
	// tsflight check says what to restore or repair.
	TableDamaged = "damaged"
	// TableUnreadable: any other failure to open the table: it needs a
	// newer protocol or an upgrade (FAILED_PRECONDITION), its files cannot
	// be read (UNAVAILABLE), …
	TableUnreadable = "unreadable"
)

// Schema metadata keys of the empty schema listed for a table that cannot
// be read (UnreadableSchema): the TableProblem's fields.
const (
	MetadataTableState = "tsflight.state"
	MetadataTableCode  = "tsflight.code"
	MetadataTableError = "tsflight.error"
)

// TableProblem says why a listed table cannot be read. It is the JSON
// app_metadata of the FlightInfo ListFlights sends for such a table (a
// readable table's FlightInfo has no app_metadata).
type TableProblem struct {
	// State is TableDamaged or TableUnreadable.
	State string `json:"state"`
	// Code is the gRPC status code opening the table fails with, in the
	// canonical upper-case form ("DATA_LOSS").
	Code string `json:"code"`
	// Error is the status message, naming the table and the file at fault.
	Error string `json:"error"`
}

// ProblemOf describes err, the error opening a table failed with (a gRPC
// status or an error of tableformat's categories).
func ProblemOf(err error) TableProblem {
	st := status.Convert(Status(err))
	p := TableProblem{State: TableUnreadable, Code: codeName(st.Code()), Error: st.Message()}
	if st.Code() == codes.DataLoss {
		p.State = TableDamaged
	}
	return p
}

// codeName is a gRPC code's canonical name: DataLoss is DATA_LOSS.
func codeName(c codes.Code) string {
	s := c.String()
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// UnreadableSchema is the schema listed for a table that cannot be read:
// no fields, and p in its metadata (MetadataTableState, …).
func UnreadableSchema(p TableProblem) *arrow.Schema {
	md := arrow.NewMetadata(
		[]string{MetadataTableState, MetadataTableCode, MetadataTableError},
		[]string{p.State, p.Code, p.Error})
	return arrow.NewSchema(nil, &md)
}

// unreadableInfo is the FlightInfo ListFlights sends for a table that
// cannot be read: its PATH descriptor, UnreadableSchema, no endpoint,
// unknown totals (-1) and the TableProblem as app_metadata.
func unreadableInfo(desc *flight.FlightDescriptor, p TableProblem, alloc memory.Allocator) *flight.FlightInfo {
	meta, _ := json.Marshal(p) // strings only: cannot fail
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(UnreadableSchema(p), alloc),
		FlightDescriptor: desc,
		TotalRecords:     -1,
		TotalBytes:       -1,
		AppMetadata:      meta,
	}
}

// cached returns the open handle of table name, if the catalog holds one.
func (c *catalog) cached(name string) (*tableformat.Table, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tb, ok := c.tables[name]
	return tb, ok
}
