package tsbs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// File is one Parquet file of a data set: one delivery's rows.
type File struct {
	// Path is where the file is: as WriteParquet wrote it, or as
	// ReadManifest resolved it; in the manifest, relative to its
	// directory.
	Path     string   `json:"path"`
	Delivery Delivery `json:"delivery"`
	Rows     int64    `json:"rows"`
	Bytes    int64    `json:"bytes"`
}

// Manifest describes a data set written by WriteParquet. It is written
// as ManifestName beside the files, so that every runner, in Go or in
// Python, loads the same files in the same order.
type Manifest struct {
	// Format names this layout, ManifestFormat.
	Format string `json:"format"`
	Params Params `json:"params"`
	// Columns are the schema's column names in order (see Schema).
	Columns []string `json:"columns"`
	// Steps and End describe the span: Steps timestamps from
	// Params.Start, End = Start + Duration (exclusive).
	Steps int    `json:"steps"`
	End   string `json:"end"`
	// Rows and Bytes are the totals of Files.
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// Files are in delivery order, which is also their names' order.
	Files []File `json:"files"`
}

const (
	// ManifestName is the manifest's file name in a data set's directory.
	ManifestName = "manifest.json"
	// ManifestFormat is the manifest's format field.
	ManifestFormat = "tsflight-bench-tsbs-cpu-only/1"
	// RowGroupRows is the most rows in a row group of the Parquet files.
	RowGroupRows = 1 << 20
)

// rowGroupRows is RowGroupRows, smaller in tests.
var rowGroupRows int64 = RowGroupRows

// FileName is the name of d's Parquet file among n deliveries: its
// sequence number, zero-padded to sort in delivery order, and its name,
// as 0000-h00.parquet or 0024-h03-late.parquet.
func FileName(d Delivery, n int) string {
	width := max(4, len(fmt.Sprint(n-1)))
	return fmt.Sprintf("%0*d-%s.parquet", width, d.Seq, d.Name())
}

// WriteParquet writes the data set into dir (created if need be): one
// Parquet file per delivery, named by FileName, then ManifestName. The
// files are zstd-compressed with row groups of at most RowGroupRows rows
// and the Arrow schema stored, written batch by batch (a file is never
// held in memory, at most a row group's encoded pages), several at once
// on GOMAXPROCS goroutines. The same Params give byte-identical files
// and manifest. Each file is written under a temporary name and renamed
// when complete, and the manifest last, so a directory with a manifest
// is complete. WriteParquet refuses a directory holding Parquet files it
// would not write, lest a reader globbing *.parquet read stale data.
func (p Params) WriteParquet(dir string) ([]File, error) {
	return p.writeParquet(memory.DefaultAllocator, dir)
}

func (p Params) writeParquet(alloc memory.Allocator, dir string) ([]File, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	ds := p.Deliveries()
	files := make([]File, len(ds))
	names := make(map[string]bool, len(ds))
	for i, d := range ds {
		name := FileName(d, len(ds))
		names[name] = true
		files[i] = File{Path: filepath.Join(dir, name), Delivery: d}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".parquet") && !names[e.Name()] {
			return nil, fmt.Errorf("tsbs: %s holds %s, which is not part of this data set", dir, e.Name())
		}
	}
	if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}

	// Write the files on a few goroutines; stop at the first error.
	var (
		mu    sync.Mutex
		first error
		next  int
		wg    sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if first != nil || next == len(files) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range min(runtime.GOMAXPROCS(0), len(files)) {
		wg.Go(func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := p.writeFile(alloc, &files[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}

	m := Manifest{Format: ManifestFormat, Params: p, Columns: schemaColumns(),
		Steps: p.Steps(), End: p.End().UTC().Format(timeFormat)}
	for _, f := range files {
		m.Rows += f.Rows
		m.Bytes += f.Bytes
		f.Path = filepath.Base(f.Path)
		m.Files = append(m.Files, f)
	}
	buf, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(filepath.Join(dir, ManifestName), append(buf, '\n')); err != nil {
		return nil, err
	}
	return files, nil
}

const timeFormat = "2006-01-02T15:04:05.999999Z07:00"

func schemaColumns() []string {
	var cols []string
	for _, f := range schema.Fields() {
		cols = append(cols, f.Name)
	}
	return cols
}

// writeProps are the Parquet writer's properties. The created_by string
// is the library's, with its version: the same for the same build.
func writeProps(alloc memory.Allocator) (*parquet.WriterProperties, pqarrow.ArrowWriterProperties) {
	return parquet.NewWriterProperties(
			parquet.WithAllocator(alloc),
			parquet.WithCompression(compress.Codecs.Zstd),
			parquet.WithMaxRowGroupLength(rowGroupRows),
		),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(alloc))
}

// writeFile writes f's delivery to f.Path and sets its Rows and Bytes.
func (p Params) writeFile(alloc memory.Allocator, f *File) (err error) {
	tmp := f.Path + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(out, 1<<20)
	props, aprops := writeProps(alloc)
	fw, err := pqarrow.NewFileWriter(schema, bw, props, aprops)
	if err != nil {
		return err
	}
	var rows int64
	err = p.Batches(alloc, f.Delivery, func(rec arrow.RecordBatch) error {
		rows += rec.NumRows()
		return fw.WriteBuffered(rec)
	})
	if cerr := fw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tsbs: writing %s: %w", f.Path, err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	st, err := os.Stat(tmp)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, f.Path); err != nil {
		return err
	}
	f.Rows, f.Bytes = rows, st.Size()
	return nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadManifest reads the manifest in dir, with each file's Path joined
// to dir.
func ReadManifest(dir string) (*Manifest, error) {
	buf, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("tsbs: %s: %w", filepath.Join(dir, ManifestName), err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("tsbs: %s: format %q, want %q", filepath.Join(dir, ManifestName), m.Format, ManifestFormat)
	}
	if !slices.Equal(m.Columns, schemaColumns()) {
		return nil, fmt.Errorf("tsbs: %s: columns %v, want %v", filepath.Join(dir, ManifestName), m.Columns, schemaColumns())
	}
	for i := range m.Files {
		m.Files[i].Path = filepath.Join(dir, m.Files[i].Path)
	}
	return &m, nil
}
