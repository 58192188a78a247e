package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/tableformat"
)

// This file holds the load command: its flags, the run over the files and
// the table's description. The check before sending is in load_check.go,
// the sending in load_put.go, the readers in load_sources.go and the
// progress line in load_progress.go.

var loadCmd = &command{
	Name:    "load",
	Group:   "client",
	Summary: "append Parquet, CSV or Arrow IPC files to a table",
	Usage:   "tsflight load [flags] TABLE FILE...",
	Help: `Appends each FILE to the existing table TABLE. One file is one append:
one DoPut, one commit, all or nothing. The format comes from the extension
(or --input-format for all files):

  .parquet                           Parquet
  .csv                               CSV with a header row
  .arrow, .feather, .ipc, .arrows    Arrow IPC file or stream

Before anything is sent every file is opened and checked against the
table's schema: columns are matched by name, in any order; each type must be
the table's or a lossless widening the server applies (int8/int16 to
int32/int64, int32 to int64, uint8/uint16/uint32 to uint64, float32 to
float64); the index, entity and non-nullable columns must be there. A table
that has no columns yet takes the first file's (a Parquet or Arrow file:
CSV has no types). If any file does not fit, nothing is sent. Schema and
column metadata in the files are not sent; a file without rows is skipped.

Files are streamed in batches of --batch-rows rows: memory stays small
whatever the file size. CSV values are parsed as the table's column types,
timestamps in RFC 3339 (2024-06-01T00:00:00Z); an empty field is a null
(in string columns, an empty string).

A file that holds rows already in the table (the same entity and index
interval) is refused whole, as is one that turns out to be unreadable half
way: nothing of it is committed. Files are loaded in order and the command
stops at the first failure; the files before it stay loaded, and the message
lists the ones that were not. Ctrl-C abandons the file being sent: nothing
of it is committed (once the whole file is sent, the server's answer is
awaited; a second Ctrl-C does not wait).

While a file is sent, a progress line (rows sent, bytes read, rate) is
redrawn on standard error if it is a terminal (--progress). After each file
one line on standard error gives its rows, bytes and seconds and the table
version and segment the server committed; --format json also writes them as
one JSON object per file to standard output.

Example:
  $ tsflight load cpu cpu-2024-06-01.parquet cpu-2024-06-02.csv
  loaded cpu-2024-06-01.parquet: 864000 rows, 61.2 MiB in 1.9 s; table cpu version 2, segment data/_managed/append/4d0c….parquet
  loaded cpu-2024-06-02.csv: 864000 rows, 70.4 MiB in 3.2 s; table cpu version 3, segment data/_managed/append/9a1e….parquet
  loaded 2 files into cpu: 1728000 rows, 131.6 MiB in 5.1 s`,
}

func init() { register(loadCmd, runLoad) }

const (
	// loadDefaultBatchRows is the rows per record batch sent.
	loadDefaultBatchRows = 64 << 10
	// loadMaxBatchBytes splits batches larger than this (wide rows): the
	// server takes batches up to its --max-recv-msg-size, 64 MiB by default.
	loadMaxBatchBytes = 16 << 20
	// loadCheckAllocEnv, set to 1, makes load count its Arrow memory and
	// fail if any is left at the end (for tests).
	loadCheckAllocEnv = "TSFLIGHT_LOAD_CHECK_ALLOC"
)

// loadTable is what load needs to know of the table.
type loadTable struct {
	name       string
	schema     *arrow.Schema // nil when the table has no columns yet
	index      string
	indexType  string // timestamp, int64 or uint64
	entities   []string
	addColumns bool // nullable columns may be left out (schema_add_columns)
}

func (t *loadTable) isKey(col string) bool {
	return col == t.index || slices.Contains(t.entities, col)
}

// loadFile is one input file and, once checked, how it is sent.
type loadFile struct {
	path   string
	format string
	size   int64
	// Set by the check:
	csvSchema *arrow.Schema // CSV: the header's columns with the table's types
	send      *arrow.Schema // the schema of the DoPut stream
	src       []int         // send column i is column src[i] of the file's batches
	nonNull   []bool        // send column i must hold no nulls (nullable in the file only)
	rows      int64         // -1 when unknown before reading
}

// loadResult is the outcome of one file, as --format json writes it.
type loadResult struct {
	File    string  `json:"file"`
	Table   string  `json:"table"`
	Rows    int64   `json:"rows"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Version *uint64 `json:"version"` // nil when the file had no rows
	Segment string  `json:"segment,omitempty"`
}

type loadJob struct {
	e         *env
	c         *client
	table     *loadTable
	mem       memory.Allocator
	batchRows int
	progress  int
	json      bool
}

func runLoad(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(loadCmd)
	server := serverFlag(fs)
	inputFormat := newChoice("", loadParquet, loadCSV, loadArrow)
	fs.Var(inputFormat, "input-format", "read every FILE in this `format`: parquet, csv or arrow (default: by extension)")
	progress := newChoice("auto", "auto", "always", "never")
	fs.Var(progress, "progress", "`when` to show a progress line on standard error: auto (if it is a terminal), always or never")
	format := newChoice("text", "text", "json")
	fs.Var(format, "format", "report `format`: text (a line per file on standard error) or json (also a JSON object per file on standard output)")
	batchRows := fs.Int("batch-rows", loadDefaultBatchRows, "`rows` per record batch sent")
	rest, err := fs.parse(e, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 0:
		return usagef("missing TABLE and FILE arguments")
	case len(rest) == 1:
		return usagef("missing FILE argument: which files should be loaded into %s?", rest[0])
	case *batchRows <= 0:
		return usagef("--batch-rows must be positive, got %d", *batchRows)
	}
	files := make([]*loadFile, 0, len(rest)-1)
	for _, path := range rest[1:] {
		f := &loadFile{path: path, format: inputFormat.value, rows: -1}
		if f.format == "" {
			if f.format = loadFormatOf(path); f.format == "" {
				what := "has no extension"
				if ext := filepath.Ext(path); ext != "" {
					what = fmt.Sprintf("has an unknown extension %q", ext)
				}
				return usagef("%s %s (known: .parquet, .csv, .arrow, .feather, .ipc, .arrows); give --input-format parquet|csv|arrow", path, what)
			}
		}
		files = append(files, f)
	}

	l := &loadJob{e: e, batchRows: *batchRows, json: format.value == "json"}
	switch progress.value {
	case "always":
		l.progress = loadProgressLines
		if isTerminal(e.stderr) {
			l.progress = loadProgressRedraw
		}
	case "auto":
		if isTerminal(e.stderr) {
			l.progress = loadProgressRedraw
		}
	}
	// As the server does: the heap grows to 1.5 times the live data before
	// a collection, not 2 times (GOGC in the environment wins).
	if e.getenv("GOGC") == "" {
		debug.SetGCPercent(flightserver.RecommendedGCPercent)
	}
	var checked *memory.CheckedAllocator
	l.mem = memory.DefaultAllocator
	if e.getenv(loadCheckAllocEnv) == "1" {
		checked = memory.NewCheckedAllocator(memory.NewGoAllocator())
		l.mem = checked
	}

	// SIGINT or SIGTERM abandons the file being sent; a second one kills.
	ctx, stop := clientContext(ctx)
	defer stop()

	c, err := dialServer(server)
	if err != nil {
		return err
	}
	defer c.close()
	l.c = c

	err = l.run(ctx, rest[0], files)
	if checked != nil {
		if n := checked.CurrentAlloc(); n != 0 {
			if err == nil {
				return fmt.Errorf("internal error: %d bytes of Arrow memory were not released", n)
			}
			return fmt.Errorf("%w (and, an internal error, %d bytes of Arrow memory were not released)", err, n)
		}
	}
	return err
}

func (l *loadJob) run(ctx context.Context, table string, files []*loadFile) error {
	tbl, err := l.describe(ctx, table)
	if err == nil {
		l.table = tbl
		err = l.check(ctx, files)
	}
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted: nothing was sent")
		}
		return err
	}
	var total loadResult
	start := time.Now()
	for i, f := range files {
		if ctx.Err() != nil {
			return l.stopped(files, i, fmt.Errorf("interrupted before %s: it was not sent", f.path))
		}
		res, err := l.send(ctx, f)
		if err != nil {
			return l.stopped(files, i, err)
		}
		total.Rows += res.Rows
		total.Bytes += res.Bytes
	}
	if len(files) > 1 {
		fmt.Fprintf(l.e.stderr, "loaded %d files into %s: %d rows, %s in %.1f s\n",
			len(files), table, total.Rows, humanBytes(total.Bytes), time.Since(start).Seconds())
	}
	return nil
}

// stopped reports which files were loaded when file i failed with err.
func (l *loadJob) stopped(files []*loadFile, i int, err error) error {
	if len(files) > 1 {
		names := func(fs []*loadFile) string {
			s := make([]string, len(fs))
			for j, f := range fs {
				s[j] = f.path
			}
			return strings.Join(s, ", ")
		}
		loaded := "none"
		if i > 0 {
			loaded = names(files[:i])
		}
		rest := files[i:]
		maybe := ""
		if errors.Is(err, errMaybeCommitted) {
			maybe = fmt.Sprintf("; %s may have been committed (check with tsflight describe %s)", files[i].path, l.table.name)
			rest = rest[1:]
		}
		notLoaded := ""
		if len(rest) > 0 {
			notLoaded = "; not loaded: " + names(rest)
		}
		fmt.Fprintf(l.e.stderr, "loaded %d of %d files: %s%s%s\n", i, len(files), loaded, maybe, notLoaded)
	}
	return err
}

// describe fetches the table's Arrow schema (GetSchema on its PATH
// descriptor) and its index (describe-table).
func (l *loadJob) describe(ctx context.Context, table string) (*loadTable, error) {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}}
	res, err := l.c.fl.GetSchema(ctx, desc)
	if err != nil {
		err = l.c.wrap(err)
		var se *serverError
		if errors.As(err, &se) && se.code == codes.NotFound {
			return nil, fmt.Errorf("table %q does not exist on %s (create it first: tsflight create --help)", table, l.c.addr)
		}
		return nil, err
	}
	schema, err := flight.DeserializeSchema(res.Schema, l.mem)
	if err != nil {
		return nil, fmt.Errorf("table %s: the server sent an unreadable schema: %w", table, err)
	}
	var info struct {
		ReaderFeatures []string `json:"reader_features"`
		Index          struct {
			Column        string   `json:"column"`
			Type          string   `json:"type"`
			EntityColumns []string `json:"entity_columns"`
		} `json:"index"`
	}
	if _, err := l.c.action(ctx, "describe-table", map[string]string{"table": table}, &info); err != nil {
		return nil, err
	}
	t := &loadTable{
		name:       table,
		index:      info.Index.Column,
		indexType:  info.Index.Type,
		entities:   info.Index.EntityColumns,
		addColumns: slices.Contains(info.ReaderFeatures, tableformat.FeatureSchemaAddColumns),
	}
	if schema.NumFields() > 0 {
		t.schema = schema
	}
	return t, nil
}
