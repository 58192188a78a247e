//go:build duckdb_arrow

package flightsql

import (
	"sync"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// segColumns remembers the top-level column names of segment files.
// Segments are immutable and their paths unique, so an entry never goes
// stale; it is only dropped to bound the memory.
type segColumns struct {
	mu    sync.Mutex
	names map[string][]string
}

const segColumnsMax = 1 << 16

func (c *segColumns) columns(path string) ([]string, error) {
	c.mu.Lock()
	cols, ok := c.names[path]
	c.mu.Unlock()
	if ok {
		return cols, nil
	}
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, err
	}
	defer rdr.Close()
	root := rdr.MetaData().Schema.Root()
	cols = make([]string, root.NumFields())
	for i := range cols {
		cols[i] = root.Field(i).Name()
	}
	c.mu.Lock()
	if c.names == nil || len(c.names) >= segColumnsMax {
		c.names = map[string][]string{}
	}
	c.names[path] = cols
	c.mu.Unlock()
	return cols, nil
}
