package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	arrowcsv "github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Input formats of tsflight load.
const (
	loadParquet = "parquet"
	loadCSV     = "csv"
	loadArrow   = "arrow"
)

// loadFormatOf detects a file's format from its extension; "" when unknown.
func loadFormatOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet", ".parq", ".pq":
		return loadParquet
	case ".csv":
		return loadCSV
	case ".arrow", ".feather", ".ipc", ".arrows":
		return loadArrow
	}
	return ""
}

// loadReadBuffer is the read-ahead of the streaming readers.
const loadReadBuffer = 1 << 20

// loadSource yields a file's record batches.
type loadSource interface {
	// schema is the schema of the batches.
	schema() *arrow.Schema
	// next returns the next batch, valid until the next call, or io.EOF.
	next() (arrow.RecordBatch, error)
	close()
}

// loadOpen opens path for reading batches of about batchRows rows. read
// counts the bytes read from the file. csvSchema is the schema a CSV file is
// read with (its header's columns with the table's types).
func loadOpen(ctx context.Context, path, format string, csvSchema *arrow.Schema, mem memory.Allocator, batchRows int, read *atomic.Int64) (src loadSource, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// A reader may panic on a corrupt file: that is an error too, and
	// either way the file is closed.
	defer func() {
		if r := recover(); r != nil {
			src, err = nil, fmt.Errorf("cannot read the file: %v", r)
		}
		if err != nil {
			f.Close()
		}
	}()
	cf := &loadCountingFile{f: f, n: read}
	switch format {
	case loadParquet:
		src, err = loadOpenParquet(ctx, cf, mem, batchRows)
	case loadArrow:
		src, err = loadOpenArrow(cf, mem)
	case loadCSV:
		src, err = loadOpenCSV(path, cf, csvSchema, mem, batchRows), nil
	default:
		err = fmt.Errorf("unknown input format %q", format)
	}
	if err != nil {
		return nil, err
	}
	return src, nil
}

// loadNext is src.next with panics (a reader tripping over a corrupt file)
// turned into errors.
func loadNext(src loadSource) (rec arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = nil, fmt.Errorf("cannot read the file (corrupt?): %v", r)
		}
	}()
	return src.next()
}

// ---- Parquet ----

type loadParquetSource struct {
	f   *loadCountingFile
	pf  *file.Reader
	rr  pqarrow.RecordReader
	sch *arrow.Schema
}

func loadOpenParquet(ctx context.Context, cf *loadCountingFile, mem memory.Allocator, batchRows int) (*loadParquetSource, error) {
	// Buffered streams read each column chunk a buffer at a time instead of
	// whole, so a large row group does not have to fit in memory. The
	// reader's internal buffers come from Go's allocator: they are pooled
	// and released by finalizers, which a checked allocator would report.
	props := parquet.NewReaderProperties(memory.DefaultAllocator)
	props.BufferedStreamEnabled = true
	props.BufferSize = 128 << 10
	pf, err := file.NewParquetReader(cf, file.WithReadProps(props))
	if err != nil {
		return nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, mem)
	if err != nil {
		return nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	s := &loadParquetSource{f: cf, pf: pf}
	if s.sch, err = fr.Schema(); err != nil {
		return nil, fmt.Errorf("the Parquet schema has no Arrow form: %w", err)
	}
	if pf.NumRows() > 0 {
		if s.rr, err = fr.GetRecordReader(ctx, nil, nil); err != nil {
			return nil, err
		}
		s.sch = s.rr.Schema()
	}
	return s, nil
}

func (s *loadParquetSource) schema() *arrow.Schema { return s.sch }

func (s *loadParquetSource) next() (arrow.RecordBatch, error) {
	if s.rr == nil {
		return nil, io.EOF
	}
	return readerNext(s.rr)
}

// readerNext returns r's next batch (r keeps it), r's error if it stopped
// on one, or io.EOF after its last batch.
func readerNext(r interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}) (arrow.RecordBatch, error) {
	if r.Next() {
		return r.RecordBatch(), nil
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

func (s *loadParquetSource) close() {
	if s.rr != nil {
		s.rr.Release()
	}
	s.f.f.Close()
}

// ---- Arrow IPC ----

var (
	loadArrowFileMagic = []byte("ARROW1")
	loadFeatherV1Magic = []byte("FEA1")
)

// loadIPCFileSource reads the IPC file format, batch by batch.
type loadIPCFileSource struct {
	f   *loadCountingFile
	fr  *ipc.FileReader
	i   int
	cur arrow.RecordBatch
}

// loadIPCStreamSource reads the IPC stream format.
type loadIPCStreamSource struct {
	f *loadCountingFile
	r *ipc.Reader
}

// loadOpenArrow opens an IPC file (it starts with ARROW1) or stream.
func loadOpenArrow(cf *loadCountingFile, mem memory.Allocator) (loadSource, error) {
	head := make([]byte, 8)
	n, err := cf.f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, loadArrowFileMagic):
		fr, err := ipc.NewFileReader(cf, ipc.WithAllocator(mem))
		if err != nil {
			return nil, fmt.Errorf("not a readable Arrow IPC file: %w", err)
		}
		return &loadIPCFileSource{f: cf, fr: fr}, nil
	case bytes.HasPrefix(head, loadFeatherV1Magic):
		return nil, errors.New("Feather version 1 is not supported; write it again as Arrow IPC (Feather version 2)")
	}
	r, err := ipc.NewReader(bufio.NewReaderSize(cf, loadReadBuffer), ipc.WithAllocator(mem))
	if err != nil {
		return nil, fmt.Errorf("not a readable Arrow IPC file or stream: %w", err)
	}
	return &loadIPCStreamSource{f: cf, r: r}, nil
}

func (s *loadIPCFileSource) schema() *arrow.Schema { return s.fr.Schema() }

func (s *loadIPCFileSource) next() (arrow.RecordBatch, error) {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	if s.i >= s.fr.NumRecords() {
		return nil, io.EOF
	}
	rec, err := s.fr.RecordBatchAt(s.i)
	if err != nil {
		return nil, err
	}
	s.i++
	s.cur = rec
	return rec, nil
}

func (s *loadIPCFileSource) close() {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	s.fr.Close()
	s.f.f.Close()
}

func (s *loadIPCStreamSource) schema() *arrow.Schema { return s.r.Schema() }

func (s *loadIPCStreamSource) next() (arrow.RecordBatch, error) { return readerNext(s.r) }

func (s *loadIPCStreamSource) close() {
	s.r.Release()
	s.f.f.Close()
}

// ---- CSV ----

// loadCSVSource reads CSV with arrow-go's reader, typed by the table.
type loadCSVSource struct {
	path string
	f    *loadCountingFile
	r    *arrowcsv.Reader
	sch  *arrow.Schema
	mem  memory.Allocator
	rows int64 // data rows returned so far
}

// loadOpenCSV reads the CSV at path; schema has the header's columns, in
// the header's order, with the types to parse them as.
func loadOpenCSV(path string, cf *loadCountingFile, schema *arrow.Schema, mem memory.Allocator, batchRows int) *loadCSVSource {
	r := arrowcsv.NewReader(bufio.NewReaderSize(cf, loadReadBuffer), schema,
		arrowcsv.WithHeader(true),
		arrowcsv.WithChunk(batchRows),
		arrowcsv.WithNullReader(false, ""), // empty is null, except in string columns
		arrowcsv.WithAllocator(mem))
	return &loadCSVSource{path: path, f: cf, r: r, sch: schema, mem: mem}
}

func (s *loadCSVSource) schema() *arrow.Schema { return s.sch }

func (s *loadCSVSource) next() (arrow.RecordBatch, error) {
	if !s.r.Next() {
		if err := s.r.Err(); err != nil {
			return nil, s.explain(err)
		}
		return nil, io.EOF
	}
	// A value that does not parse leaves a null in the batch and sets Err:
	// the batch must not be sent.
	if err := s.r.Err(); err != nil {
		return nil, s.explain(err)
	}
	rec := s.r.RecordBatch()
	s.rows += rec.NumRows()
	return rec, nil
}

func (s *loadCSVSource) close() {
	s.r.Release()
	s.f.f.Close()
}

// explain turns a parse error of the batch after s.rows into one naming the
// line and column: arrow-go's messages name neither.
func (s *loadCSVSource) explain(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return err // encoding/csv's errors name the line
	}
	if loc := loadCSVLocate(s.path, s.sch, s.rows, s.mem); loc != nil {
		return loc
	}
	return fmt.Errorf("in the CSV rows after row %d: %w", s.rows, err)
}

// loadCSVLocate reads the CSV at path again from data row skip and returns
// the first value that does not parse as its column's type, with its line,
// or nil.
func loadCSVLocate(path string, schema *arrow.Schema, skip int64, mem memory.Allocator) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, loadReadBuffer))
	r.ReuseRecord = true
	if _, err := r.Read(); err != nil { // the header
		return nil
	}
	for i := int64(0); i < skip; i++ {
		if _, err := r.Read(); err != nil {
			return nil
		}
	}
	builders := make([]array.Builder, schema.NumFields())
	for i, fld := range schema.Fields() {
		builders[i] = array.NewBuilder(mem, fld.Type)
		defer builders[i].Release()
	}
	for {
		rec, err := r.Read()
		if err != nil {
			return nil
		}
		for i, v := range rec {
			if i >= len(builders) {
				break
			}
			fld := schema.Field(i)
			if v == "" && !loadIsStringType(fld.Type) {
				continue // null
			}
			b := builders[i]
			if b.Len() >= 1024 {
				b.NewArray().Release() // keep the scratch builders small
			}
			if perr := b.AppendValueFromString(v); perr != nil {
				line, _ := r.FieldPos(i)
				msg := fmt.Sprintf("line %d, column %q: %q is not a valid %s", line, fld.Name, v, fld.Type)
				var ne *strconv.NumError
				if !errors.As(perr, &ne) { // strconv's say no more than msg
					msg += " (" + perr.Error() + ")"
				}
				return errors.New(msg)
			}
		}
	}
}

func loadIsStringType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	}
	return false
}

// loadCSVTypeOK reports whether a table column of type t can be read from
// CSV text.
func loadCSVTypeOK(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING,
		arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY,
		arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	}
	return false
}

// loadCSVHeader reads the header row of the CSV at path.
func loadCSVHeader(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReader(f))
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("the file is empty: a CSV file needs a header row")
	}
	if err != nil {
		return nil, fmt.Errorf("not a readable CSV file: %w", err)
	}
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\ufeff") // a UTF-8 byte order mark
	}
	return header, nil
}
