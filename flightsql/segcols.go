//go:build duckdb_arrow

package flightsql

import (
	"os"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// segColumns remembers the top-level column names and the row count of
// segment files, read from their footers. Segments are immutable and their
// paths unique, but a file can be replaced behind the log's back (a restore,
// a careless copy), so an entry is keyed by the file's size and
// modification time too: a replaced file is read again, and its row count
// checked against the log. Entries are only dropped to bound the memory.
type segColumns struct {
	mu    sync.Mutex
	names map[segKey]segFooter
}

type segKey struct {
	path  string
	size  int64
	mtime time.Time
}

type segFooter struct {
	cols []string
	rows int64
}

const segColumnsMax = 1 << 16

// columns returns the column names and row count of the segment at path,
// whose stat is fi.
func (c *segColumns) columns(path string, fi os.FileInfo) ([]string, int64, error) {
	k := segKey{path: path, size: fi.Size(), mtime: fi.ModTime()}
	c.mu.Lock()
	f, ok := c.names[k]
	c.mu.Unlock()
	if ok {
		return f.cols, f.rows, nil
	}
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, 0, err
	}
	defer rdr.Close()
	md := rdr.MetaData()
	root := md.Schema.Root()
	f = segFooter{cols: make([]string, root.NumFields()), rows: md.NumRows}
	for i := range f.cols {
		f.cols[i] = root.Field(i).Name()
	}
	c.mu.Lock()
	if c.names == nil || len(c.names) >= segColumnsMax {
		c.names = map[segKey]segFooter{}
	}
	c.names[k] = f
	c.mu.Unlock()
	return f.cols, f.rows, nil
}
