package tableformat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// The fixture of the scan tests: tables in a temporary directory whose
// segments a test writes itself, and the helpers that build batches, run
// scans and compare rows.

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
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: ix}, nil)
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
		fb := b.Field(i)
		ok := scAppendTo[int64](fb, c) || scAppendTo[int32](fb, c) || scAppendTo[uint64](fb, c) ||
			scAppendTo[float64](fb, c) || scAppendTo[string](fb, c) || scAppendTo[bool](fb, c) ||
			scAppendTo[arrow.Timestamp](fb, scTimestamps(c))
		if !ok {
			t.Fatalf("scanRecord: column %d: values %T do not suit builder %T", i, c, fb)
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

// scAppendTo appends c to b if b is a builder of T values (see
// scAppendColumn).
func scAppendTo[T any](b array.Builder, c any) bool {
	tb, ok := b.(interface {
		Append(T)
		AppendNull()
	})
	return ok && scAppendColumn(tb, c)
}

// scAppendColumn appends c, a []T or a []*T (nil for null), to b and
// reports whether c was one of the two.
func scAppendColumn[T any](b interface {
	Append(T)
	AppendNull()
}, c any) bool {
	switch vs := c.(type) {
	case []T:
		for _, v := range vs {
			b.Append(v)
		}
	case []*T:
		for _, v := range vs {
			if v == nil {
				b.AppendNull()
			} else {
				b.Append(*v)
			}
		}
	default:
		return false
	}
	return true
}

// scTimestamps turns a timestamp column's []int64 or []*int64 into
// arrow.Timestamp values; anything else is returned as it is.
func scTimestamps(c any) any {
	switch vs := c.(type) {
	case []int64:
		out := make([]arrow.Timestamp, len(vs))
		for i, v := range vs {
			out[i] = arrow.Timestamp(v)
		}
		return out
	case []*int64:
		out := make([]*arrow.Timestamp, len(vs))
		for i, v := range vs {
			if v != nil {
				out[i] = scPtr(arrow.Timestamp(*v))
			}
		}
		return out
	}
	return c
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

// scPlanned plans a scan of st with opts and returns the planned
// segments' file names without ".parquet", in plan order.
func scPlanned(t testing.TB, st *State, opts ScanOptions) []string {
	t.Helper()
	plan, err := st.Plan(opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range scSegPaths(plan.Segments()) {
		got = append(got, strings.TrimSuffix(filepath.Base(p), ".parquet"))
	}
	return got
}

// scCheckRange scans column col of tb over [start, end) and checks that it
// returns exactly the int64 values want.
func scCheckRange(t testing.TB, tb *Table, start, end *IndexValue, col string, want []int64) {
	t.Helper()
	res := scRunScan(t, tb, ScanOptions{Start: start, End: end, Columns: []string{col}})
	var rows []string
	for _, v := range want {
		rows = append(rows, strconv.FormatInt(v, 10))
	}
	slices.Sort(rows)
	if !slices.Equal(res.rows, rows) {
		t.Errorf("[%v, %v): got %v, want %v", start, end, res.rows, rows)
	}
}
