package tableformat

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/coverage"
)

// compactHosts is the number of entities of the compaction tests' rows.
const compactHosts = 5

// compactRowsOf are the rows of append i: steps 2i and 2i+1 of every host,
// time-major (as a collector sends them), so that each append holds 10
// rows over 5 entities.
func compactRowsOf(i int) []row {
	var out []row
	for step := 2 * i; step < 2*i+2; step++ {
		for h := range compactHosts {
			out = append(out, row{sec: int64(step) * 10, host: fmt.Sprintf("h%d", h), v: int64(step*100 + h)})
		}
	}
	return out
}

// appendSmall appends appends [from, to) through tb.
func appendSmall(t *testing.T, ctx context.Context, tb *Table, mem memory.Allocator, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := appendRows(ctx, tb, mem, compactRowsOf(i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

// newCompactEnv makes an append env of tsIndex holding appends [0, n)
// (compactRowsOf) and returns it with its context.
func newCompactEnv(t *testing.T, n int) (*appendEnv, context.Context) {
	t.Helper()
	e := newAppendEnv(t, tsIndex())
	appendSmall(t, e.ctx, e.tb, e.mem, 0, n)
	return e, e.ctx
}

func appendRows(ctx context.Context, tb *Table, mem memory.Allocator, rows []row) (*AppendResult, error) {
	rec := inBatch(mem, rows...)
	rdr, err := array.NewRecordReader(inSchema(), []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	o := DefaultAppendOptions()
	o.Alloc = mem
	return tb.Append(ctx, rdr, o)
}

// compactOpts are the default options with the test's allocator.
func compactOpts(mem memory.Allocator) *CompactOptions {
	o := DefaultCompactOptions()
	o.Alloc = mem
	return o
}

// tableRows scans every row of st and renders each as "col=value|…",
// sorted.
func tableRows(t *testing.T, ctx context.Context, tb *Table, st *State, mem memory.Allocator) []string {
	t.Helper()
	var out []string
	scanEach(t, ctx, tb, st, ScanOptions{Alloc: mem}, func(rec arrow.RecordBatch) {
		for i := range int(rec.NumRows()) {
			parts := make([]string, rec.NumCols())
			for c := range parts {
				parts[c] = rec.Schema().Field(c).Name + "=" + rec.Column(c).ValueStr(i)
			}
			out = append(out, strings.Join(parts, "|"))
		}
	})
	slices.Sort(out)
	return out
}

// liveUnion is the union of the live segments' sidecars of st.
func liveUnion(t *testing.T, tb *Table, st *State) *coverage.Set {
	t.Helper()
	entity := len(st.Index().EntityColumns) > 0
	u := newSegmentCoverage(st.Index(), entity)
	for _, seg := range st.Segments {
		c, err := tb.readCoverageFile(st, seg.CoveragePath, entity)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.set.Union(c.set); err != nil {
			t.Fatal(err)
		}
	}
	return u.set
}

// coverageAnswers renders the coverage and gap answers of every host and
// of the whole table over [start, end) through the query functions.
func coverageAnswers(t *testing.T, ctx context.Context, tb *Table, st *State, start, end IndexValue) string {
	t.Helper()
	var b strings.Builder
	for h := -1; h < compactHosts; h++ {
		q := CoverageQuery{Start: start, End: end}
		if h >= 0 {
			q.Entity = Identity{{Type: EntityUtf8, Str: fmt.Sprintf("h%d", h)}}
		}
		c, err := tb.Coverage(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		g, err := tb.Gaps(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d: %+v gaps %s missing %d\n", h, *c, spans(g.Gaps), g.MissingIntervals)
	}
	return b.String()
}

// checkTable runs the table check and fails on any finding.
func checkTable(t *testing.T, ctx context.Context, tb *Table) {
	t.Helper()
	rep, err := tb.Check(ctx, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("check after compaction: %+v", rep.Findings)
	}
}

// readSegmentFile reads the segment file p of the table in dir whole, in
// stored order, and the row count of each of its row groups.
func readSegmentFile(t *testing.T, dir, p string) (arrow.Table, []int64) {
	t.Helper()
	pf, err := file.OpenParquetFile(filepath.Join(dir, filepath.FromSlash(p)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	var groups []int64
	for g := range pf.NumRowGroups() {
		groups = append(groups, pf.MetaData().RowGroup(g).NumRows())
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tbl, groups
}

// segmentFileRows reads a segment file in stored order: (host, ts) per
// row, and the row count of each row group.
func segmentFileRows(t *testing.T, dir, p string) (keys [][2]string, groups []int64) {
	t.Helper()
	tbl, groups := readSegmentFile(t, dir, p)
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 1<<20)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		ts := rec.Column(0).(*array.Timestamp)
		host := rec.Column(1).(*array.String)
		for i := range int(rec.NumRows()) {
			keys = append(keys, [2]string{host.Value(i), fmt.Sprintf("%020d", int64(ts.Value(i)))})
		}
	}
	return keys, groups
}
