package tableformat

import (
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// dictionaryColumns counts the column chunks of a segment that have a
// dictionary page.
func dictionaryColumns(t *testing.T, path string) (withDict, columns int) {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	md := r.MetaData()
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			columns++
			if cc.HasDictionaryPage() {
				withDict++
			}
		}
	}
	return withDict, columns
}

// TestGroupPlainRows: a small append's segment of at most GroupPlainRows
// rows is written without dictionaries, a larger one (or any, with 0) with
// them; the rows read back the same either way.
func TestGroupPlainRows(t *testing.T) {
	for _, c := range []struct {
		plainRows int64
		wantDict  bool
	}{{4096, false}, {1, true}, {0, true}} {
		e := newAppendEnv(t, tsIndex())
		if _, err := e.append(row{1000, "h0", 0}); err != nil { // adopts the schema, never grouped
			t.Fatal(err)
		}
		o := e.opts()
		o.GroupPlainRows = c.plainRows
		rdr := readerOf(t, inSchema(), inBatch(e.mem, row{0, "h0", 1}, row{10, "h1", 2}, row{20, "h0", 3}))
		res, err := e.tb.Append(e.ctx, rdr, o)
		rdr.Release()
		if err != nil {
			t.Fatal(err)
		}
		if res.Grouped != 1 || res.Segment.RowCount != 3 {
			t.Fatalf("GroupPlainRows %d: the append did not take the small-append path: %+v", c.plainRows, res)
		}
		withDict, cols := dictionaryColumns(t, filepath.Join(e.dir, filepath.FromSlash(res.Segment.Path)))
		if got := withDict > 0; got != c.wantDict || (c.wantDict && withDict == 0) {
			t.Errorf("GroupPlainRows %d: %d of %d column chunks have a dictionary, want dictionaries %v", c.plainRows, withDict, cols, c.wantDict)
		}
		if !c.wantDict && withDict != 0 {
			t.Errorf("GroupPlainRows %d: %d column chunks have a dictionary", c.plainRows, withDict)
		}
		if n, s := scanCountSum(t, e.tb, e.mem, "v"); n != 4 || s != 6 {
			t.Errorf("GroupPlainRows %d: scan %d rows, sum %d", c.plainRows, n, s)
		}
	}
}
