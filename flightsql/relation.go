//go:build duckdb_arrow

package flightsql

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// relationSQL is the SELECT reading one table's planned segments segs.
// Columns absent from every planned segment (added after those segments
// were written) are typed NULLs; union_by_name is used only when the
// planned segments' columns differ. It also returns the files it reads.
func (s *Server) relationSQL(name string, st *tableformat.State, segs []tableformat.SegmentMeta) (string, []string, error) {
	var b strings.Builder
	b.WriteString("SELECT ")
	if st.Schema() == nil {
		// No data yet: the table has only its index column.
		typ := "TIMESTAMPTZ"
		switch st.Index().Kind.Type {
		case tableformat.IndexInt64:
			typ = "BIGINT"
		case tableformat.IndexUInt64:
			typ = "UBIGINT"
		}
		b.WriteString("CAST(NULL AS " + typ + ") AS " + sqlIdent(st.Index().Column) + " WHERE false")
		return b.String(), nil, nil
	}
	as, err := tableformat.ArrowSchema(st.Schema())
	if err != nil {
		return "", nil, err
	}
	files := make([]string, len(segs))
	present := map[string]bool{}
	var first []string
	same := true
	root := s.svc.Root()
	for i, sg := range segs {
		files[i] = filepath.Join(root, name, filepath.FromSlash(sg.Path))
		fi, err := checkSegmentFile(root, name, files[i], sg)
		if err != nil {
			return "", nil, err
		}
		cols, rows, err := s.segCols.columns(files[i], fi)
		if err != nil {
			return "", nil, segmentLost(root, name, sg.Path, err)
		}
		if rows < 0 || uint64(rows) != sg.RowCount {
			return "", nil, reqerr.Errorf(tableformat.ErrCorrupt, "table %s: segment %s is damaged: its footer says %d rows, the table's log records %d (replaced by another file?); restore it or run tsflight check", name, sg.Path, rows, sg.RowCount)
		}
		if i == 0 {
			first = cols
		} else if !slices.Equal(first, cols) {
			same = false
		}
		for _, c := range cols {
			present[c] = true
		}
	}
	for i, f := range as.Fields() {
		if i > 0 {
			b.WriteString(", ")
		}
		if present[f.Name] {
			b.WriteString(sqlIdent(f.Name))
			continue
		}
		typ, err := duckType(f.Type)
		if err != nil {
			return "", nil, reqerr.Errorf(reqerr.ErrUnimplemented, "table %s: column %s: %v", name, f.Name, err)
		}
		b.WriteString("CAST(NULL AS " + typ + ") AS " + sqlIdent(f.Name))
	}
	if len(segs) == 0 {
		b.WriteString(" WHERE false")
		return b.String(), files, nil
	}
	b.WriteString(" FROM read_parquet([")
	for i, f := range files {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sqlString(f))
	}
	b.WriteString("]")
	if !same {
		b.WriteString(", union_by_name = true")
	}
	b.WriteString(")")
	return b.String(), files, nil
}

// checkSegmentFile checks, before DuckDB reads it, that the file of a
// planned segment exists and has the size the log recorded for it (when
// it recorded one): a stat, so that a missing, truncated or replaced
// segment is DATA_LOSS naming the table and the segment's table-relative
// path, never a DuckDB error quoting the root's absolute path.
func checkSegmentFile(root, table, file string, sg tableformat.SegmentMeta) (os.FileInfo, error) {
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, reqerr.Errorf(tableformat.ErrCorrupt, "table %s: segment %s is missing: the table's log lists it but the file is gone", table, sg.Path)
	case err != nil:
		return nil, segmentLost(root, table, sg.Path, err)
	case !fi.Mode().IsRegular():
		return nil, reqerr.Errorf(tableformat.ErrCorrupt, "table %s: segment %s is not a regular file", table, sg.Path)
	case sg.FileSize != nil && uint64(fi.Size()) != *sg.FileSize:
		return nil, reqerr.Errorf(tableformat.ErrCorrupt, "table %s: segment %s is damaged: the file has %d bytes, the table's log records %d (truncated or replaced)", table, sg.Path, fi.Size(), *sg.FileSize)
	}
	return fi, nil
}

// segmentLost is the DATA_LOSS of a planned segment that cannot be read,
// with the root scrubbed from the cause.
func segmentLost(root, table, seg string, err error) error {
	return reqerr.Errorf(tableformat.ErrCorrupt, "table %s: segment %s cannot be read: %s", table, seg, scrubRoot(err.Error(), root))
}

// duckScalarTypes are the DuckDB types of the Arrow types whose DuckDB
// type does not depend on their parameters (duckType).
var duckScalarTypes = map[arrow.Type]string{
	arrow.BOOL:              "BOOLEAN",
	arrow.INT8:              "TINYINT",
	arrow.INT16:             "SMALLINT",
	arrow.INT32:             "INTEGER",
	arrow.INT64:             "BIGINT",
	arrow.UINT8:             "UTINYINT",
	arrow.UINT16:            "USMALLINT",
	arrow.UINT32:            "UINTEGER",
	arrow.UINT64:            "UBIGINT",
	arrow.FLOAT16:           "FLOAT",
	arrow.FLOAT32:           "FLOAT",
	arrow.FLOAT64:           "DOUBLE",
	arrow.STRING:            "VARCHAR",
	arrow.LARGE_STRING:      "VARCHAR",
	arrow.STRING_VIEW:       "VARCHAR",
	arrow.BINARY:            "BLOB",
	arrow.LARGE_BINARY:      "BLOB",
	arrow.BINARY_VIEW:       "BLOB",
	arrow.FIXED_SIZE_BINARY: "BLOB",
	arrow.DATE32:            "DATE",
	arrow.DATE64:            "DATE",
	arrow.TIME32:            "TIME",
	arrow.TIME64:            "TIME",
	arrow.DURATION:          "INTERVAL",
}

// duckType names the DuckDB type of an Arrow type, for typed NULLs.
func duckType(t arrow.DataType) (string, error) {
	if name, ok := duckScalarTypes[t.ID()]; ok {
		return name, nil
	}
	switch t := t.(type) {
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return "TIMESTAMPTZ", nil
		}
		// As DuckDB reads the segments' Parquet: TIMESTAMP(MILLIS) (and
		// arrow-go's seconds, written as millis) as TIMESTAMP, not
		// TIMESTAMP_MS; a typed NULL of another type would make a query that
		// binds over the files fail when pruned to no segment
		// (TestPruningDifferential).
		if t.Unit == arrow.Nanosecond {
			return "TIMESTAMP_NS", nil
		}
		return "TIMESTAMP", nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("DECIMAL(%d, %d)", t.Precision, t.Scale), nil
	case *arrow.ListType:
		e, err := duckType(t.Elem())
		return e + "[]", err
	case *arrow.LargeListType:
		e, err := duckType(t.Elem())
		return e + "[]", err
	case *arrow.StructType:
		parts := make([]string, t.NumFields())
		for i, f := range t.Fields() {
			ft, err := duckType(f.Type)
			if err != nil {
				return "", err
			}
			parts[i] = sqlIdent(f.Name) + " " + ft
		}
		return "STRUCT(" + strings.Join(parts, ", ") + ")", nil
	case *arrow.MapType:
		k, err := duckType(t.KeyType())
		if err != nil {
			return "", err
		}
		v, err := duckType(t.ItemType())
		return "MAP(" + k + ", " + v + ")", err
	}
	return "", fmt.Errorf("Arrow type %s has no SQL mapping", t)
}
