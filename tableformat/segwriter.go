package tableformat

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// segmentWriter streams canonical batches into one new Parquet segment.
//
// For schemas of top-level scalar columns (the common time-series case) it
// encodes the columns of each batch in parallel, one goroutine per column
// up to GOMAXPROCS: Parquet encoding (dictionaries, compression) is the
// bulk of an append's CPU time, and the column chunks of a buffered row
// group are independent. Schemas with nested columns go through
// pqarrow.FileWriter, one column after another.
type segmentWriter struct {
	fs     storage.FS
	path   string
	file   storage.File
	buf    *bufio.Writer
	count  *countingWriter
	closed bool

	maxRows, maxBytes int64

	// parallel path
	pw       *file.Writer
	schema   *arrow.Schema
	arrProps pqarrow.ArrowWriterProperties
	rgw      file.BufferedRowGroupWriter
	rgRows   int64
	workers  int
	// fronts[i] is the dictionary front end of column i in the open row
	// group (nil for columns written the dense way).
	fronts     []dictFrontEnd
	compressed bool
	plain      bool // no dictionaries (AppendOptions.noDictionary)

	// nested path
	fw *pqarrow.FileWriter

	// writeAsync: the batch being encoded in the background (nil when
	// none) sends its result on pending; asyncErr keeps the first error.
	pending  chan error
	asyncErr error
	stop     atomic.Bool // abort asks the background encoding to end early
}

// countingWriter counts bytes and hides Close from the Parquet writer, so
// that the segment writer decides when the file is synced and closed.
type countingWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func flatSchema(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		switch f.Type.ID() {
		case arrow.STRUCT, arrow.LIST, arrow.MAP, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.DICTIONARY, arrow.EXTENSION:
			return false
		}
	}
	return true
}

func newSegmentWriter(fsys storage.FS, path string, schema *arrow.Schema, opts *AppendOptions, mem memory.Allocator) (*segmentWriter, error) {
	f, err := fsys.CreateExclusive(path)
	if err != nil {
		return nil, storageErr("create segment "+path, err)
	}
	return newSegmentWriterOn(fsys, path, f, schema, opts, mem)
}

// newSegmentWriterOn is newSegmentWriter on f, a file created at path
// (an openingFile while it is being created).
func newSegmentWriterOn(fsys storage.FS, path string, f storage.File, schema *arrow.Schema, opts *AppendOptions, mem memory.Allocator) (*segmentWriter, error) {
	var err error
	w := &segmentWriter{fs: fsys, path: path, file: f, maxRows: opts.MaxRowsPerRowGroup, maxBytes: opts.MaxBytesPerRowGroup, schema: schema,
		compressed: opts.Compression != compress.Codecs.Uncompressed, plain: opts.noDictionary}
	w.buf = segmentBuffers.Get().(*bufio.Writer)
	w.buf.Reset(f)
	w.count = &countingWriter{w: w.buf}
	props := parquet.NewWriterProperties(
		parquet.WithAllocator(mem),
		parquet.WithCompression(opts.Compression),
		parquet.WithMaxRowGroupLength(opts.MaxRowsPerRowGroup),
		parquet.WithDictionaryDefault(!opts.noDictionary),
		parquet.WithStats(true),
		// Offset and column indexes let scans seek inside a row group.
		parquet.WithPageIndexEnabled(true),
		parquet.WithCreatedBy("tsflight"),
	)
	w.arrProps = pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem))
	fail := func(err error) (*segmentWriter, error) {
		w.abort()
		return nil, fmt.Errorf("%w: parquet writer for %s: %w", ErrStorage, path, err)
	}
	if !flatSchema(schema) {
		if w.fw, err = pqarrow.NewFileWriter(schema, w.count, props, w.arrProps); err != nil {
			return fail(err)
		}
		return w, nil
	}
	pqschema, err := pqarrow.ToParquet(schema, props, w.arrProps)
	if err != nil {
		return fail(err)
	}
	meta := make(metadata.KeyValueMetadata, 0, schema.Metadata().Len()+1)
	for i, k := range schema.Metadata().Keys() {
		meta.Append(k, schema.Metadata().Values()[i])
	}
	// Store the Arrow schema as pqarrow does (a serialized IPC schema,
	// base64), so that readers restore exact Arrow types.
	var ser bytes.Buffer
	iw := ipc.NewWriter(&ser, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err := iw.Close(); err != nil {
		return fail(err)
	}
	meta.Append("ARROW:schema", base64.StdEncoding.EncodeToString(ser.Bytes()))
	if w.pw, err = file.NewParquetWriterWithError(w.count, pqschema.Root(), file.WithWriterProps(props), file.WithWriteMetadata(meta)); err != nil {
		return fail(err)
	}
	w.workers = max(1, min(runtime.GOMAXPROCS(0), schema.NumFields()))
	return w, nil
}

// write appends a canonical batch, closing row groups at the row and byte
// limits.
func (w *segmentWriter) write(rec arrow.RecordBatch) error {
	if w.fw != nil {
		if err := w.fw.WriteBuffered(rec); err != nil {
			return fmt.Errorf("%w: write segment %s: %w", ErrStorage, w.path, err)
		}
		if w.maxBytes > 0 && w.fw.RowGroupTotalBytesWritten() >= w.maxBytes {
			if err := w.fw.NewBufferedRowGroupChecked(); err != nil {
				return fmt.Errorf("%w: write segment %s: %w", ErrStorage, w.path, err)
			}
		}
		return nil
	}
	for off := int64(0); off < rec.NumRows(); {
		if w.rgw == nil {
			rgw, err := w.pw.AppendBufferedRowGroupChecked()
			if err != nil {
				return fmt.Errorf("%w: write segment %s: %w", ErrStorage, w.path, err)
			}
			w.rgw, w.rgRows = rgw, 0
			w.fronts = w.fronts[:0]
			for _, f := range w.schema.Fields() {
				w.fronts = append(w.fronts, newDictFrontEnd(f.Type, w.compressed && !w.plain))
			}
		}
		n := min(rec.NumRows()-off, w.maxRows-w.rgRows)
		part := rec
		if off != 0 || n != rec.NumRows() {
			part = rec.NewSlice(off, off+n)
		}
		err := w.writeColumns(part)
		if part != rec {
			part.Release()
		}
		if err != nil {
			return fmt.Errorf("%w: write segment %s: %w", ErrStorage, w.path, err)
		}
		off += n
		w.rgRows += n
		if w.rgRows >= w.maxRows || (w.maxBytes > 0 && w.rgw.TotalBytesWritten() >= w.maxBytes) {
			if err := w.closeRowGroup(); err != nil {
				return err
			}
		}
	}
	return nil
}

// errEncodingStopped is what a background encoding that abort stopped
// before it began returns; nobody sees it, as abort discards the segment.
// (A batch is encoded whole or not at all: the Parquet writer cannot
// release a row group whose columns hold different row counts.)
var errEncodingStopped = errors.New("segment encoding stopped")

// writeAsync is write in a background goroutine: it waits for the batch
// handed over before (at most one batch is encoded at a time, so at most
// one is held beyond the caller's), returns that batch's error if it
// failed, and otherwise retains rec and starts encoding it. The caller
// meanwhile receives the next batch and computes its coverage, instead
// of leaving the cores idle while it waits on the network. flush and
// abort wait for the batch in flight, so no goroutine outlives the
// writer; the caller must not use the writer from two goroutines.
func (w *segmentWriter) writeAsync(rec arrow.RecordBatch) error {
	if err := w.wait(); err != nil {
		return err
	}
	rec.Retain()
	done := make(chan error, 1)
	w.pending = done
	go func() {
		// rec is released before the result is sent, never after (as a
		// deferred release would be): whoever waits on done may go on to
		// free the stream, or check that every byte came back.
		err := errEncodingStopped // abort came first: the segment is discarded anyway
		if !w.stop.Load() {
			err = w.write(rec)
			if err == nil {
				if h := testHookEncoded; h != nil {
					err = h()
				}
			}
		}
		rec.Release()
		done <- err
	}()
	return nil
}

// testHookEncoded, when a test sets it, runs in the background goroutine
// after each batch writeAsync encoded; its error is that batch's.
var testHookEncoded func() error

// wait waits for the batch writeAsync handed over, if one is in flight,
// and returns the first error of any batch encoded in the background.
func (w *segmentWriter) wait() error {
	if w.pending != nil {
		if err := <-w.pending; err != nil && w.asyncErr == nil {
			w.asyncErr = err
		}
		w.pending = nil
	}
	return w.asyncErr
}

// writeColumns encodes each column of rec into its column chunk, in
// parallel.
func (w *segmentWriter) writeColumns(rec arrow.RecordBatch) error {
	return w.eachColumn(func(i int, defLevels *[]int16) error {
		cw, err := w.rgw.Column(i)
		if err != nil {
			return err
		}
		arr := rec.Column(i)
		nullable := w.schema.Field(i).Nullable
		var levels []int16
		if nullable {
			if cap(*defLevels) < arr.Len() {
				*defLevels = make([]int16, arr.Len())
			}
			levels = (*defLevels)[:arr.Len()]
			for r := range levels {
				if arr.IsNull(r) {
					levels[r] = 0
				} else {
					levels[r] = 1
				}
			}
		}
		if front := w.fronts[i]; front != nil {
			return front.write(&w.arrProps, cw, arr, levels, nullable)
		}
		return writeDense(&w.arrProps, cw, arr, levels, nullable)
	})
}

// eachColumn runs do for every column of the open row group on w.workers
// goroutines (each with its own scratch definition levels) and returns
// the first column's error.
func (w *segmentWriter) eachColumn(do func(i int, defLevels *[]int16) error) error {
	ncols := w.schema.NumFields()
	errs := make([]error, ncols)
	next := make(chan int, ncols)
	for i := range ncols {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range w.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var defLevels []int16
			for i := range next {
				errs[i] = do(i, &defLevels)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pageCutter is what arrow-go's column chunk writers (all of them embed
// its columnWriter) offer to close the page being filled.
type pageCutter interface{ FlushCurrentPage() error }

// preflushPages lets a test write the same data with and without
// cutPages and compare the files.
var preflushPages = true

// cutPages closes the last page of every column chunk of the open row
// group, in parallel, before the row group is closed. Closing a row group
// does it column after column: RLE-encoding and compressing each chunk's
// last page, which for a chunk of dictionary indices is most of its data
// (its pages are cut by raw size, 1 MiB: 131,072 int64 values make one
// page). That left one core idle for 8 to 18 ms per row group of a TSBS
// DoPut. A column's pages go to a buffer of its own until the row group
// is closed, so the columns can do this at once; Close then writes the
// dictionary page, the pages already cut, in the same order, and the
// file is the same. A column with nothing buffered (its last write
// filled a page) is left alone: a cut there would add an empty page.
func (w *segmentWriter) cutPages() error {
	if !preflushPages || w.stop.Load() {
		return nil // an aborted segment is discarded: Close alone will do
	}
	return w.eachColumn(func(i int, _ *[]int16) error {
		cw, err := w.rgw.Column(i)
		if err != nil {
			return err
		}
		pc, ok := cw.(pageCutter)
		ps := cw.PageStatistics()
		if !ok || ps == nil || (ps.NumValues() == 0 && ps.NullCount() == 0) {
			return nil
		}
		return pc.FlushCurrentPage()
	})
}

func (w *segmentWriter) closeRowGroup() error {
	if w.rgw == nil {
		return nil
	}
	err := w.cutPages()
	if err == nil {
		err = w.rgw.Close()
	}
	if err != nil {
		releaseColumns(w.rgw)
	}
	w.rgw = nil
	if err != nil {
		return fmt.Errorf("%w: write segment %s: %w", ErrStorage, w.path, err)
	}
	return nil
}

// releaseColumns releases the encoders of a row group whose Close failed:
// arrow-go's row group stops at the first column that fails to write and
// leaves that column's encoder and every later column's unreleased (the
// memory an allocator lent them would never come back). A column that
// closed has no encoder left.
func releaseColumns(rgw file.BufferedRowGroupWriter) {
	for i := range rgw.NumColumns() {
		cw, err := rgw.Column(i)
		if err != nil || cw == nil {
			continue
		}
		if enc := cw.CurrentEncoder(); enc != nil {
			enc.Release()
		}
	}
}

// segmentBuffers recycles the 1 MiB write buffers of segment files: a
// small append used to allocate one per segment, which was most of what it
// gave the garbage collector to do.
var segmentBuffers = &sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1<<20) }}

// finish writes the footer, flushes, fsyncs and closes the file, and
// returns its size.
func (w *segmentWriter) finish() (uint64, error) {
	size, err := w.flush()
	if err != nil {
		return 0, err
	}
	return size, w.syncClose()
}

// flush writes the footer and flushes the file, which stays open for
// syncClose (the caller may overlap the fsync with other work); it
// returns the file's size.
func (w *segmentWriter) flush() (uint64, error) {
	if err := w.wait(); err != nil {
		return 0, err // abort closes and removes the file
	}
	w.closed = true
	var err error
	if w.fw != nil {
		err = w.fw.Close()
	} else {
		if err = w.closeRowGroup(); err == nil {
			err = w.pw.Close()
		}
	}
	if err == nil {
		err = w.buf.Flush()
	}
	w.releaseBuffer()
	if err != nil {
		_ = w.file.Close()
		return 0, fmt.Errorf("%w: finish segment %s: %w", ErrStorage, w.path, err)
	}
	return uint64(w.count.n), nil
}

// syncClose fsyncs and closes a flushed file.
func (w *segmentWriter) syncClose() error {
	err := w.file.Sync()
	if cerr := w.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: finish segment %s: %w", ErrStorage, w.path, err)
	}
	return nil
}

func (w *segmentWriter) releaseBuffer() {
	if w.buf != nil {
		w.buf.Reset(nil)
		segmentBuffers.Put(w.buf)
		w.buf = nil
	}
}

// abort closes the file if still open and removes it.
func (w *segmentWriter) abort() {
	w.stop.Store(true)
	_ = w.wait() // the background goroutine writes to the file
	if !w.closed {
		w.closed = true
		switch {
		case w.fw != nil:
			_ = w.fw.Close()
		case w.pw != nil:
			_ = w.closeRowGroup()
			_ = w.pw.Close()
		}
		w.releaseBuffer()
		_ = w.file.Close()
	}
	_ = w.fs.Remove(w.path)
}
