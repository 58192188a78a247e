package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Output formats.
const (
	formatTable   = "table"
	formatCSV     = "csv"
	formatJSON    = "json"
	formatParquet = "parquet"
)

// defaultMaxRows is how many rows the table format shows, like the DuckDB
// CLI: a terminal is for looking, --format csv|json|parquet for keeping.
const defaultMaxRows = 40

// outputFlags are --format, --output and --max-rows.
type outputFlags struct {
	format  *choice
	output  string
	maxRows int
}

// addOutputFlags adds the output flags; formats lists the formats the
// command supports, the first being the default.
func addOutputFlags(fs *flagSet, formats ...string) *outputFlags {
	o := &outputFlags{format: newChoice(formats[0], formats...)}
	fs.Var(o.format, "format", "output `format`: "+strings.Join(formats, ", "))
	fs.StringVar(&o.output, "output", "", "write to this `file` instead of standard output (replaced if it exists)")
	if formats[0] == formatTable {
		fs.IntVar(&o.maxRows, "max-rows", defaultMaxRows, "rows the table format shows (`n`; 0 = all); the others write every row")
	}
	return o
}

// check validates the flags once parsed.
func (o *outputFlags) check(e *env) error {
	if o.maxRows < 0 {
		return usagef("--max-rows must not be negative, got %d", o.maxRows)
	}
	if o.format.value == formatParquet && o.output == "" && isTerminal(e.stdout) {
		return usagef("--format parquet writes binary: give --output FILE or redirect standard output")
	}
	return nil
}

// open returns the writer output goes to and a function that finishes it
// (flush, and close the file). With --output, a regular file is replaced
// only when the command succeeds: finish(false), after an error, leaves an
// existing file as it was and no half output behind (see createOutput).
func (o *outputFlags) open(e *env) (io.Writer, func(ok bool) error, error) {
	if o.output == "" {
		bw := bufio.NewWriterSize(e.stdout, 64<<10)
		return bw, func(bool) error { return bw.Flush() }, nil
	}
	f, err := createOutput(o.output)
	if err != nil {
		return nil, nil, err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	return bw, func(ok bool) error {
		err := bw.Flush()
		return errors.Join(err, f.finish(ok && err == nil))
	}, nil
}

// outputFile is a file a command writes its output to (--output, a
// plot). A regular file, or a path that does not exist yet, is written as
// a temporary file in the same directory and renamed over the path only
// when the output is complete, so a failed command never destroys the
// file it was to replace; a device or pipe (/dev/null, a FIFO) is written
// in place and never removed.
type outputFile struct {
	f    *os.File
	path string // the file replaced on success
	tmp  string // the temporary file; "" when writing path itself
}

// createOutput opens path for a command's output; finish ends it.
func createOutput(path string) (*outputFile, error) {
	// Errors name path, as os.Create's would, not a temporary file.
	pathErr := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &fs.PathError{Op: "open", Path: path, Err: pe.Err}
		}
		return err
	}
	target := path
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		f, err := os.Create(path) // a device or pipe: written in place
		if err != nil {
			return nil, err
		}
		return &outputFile{f: f, path: path}, nil
	case err == nil:
		// Replace the file a symbolic link points to, not the link; and
		// refuse, as writing in place would, a file we may not write.
		if target, err = filepath.EvalSymlinks(path); err != nil {
			return nil, pathErr(err)
		}
		w, err := os.OpenFile(target, os.O_WRONLY, 0)
		if err != nil {
			return nil, pathErr(err)
		}
		w.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return nil, pathErr(err)
	}
	dir, base := filepath.Split(target)
	// Hidden, and named after the file it will become. Created like
	// os.Create (mode 0666 less the umask), then given the old file's mode.
	for range 100 {
		tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%08x", base, rand.Uint32()))
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			if fi != nil { // the file may be writable, its directory is not
				return nil, fmt.Errorf("%w (replacing it takes a temporary file in its directory)", pathErr(err))
			}
			return nil, pathErr(err)
		}
		if fi != nil {
			if err := f.Chmod(fi.Mode().Perm()); err != nil {
				f.Close()
				os.Remove(tmp)
				return nil, pathErr(err)
			}
		}
		return &outputFile{f: f, path: target, tmp: tmp}, nil
	}
	return nil, fmt.Errorf("cannot create a temporary file next to %s", path)
}

func (o *outputFile) Write(p []byte) (int, error) { return o.f.Write(p) }

// finish closes the file; when ok, the output replaces the file at path,
// otherwise the temporary file is removed and path is left as it was.
func (o *outputFile) finish(ok bool) error {
	err := o.f.Close()
	if o.tmp == "" {
		return err
	}
	if ok && err == nil {
		err = os.Rename(o.tmp, o.path)
	}
	if !ok || err != nil {
		os.Remove(o.tmp)
	}
	return err
}

// writeOutputFile writes path with write, through createOutput: path is
// replaced only if write and the writing succeed.
func writeOutputFile(path string, write func(w io.Writer) error) error {
	f, err := createOutput(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	return errors.Join(err, f.finish(err == nil))
}

// emit writes a report through o: it opens the output, lets write fill it
// and finishes it (removing a file it started when write failed).
func (o *outputFlags) emit(e *env, write func(w io.Writer) error) error {
	w, finish, err := o.open(e)
	if err != nil {
		return err
	}
	err = write(w)
	return errors.Join(err, finish(err == nil))
}

// rowSink receives a result's batches in order.
type rowSink interface {
	write(rec arrow.RecordBatch) error
	// close finishes the output; rows is the number of rows written.
	close() error
}

// newSink returns the sink of o's format writing to w.
func (o *outputFlags) newSink(w io.Writer, schema *arrow.Schema) (rowSink, error) {
	switch o.format.value {
	case formatCSV:
		cw := csv.NewWriter(w)
		if schema.NumFields() > 0 { // a table without columns yet has no header
			if err := cw.Write(fieldNames(schema)); err != nil {
				return nil, err
			}
		}
		return &csvSink{w: cw}, nil
	case formatJSON:
		return &jsonSink{w: w, schema: schema}, nil
	case formatParquet:
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(1<<20))
		fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.DefaultWriterProps())
		if err != nil {
			return nil, err
		}
		return &parquetSink{w: fw}, nil
	default:
		return &tableSink{w: w, grid: grid{header: fieldNames(schema), right: numericColumns(schema)}, max: o.maxRows}, nil
	}
}

func fieldNames(s *arrow.Schema) []string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return names
}

func numericColumns(s *arrow.Schema) []bool {
	right := make([]bool, s.NumFields())
	for i, f := range s.Fields() {
		right[i] = arrow.IsInteger(f.Type.ID()) || arrow.IsFloating(f.Type.ID()) || arrow.IsDecimal(f.Type.ID())
	}
	return right
}

// valueString renders one value for the table and CSV formats: timestamps
// in RFC 3339 (in the column's zone, UTC when it has none), floats in the
// shortest form that reads back the same, nulls as "" (the caller may
// substitute), anything else as Arrow prints it.
func valueString(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return ""
	}
	switch a := a.(type) {
	case *array.Timestamp:
		typ := a.DataType().(*arrow.TimestampType)
		t := a.Value(i).ToTime(typ.Unit)
		if loc, err := typ.GetZone(); err == nil && loc != nil {
			t = t.In(loc)
		}
		return t.Format(time.RFC3339Nano)
	case *array.Float64:
		return formatFloat(a.Value(i), 64)
	case *array.Float32:
		return formatFloat(float64(a.Value(i)), 32)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Dictionary:
		return valueString(a.Dictionary(), a.GetValueIndex(i))
	}
	return a.ValueStr(i)
}

// formatFloat prints v in the shortest form that reads back the same:
// plain decimals for everyday magnitudes, an exponent for the very large
// and the very small.
func formatFloat(v float64, bits int) string {
	if a := math.Abs(v); a == 0 || (a >= 1e-6 && a < 1e15) {
		return strconv.FormatFloat(v, 'f', -1, bits)
	}
	return strconv.FormatFloat(v, 'g', -1, bits)
}

// jsonValue is one value for the JSON format. NaN and the infinities,
// which JSON numbers cannot be, are the strings "NaN", "+Inf" and "-Inf"
// whatever the float's width.
func jsonValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Timestamp:
		return valueString(a, i)
	case *array.Float64:
		if v := a.Value(i); math.IsNaN(v) || math.IsInf(v, 0) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
	case *array.Float32:
		if v := float64(a.Value(i)); math.IsNaN(v) || math.IsInf(v, 0) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
	case *array.Float16:
		if v := float64(a.Value(i).Float32()); math.IsNaN(v) || math.IsInf(v, 0) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
	case *array.Dictionary:
		return jsonValue(a.Dictionary(), a.GetValueIndex(i))
	}
	return a.GetOneForMarshal(i)
}

// grid is a text table: a header and rows of cells.
type grid struct {
	header []string
	right  []bool // right-align this column (numbers)
	rows   [][]string
}

// printCapped writes a blank line, then g with at most maxRows rows (all
// when maxRows is 0) and, when rows were left out, a line that says how
// many.
func printCapped(w io.Writer, g *grid, maxRows int) error {
	more := 0
	if maxRows > 0 && len(g.rows) > maxRows {
		more, g.rows = len(g.rows)-maxRows, g.rows[:maxRows]
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	if err := g.print(w); err != nil {
		return err
	}
	if more > 0 {
		if _, err := fmt.Fprintf(w, "… %d more (--max-rows 0 shows all)\n", more); err != nil {
			return err
		}
	}
	return nil
}

// print writes g with aligned columns and a rule under the header.
func (g *grid) print(w io.Writer) error {
	width := make([]int, len(g.header))
	for i, h := range g.header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range g.rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) string {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i < len(g.right) && g.right[i] {
				b.WriteString(pad + c)
			} else if i == len(cells)-1 {
				b.WriteString(c)
			} else {
				b.WriteString(c + pad)
			}
		}
		return strings.TrimRight(b.String(), " ") + "\n"
	}
	rule := make([]string, len(g.header))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
	}
	if _, err := io.WriteString(w, line(g.header)+line(rule)); err != nil {
		return err
	}
	for _, r := range g.rows {
		if _, err := io.WriteString(w, line(r)); err != nil {
			return err
		}
	}
	return nil
}

// tableSink keeps the first max rows for an aligned table and counts the
// rest.
type tableSink struct {
	w     io.Writer
	grid  grid
	max   int // 0 = all
	total int64
}

func (s *tableSink) write(rec arrow.RecordBatch) error {
	for r := 0; r < int(rec.NumRows()); r++ {
		s.total++
		if s.max > 0 && len(s.grid.rows) >= s.max {
			continue
		}
		row := make([]string, rec.NumCols())
		for c := range row {
			if rec.Column(c).IsNull(r) {
				row[c] = "NULL"
			} else {
				row[c] = valueString(rec.Column(c), r)
			}
		}
		s.grid.rows = append(s.grid.rows, row)
	}
	return nil
}

func (s *tableSink) close() error {
	if len(s.grid.header) > 0 { // a table without columns yet has none to show
		if err := s.grid.print(s.w); err != nil {
			return err
		}
	}
	switch {
	case int64(len(s.grid.rows)) < s.total:
		_, err := fmt.Fprintf(s.w, "(%d rows, first %d shown; --max-rows 0 shows all, --format csv|json|parquet writes all)\n", s.total, len(s.grid.rows))
		return err
	case s.total == 1:
		_, err := fmt.Fprintln(s.w, "(1 row)")
		return err
	default:
		_, err := fmt.Fprintf(s.w, "(%d rows)\n", s.total)
		return err
	}
}

type csvSink struct{ w *csv.Writer }

func (s *csvSink) write(rec arrow.RecordBatch) error {
	row := make([]string, rec.NumCols())
	for r := 0; r < int(rec.NumRows()); r++ {
		for c := range row {
			row[c] = valueString(rec.Column(c), r)
		}
		if err := s.w.Write(row); err != nil {
			return err
		}
	}
	return nil
}

func (s *csvSink) close() error {
	s.w.Flush()
	return s.w.Error()
}

// jsonSink writes JSON Lines: one object per row, keys in column order.
type jsonSink struct {
	w      io.Writer
	schema *arrow.Schema
	buf    []byte
}

func (s *jsonSink) write(rec arrow.RecordBatch) error {
	names := make([][]byte, rec.NumCols())
	for c, f := range s.schema.Fields() {
		k, err := json.Marshal(f.Name)
		if err != nil {
			return err
		}
		names[c] = k
	}
	for r := 0; r < int(rec.NumRows()); r++ {
		b := append(s.buf[:0], '{')
		for c := range names {
			if c > 0 {
				b = append(b, ',')
			}
			b = append(append(b, names[c]...), ':')
			v, err := json.Marshal(jsonValue(rec.Column(c), r))
			if err != nil {
				return fmt.Errorf("column %s: %w", s.schema.Field(c).Name, err)
			}
			b = append(b, v...)
		}
		b = append(b, '}', '\n')
		s.buf = b
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func (s *jsonSink) close() error { return nil }

type parquetSink struct{ w *pqarrow.FileWriter }

func (s *parquetSink) write(rec arrow.RecordBatch) error { return s.w.WriteBuffered(rec) }
func (s *parquetSink) close() error                      { return s.w.Close() }

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeCSV writes g as CSV with a header row.
func (g *grid) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(g.header); err != nil {
		return err
	}
	if err := cw.WriteAll(g.rows); err != nil {
		return err
	}
	return cw.Error()
}
