package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/tableformat"
)

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

func init() {
	loadCmd.Run = runLoad // set here: runLoad refers to loadCmd
	register(loadCmd)
}

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

// loadWidenings lists the widenings the server applies (docs/flight.md,
// DoPut, Schema): input type to the table types it may fill.
var loadWidenings = map[arrow.Type][]arrow.Type{
	arrow.INT8:    {arrow.INT32, arrow.INT64},
	arrow.INT16:   {arrow.INT32, arrow.INT64},
	arrow.INT32:   {arrow.INT64},
	arrow.UINT8:   {arrow.UINT64},
	arrow.UINT16:  {arrow.UINT64},
	arrow.UINT32:  {arrow.UINT64},
	arrow.FLOAT32: {arrow.FLOAT64},
}

const loadWideningsText = "int8/int16→int32/int64, int32→int64, uint8/uint16/uint32→uint64, float32→float64"

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
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	c, err := dialServer(*server)
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
			len(files), table, total.Rows, loadHumanBytes(total.Bytes), time.Since(start).Seconds())
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
		fmt.Fprintf(l.e.stderr, "loaded %d of %d files: %s; not loaded: %s\n", i, len(files), loaded, names(files[i:]))
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

// ---- the check before sending ----

// check opens every file and matches its columns with the table's (or, for
// a table without columns, with the first file's as the table will adopt
// them). It reports every file that does not fit.
func (l *loadJob) check(ctx context.Context, files []*loadFile) error {
	expected := l.table.schema
	var problems []string
	for _, f := range files {
		adopted, err := l.checkFile(ctx, f, expected)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f.path, err))
			continue
		}
		if expected == nil {
			expected = adopted
		}
	}
	switch len(problems) {
	case 0:
		return nil
	case 1:
		if len(files) == 1 {
			return fmt.Errorf("%s; nothing was sent", problems[0])
		}
		return fmt.Errorf("%s; nothing was sent (no file was loaded)", problems[0])
	}
	return fmt.Errorf("%d of %d files do not fit table %s; nothing was sent:\n  %s", len(problems), len(files), l.table.name, strings.Join(problems, "\n  "))
}

// checkFile checks one file against expected (nil: the table has no
// columns yet) and plans how it is sent. For a table without columns it
// returns the table's schema after adopting the file's.
func (l *loadJob) checkFile(ctx context.Context, f *loadFile, expected *arrow.Schema) (*arrow.Schema, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, loadPathError(err)
	}
	if st.IsDir() {
		return nil, errors.New("is a directory")
	}
	f.size = st.Size()
	if f.format == loadCSV {
		return nil, l.checkCSV(ctx, f, expected)
	}
	var read atomic.Int64
	src, err := loadOpen(ctx, f.path, f.format, nil, l.mem, l.batchRows, &read)
	if err != nil {
		return nil, loadPathError(err)
	}
	defer src.close()
	if ps, ok := src.(*loadParquetSource); ok {
		f.rows = ps.pf.NumRows()
	}
	if fs, ok := src.(*loadIPCFileSource); ok && fs.fr.NumRecords() == 0 {
		f.rows = 0
	}
	return l.planColumns(f, src.schema(), expected)
}

func loadPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot read the file: %v", pe.Err)
	}
	return err
}

// planColumns matches the columns of a Parquet or Arrow file with the
// table's, as the server will (tableformat's normalizer): by name, with
// the same or a widened type, the same nullability (a non-nullable file
// column is sent as nullable, and a nullable one for a non-nullable table
// column is checked for nulls as it is sent), and only nullable columns
// left out, after add-columns.
func (l *loadJob) planColumns(f *loadFile, in *arrow.Schema, expected *arrow.Schema) (*arrow.Schema, error) {
	fields := make([]arrow.Field, in.NumFields())
	for i, fld := range in.Fields() {
		fields[i] = arrow.Field{Name: fld.Name, Type: fld.Type, Nullable: fld.Nullable}
	}
	if expected == nil {
		return l.planAdopt(f, fields)
	}
	var problems []string
	seen := map[string]bool{}
	f.src = make([]int, len(fields))
	f.nonNull = make([]bool, len(fields))
	for i, fld := range fields {
		f.src[i] = i
		if seen[fld.Name] {
			problems = append(problems, fmt.Sprintf("column %q appears twice", fld.Name))
			continue
		}
		seen[fld.Name] = true
		j := expected.FieldIndices(fld.Name)
		if len(j) == 0 {
			problems = append(problems, fmt.Sprintf("column %q is not in table %s (its columns: %s)", fld.Name, l.table.name, strings.Join(fieldNames(expected), ", ")))
			continue
		}
		want := expected.Field(j[0])
		if !loadTypeFits(fld.Type, want.Type) {
			problems = append(problems, fmt.Sprintf("column %q is %s in the file but %s in table %s (allowed: the same type or a lossless widening: %s)", fld.Name, fld.Type, want.Type, l.table.name, loadWideningsText))
			continue
		}
		f.nonNull[i] = fld.Nullable && !want.Nullable
		fields[i].Nullable = want.Nullable
	}
	problems = append(problems, l.missing(expected, seen)...)
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	f.send = arrow.NewSchema(fields, nil)
	return nil, nil
}

// missing lists the problems of the table columns a file leaves out.
func (l *loadJob) missing(expected *arrow.Schema, present map[string]bool) []string {
	var problems []string
	for _, want := range expected.Fields() {
		switch {
		case present[want.Name]:
		case l.table.isKey(want.Name):
			kind := "entity"
			if want.Name == l.table.index {
				kind = "index"
			}
			problems = append(problems, fmt.Sprintf("the %s column %q is missing", kind, want.Name))
		case !want.Nullable:
			problems = append(problems, fmt.Sprintf("the non-nullable column %q is missing", want.Name))
		case !l.table.addColumns:
			problems = append(problems, fmt.Sprintf("column %q is missing (a file may leave out nullable columns only after add-columns)", want.Name))
		}
	}
	return problems
}

// planAdopt plans the first file into a table without columns: its schema
// becomes the table's, converted as the server converts it.
func (l *loadJob) planAdopt(f *loadFile, fields []arrow.Field) (*arrow.Schema, error) {
	send := arrow.NewSchema(fields, nil)
	logical, err := tableformat.LogicalFromArrow(send)
	if err != nil {
		return nil, fmt.Errorf("table %s has no columns yet and cannot take this file's: %v", l.table.name, err)
	}
	adopted, err := tableformat.ArrowSchema(logical)
	if err != nil {
		return nil, fmt.Errorf("table %s has no columns yet and cannot take this file's: %v", l.table.name, err)
	}
	var problems []string
	if j := adopted.FieldIndices(l.table.index); len(j) == 0 {
		problems = append(problems, fmt.Sprintf("the index column %q is missing", l.table.index))
	} else if t := adopted.Field(j[0]).Type; !loadIndexTypeOK(l.table.indexType, t) {
		problems = append(problems, fmt.Sprintf("the index column %q is %s; a %s index needs %s", l.table.index, t, l.table.indexType, loadIndexTypeName(l.table.indexType)))
	}
	for _, name := range l.table.entities {
		j := adopted.FieldIndices(name)
		if len(j) == 0 {
			problems = append(problems, fmt.Sprintf("the entity column %q is missing", name))
			continue
		}
		switch t := adopted.Field(j[0]).Type; t.ID() {
		case arrow.STRING, arrow.INT32, arrow.INT64, arrow.UINT64:
		default:
			problems = append(problems, fmt.Sprintf("the entity column %q is %s; entity columns must be utf8, int32, int64 or uint64", name, t))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	f.send = send
	f.src = make([]int, len(fields))
	for i := range f.src {
		f.src[i] = i
	}
	f.nonNull = make([]bool, len(fields))
	return adopted, nil
}

func loadIndexTypeOK(indexType string, t arrow.DataType) bool {
	switch indexType {
	case "timestamp":
		return t.ID() == arrow.TIMESTAMP
	case "int64":
		return t.ID() == arrow.INT64
	case "uint64":
		return t.ID() == arrow.UINT64
	}
	return true // an index type this client does not know: the server checks
}

func loadIndexTypeName(indexType string) string {
	if indexType == "timestamp" {
		return "a timestamp[ms|us|ns] column"
	}
	return indexType
}

// loadTypeFits reports whether the server takes a column of type in for a
// table column of type want: the same type, the same type under other
// nested names, or an allowed widening.
func loadTypeFits(in, want arrow.DataType) bool {
	if arrow.TypeEqual(in, want) {
		return true
	}
	if slices.Contains(loadWidenings[in.ID()], want.ID()) {
		return true
	}
	// The server re-wraps a type whose logical form is the table's (nested
	// field names, for instance).
	a, errA := tableformat.LogicalFromArrow(arrow.NewSchema([]arrow.Field{{Name: "c", Type: in, Nullable: true}}, nil))
	b, errB := tableformat.LogicalFromArrow(arrow.NewSchema([]arrow.Field{{Name: "c", Type: want, Nullable: true}}, nil))
	return errA == nil && errB == nil && a.Columns[0].Type.Equal(b.Columns[0].Type)
}

// checkCSV checks a CSV file's header against the table and parses its
// first batch, so that most wrongly typed files are refused before
// anything is sent.
func (l *loadJob) checkCSV(ctx context.Context, f *loadFile, expected *arrow.Schema) error {
	if expected == nil {
		return fmt.Errorf("table %s has no columns yet and CSV carries no types: load a Parquet or Arrow file first", l.table.name)
	}
	header, err := loadCSVHeader(f.path)
	if err != nil {
		return loadPathError(err)
	}
	var problems []string
	seen := map[string]bool{}
	csvFields := make([]arrow.Field, len(header))
	headerIdx := map[string]int{}
	for i, name := range header {
		csvFields[i] = arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}
		if seen[name] {
			problems = append(problems, fmt.Sprintf("column %q appears twice in the header", name))
			continue
		}
		seen[name] = true
		headerIdx[name] = i
		j := expected.FieldIndices(name)
		if len(j) == 0 {
			problems = append(problems, fmt.Sprintf("column %q is not in table %s (its columns: %s)", name, l.table.name, strings.Join(fieldNames(expected), ", ")))
			continue
		}
		t := expected.Field(j[0]).Type
		if !loadCSVTypeOK(t) {
			problems = append(problems, fmt.Sprintf("column %q is %s in table %s, which cannot be read from CSV", name, t, l.table.name))
			continue
		}
		csvFields[i].Type = t
	}
	problems = append(problems, l.missing(expected, seen)...)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	f.csvSchema = arrow.NewSchema(csvFields, nil)
	// Send in the table's column order.
	var sendFields []arrow.Field
	for _, want := range expected.Fields() {
		i, ok := headerIdx[want.Name]
		if !ok {
			continue
		}
		sendFields = append(sendFields, arrow.Field{Name: want.Name, Type: want.Type, Nullable: want.Nullable})
		f.src = append(f.src, i)
		f.nonNull = append(f.nonNull, !want.Nullable)
	}
	f.send = arrow.NewSchema(sendFields, nil)

	var read atomic.Int64
	src, err := loadOpen(ctx, f.path, loadCSV, f.csvSchema, l.mem, l.batchRows, &read)
	if err != nil {
		return loadPathError(err)
	}
	defer src.close()
	rec, err := loadNext(src)
	switch {
	case errors.Is(err, io.EOF):
		f.rows = 0
	case err != nil:
		return err
	default:
		if out, err := f.convert(rec, 0); err != nil {
			return err
		} else {
			out.Release()
		}
	}
	return nil
}

// convert returns rec as sent: its columns in the send schema's order,
// checked for nulls where the table allows none. first is the number of
// rows of the file before rec, for messages.
func (f *loadFile) convert(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
	if int(rec.NumCols()) <= slices.Max(append([]int{-1}, f.src...)) {
		return nil, fmt.Errorf("a batch has %d columns, the file's schema %d", rec.NumCols(), len(f.src))
	}
	cols := make([]arrow.Array, len(f.src))
	for i, j := range f.src {
		col := rec.Column(j)
		want := f.send.Field(i)
		if !arrow.TypeEqual(col.DataType(), want.Type) && !loadTypeFits(col.DataType(), want.Type) {
			return nil, fmt.Errorf("column %q is %s in a batch but %s in the file's schema", want.Name, col.DataType(), want.Type)
		}
		if f.nonNull[i] && col.NullN() > 0 {
			row := first + 1
			for k := 0; k < col.Len(); k++ {
				if col.IsNull(k) {
					row += int64(k)
					break
				}
			}
			return nil, fmt.Errorf("column %q is not nullable in the table but row %d of the file has no value in it", want.Name, row)
		}
		cols[i] = col
	}
	return array.NewRecordBatch(f.send, cols, rec.NumRows()), nil
}

// ---- sending ----

// loadPutAnswer is the PutResult's app_metadata.
type loadPutAnswer struct {
	Version uint64 `json:"version"`
	Rows    int64  `json:"rows"`
	Segment string `json:"segment"`
}

// send streams one file as one DoPut and reports it.
func (l *loadJob) send(ctx context.Context, f *loadFile) (*loadResult, error) {
	start := time.Now()
	res := &loadResult{File: f.path, Table: l.table.name, Bytes: f.size}
	if f.rows == 0 {
		return l.report(res, start, nil)
	}
	var read atomic.Int64
	src, err := loadOpen(ctx, f.path, f.format, f.csvSchema, l.mem, l.batchRows, &read)
	if err != nil {
		return nil, fmt.Errorf("%s: %v; nothing was sent", f.path, loadPathError(err))
	}
	defer src.close()

	// The stream is cancelled by a signal only until the last batch is
	// sent: once the server has everything, its answer is awaited.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	unhook := context.AfterFunc(ctx, cancel)
	defer unhook()

	prog := newLoadProgress(l.e.stderr, l.progress, f.path, f.size)
	defer prog.clear()
	notCommitted := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while sending %s: nothing of it was committed", f.path)
		}
		return loadNotCommitted(f.path, err)
	}

	stream, err := l.c.fl.DoPut(sctx)
	if err != nil {
		return nil, notCommitted(l.c.wrap(err))
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(f.send), ipc.WithAllocator(l.mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{l.table.name}})
	// serverErr is the server's reason when a write finds the stream ended.
	serverErr := func(err error) error {
		if errors.Is(err, io.EOF) {
			if _, rerr := stream.Recv(); rerr != nil && !errors.Is(rerr, io.EOF) {
				err = rerr
			}
		}
		return l.c.wrap(err)
	}

	for {
		if ctx.Err() != nil {
			return nil, notCommitted(ctx.Err())
		}
		rec, err := loadNext(src)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if f.format != loadCSV { // CSV errors name the line
				err = fmt.Errorf("reading the file failed: %w", err)
			}
			return nil, notCommitted(err)
		}
		out, err := f.convert(rec, res.Rows)
		if err != nil {
			return nil, notCommitted(err)
		}
		err = l.write(w, out)
		out.Release()
		if err != nil {
			return nil, notCommitted(serverErr(err))
		}
		res.Rows += out.NumRows()
		prog.update(res.Rows, read.Load())
	}
	if res.Rows == 0 {
		return l.report(res, start, nil) // the deferred cancel drops the stream
	}
	if err := w.Close(); err != nil {
		return nil, notCommitted(serverErr(err))
	}
	if !unhook() {
		return nil, notCommitted(context.Canceled)
	}
	if err := stream.CloseSend(); err != nil {
		return nil, notCommitted(serverErr(err))
	}
	prog.waiting(res.Rows, read.Load())
	put, err := stream.Recv()
	if err != nil {
		err = l.c.wrap(err)
		var se *serverError
		if errors.As(err, &se) && se.code != codes.Unknown {
			return nil, loadNotCommitted(f.path, err)
		}
		return nil, fmt.Errorf("%s: %w; the server had the whole file and may have committed it: check with tsflight describe %s", f.path, err, l.table.name)
	}
	for { // the stream ends after the one result
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	var ans loadPutAnswer
	if err := json.Unmarshal(put.AppMetadata, &ans); err != nil {
		return nil, fmt.Errorf("%s: the server committed it but its answer %q is unreadable: %v", f.path, put.AppMetadata, err)
	}
	prog.clear()
	return l.report(res, start, &ans)
}

// loadNotCommitted is the error of a file the server did not commit.
func loadNotCommitted(path string, err error) error {
	if strings.Contains(err.Error(), "nothing was committed") { // the server said so
		return fmt.Errorf("%s: %w", path, err)
	}
	return fmt.Errorf("%s: %w; nothing of it was committed", path, err)
}

// write sends rec, split so that no batch has more than batchRows rows or
// about loadMaxBatchBytes bytes.
func (l *loadJob) write(w *flight.Writer, rec arrow.RecordBatch) error {
	n := rec.NumRows()
	if n == 0 {
		return nil
	}
	per := int64(l.batchRows)
	if size := util.TotalRecordSize(rec); size > loadMaxBatchBytes {
		pieces := (size + loadMaxBatchBytes - 1) / loadMaxBatchBytes
		per = min(per, max(1, (n+pieces-1)/pieces))
	}
	if n <= per {
		return w.Write(rec)
	}
	for off := int64(0); off < n; off += per {
		part := rec.NewSlice(off, min(off+per, n))
		err := w.Write(part)
		part.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// report prints the summary line of a file (and its JSON object).
func (l *loadJob) report(res *loadResult, start time.Time, ans *loadPutAnswer) (*loadResult, error) {
	res.Seconds = time.Since(start).Seconds()
	if ans == nil {
		fmt.Fprintf(l.e.stderr, "skipped %s: no rows, nothing to load\n", res.File)
	} else {
		v := ans.Version
		res.Version = &v
		res.Segment = ans.Segment
		if ans.Rows > 0 {
			res.Rows = ans.Rows
		}
		fmt.Fprintf(l.e.stderr, "loaded %s: %d rows, %s in %.1f s; table %s version %d, segment %s\n",
			res.File, res.Rows, loadHumanBytes(res.Bytes), res.Seconds, res.Table, ans.Version, ans.Segment)
	}
	if l.json {
		b, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		if _, err := l.e.stdout.Write(append(b, '\n')); err != nil {
			return nil, err
		}
	}
	return res, nil
}
