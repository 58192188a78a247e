package tableformat

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// TestSegmentStatsAndPageIndexes: the segments a bulk append and a
// compaction write with the default options carry, for every column of
// every row group, the statistics (min, max, null count) and the page
// index (a column index with each page's min and max, an offset index
// locating each page) that let DuckDB and tsflight's scans skip row
// groups and pages; and the compacted segment's row groups follow its
// hour buckets, as its sort order promises.
func TestSegmentStatsAndPageIndexes(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const hosts, steps = 100, 720 // 2 hours at 10 s: 72,000 rows
	write := func(dir string, parts int) *Table {
		tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsbsIndex()}, nil)
		for p := range parts {
			n := steps / parts
			recs := tsbsBatches(mem, 7, hosts, p*n, n, 1<<14)
			o := DefaultAppendOptions()
			o.Alloc = mem
			appendTSBS(t, ctx, tb, recs, o)
			testkit.Release(recs)
		}
		return tb
	}
	root := t.TempDir()
	bulk := write(filepath.Join(root, "bulk"), 1)
	compacted := write(filepath.Join(root, "compacted"), 12) // appends of 10 minutes
	o := compactOpts(mem)
	if rep, err := compacted.Compact(ctx, o); err != nil || rep.OutputSegments != 1 {
		t.Fatalf("compaction: %+v %v", rep, err)
	}
	for _, c := range []struct {
		name      string
		dir       string
		tb        *Table
		minGroups int
	}{{"bulk", "bulk", bulk, 1}, {"compacted", "compacted", compacted, 2}} {
		segs := c.tb.State().Segments
		if len(segs) != 1 {
			t.Fatalf("%s: %d segments", c.name, len(segs))
		}
		pf, err := file.OpenParquetFile(filepath.Join(root, c.dir, filepath.FromSlash(segs[0].Path)), false)
		if err != nil {
			t.Fatal(err)
		}
		md := pf.MetaData()
		if md.NumRowGroups() < c.minGroups {
			t.Errorf("%s: %d row groups, want at least %d", c.name, md.NumRowGroups(), c.minGroups)
		}
		ncols := md.Schema.NumColumns()
		if ncols != tsbsSchema().NumFields() {
			t.Fatalf("%s: %d columns", c.name, ncols)
		}
		pir := pf.GetPageIndexReader()
		if pir == nil {
			t.Fatalf("%s: no page index reader", c.name)
		}
		var prevMax []byte
		for g := range md.NumRowGroups() {
			rgm := md.RowGroup(g)
			rgpi, err := pir.RowGroup(g)
			if err != nil || rgpi == nil {
				t.Fatalf("%s: row group %d: page index: %v", c.name, g, err)
			}
			for col := range ncols {
				name := md.Schema.Column(col).Name()
				cc, err := rgm.ColumnChunk(col)
				if err != nil {
					t.Fatal(err)
				}
				if set, err := cc.StatsSet(); err != nil || !set {
					t.Errorf("%s: row group %d column %s: no statistics (%v)", c.name, g, name, err)
					continue
				}
				st, err := cc.Statistics()
				if err != nil || st == nil || !st.HasMinMax() || !st.HasNullCount() || st.NullCount() != 0 {
					t.Errorf("%s: row group %d column %s: statistics %v (%v)", c.name, g, name, st, err)
					continue
				}
				if cc.GetColumnIndexLocation() == nil || cc.GetOffsetIndexLocation() == nil {
					t.Errorf("%s: row group %d column %s: no page index location", c.name, g, name)
					continue
				}
				ci, err := rgpi.GetColumnIndex(col)
				if err != nil || ci == nil {
					t.Errorf("%s: row group %d column %s: column index %v", c.name, g, name, err)
					continue
				}
				oi, err := rgpi.GetOffsetIndex(col)
				if err != nil || oi == nil {
					t.Errorf("%s: row group %d column %s: offset index %v", c.name, g, name, err)
					continue
				}
				locs := oi.GetPageLocations()
				if len(locs) == 0 || len(ci.GetMinValues()) != len(locs) || len(ci.GetMaxValues()) != len(locs) || locs[0].FirstRowIndex != 0 {
					t.Errorf("%s: row group %d column %s: %d page locations, %d/%d page bounds", c.name, g, name, len(locs), len(ci.GetMinValues()), len(ci.GetMaxValues()))
				}
				for p := 1; p < len(locs); p++ {
					if locs[p].FirstRowIndex <= locs[p-1].FirstRowIndex || locs[p].FirstRowIndex >= rgm.NumRows() {
						t.Errorf("%s: row group %d column %s: page %d starts at row %d", c.name, g, name, p, locs[p].FirstRowIndex)
					}
				}
				if col != 0 || c.name != "compacted" {
					continue
				}
				// time (ns, after 1970): a row group starts in the hour the
				// previous one ends in, or later.
				lo, hi := st.EncodeMin(), st.EncodeMax()
				hour := func(b []byte) uint64 { return leUint64(b) / 3600e9 }
				if prevMax != nil && hour(lo) < hour(prevMax) {
					t.Errorf("compacted: row group %d starts in hour %d, before the previous one's last hour %d", g, hour(lo), hour(prevMax))
				}
				prevMax = hi
				for p, v := range ci.GetMinValues() {
					if leUint64(v) < leUint64(lo) || leUint64(ci.GetMaxValues()[p]) > leUint64(hi) {
						t.Errorf("compacted: row group %d page %d: time bounds outside the row group's", g, p)
					}
				}
			}
		}
		pf.Close()
	}
}
