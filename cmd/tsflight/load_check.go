package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tsflight/tsflight/tableformat"
)

// The check before sending: every file is opened and its columns matched
// with the table's (or adopted by a table without columns) before anything
// is sent, and each batch is converted to the planned send schema.

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
