package tableformat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// ---- fixtures ----

// scanFixture is a table in a temporary directory whose segments the test
// writes itself with pqarrow.
type scanFixture struct {
	t     testing.TB
	dir   string
	tb    *Table
	canon *arrow.Schema
	n     int
}

func newScanFixture(t testing.TB, ix IndexSpec, logical *Schema) *scanFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	tb, err := Create(ctx, storage.Local(dir), CreateOptions{Index: ix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := tb.State().Meta.Clone()
	m.Schema = logical
	if _, err := tb.Commit(ctx, tb.State().Version, []Action{UpdateTableMeta{Meta: *m}}); err != nil {
		t.Fatal(err)
	}
	canon, err := ArrowSchema(logical)
	if err != nil {
		t.Fatal(err)
	}
	return &scanFixture{t: t, dir: dir, tb: tb, canon: canon}
}

// addColumns commits the logical schema plus the nullable fields extra.
func (f *scanFixture) addColumns(extra ...Field) {
	f.t.Helper()
	st := f.tb.State()
	m := st.Meta.Clone()
	s := &Schema{Columns: append(slices.Clone(st.Schema().Columns), extra...), Metadata: st.Schema().Metadata}
	m.Schema = s
	if !slices.Contains(m.ReaderFeatures, FeatureSchemaAddColumns) {
		m.ReaderFeatures = append(m.ReaderFeatures, FeatureSchemaAddColumns)
		slices.Sort(m.ReaderFeatures)
	}
	if _, err := f.tb.Commit(context.Background(), st.Version, []Action{UpdateTableMeta{Meta: *m}}); err != nil {
		f.t.Fatal(err)
	}
	canon, err := ArrowSchema(s)
	if err != nil {
		f.t.Fatal(err)
	}
	f.canon = canon
}

// writeParquet writes recs to path (table-relative) with row groups of at
// most rowGroupRows rows, and returns the file size.
func (f *scanFixture) writeParquet(path string, rowGroupRows int64, recs ...arrow.RecordBatch) uint64 {
	f.t.Helper()
	full := filepath.Join(f.dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		f.t.Fatal(err)
	}
	out, err := os.Create(full)
	if err != nil {
		f.t.Fatal(err)
	}
	if rowGroupRows <= 0 {
		rowGroupRows = 1 << 20
	}
	// As the append path writes: zstd, dictionaries, statistics.
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rowGroupRows), parquet.WithAllocator(memory.DefaultAllocator),
		parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(true), parquet.WithStats(true))
	w, err := pqarrow.NewFileWriter(recs[0].Schema(), out, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.WriteBuffered(r); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
	info, err := os.Stat(full)
	if err != nil {
		f.t.Fatal(err)
	}
	return uint64(info.Size())
}

// addSegment writes recs as the next segment and commits it; the bounds are
// computed from the index column.
func (f *scanFixture) addSegment(layout EntityLayout, rowGroupRows int64, recs ...arrow.RecordBatch) SegmentMeta {
	f.t.Helper()
	f.n++
	path := fmt.Sprintf("data/scan/seg-%03d.parquet", f.n)
	size := f.writeParquet(path, rowGroupRows, recs...)
	st := f.tb.State()
	lo, hi, rows := scanIndexBounds(f.t, st.Index(), recs)
	seg := SegmentMeta{Path: path, Format: FormatParquet, Layout: layout, IndexMin: lo, IndexMax: hi, RowCount: rows, FileSize: &size}
	if _, err := f.tb.Commit(context.Background(), st.Version, []Action{AddSegment{Segment: seg}}); err != nil {
		f.t.Fatal(err)
	}
	return seg
}

func scanIndexBounds(t testing.TB, ix *IndexSpec, recs []arrow.RecordBatch) (lo, hi IndexValue, rows uint64) {
	var have bool
	for _, r := range recs {
		rows += uint64(r.NumRows())
		col := r.Column(r.Schema().FieldIndices(ix.Column)[0])
		for i := 0; i < col.Len(); i++ {
			if col.IsNull(i) {
				continue
			}
			var v IndexValue
			switch a := col.(type) {
			case *array.Timestamp:
				unit := a.DataType().(*arrow.TimestampType).Unit
				v = TimeValue(a.Value(i).ToTime(unit))
			case *array.Int64:
				v = Int64Value(a.Value(i))
			case *array.Uint64:
				v = Uint64Value(a.Value(i))
			default:
				t.Fatalf("index column type %s", col.DataType())
			}
			if !have || v.Compare(lo) < 0 {
				lo = v
			}
			if !have || v.Compare(hi) > 0 {
				hi = v
			}
			have = true
		}
	}
	if !have {
		t.Fatal("segment without index values")
	}
	return lo, hi, rows
}

// scanRecord builds a batch of schema from one Go slice per column:
// []int64 (also timestamps, in the column's unit), []int32, []uint64,
// []float64, []string, []bool, or a pointer-element variant for nulls.
func scanRecord(t testing.TB, schema *arrow.Schema, cols ...any) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, c := range cols {
		switch fb := b.Field(i).(type) {
		case *array.TimestampBuilder:
			switch vs := c.(type) {
			case []int64:
				for _, v := range vs {
					fb.Append(arrow.Timestamp(v))
				}
			case []*int64:
				for _, v := range vs {
					if v == nil {
						fb.AppendNull()
					} else {
						fb.Append(arrow.Timestamp(*v))
					}
				}
			}
		case *array.Int64Builder:
			switch vs := c.(type) {
			case []int64:
				fb.AppendValues(vs, nil)
			case []*int64:
				for _, v := range vs {
					if v == nil {
						fb.AppendNull()
					} else {
						fb.Append(*v)
					}
				}
			}
		case *array.Int32Builder:
			fb.AppendValues(c.([]int32), nil)
		case *array.Uint64Builder:
			fb.AppendValues(c.([]uint64), nil)
		case *array.Float64Builder:
			switch vs := c.(type) {
			case []float64:
				fb.AppendValues(vs, nil)
			case []*float64:
				for _, v := range vs {
					if v == nil {
						fb.AppendNull()
					} else {
						fb.Append(*v)
					}
				}
			}
		case *array.StringBuilder:
			switch vs := c.(type) {
			case []string:
				fb.AppendValues(vs, nil)
			case []*string:
				for _, v := range vs {
					if v == nil {
						fb.AppendNull()
					} else {
						fb.Append(*v)
					}
				}
			}
		case *array.BooleanBuilder:
			fb.AppendValues(c.([]bool), nil)
		default:
			t.Fatalf("scanRecord: column %d: unsupported builder %T", i, fb)
		}
	}
	rec := b.NewRecordBatch()
	for i := range cols {
		if int64(rec.Column(i).Len()) != rec.NumRows() {
			t.Fatalf("scanRecord: column %d has %d values, want %d", i, rec.Column(i).Len(), rec.NumRows())
		}
	}
	return rec
}

func scanJSONRecord(t testing.TB, schema *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// scRenderRow renders row i of rec, columns joined by "|".
func scRenderRow(rec arrow.RecordBatch, i int) string {
	parts := make([]string, rec.NumCols())
	for c := range parts {
		a := rec.Column(c)
		if a.IsNull(i) {
			parts[c] = "null"
		} else {
			parts[c] = a.ValueStr(i)
		}
	}
	return strings.Join(parts, "|")
}

// scExpectRows renders the rows of recs (projected to cols) that keep
// accepts, sorted.
func scExpectRows(recs []arrow.RecordBatch, cols []string, keep func(rec arrow.RecordBatch, i int) bool) []string {
	var out []string
	for _, r := range recs {
		arrs := make([]arrow.Array, len(cols))
		fields := make([]arrow.Field, len(cols))
		for k, c := range cols {
			j := r.Schema().FieldIndices(c)[0]
			arrs[k], fields[k] = r.Column(j), r.Schema().Field(j)
		}
		proj := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, r.NumRows())
		for i := 0; i < int(r.NumRows()); i++ {
			if keep == nil || keep(r, i) {
				out = append(out, scRenderRow(proj, i))
			}
		}
		proj.Release()
	}
	slices.Sort(out)
	return out
}

// scanResult is what a test scan returned.
type scanResult struct {
	rows    []string
	batches []int
	schema  *arrow.Schema
	stats   *scanStats
}

// scRunScan scans with a checked allocator and returns the rendered rows
// (sorted); it fails the test on any error and checks that every buffer was
// freed.
func scRunScan(t testing.TB, tb *Table, opts ScanOptions) scanResult {
	t.Helper()
	res, err := scTryScan(t, tb, opts)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return res
}

func scTryScan(t testing.TB, tb *Table, opts ScanOptions) (scanResult, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	opts.Alloc = mem
	rr, err := tb.Scan(context.Background(), nil, opts)
	if err != nil {
		return scanResult{}, err
	}
	defer rr.Release()
	res := scanResult{schema: rr.Schema(), stats: rr.(*scanReader).run.stats}
	for rr.Next() {
		rec := rr.RecordBatch()
		if !rec.Schema().Equal(rr.Schema()) {
			t.Fatalf("batch schema %s, reader schema %s", rec.Schema(), rr.Schema())
		}
		for i, f := range rec.Schema().Fields() {
			if !arrow.TypeEqual(rec.Column(i).DataType(), f.Type, arrow.CheckMetadata()) {
				t.Fatalf("column %q has type %s, schema says %s", f.Name, rec.Column(i).DataType(), f.Type)
			}
			if v, ok := rec.Column(i).(interface{ ValidateFull() error }); ok {
				if err := v.ValidateFull(); err != nil {
					t.Fatalf("column %q: %v", f.Name, err)
				}
			}
			if n := rec.Column(i).NullN(); n != scCountNulls(rec.Column(i)) {
				t.Fatalf("column %q: null count %d, validity says %d", f.Name, n, scCountNulls(rec.Column(i)))
			}
		}
		res.batches = append(res.batches, int(rec.NumRows()))
		for i := 0; i < int(rec.NumRows()); i++ {
			res.rows = append(res.rows, scRenderRow(rec, i))
		}
	}
	slices.Sort(res.rows)
	return res, rr.Err()
}

func scCountNulls(a arrow.Array) int {
	if a.Data().Buffers()[0] == nil {
		return 0
	}
	n := 0
	for i := 0; i < a.Len(); i++ {
		if !bitutil.BitIsSet(a.Data().Buffers()[0].Bytes(), a.Data().Offset()+i) {
			n++
		}
	}
	return n
}

func scSameRows(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d\ngot:  %.600q\nwant: %.600q", len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("row %d: got %q, want %q", i, got[i], want[i])
		}
	}
}

func scSegPaths(segs []SegmentMeta) []string {
	out := make([]string, len(segs))
	for i := range segs {
		out[i] = segs[i].Path
	}
	return out
}

func scI64s(vs ...int64) []int64 { return vs }

func scSeq(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

func scRepeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func scPtr[T any](v T) *T { return &v }

// int64 index tables: k int64 (index), v int64 nullable.
func scIntIndex(entities ...string) IndexSpec {
	return IndexSpec{Column: "k", EntityColumns: nonNil(entities), Kind: IndexKind{Type: IndexInt64, Width: 10}}
}

func scKVSchema() *Schema {
	return &Schema{Columns: []Field{
		{Name: "k", Type: DataType{Kind: TypeInt64}},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
	}}
}

// time-series tables: ts timestamp[ns, UTC] index, host utf8 entity, v int64.
func scHostIndex() IndexSpec {
	return IndexSpec{Column: "ts", EntityColumns: []string{"host"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}}
}

func scHostSchema(unit TimeUnit) *Schema {
	utc := "UTC"
	return &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: unit, Timezone: &utc}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
	}}
}

func scSingle(vals ...EntityValue) EntityLayout {
	return EntityLayout{Kind: LayoutSingle, Identity: vals}
}

var (
	scNA    = EntityLayout{Kind: LayoutNotApplicable}
	scMixed = EntityLayout{Kind: LayoutMixed}
)

func scStr(s string) EntityValue { return EntityValue{Type: EntityUtf8, Str: s} }

func scIv(v int64) *IndexValue { x := Int64Value(v); return &x }

func scUv(v uint64) *IndexValue { x := Uint64Value(v); return &x }

func scTv(t time.Time) *IndexValue { x := TimeValue(t); return &x }

// ---- planning ----

func TestScanPlanPrunesByRange(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	// Added out of order: planning sorts by (index_min, index_max, path).
	for _, base := range []int64{20, 0, 30, 10} {
		f.addSegment(scNA, 0, scanRecord(t, f.canon, scSeq(base, 10), scSeq(base, 10)))
	}
	f.addSegment(scNA, 0, scanRecord(t, f.canon, scI64s(10, 12), scI64s(0, 0))) // seg-005: [10, 12]
	st := f.tb.State()
	for _, c := range []struct {
		name       string
		start, end *IndexValue
		want       []string
	}{
		{"all", nil, nil, []string{"seg-002", "seg-005", "seg-004", "seg-001", "seg-003"}},
		{"narrow", scIv(15), scIv(25), []string{"seg-004", "seg-001"}},
		{"end excludes index_min", nil, scIv(20), []string{"seg-002", "seg-005", "seg-004"}},
		{"start includes index_max", scIv(19), nil, []string{"seg-004", "seg-001", "seg-003"}},
		{"start after everything", scIv(40), nil, nil},
		{"one value", scIv(12), scIv(13), []string{"seg-005", "seg-004"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			segs, err := st.PlanScan(ScanOptions{Start: c.start, End: c.end})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range scSegPaths(segs) {
				got = append(got, strings.TrimSuffix(filepath.Base(p), ".parquet"))
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("planned %v, want %v", got, c.want)
			}
		})
	}
}

func TestScanPlanPrunesByEntity(t *testing.T) {
	ix := IndexSpec{Column: "k", EntityColumns: []string{"host", "dc"}, Kind: IndexKind{Type: IndexInt64, Width: 10}}
	sch := &Schema{Columns: []Field{
		{Name: "k", Type: DataType{Kind: TypeInt64}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "dc", Type: DataType{Kind: TypeInt32}},
	}}
	f := newScanFixture(t, ix, sch)
	dc := func(v int64) EntityValue { return EntityValue{Type: EntityInt32, Int: v} }
	f.addSegment(scSingle(scStr("a"), dc(1)), 0, scanRecord(t, f.canon, scI64s(1), []string{"a"}, []int32{1}))
	f.addSegment(scSingle(scStr("b"), dc(1)), 0, scanRecord(t, f.canon, scI64s(2), []string{"b"}, []int32{1}))
	f.addSegment(scSingle(scStr("a"), dc(2)), 0, scanRecord(t, f.canon, scI64s(3), []string{"a"}, []int32{2}))
	f.addSegment(scMixed, 0, scanRecord(t, f.canon, scI64s(4, 5), []string{"c", "d"}, []int32{1, 2}))
	st := f.tb.State()
	for _, c := range []struct {
		ents map[string]EntityValue
		want []string
	}{
		{nil, []string{"seg-001", "seg-002", "seg-003", "seg-004"}},
		{map[string]EntityValue{"host": scStr("a")}, []string{"seg-001", "seg-003", "seg-004"}},
		{map[string]EntityValue{"dc": dc(1)}, []string{"seg-001", "seg-002", "seg-004"}},
		{map[string]EntityValue{"host": scStr("a"), "dc": dc(2)}, []string{"seg-003", "seg-004"}},
		{map[string]EntityValue{"host": scStr("zzz")}, []string{"seg-004"}}, // Mixed is never pruned
	} {
		segs, err := st.PlanScan(ScanOptions{Entities: c.ents})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range scSegPaths(segs) {
			got = append(got, strings.TrimSuffix(filepath.Base(p), ".parquet"))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("entities %v: planned %v, want %v", c.ents, got, c.want)
		}
	}
	// And the scan returns exactly the matching rows.
	res := scRunScan(t, f.tb, ScanOptions{Entities: map[string]EntityValue{"host": scStr("a")}})
	scSameRows(t, res.rows, []string{"1|a|1", "3|a|2"})
	if got := res.stats.segments.Load(); got != 3 {
		t.Errorf("opened %d segments, want 3", got)
	}
}

// ---- row groups ----

func TestScanPrunesRowGroups(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	ks := scSeq(0, 10000)
	f.addSegment(scNA, 1000, scanRecord(t, f.canon, ks, ks)) // 10 row groups of 1000
	res := scRunScan(t, f.tb, ScanOptions{Start: scIv(2500), End: scIv(3500)})
	var want []string
	for k := int64(2500); k < 3500; k++ {
		want = append(want, fmt.Sprintf("%d|%d", k, k))
	}
	slices.Sort(want)
	scSameRows(t, res.rows, want)
	if g, r := res.stats.rowGroups.Load(), res.stats.rowGroupsRead.Load(); g != 10 || r != 2 {
		t.Errorf("read %d of %d row groups, want 2 of 10", r, g)
	}
	// Within them, the rows in range are found from the index column
	// alone, and the other columns are decoded from the first one on.
	if l, d := res.stats.rowsLocated.Load(), res.stats.rowsDecoded.Load(); l != 2000 || d > 1500 {
		t.Errorf("located over %d rows and decoded %d; want 2000 and at most 1500", l, d)
	}
	// A range between two row groups' values reads none.
	f2 := newScanFixture(t, scIntIndex(), scKVSchema())
	even := make([]int64, 100)
	for i := range even {
		even[i] = int64(i) * 10
	}
	f2.addSegment(scNA, 10, scanRecord(t, f2.canon, even, even))
	res = scRunScan(t, f2.tb, ScanOptions{Start: scIv(91), End: scIv(99)})
	if len(res.rows) != 0 || res.stats.rowGroupsRead.Load() != 0 {
		t.Errorf("rows %v, row groups read %d; want none", res.rows, res.stats.rowGroupsRead.Load())
	}
}

func TestScanPrunesRowGroupsByEntity(t *testing.T) {
	f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
	var ts []int64
	var hosts []string
	for _, h := range []string{"a", "b", "c", "d"} {
		ts = append(ts, scSeq(1e18, 500)...)
		hosts = append(hosts, scRepeat(h, 500)...)
	}
	f.addSegment(scMixed, 500, scanRecord(t, f.canon, ts, hosts, scSeq(0, 2000)))
	res := scRunScan(t, f.tb, ScanOptions{Entities: map[string]EntityValue{"host": scStr("c")}, Columns: []string{"v"}})
	if len(res.rows) != 500 || res.rows[0] != "1000" {
		t.Fatalf("got %d rows starting %q", len(res.rows), res.rows[:min(1, len(res.rows))])
	}
	if g, r := res.stats.rowGroups.Load(), res.stats.rowGroupsRead.Load(); g != 4 || r != 1 {
		t.Errorf("read %d of %d row groups, want 1 of 4", r, g)
	}
}

// TestScanSeeksToRange: when the statistics cannot exclude row groups that
// hold no row in range, the rows in range are located from the index column
// and the other columns decoded only from there (a seek across row groups).
func TestScanSeeksToRange(t *testing.T) {
	sch := &Schema{Columns: []Field{
		{Name: "k", Type: DataType{Kind: TypeInt64}},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
		{Name: "s", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		{Name: "b", Type: DataType{Kind: TypeBool}, Nullable: true},
		{Name: "f", Type: DataType{Kind: TypeFloat64}, Nullable: true},
	}}
	f := newScanFixture(t, scIntIndex(), sch)
	const n = 10_000
	k, v, str, b, fl := make([]int64, n), make([]*int64, n), make([]*string, n), make([]bool, n), make([]*float64, n)
	for i := range n {
		k[i] = int64(i%2) * 10_000 // 0 or 10000: every row group spans the range
		if i >= 3000 && i < 4000 {
			k[i] = 5000 + int64(i-3000)
		}
		if i%7 != 0 {
			v[i] = scPtr(int64(i))
			str[i] = scPtr(fmt.Sprintf("s%d", i%13))
			fl[i] = scPtr(float64(i) / 8)
		}
		b[i] = i%3 == 0
	}
	rec := scanRecord(t, f.canon, k, v, str, b, fl)
	f.addSegment(scNA, 1000, rec)
	cols := []string{"k", "v", "s", "b", "f"}
	for _, c := range []struct {
		lo, hi int64
		cols   []string
	}{
		{5200, 5300, cols},
		{5000, 5001, cols},
		{5999, 6000, []string{"s", "v"}},
		{4000, 7000, []string{"f"}},
		{10_000, 10_001, cols},
	} {
		for _, batch := range []int{0, 64} {
			res := scRunScan(t, f.tb, ScanOptions{Start: scIv(c.lo), End: scIv(c.hi), Columns: c.cols, BatchRows: batch, Parallelism: 1})
			want := scExpectRows([]arrow.RecordBatch{rec}, c.cols, func(r arrow.RecordBatch, i int) bool { return k[i] >= c.lo && k[i] < c.hi })
			scSameRows(t, res.rows, want)
			if c.hi <= 6000 && res.stats.rowsDecoded.Load() >= n/2 {
				t.Errorf("[%d, %d): decoded %d rows", c.lo, c.hi, res.stats.rowsDecoded.Load())
			}
		}
	}
}

// ---- exact filtering ----

func TestScanRangeEdgesInt64(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	keys := scI64s(math.MinInt64, -1, 0, 1, math.MaxInt64)
	f.addSegment(scNA, 0, scanRecord(t, f.canon, keys, keys))
	for _, c := range []struct {
		start, end *IndexValue
		want       []int64
	}{
		{nil, nil, keys},
		{scIv(math.MinInt64), scIv(math.MaxInt64), scI64s(math.MinInt64, -1, 0, 1)},
		{scIv(0), nil, scI64s(0, 1, math.MaxInt64)},
		{nil, scIv(0), scI64s(math.MinInt64, -1)},
		{nil, scIv(math.MinInt64 + 1), scI64s(math.MinInt64)},
		{scIv(math.MaxInt64), nil, scI64s(math.MaxInt64)},
		{scIv(-1), scIv(1), scI64s(-1, 0)},
		{scIv(2), scIv(math.MaxInt64), nil},
	} {
		res := scRunScan(t, f.tb, ScanOptions{Start: c.start, End: c.end, Columns: []string{"k"}})
		var want []string
		for _, k := range c.want {
			want = append(want, strconv.FormatInt(k, 10))
		}
		slices.Sort(want)
		if !slices.Equal(res.rows, want) {
			t.Errorf("[%v, %v): got %v, want %v", c.start, c.end, res.rows, want)
		}
	}
}

func TestScanRangeEdgesUint64(t *testing.T) {
	ix := IndexSpec{Column: "k", EntityColumns: []string{}, Kind: IndexKind{Type: IndexUInt64, Width: 7}}
	sch := &Schema{Columns: []Field{{Name: "k", Type: DataType{Kind: TypeUInt64}}, {Name: "s", Type: DataType{Kind: TypeUtf8}, Nullable: true}}}
	f := newScanFixture(t, ix, sch)
	keys := []uint64{0, 1, math.MaxUint64 - 1, math.MaxUint64}
	// Two row groups so that the unsigned statistics are exercised.
	f.addSegment(scNA, 2, scanRecord(t, f.canon, keys, []string{"a", "b", "c", "d"}))
	for _, c := range []struct {
		start, end *IndexValue
		want       []string
		groups     int64
	}{
		{nil, nil, []string{"a", "b", "c", "d"}, 2},
		{scUv(math.MaxUint64), nil, []string{"d"}, 1},
		{nil, scUv(1), []string{"a"}, 1},
		{scUv(1), scUv(math.MaxUint64), []string{"b", "c"}, 2},
		{scUv(2), scUv(math.MaxUint64 - 1), nil, 0},
		{scUv(1 << 63), nil, []string{"c", "d"}, 1},
	} {
		res := scRunScan(t, f.tb, ScanOptions{Start: c.start, End: c.end, Columns: []string{"s"}})
		if !slices.Equal(res.rows, c.want) {
			t.Errorf("[%v, %v): got %v, want %v", c.start, c.end, res.rows, c.want)
		}
		if got := res.stats.rowGroupsRead.Load(); got != c.groups {
			t.Errorf("[%v, %v): read %d row groups, want %d", c.start, c.end, got, c.groups)
		}
	}
}

func TestScanRangeEdgesTimestamps(t *testing.T) {
	base := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	t.Run("ns", func(t *testing.T) {
		f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
		b := base.UnixNano()
		ts := scI64s(math.MinInt64, b-1, b, b+1, b+999, math.MaxInt64)
		f.addSegment(scMixed, 0, scanRecord(t, f.canon, ts, scRepeat("h", len(ts)), ts))
		ns := func(v int64) *IndexValue { return scTv(time.Unix(0, v)) }
		for _, c := range []struct {
			start, end *IndexValue
			want       []int64
		}{
			{ns(b), ns(b + 1), scI64s(b)},
			{ns(b), ns(b + 999), scI64s(b, b+1)},
			{nil, ns(b), scI64s(math.MinInt64, b-1)},
			{ns(b + 1), nil, scI64s(b+1, b+999, math.MaxInt64)},
			{ns(math.MinInt64), ns(math.MaxInt64), scI64s(math.MinInt64, b-1, b, b+1, b+999)},
			// Bounds beyond the nanosecond range saturate.
			{scTv(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)), scTv(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)), ts},
			{scTv(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)), ns(b), scI64s(math.MinInt64, b-1)},
			{ns(math.MaxInt64), scTv(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)), scI64s(math.MaxInt64)},
		} {
			res := scRunScan(t, f.tb, ScanOptions{Start: c.start, End: c.end, Columns: []string{"v"}})
			var want []string
			for _, v := range c.want {
				want = append(want, strconv.FormatInt(v, 10))
			}
			slices.Sort(want)
			if !slices.Equal(res.rows, want) {
				t.Errorf("[%v, %v): got %v, want %v", c.start, c.end, res.rows, want)
			}
		}
	})
	t.Run("ms", func(t *testing.T) {
		f := newScanFixture(t, scHostIndex(), scHostSchema(Millis))
		b := base.UnixMilli()
		ts := scI64s(b-1, b, b+1, b+999, b+1000)
		f.addSegment(scMixed, 0, scanRecord(t, f.canon, ts, scRepeat("h", len(ts)), ts))
		ms := func(v int64) *IndexValue { return scTv(time.UnixMilli(v)) }
		half := func(v int64) *IndexValue { return scTv(time.UnixMilli(v).Add(500 * time.Microsecond)) }
		for _, c := range []struct {
			start, end *IndexValue
			want       []int64
		}{
			{ms(b), ms(b + 1000), scI64s(b, b+1, b+999)},
			{ms(b + 1), ms(b + 1000), scI64s(b+1, b+999)},
			{ms(b), ms(b + 1), scI64s(b)},
			// Bounds finer than the column's unit are floored, as the
			// reference does: b-0.5ms selects b-1, and an end of
			// b+1000.5ms excludes b+1000.
			{half(b - 1), ms(b), scI64s(b - 1)},
			{ms(b), half(b + 1000), scI64s(b, b+1, b+999)},
			{half(b), half(b + 1), scI64s(b)},
			// Both bounds in the same millisecond: nothing.
			{half(b), scTv(time.UnixMilli(b).Add(700 * time.Microsecond)), nil},
		} {
			res := scRunScan(t, f.tb, ScanOptions{Start: c.start, End: c.end, Columns: []string{"v"}})
			var want []string
			for _, v := range c.want {
				want = append(want, strconv.FormatInt(v, 10))
			}
			slices.Sort(want)
			if !slices.Equal(res.rows, want) {
				t.Errorf("[%v, %v): got %v, want %v", c.start, c.end, res.rows, want)
			}
		}
	})
}

func TestScanNullIndexValues(t *testing.T) {
	utc := "UTC"
	sch := &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Millis, Timezone: &utc}, Nullable: true},
		{Name: "host", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
	}}
	f := newScanFixture(t, scHostIndex(), sch)
	f.addSegment(scMixed, 0, scanRecord(t, f.canon, []*int64{scPtr[int64](1000), nil, scPtr[int64](3000)}, []*string{scPtr("a"), scPtr("a"), nil}, scI64s(1, 2, 3)))
	// No bounds: no range filter, every row.
	if got := scRunScan(t, f.tb, ScanOptions{Columns: []string{"v"}}).rows; !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("full scan: %v", got)
	}
	// Any bound drops the null index.
	if got := scRunScan(t, f.tb, ScanOptions{Columns: []string{"v"}, End: scTv(time.UnixMilli(1 << 50))}).rows; !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("bounded scan: %v", got)
	}
	// A null entity never matches.
	if got := scRunScan(t, f.tb, ScanOptions{Columns: []string{"v"}, Entities: map[string]EntityValue{"host": scStr("a")}}).rows; !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("entity scan: %v", got)
	}
}

// ---- projection and entity filters ----

func TestScanProjection(t *testing.T) {
	f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
	rec := scanRecord(t, f.canon, scSeq(100, 10), []string{"a", "b", "a", "b", "a", "b", "a", "b", "a", "b"}, scSeq(0, 10))
	f.addSegment(scMixed, 0, rec)
	recs := []arrow.RecordBatch{rec}
	for _, c := range []struct {
		cols []string
		opts ScanOptions
		keep func(arrow.RecordBatch, int) bool
	}{
		{cols: []string{"ts", "host", "v"}},
		{cols: []string{"v", "ts"}, opts: ScanOptions{Columns: []string{"v", "ts"}}},
		// Filter columns not in the output are read but dropped.
		{cols: []string{"v"}, opts: ScanOptions{Columns: []string{"v"}, Start: scTv(time.Unix(0, 103)), Entities: map[string]EntityValue{"host": scStr("b")}},
			keep: func(r arrow.RecordBatch, i int) bool { return i >= 3 && i%2 == 1 }},
		{cols: []string{"host"}, opts: ScanOptions{Columns: []string{"host"}, End: scTv(time.Unix(0, 102))},
			keep: func(r arrow.RecordBatch, i int) bool { return i < 2 }},
	} {
		res := scRunScan(t, f.tb, c.opts)
		var names []string
		for _, fl := range res.schema.Fields() {
			names = append(names, fl.Name)
		}
		if !slices.Equal(names, c.cols) {
			t.Errorf("%v: schema columns %v", c.opts.Columns, names)
		}
		for _, fl := range res.schema.Fields() {
			want := f.canon.Field(f.canon.FieldIndices(fl.Name)[0])
			if !fl.Equal(want) {
				t.Errorf("field %v, canonical %v", fl, want)
			}
		}
		scSameRows(t, res.rows, scExpectRows(recs, c.cols, c.keep))
	}
	// No columns: batches carry only row counts.
	res := scRunScan(t, f.tb, ScanOptions{Columns: []string{}, Start: scTv(time.Unix(0, 105))})
	total := 0
	for _, n := range res.batches {
		total += n
	}
	if res.schema.NumFields() != 0 || total != 5 {
		t.Errorf("zero-column scan: %d fields, %d rows", res.schema.NumFields(), total)
	}
}

func TestScanEntityFilters(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"host", "i32", "i64", "u64"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Hours, 1}}}
	sch := &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Micros}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "i32", Type: DataType{Kind: TypeInt32}},
		{Name: "i64", Type: DataType{Kind: TypeInt64}},
		{Name: "u64", Type: DataType{Kind: TypeUInt64}},
		{Name: "x", Type: DataType{Kind: TypeFloat64}, Nullable: true},
	}}
	f := newScanFixture(t, ix, sch)
	n := 3000
	ts := scSeq(1_700_000_000_000_000, int64(n))
	hosts, i32, i64, u64, x := make([]string, n), make([]int32, n), make([]int64, n), make([]uint64, n), make([]float64, n)
	for i := range n {
		hosts[i] = fmt.Sprintf("host-%d", i%7)
		i32[i] = int32(i % 3)
		i64[i] = int64(i%5) - 2
		u64[i] = math.MaxUint64 - uint64(i%2)
		x[i] = float64(i) / 4
	}
	rec := scanRecord(t, f.canon, ts, hosts, i32, i64, u64, x)
	f.addSegment(scMixed, 1000, rec)
	recs := []arrow.RecordBatch{rec}
	cols := []string{"ts", "host", "i32", "i64", "u64", "x"}
	for _, c := range []struct {
		ents map[string]EntityValue
		keep func(i int) bool
	}{
		{map[string]EntityValue{"host": scStr("host-3")}, func(i int) bool { return i%7 == 3 }},
		{map[string]EntityValue{"i32": {Type: EntityInt32, Int: 2}}, func(i int) bool { return i%3 == 2 }},
		{map[string]EntityValue{"i64": {Type: EntityInt64, Int: -2}}, func(i int) bool { return i%5 == 0 }},
		{map[string]EntityValue{"u64": {Type: EntityUInt64, Uint: math.MaxUint64}}, func(i int) bool { return i%2 == 0 }},
		{map[string]EntityValue{"host": scStr("host-1"), "i32": {Type: EntityInt32, Int: 1}, "u64": {Type: EntityUInt64, Uint: math.MaxUint64 - 1}},
			func(i int) bool { return i%7 == 1 && i%3 == 1 && i%2 == 1 }},
		{map[string]EntityValue{"host": scStr("nobody")}, func(int) bool { return false }},
	} {
		for _, batchRows := range []int{0, 100} {
			res := scRunScan(t, f.tb, ScanOptions{Entities: c.ents, BatchRows: batchRows})
			scSameRows(t, res.rows, scExpectRows(recs, cols, func(_ arrow.RecordBatch, i int) bool { return c.keep(i) }))
			for k, b := range res.batches {
				if batchRows > 0 && b > batchRows {
					t.Errorf("batch %d has %d rows, limit %d", k, b, batchRows)
				}
			}
		}
	}
}

// ---- schema alignment ----

func TestScanAddedColumnReadsNull(t *testing.T) {
	f := newScanFixture(t, scHostIndex(), scHostSchema(Millis))
	old := scanRecord(t, f.canon, scI64s(1000, 2000, 3000), []string{"a", "b", "a"}, scI64s(1, 2, 3))
	f.addSegment(scMixed, 0, old)
	f.addColumns(Field{Name: "score", Type: DataType{Kind: TypeFloat64}, Nullable: true},
		Field{Name: "tags", Type: DataType{Kind: TypeList, Elem: &Field{Name: "item", Type: DataType{Kind: TypeUtf8}, Nullable: true}}, Nullable: true})
	newer := scanJSONRecord(t, f.canon, `[
		{"ts": 4000, "host": "a", "v": 4, "score": 0.5, "tags": ["x"]},
		{"ts": 5000, "host": "b", "v": 5, "score": null, "tags": null}]`)
	f.addSegment(scMixed, 0, newer)

	res := scRunScan(t, f.tb, ScanOptions{})
	if res.schema.NumFields() != 5 {
		t.Fatalf("schema %s", res.schema)
	}
	want := []string{
		"1970-01-01T00:00:01Z|a|1|null|null",
		"1970-01-01T00:00:02Z|b|2|null|null",
		"1970-01-01T00:00:03Z|a|3|null|null",
		"1970-01-01T00:00:04Z|a|4|0.5|[\"x\"]",
		"1970-01-01T00:00:05Z|b|5|null|null",
	}
	scSameRows(t, res.rows, want)
	// Only the added column, with filters (partial selections of a
	// missing column).
	res = scRunScan(t, f.tb, ScanOptions{Columns: []string{"score"}, Start: scTv(time.UnixMilli(2000)), Entities: map[string]EntityValue{"host": scStr("a")}})
	scSameRows(t, res.rows, []string{"0.5", "null"})
	res = scRunScan(t, f.tb, ScanOptions{Columns: []string{"tags", "score"}, BatchRows: 2})
	scSameRows(t, res.rows, []string{"[\"x\"]|0.5", "null|null", "null|null", "null|null", "null|null"})
}

func TestScanTypeMismatchIsCorruption(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	wrong := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	seg := f.addSegment(scNA, 0, scanRecord(t, wrong, scI64s(1, 2), []float64{1, 2}))
	_, err := scTryScan(t, f.tb, ScanOptions{})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != seg.Path || !strings.Contains(err.Error(), `"v"`) {
		t.Fatalf("got %v, want a CorruptionError naming %s and column v", err, seg.Path)
	}
	// A segment lacking a column that is not nullable is corrupt too.
	f2 := newScanFixture(t, scIntIndex(), scKVSchema())
	only := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	f2.addSegment(scNA, 0, scanRecord(t, only, scI64s(1), scI64s(2)))
	// (This one has both columns, in another order: fine.)
	if got := scRunScan(t, f2.tb, ScanOptions{}).rows; !slices.Equal(got, []string{"2|1"}) {
		t.Fatalf("reordered columns: %v", got)
	}
	noK := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	path := "data/scan/no-k.parquet"
	f2.writeParquet(path, 0, scanRecord(t, noK, scI64s(5)))
	st := f2.tb.State()
	if _, err := f2.tb.Commit(context.Background(), st.Version, []Action{AddSegment{Segment: SegmentMeta{Path: path, Format: FormatParquet, Layout: scNA, IndexMin: Int64Value(5), IndexMax: Int64Value(5), RowCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, err = scTryScan(t, f2.tb, ScanOptions{Columns: []string{"v"}})
	if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("got %v, want a CorruptionError naming %s and column k", err, path)
	}
}

// ---- every column type, through both output paths ----

func scAllTypesSchema() *Schema {
	tz := "+05:00"
	return &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Micros}},
		{Name: "e", Type: DataType{Kind: TypeUtf8}},
		{Name: "c_bool", Type: DataType{Kind: TypeBool}, Nullable: true},
		{Name: "c_i32", Type: DataType{Kind: TypeInt32}, Nullable: true},
		{Name: "c_i64", Type: DataType{Kind: TypeInt64}, Nullable: true},
		{Name: "c_u64", Type: DataType{Kind: TypeUInt64}, Nullable: true},
		{Name: "c_f32", Type: DataType{Kind: TypeFloat32}, Nullable: true},
		{Name: "c_f64", Type: DataType{Kind: TypeFloat64}},
		{Name: "c_bin", Type: DataType{Kind: TypeBinary}, Nullable: true},
		{Name: "c_fsb", Type: DataType{Kind: TypeFixedBinary, ByteWidth: 3}, Nullable: true},
		{Name: "c_str", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		{Name: "c_d128", Type: DataType{Kind: TypeDecimal, Precision: 10, Scale: 2}, Nullable: true},
		{Name: "c_d256", Type: DataType{Kind: TypeDecimal, Precision: 40, Scale: 3}, Nullable: true},
		{Name: "c_struct", Type: DataType{Kind: TypeStruct, Fields: []Field{
			{Name: "x", Type: DataType{Kind: TypeInt32}},
			{Name: "label", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		}}, Nullable: true},
		{Name: "c_list", Type: DataType{Kind: TypeList, Elem: &Field{Name: "item", Type: DataType{Kind: TypeInt64}, Nullable: true}}, Nullable: true},
		{Name: "c_map", Type: DataType{Kind: TypeMap, Key: &Field{Name: "key", Type: DataType{Kind: TypeUtf8}}, Value: &Field{Name: "value", Type: DataType{Kind: TypeInt64}, Nullable: true}}, Nullable: true},
		{Name: "c_ts_tz", Type: DataType{Kind: TypeTimestamp, Unit: Nanos, Timezone: &tz}, Nullable: true},
	}}
}

func scAllTypesRows(from, n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := from; i < from+n; i++ {
		if i > from {
			b.WriteString(",")
		}
		nul := i%4 == 3
		val := func(s string) string {
			if nul {
				return "null"
			}
			return s
		}
		fmt.Fprintf(&b, `{"ts": %d, "e": "e%d", "c_bool": %s, "c_i32": %s, "c_i64": %s, "c_u64": %s, "c_f32": %s, "c_f64": %d.25,`,
			1_700_000_000_000_000+int64(i), i%3, val(strconv.FormatBool(i%2 == 0)), val(strconv.Itoa(-i)), val(strconv.Itoa(i*1000)),
			val(strconv.FormatUint(math.MaxUint64-uint64(i), 10)), val(fmt.Sprintf("%d.5", i)), i)
		fmt.Fprintf(&b, `"c_bin": %s, "c_fsb": %s, "c_str": %s, "c_d128": %s, "c_d256": %s,`,
			val(`"`+scBase64(fmt.Sprintf("bin-%d", i))+`"`), val(`"`+scBase64(fmt.Sprintf("%03d", i%1000))+`"`), val(fmt.Sprintf(`"s%dé"`, i)),
			val(fmt.Sprintf(`"%d.%02d"`, i, i%100)), val(fmt.Sprintf(`"12345678901234567890123456789012%d.%03d"`, i, i%1000)))
		fmt.Fprintf(&b, `"c_struct": %s, "c_list": %s, "c_map": %s, "c_ts_tz": %s}`,
			val(fmt.Sprintf(`{"x": %d, "label": %s}`, i, map[bool]string{true: "null", false: fmt.Sprintf(`"l%d"`, i)}[i%5 == 0])),
			val(fmt.Sprintf(`[%d, null, %d]`, i, -i)), val(fmt.Sprintf(`[{"key": "k%d", "value": %d}, {"key": "z", "value": null}]`, i, i)),
			val(strconv.Itoa(i*7)))
	}
	b.WriteString("]")
	return b.String()
}

func scBase64(s string) string {
	out, _ := json.Marshal([]byte(s))
	return strings.Trim(string(out), `"`)
}

func TestScanAllTypes(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"e"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Days, 1}}}
	f := newScanFixture(t, ix, scAllTypesSchema())
	var recs []arrow.RecordBatch
	for s := range 3 {
		rec := scanJSONRecord(t, f.canon, scAllTypesRows(s*400, 400))
		recs = append(recs, rec)
		f.addSegment(scMixed, 150, rec)
	}
	var cols []string
	for _, fl := range f.canon.Fields() {
		cols = append(cols, fl.Name)
	}
	lo := int64(1_700_000_000_000_000)
	for _, c := range []struct {
		name string
		opts ScanOptions
		keep func(arrow.RecordBatch, int) bool
	}{
		{"full, passed through", ScanOptions{BatchRows: 100}, nil},
		{"range", ScanOptions{Start: scTv(time.UnixMicro(lo + 137)), End: scTv(time.UnixMicro(lo + 1111)), BatchRows: 64}, func(r arrow.RecordBatch, i int) bool {
			v := int64(r.Column(0).(*array.Timestamp).Value(i))
			return v >= lo+137 && v < lo+1111
		}},
		{"entity, scattered rows", ScanOptions{Entities: map[string]EntityValue{"e": scStr("e1")}, BatchRows: 50}, func(r arrow.RecordBatch, i int) bool {
			return r.Column(1).(*array.String).Value(i) == "e1"
		}},
		{"entity, large batches", ScanOptions{Entities: map[string]EntityValue{"e": scStr("e2")}}, func(r arrow.RecordBatch, i int) bool {
			return r.Column(1).(*array.String).Value(i) == "e2"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := scRunScan(t, f.tb, c.opts)
			scSameRows(t, res.rows, scExpectRows(recs, cols, c.keep))
			if c.opts.BatchRows > 0 {
				for _, n := range res.batches {
					if n > c.opts.BatchRows {
						t.Errorf("batch of %d rows, limit %d", n, c.opts.BatchRows)
					}
				}
			}
		})
	}
}

// ---- batches ----

// Whole segments decode in equal batches of at most min(BatchRows, 16K)
// rows, all handed on without copying: no short tail per segment.
func TestScanEvenBatches(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	odd := scSeq(0, 4001)
	f.addSegment(scNA, 0, scanRecord(t, f.canon, odd, odd))
	big := scSeq(10_000, 40_000)
	f.addSegment(scNA, 0, scanRecord(t, f.canon, big, big))

	res := scRunScan(t, f.tb, ScanOptions{End: scIv(10_000), BatchRows: 1000})
	slices.Sort(res.batches)
	if !slices.Equal(res.batches, []int{797, 801, 801, 801, 801}) || res.stats.passThrough.Load() != 5 {
		t.Errorf("batches %v, %d passed through; want 4 × 801 and 797, all passed through", res.batches, res.stats.passThrough.Load())
	}
	res = scRunScan(t, f.tb, ScanOptions{Start: scIv(10_000), BatchRows: 1 << 16})
	total := 0
	for _, n := range res.batches {
		total += n
		if n < scanDecodeRows/2 || n > scanDecodeRows {
			t.Errorf("batch of %d rows, want %d to %d", n, scanDecodeRows/2, scanDecodeRows)
		}
	}
	if total != 40_000 || len(res.batches) != 3 || res.stats.passThrough.Load() != 3 {
		t.Errorf("batches %v, %d passed through; want 3 batches, 40,000 rows, all passed through", res.batches, res.stats.passThrough.Load())
	}
}

func TestScanBatchSizes(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	for s := range 20 {
		ks := scSeq(int64(s)*100, 100)
		f.addSegment(scNA, 0, scanRecord(t, f.canon, ks, ks))
	}
	big := scSeq(10_000, 5000)
	f.addSegment(scNA, 0, scanRecord(t, f.canon, big, big))

	// Small segments coalesce into full batches.
	res := scRunScan(t, f.tb, ScanOptions{End: scIv(2000), BatchRows: 1000, Parallelism: 1})
	if !slices.Equal(res.batches, []int{1000, 1000}) {
		t.Errorf("batches %v, want [1000 1000]", res.batches)
	}
	// Fully matching decoded batches of a large segment are handed on.
	res = scRunScan(t, f.tb, ScanOptions{Start: scIv(10_000), BatchRows: 1000})
	if !slices.Equal(res.batches, []int{1000, 1000, 1000, 1000, 1000}) || res.stats.passThrough.Load() != 5 {
		t.Errorf("batches %v, %d passed through; want 5 × 1000 passed through", res.batches, res.stats.passThrough.Load())
	}
	// A partial selection is split at exactly BatchRows.
	res = scRunScan(t, f.tb, ScanOptions{Start: scIv(10_001), End: scIv(14_999), BatchRows: 1000, Parallelism: 1})
	total := 0
	for _, n := range res.batches {
		total += n
		if n > 1000 {
			t.Errorf("batch of %d rows", n)
		}
	}
	if total != 4998 {
		t.Errorf("%d rows, want 4998", total)
	}
	// Several workers: every row exactly once.
	res = scRunScan(t, f.tb, ScanOptions{BatchRows: 333, Parallelism: 4})
	var want []string
	for s := range 20 {
		for k := int64(s) * 100; k < int64(s)*100+100; k++ {
			want = append(want, fmt.Sprintf("%d|%d", k, k))
		}
	}
	for _, k := range big {
		want = append(want, fmt.Sprintf("%d|%d", k, k))
	}
	slices.Sort(want)
	scSameRows(t, res.rows, want)
}

func TestScanEmpty(t *testing.T) {
	ctx := context.Background()
	tb, err := Create(ctx, storage.Local(t.TempDir()), CreateOptions{Index: scHostIndex()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No schema yet: an empty stream with no fields.
	res := scRunScan(t, tb, ScanOptions{})
	if res.schema.NumFields() != 0 || len(res.rows) != 0 {
		t.Fatalf("schema %s, rows %v", res.schema, res.rows)
	}
	if _, err := tb.Scan(ctx, nil, ScanOptions{Columns: []string{"v"}}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("unknown column without a schema: %v", err)
	}
	// A schema but no segments.
	f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
	res = scRunScan(t, f.tb, ScanOptions{Columns: []string{"v", "host"}})
	if res.schema.NumFields() != 2 || len(res.rows) != 0 {
		t.Fatalf("schema %s, rows %v", res.schema, res.rows)
	}
}

// ---- invalid options ----

func TestScanInvalidOptions(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"host", "n"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}}
	sch := &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Nanos}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "n", Type: DataType{Kind: TypeInt32}},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
	}}
	f := newScanFixture(t, ix, sch)
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		opts ScanOptions
		want []string
	}{
		{ScanOptions{Start: scIv(5)}, []string{"start", "5", "int64", "timestamp"}},
		{ScanOptions{End: scUv(5)}, []string{"end", "5", "uint64"}},
		{ScanOptions{Start: scTv(t0), End: scTv(t0)}, []string{"start", "end", "2024-01-01T00:00:00Z"}},
		{ScanOptions{Start: scTv(t0.Add(time.Second)), End: scTv(t0)}, []string{"start 2024-01-01T00:00:01Z", "end 2024-01-01T00:00:00Z"}},
		{ScanOptions{Columns: []string{"v", "nope"}}, []string{"columns", `"nope"`}},
		{ScanOptions{Columns: []string{"v", "v"}}, []string{"columns", `"v"`, "twice"}},
		{ScanOptions{Entities: map[string]EntityValue{"v": {Type: EntityInt64, Int: 1}}}, []string{"entities", `"v"`, "not an entity column"}},
		{ScanOptions{Entities: map[string]EntityValue{"nope": scStr("x")}}, []string{"entities", `"nope"`}},
		{ScanOptions{Entities: map[string]EntityValue{"host": {Type: EntityInt64, Int: 7}}}, []string{"entities", `"host"`, "Utf8", `"7"`, "int64"}},
		{ScanOptions{Entities: map[string]EntityValue{"n": {Type: EntityInt64, Int: 7}}}, []string{"entities", `"n"`, "Int32", "int64"}},
		{ScanOptions{Entities: map[string]EntityValue{"n": scStr("7")}}, []string{"entities", `"n"`, "utf8"}},
		{ScanOptions{BatchRows: -1}, []string{"batch_rows", "-1"}},
		{ScanOptions{Parallelism: -2}, []string{"parallelism", "-2"}},
	} {
		_, err := f.tb.State().PlanScan(c.opts)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: PlanScan error %v, want ErrInvalidInput", c.opts, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
		if _, err2 := f.tb.Scan(context.Background(), nil, c.opts); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("Scan error %v, PlanScan error %v", err2, err)
		}
	}
}

// ---- failures and cancellation ----

// scWaitGoroutines waits until at most n goroutines run.
func scWaitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func scBigScanFixture(t *testing.T, segments, rows int) *scanFixture {
	f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
	for s := range segments {
		ts := scSeq(int64(s*rows), int64(rows))
		f.addSegment(scSingle(scStr(fmt.Sprint("h", s))), 4096, scanRecord(t, f.canon, ts, scRepeat(fmt.Sprint("h", s), rows), ts))
	}
	return f
}

func TestScanCancel(t *testing.T) {
	f := scBigScanFixture(t, 8, 20_000)
	for _, how := range []string{"cancel", "release", "cancel-before-next", "cancel-then-drain"} {
		t.Run(how, func(t *testing.T) {
			before := runtime.NumGoroutine()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rr, err := f.tb.Scan(ctx, nil, ScanOptions{BatchRows: 1000, Parallelism: 4, Alloc: mem, Start: scTv(time.Unix(0, 1))})
			if err != nil {
				t.Fatal(err)
			}
			switch how {
			case "cancel-before-next":
				cancel()
			default:
				for range 3 {
					if !rr.Next() {
						t.Fatalf("stream ended early: %v", rr.Err())
					}
				}
			}
			switch how {
			case "release":
				rr.Release()
			case "cancel-then-drain":
				cancel()
				// Any batch already delivered stays valid; the stream
				// ends promptly.
				n := 0
				for rr.Next() {
					n++
				}
				if n > 0 {
					t.Errorf("%d batches after cancel", n)
				}
				if !errors.Is(rr.Err(), context.Canceled) {
					t.Errorf("Err() = %v, want context.Canceled", rr.Err())
				}
				rr.Release()
			default:
				cancel()
				if rr.Next() {
					t.Error("Next after cancel returned a batch")
				}
				if !errors.Is(rr.Err(), context.Canceled) {
					t.Errorf("Err() = %v, want context.Canceled", rr.Err())
				}
				rr.Release()
			}
			scWaitGoroutines(t, before)
			mem.AssertSize(t, 0)
		})
	}
	// A cancelled context refuses to start.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.tb.Scan(ctx, nil, ScanOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("scan with a cancelled context: %v", err)
	}
}

func TestScanMissingSegmentFile(t *testing.T) {
	f := scBigScanFixture(t, 4, 5000)
	segs := f.tb.State().Segments
	victim := segs[2].Path
	if err := os.Remove(filepath.Join(f.dir, filepath.FromSlash(victim))); err != nil {
		t.Fatal(err)
	}
	for _, par := range []int{1, 4} {
		before := runtime.NumGoroutine()
		_, err := scTryScan(t, f.tb, ScanOptions{Parallelism: par, BatchRows: 1000})
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Path != victim || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("parallelism %d: got %v, want a CorruptionError for %s", par, err, victim)
		}
		scWaitGoroutines(t, before)
	}
	// Pruned away, the missing file does not matter.
	res := scRunScan(t, f.tb, ScanOptions{Entities: map[string]EntityValue{"host": scStr("h1")}})
	if len(res.rows) != 5000 {
		t.Errorf("%d rows", len(res.rows))
	}
}

func TestScanCorruptSegmentFile(t *testing.T) {
	f := scBigScanFixture(t, 2, 1000)
	victim := f.tb.State().Segments[1].Path
	full := filepath.Join(f.dir, filepath.FromSlash(victim))
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"garbage":   []byte("this is not a parquet file at all"),
		"truncated": data[:len(data)/2],
		"scrambled": scScramble(data),
	} {
		if err := os.WriteFile(full, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := scTryScan(t, f.tb, ScanOptions{})
		var ce *CorruptionError
		if name == "scrambled" && err == nil {
			continue // the damage may hit bytes no decoder checks
		}
		if !errors.As(err, &ce) || ce.Path != victim {
			t.Errorf("%s: got %v, want a CorruptionError for %s", name, err, victim)
		}
	}
}

func scScramble(b []byte) []byte {
	out := slices.Clone(b)
	for i := 4; i < len(out)/2; i++ {
		out[i] ^= 0x5a
	}
	return out
}

// ---- reference fixtures ----

// TestScanReferenceTables scans every table the reference package wrote and
// checks the row counts against <name>.expected.json and, with pyarrow, the
// per-column sums, null counts and string values of the live segment files
// and the row count of a range scan.
func TestScanReferenceTables(t *testing.T) {
	havePy := exec.Command("python3", "-c", "import pyarrow.parquet").Run() == nil
	for _, set := range referenceSets(t) {
		files, err := filepath.Glob(filepath.Join(set, "*.expected.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no fixtures (%v)", set, err)
		}
		for _, file := range files {
			name := strings.TrimSuffix(filepath.Base(file), ".expected.json")
			t.Run(name, func(t *testing.T) {
				raw, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				var want expectedTable
				if err := json.Unmarshal(raw, &want); err != nil {
					t.Fatal(err)
				}
				dir := filepath.Join(set, name)
				tb, err := Open(context.Background(), storage.Local(dir), &Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				var rows uint64
				for _, s := range want.Segments {
					rows += s.RowCount
				}
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				got := scanSummary(t, tb, ScanOptions{Alloc: mem})
				if got.Rows != rows {
					t.Fatalf("scanned %d rows, expected.json says %d", got.Rows, rows)
				}
				// Every batch has the canonical types (the map's entries are
				// renamed, for one) and valid arrays.
				full := scRunScan(t, tb, ScanOptions{BatchRows: 2})
				if uint64(len(full.rows)) != rows {
					t.Fatalf("scanned %d rows in small batches, want %d", len(full.rows), rows)
				}
				st := tb.State()
				if !havePy {
					t.Log("pyarrow not available: column values not checked")
					return
				}
				var paths []string
				for _, s := range st.Segments {
					paths = append(paths, filepath.Join(dir, filepath.FromSlash(s.Path)))
				}
				// A range from the largest segment minimum on.
				startSeg := slices.MaxFunc(st.Segments, func(a, b SegmentMeta) int { return a.IndexMin.Compare(b.IndexMin) })
				idxCol, _ := st.Schema().Column(st.Index().Column)
				lo := scRawIndex(startSeg.IndexMin, idxCol.Type.Unit)
				py := scPyarrowSummary(t, paths, st.Index().Column, lo)
				scCompareSummaries(t, got, py)
				start := startSeg.IndexMin
				ranged := scanSummary(t, tb, ScanOptions{Alloc: mem, Start: &start})
				if ranged.Rows != py.RangeRows {
					t.Errorf("range scan from %s: %d rows, pyarrow counts %d", start, ranged.Rows, py.RangeRows)
				}
			})
		}
	}
}

// scRawIndex is an index value as stored in its column.
func scRawIndex(v IndexValue, unit TimeUnit) string {
	switch v.Type {
	case IndexInt64:
		return strconv.FormatInt(v.Int, 10)
	case IndexUInt64:
		return strconv.FormatUint(v.Uint, 10)
	}
	x, _ := scanFloorToUnit(v.Time, unit)
	return strconv.FormatInt(x, 10)
}

type scColumnSummary struct {
	Sum     string   `json:"sum"` // exact integer, or a float
	IsFloat bool     `json:"float"`
	Nulls   int64    `json:"nulls"`
	Strings []string `json:"strings"`
}

type scTableSummary struct {
	Rows      uint64                      `json:"rows"`
	RangeRows uint64                      `json:"range_rows"`
	Columns   map[string]*scColumnSummary `json:"columns"`
}

// scanSummary scans tb and sums every numeric and timestamp column, counts
// nulls and collects utf8 values (sorted).
func scanSummary(t *testing.T, tb *Table, opts ScanOptions) scTableSummary {
	t.Helper()
	rr, err := tb.Scan(context.Background(), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	out := scTableSummary{Columns: map[string]*scColumnSummary{}}
	sums := map[string]*big.Int{}
	fsums := map[string]float64{}
	for rr.Next() {
		rec := rr.RecordBatch()
		out.Rows += uint64(rec.NumRows())
		for c, fl := range rec.Schema().Fields() {
			col := rec.Column(c)
			cs := out.Columns[fl.Name]
			if cs == nil {
				cs = &scColumnSummary{}
				out.Columns[fl.Name] = cs
				sums[fl.Name] = new(big.Int)
			}
			cs.Nulls += int64(col.NullN())
			for i := 0; i < col.Len(); i++ {
				if col.IsNull(i) {
					continue
				}
				switch a := col.(type) {
				case *array.Int32:
					sums[fl.Name].Add(sums[fl.Name], big.NewInt(int64(a.Value(i))))
				case *array.Int64:
					sums[fl.Name].Add(sums[fl.Name], big.NewInt(a.Value(i)))
				case *array.Timestamp:
					sums[fl.Name].Add(sums[fl.Name], big.NewInt(int64(a.Value(i))))
				case *array.Uint64:
					sums[fl.Name].Add(sums[fl.Name], new(big.Int).SetUint64(a.Value(i)))
				case *array.Float32:
					cs.IsFloat = true
					fsums[fl.Name] += float64(a.Value(i))
				case *array.Float64:
					cs.IsFloat = true
					fsums[fl.Name] += a.Value(i)
				case *array.String:
					cs.Strings = append(cs.Strings, a.Value(i))
				}
			}
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	for name, cs := range out.Columns {
		if cs.IsFloat {
			cs.Sum = strconv.FormatFloat(fsums[name], 'g', -1, 64)
		} else {
			cs.Sum = sums[name].String()
		}
		slices.Sort(cs.Strings)
	}
	return out
}

const scPyScript = `
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
paths, index_col, lo = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
out = {"rows": 0, "range_rows": 0, "columns": {}}
tables = [pq.read_table(p) for p in paths]
names = []
for t in tables:
    for n in t.column_names:
        if n not in names:
            names.append(n)
for t in tables:
    out["rows"] += t.num_rows
    idx = t.column(index_col)
    if pa.types.is_timestamp(idx.type):
        idx = idx.cast(pa.int64())
    out["range_rows"] += sum(1 for v in idx.to_pylist() if v is not None and v >= lo)
for n in names:
    cs = {"sum": 0, "float": False, "nulls": 0, "strings": []}
    for t in tables:
        if n not in t.column_names:
            cs["nulls"] += t.num_rows
            continue
        col = t.column(n)
        cs["nulls"] += col.null_count
        ty = col.type
        if pa.types.is_timestamp(ty):
            col = col.cast(pa.int64())
            ty = col.type
        if pa.types.is_integer(ty) or pa.types.is_floating(ty):
            cs["float"] = pa.types.is_floating(ty)
            cs["sum"] += sum(v for v in col.to_pylist() if v is not None)
        elif pa.types.is_string(ty):
            cs["strings"] += [v for v in col.to_pylist() if v is not None]
    cs["strings"].sort(key=lambda s: s.encode("utf-8"))
    cs["sum"] = repr(float(cs["sum"])) if cs["float"] else str(cs["sum"])
    out["columns"][n] = cs
print(json.dumps(out))
`

func scPyarrowSummary(t *testing.T, paths []string, indexCol, lo string) scTableSummary {
	t.Helper()
	js, _ := json.Marshal(paths)
	out, err := exec.Command("python3", "-c", scPyScript, string(js), indexCol, lo).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("pyarrow: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("pyarrow: %v", err)
	}
	var s scTableSummary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("pyarrow output %s: %v", out, err)
	}
	return s
}

func scCompareSummaries(t *testing.T, got, want scTableSummary) {
	t.Helper()
	if got.Rows != want.Rows {
		t.Errorf("rows: scan %d, pyarrow %d", got.Rows, want.Rows)
	}
	for name, w := range want.Columns {
		g, ok := got.Columns[name]
		if !ok {
			t.Errorf("column %q: not scanned", name)
			continue
		}
		if g.Nulls != w.Nulls {
			t.Errorf("column %q: %d nulls, pyarrow %d", name, g.Nulls, w.Nulls)
		}
		if w.IsFloat {
			gf, _ := strconv.ParseFloat(g.Sum, 64)
			wf, _ := strconv.ParseFloat(w.Sum, 64)
			if math.Abs(gf-wf) > 1e-9*math.Max(1, math.Abs(wf)) {
				t.Errorf("column %q: sum %s, pyarrow %s", name, g.Sum, w.Sum)
			}
		} else if g.Sum != w.Sum && !(g.Sum == "0" && w.Sum == "0") {
			t.Errorf("column %q: sum %s, pyarrow %s", name, g.Sum, w.Sum)
		}
		if !slices.Equal(g.Strings, w.Strings) {
			t.Errorf("column %q: strings %q, pyarrow %q", name, g.Strings, w.Strings)
		}
	}
}

// ---- the default (pooled) allocator ----

func TestScanPoolAllocator(t *testing.T) {
	a := newPoolAllocator(defaultPoolBytes)
	for _, size := range []int{0, 10, 4095, 4096, 5000, 1 << 20, (1 << 20) + 1} {
		b := a.Allocate(size)
		if len(b) != size {
			t.Fatalf("Allocate(%d): len %d", size, len(b))
		}
		for i := range b {
			b[i] = 0xff
		}
		a.Free(b)
		c := a.Allocate(size)
		for i, x := range c {
			if x != 0 {
				t.Fatalf("Allocate(%d) after reuse: byte %d is %#x", size, i, x)
			}
		}
		for i := range c {
			c[i] = byte(i)
		}
		d := a.Reallocate(size*2+10, c)
		if len(d) != size*2+10 {
			t.Fatalf("Reallocate: len %d", len(d))
		}
		for i := range d {
			want := byte(0)
			if i < size {
				want = byte(i)
			}
			if d[i] != want {
				t.Fatalf("Reallocate(%d → %d): byte %d is %#x, want %#x", size, len(d), i, d[i], want)
			}
		}
		e := a.Reallocate(size/2, d)
		if len(e) != size/2 || (size/2 > 0 && e[size/2-1] != byte(size/2-1)) {
			t.Fatalf("shrinking Reallocate: len %d", len(e))
		}
		a.Free(e)
	}
}

// scRunScanPooled scans with the default allocator, keeps every batch
// until the end and only then renders them, so that memory handed out twice
// by the pool would show as corrupt rows.
func scRunScanPooled(t *testing.T, tb *Table, opts ScanOptions) []string {
	t.Helper()
	opts.Alloc = nil
	rr, err := tb.Scan(context.Background(), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var kept []arrow.RecordBatch
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		kept = append(kept, rec)
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	rr.Release()
	var rows []string
	for _, rec := range kept {
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, scRenderRow(rec, i))
		}
		rec.Release()
	}
	slices.Sort(rows)
	return rows
}

func TestScanPooledAllocatorResults(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"e"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Days, 1}}}
	f := newScanFixture(t, ix, scAllTypesSchema())
	for s := range 3 {
		f.addSegment(scMixed, 150, scanJSONRecord(t, f.canon, scAllTypesRows(s*400, 400)))
	}
	big := scBigScanFixture(t, 4, 30_000)
	lo := int64(1_700_000_000_000_000)
	for _, c := range []struct {
		tb   *Table
		opts ScanOptions
	}{
		{f.tb, ScanOptions{BatchRows: 100}},
		{f.tb, ScanOptions{Start: scTv(time.UnixMicro(lo + 137)), End: scTv(time.UnixMicro(lo + 1111)), BatchRows: 64}},
		{f.tb, ScanOptions{Entities: map[string]EntityValue{"e": scStr("e1")}, BatchRows: 50}},
		{big.tb, ScanOptions{BatchRows: 4096}},
		{big.tb, ScanOptions{Start: scTv(time.Unix(0, 12_345)), End: scTv(time.Unix(0, 98_765)), BatchRows: 1000}},
	} {
		want := scRunScan(t, c.tb, c.opts).rows
		for range 3 {
			scSameRows(t, scRunScanPooled(t, c.tb, c.opts), want)
		}
	}
}

// ---- segments written by Table.Append ----

func TestScanAppendedTable(t *testing.T) {
	ctx := context.Background()
	tb, err := Create(ctx, storage.Local(t.TempDir()), CreateOptions{Index: scHostIndex()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := ArrowSchema(scHostSchema(Nanos))
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for a := range 3 {
		n := 3000
		ts, hosts, vs := make([]int64, n), make([]string, n), make([]int64, n)
		for i := range n {
			step := int64(a*n+i) / 4
			ts[i] = step * 10 * int64(time.Second)
			hosts[i] = fmt.Sprint("h", (a*n+i)%4)
			vs[i] = int64(a*n + i)
		}
		rec := scanRecord(t, canon, ts, hosts, vs)
		recs = append(recs, rec)
		rdr, err := array.NewRecordReader(canon, []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		opts := DefaultAppendOptions()
		opts.MaxRowsPerRowGroup = 1000
		if _, err := tb.Append(ctx, rdr, opts); err != nil {
			t.Fatal(err)
		}
		rdr.Release()
	}
	if got := scRunScanCount(t, tb); got != 9000 {
		t.Fatalf("full scan: %d rows", got)
	}
	cols := []string{"ts", "host", "v"}
	lo, hi := int64(1000*10*time.Second), int64(1500*10*time.Second)
	res := scRunScan(t, tb, ScanOptions{Start: scTv(time.Unix(0, lo)), End: scTv(time.Unix(0, hi)), Entities: map[string]EntityValue{"host": scStr("h2")}, BatchRows: 128})
	scSameRows(t, res.rows, scExpectRows(recs, cols, func(r arrow.RecordBatch, i int) bool {
		ts := int64(r.Column(0).(*array.Timestamp).Value(i))
		return ts >= lo && ts < hi && r.Column(1).(*array.String).Value(i) == "h2"
	}))
	if g, rg := res.stats.rowGroups.Load(), res.stats.rowGroupsRead.Load(); rg >= g {
		t.Errorf("read %d of %d row groups; the statistics should prune some", rg, g)
	}
}

func scRunScanCount(t *testing.T, tb *Table) int {
	t.Helper()
	res := scRunScan(t, tb, ScanOptions{Columns: []string{}})
	n := 0
	for _, b := range res.batches {
		n += b
	}
	return n
}

// ---- storage failures ----

// scFlakyFS fails ReadAt on segment files after the first few calls.
type scFlakyFS struct {
	storage.FS
	okReads int
}

type scFlakyReader struct {
	storage.Reader
	left int
}

var errScFlaky = errors.New("injected read failure")

func (f *scFlakyFS) Open(name string) (storage.Reader, error) {
	r, err := f.FS.Open(name)
	if err != nil || !strings.HasPrefix(name, "data/") {
		return r, err
	}
	return &scFlakyReader{Reader: r, left: f.okReads}, nil
}

func (r *scFlakyReader) ReadAt(p []byte, off int64) (int, error) {
	if r.left <= 0 {
		return 0, errScFlaky
	}
	r.left--
	return r.Reader.ReadAt(p, off)
}

func TestScanStorageErrors(t *testing.T) {
	f := scBigScanFixture(t, 2, 3000)
	ctx := context.Background()
	open := func(fsys storage.FS) *Table {
		tb, err := Open(ctx, fsys, &Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	// Opening a segment fails.
	ffs := storage.NewFaultFS(storage.Local(f.dir))
	tb := open(ffs)
	ffs.Inject(storage.Fault{Op: storage.OpOpen, Match: func(n string) bool { return strings.HasPrefix(n, "data/") }, Err: errScFlaky})
	_, err := scTryScan(t, tb, ScanOptions{})
	if !errors.Is(err, ErrStorage) || !errors.Is(err, errScFlaky) || errors.Is(err, ErrCorrupt) {
		t.Errorf("failed open: %v, want a storage error", err)
	}
	// Reading fails in the footer, then later and later, until the
	// segments are read before the failure would come.
	failed := 0
	for ok := 0; ; ok++ {
		tb := open(&scFlakyFS{FS: storage.Local(f.dir), okReads: ok})
		_, err := scTryScan(t, tb, ScanOptions{Parallelism: 1})
		if err == nil {
			break
		}
		failed++
		if !errors.Is(err, ErrStorage) || !errors.Is(err, errScFlaky) || errors.Is(err, ErrCorrupt) {
			t.Errorf("read failing after %d reads: %v, want a storage error", ok, err)
		}
	}
	if failed < 3 {
		t.Errorf("only %d failing cases", failed)
	}
}

// The pool keeps at most its limit of free memory, makes room by evicting
// the fullest other size class, and a trim empties it when it went unused
// since the previous trim. (This pool is not armed: no collection trims it
// behind the test's back.)
func TestScanPoolBounded(t *testing.T) {
	const mib = 1 << 20
	a := newPoolAllocator(4 * mib)
	bufs := make([][]byte, 6)
	for i := range bufs {
		bufs[i] = a.Allocate(mib) // exactly a class size
	}
	for _, b := range bufs {
		a.Free(b)
	}
	pooled := a.pooled
	if pooled != 4*mib {
		t.Fatalf("pool holds %d bytes after freeing 6 MiB, want its limit %d", pooled, 4*mib)
	}
	// A buffer of another class evicts from the fullest class.
	big := a.Allocate(2*mib + 1)
	a.Free(big)
	c, capacity := poolClass(2*mib + 1)
	c1, _ := poolClass(mib)
	got, got1, pooled := len(a.free[c]), len(a.free[c1]), a.pooled
	if got != 1 || got1 != 1 || pooled != capacity+mib {
		t.Fatalf("after freeing a %d-byte buffer: %d of its class, %d of 1 MiB, %d bytes pooled; want 1, 1, %d", capacity, got, got1, pooled, capacity+mib)
	}
	// A buffer larger than the limit is never pooled.
	a.Free(make([]byte, 8*mib))
	// Buffers of foreign capacities are ignored.
	a.Free(make([]byte, mib+3))
	if a.pooled != capacity+mib {
		t.Fatalf("foreign buffers were pooled: %d bytes", a.pooled)
	}
	// An allocation served from the pool keeps it through one trim; an
	// idle pool is emptied by the next.
	a.Free(a.Allocate(mib))
	a.trim()
	if a.pooled == 0 {
		t.Fatal("a pool used since the last trim was emptied")
	}
	a.trim()
	if a.pooled != 0 || len(a.free[c]) != 0 {
		t.Fatalf("an idle pool kept %d bytes", a.pooled)
	}
}

// Garbage collections trim the pool on their own.
func TestScanPoolTrimmedByGC(t *testing.T) {
	a := newPoolAllocator(4 << 20)
	a.armTrim()
	a.Free(a.Allocate(1 << 20))
	for range 50 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		a.mu.Lock()
		pooled := a.pooled
		a.mu.Unlock()
		if pooled == 0 {
			return
		}
	}
	t.Fatal("the pool still holds memory after 50 garbage collections")
}

// Size classes: four per power of two, each buffer at most a quarter
// larger than asked for.
func TestScanPoolClasses(t *testing.T) {
	prev := -1
	for size := poolMinBytes + 1; size <= poolMaxBytes; size += size/7 + 1 {
		c, capacity := poolClass(size)
		if capacity < size || float64(capacity) > 1.25*float64(size)+1 {
			t.Fatalf("size %d: class capacity %d", size, capacity)
		}
		if c < prev || c >= poolClasses {
			t.Fatalf("size %d: class %d after %d (of %d)", size, c, prev, poolClasses)
		}
		if c2, cap2 := poolClass(capacity); c2 != c || cap2 != capacity {
			t.Fatalf("capacity %d maps to class %d (%d), not %d", capacity, c2, cap2, c)
		}
		prev = c
	}
}

// ---- the direct string decoder ----

// scDirectCompare scans f with and without the direct string decoder and
// wants the same rows, and the direct decoder to have been used.
func scDirectCompare(t *testing.T, f *scanFixture, opts ScanOptions) {
	t.Helper()
	defer func() { scanDirectStrings = true }()
	scanDirectStrings = false
	want := scRunScan(t, f.tb, opts)
	scanDirectStrings = true
	got := scRunScan(t, f.tb, opts)
	if want.stats.directString.Load() != 0 || got.stats.directString.Load() == 0 {
		t.Fatalf("direct string chunks: %d with the decoder off, %d with it on", want.stats.directString.Load(), got.stats.directString.Load())
	}
	scSameRows(t, got.rows, want.rows)
}

// Nullable and required strings and binaries, row groups of 150 rows read
// in batches of 100 (batches span column chunks, each with its own
// dictionary).
func TestScanDirectStringsAllTypes(t *testing.T) {
	ix := IndexSpec{Column: "ts", EntityColumns: []string{"e"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Days, 1}}}
	f := newScanFixture(t, ix, scAllTypesSchema())
	for s := range 3 {
		f.addSegment(scMixed, 150, scanJSONRecord(t, f.canon, scAllTypesRows(s*400, 400)))
	}
	scDirectCompare(t, f, ScanOptions{BatchRows: 100})
	scDirectCompare(t, f, ScanOptions{Columns: []string{"ts", "c_str", "c_bin"}, BatchRows: 64})
	scDirectCompare(t, f, ScanOptions{Entities: map[string]EntityValue{"e": scStr("e1")}})
}

// A column whose dictionary outgrows the writer's limit continues in
// PLAIN pages; nulls, empty strings and long values on the way.
func TestScanDirectStringsFallback(t *testing.T) {
	utc := "UTC"
	f := newScanFixture(t, scHostIndex(), &Schema{Columns: []Field{
		{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Nanos, Timezone: &utc}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "note", Type: DataType{Kind: TypeUtf8}, Nullable: true},
	}})
	for s := range 2 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, f.canon)
		for i := range 30_000 {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(s*30_000+i) * 1e9))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host_%d", i%50))
			switch {
			case i%17 == 0:
				b.Field(2).AppendNull()
			case i%23 == 0:
				b.Field(2).(*array.StringBuilder).Append("")
			case i < 5000:
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("tag-%d", i%7))
			default: // unique and long: the dictionary overflows
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%s-%d", strings.Repeat("v", 60), s*30_000+i))
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		f.addSegment(scMixed, 0, rec)
		rec.Release()
	}
	scDirectCompare(t, f, ScanOptions{})
	scDirectCompare(t, f, ScanOptions{BatchRows: 7000, Columns: []string{"ts", "note"}})
	// With the package's pool, freed page buffers are reused at once: a
	// batch that spans PLAIN pages must not keep pointing into them.
	defer func() { scanDirectStrings = true }()
	scanDirectStrings = false
	want := scRunScanPooled(t, f.tb, ScanOptions{BatchRows: 7000, Columns: []string{"ts", "note"}})
	scanDirectStrings = true
	got := scRunScanPooled(t, f.tb, ScanOptions{BatchRows: 7000, Columns: []string{"ts", "note"}})
	scSameRows(t, got, want)
}
