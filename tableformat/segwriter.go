package tableformat

import (
	"bufio"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// segmentWriter streams canonical batches into one new Parquet segment.
type segmentWriter struct {
	fs     storage.FS
	path   string
	file   storage.File
	buf    *bufio.Writer
	count  *countingWriter
	pw     *pqarrow.FileWriter
	maxRGB int64
	closed bool
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

func newSegmentWriter(fsys storage.FS, path string, schema *arrow.Schema, opts *AppendOptions, mem memory.Allocator) (*segmentWriter, error) {
	f, err := fsys.CreateExclusive(path)
	if err != nil {
		return nil, storageErr("create segment "+path, err)
	}
	w := &segmentWriter{fs: fsys, path: path, file: f, maxRGB: opts.MaxBytesPerRowGroup}
	w.buf = bufio.NewWriterSize(f, 1<<20)
	w.count = &countingWriter{w: w.buf}
	props := parquet.NewWriterProperties(
		parquet.WithAllocator(mem),
		parquet.WithCompression(opts.Compression),
		parquet.WithMaxRowGroupLength(opts.MaxRowsPerRowGroup),
		parquet.WithDictionaryDefault(true),
		parquet.WithStats(true),
		// Offset and column indexes let scans seek inside a row group.
		parquet.WithPageIndexEnabled(true),
		parquet.WithCreatedBy("tsflight"),
	)
	arrowProps := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem))
	pw, err := pqarrow.NewFileWriter(schema, w.count, props, arrowProps)
	if err != nil {
		w.abort()
		return nil, fmt.Errorf("%w: parquet writer for %s: %w", ErrStorage, path, err)
	}
	w.pw = pw
	return w, nil
}

// write appends a canonical batch, closing the row group when it grows past
// the byte limit (the row limit is enforced by the Parquet writer).
func (w *segmentWriter) write(rec arrow.RecordBatch) error {
	if err := w.pw.WriteBuffered(rec); err != nil {
		return fmt.Errorf("%w: write segment %s: %w", ErrStorage, w.path, err)
	}
	if w.maxRGB > 0 && w.pw.RowGroupTotalBytesWritten() >= w.maxRGB {
		if err := w.pw.NewBufferedRowGroupChecked(); err != nil {
			return fmt.Errorf("%w: write segment %s: %w", ErrStorage, w.path, err)
		}
	}
	return nil
}

// finish writes the footer, flushes, fsyncs and closes the file, and
// returns its size.
func (w *segmentWriter) finish() (uint64, error) {
	w.closed = true
	err := w.pw.Close()
	if err == nil {
		err = w.buf.Flush()
	}
	if err == nil {
		err = w.file.Sync()
	}
	if cerr := w.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("%w: finish segment %s: %w", ErrStorage, w.path, err)
	}
	return uint64(w.count.n), nil
}

// abort closes the file if still open and removes it.
func (w *segmentWriter) abort() {
	if !w.closed {
		w.closed = true
		if w.pw != nil {
			_ = w.pw.Close()
		}
		_ = w.file.Close()
	}
	_ = w.fs.Remove(w.path)
}

// compressionCodec is re-exported for AppendOptions.
type compressionCodec = compress.Compression
