package tableformat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/tableformat/storage"
)

var t0 = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// inSchema is the Arrow schema of most append tests: ts (ns, UTC), host,
// v (nullable int64).
func inSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
}

// row is one input row for inBatch; a negative sec makes ts null and an
// empty host makes host null.
type row struct {
	sec  int64
	host string
	v    int64
}

func inBatch(mem memory.Allocator, rows ...row) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, inSchema())
	defer b.Release()
	for _, r := range rows {
		if r.sec < 0 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(r.sec) * time.Second).UnixNano()))
		}
		if r.host == "" {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(r.host)
		}
		b.Field(2).(*array.Int64Builder).Append(r.v)
	}
	return b.NewRecordBatch()
}

// readerOf wraps batches in a RecordReader (and releases the batches).
func readerOf(t *testing.T, schema *arrow.Schema, recs ...arrow.RecordBatch) array.RecordReader {
	t.Helper()
	rdr, err := array.NewRecordReader(schema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	return rdr
}

type appendEnv struct {
	t   *testing.T
	ctx context.Context
	mem *memory.CheckedAllocator
	dir string
	tb  *Table
	// snapshots makes appends write full table coverage snapshots
	// (AppendOptions.TableSnapshot) instead of the segment-union marker.
	snapshots bool
}

func newAppendEnv(t *testing.T, spec IndexSpec) *appendEnv {
	e := &appendEnv{t: t, ctx: context.Background(), mem: memory.NewCheckedAllocator(memory.DefaultAllocator), dir: t.TempDir()}
	tb := mustCreateTable(t, storage.Local(e.dir), CreateOptions{Index: spec}, nil)
	e.tb = tb
	t.Cleanup(func() { e.mem.AssertSize(t, 0) })
	return e
}

func (e *appendEnv) opts() *AppendOptions {
	o := DefaultAppendOptions()
	o.Alloc = e.mem
	o.TableSnapshot = e.snapshots
	return o
}

func (e *appendEnv) append(rows ...row) (*AppendResult, error) {
	rdr := readerOf(e.t, inSchema(), inBatch(e.mem, rows...))
	defer rdr.Release()
	return e.tb.Append(e.ctx, rdr, e.opts())
}

// mustAppend appends rows and fails t if the append fails.
func (e *appendEnv) mustAppend(t *testing.T, rows ...row) *AppendResult {
	t.Helper()
	res, err := e.append(rows...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// files lists every file under the table except the log.
func (e *appendEnv) dataFiles() []string {
	var out []string
	for name := range dirSnapshot(e.t, e.dir) {
		if !strings.Contains(name, LogDir) {
			out = append(out, name)
		}
	}
	return out
}

func TestAppendAdoptsSchemaInTheSameCommit(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	res, err := e.append(row{0, "h1", 1}, row{10, "h1", 2}, row{0, "h2", 3}, row{25, "h2", 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 2 || res.Segment.RowCount != 4 || res.Segment.Layout.Kind != LayoutMixed {
		t.Fatalf("result %+v", res)
	}
	if got, want := res.Segment.IndexMin.String(), "2024-06-01T00:00:00Z"; got != want {
		t.Fatalf("index_min %s, want %s", got, want)
	}
	if got, want := res.Segment.IndexMax.String(), "2024-06-01T00:00:25Z"; got != want {
		t.Fatalf("index_max %s, want %s", got, want)
	}
	c, err := e.tb.log.readCommit(2)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range c.Actions {
		names = append(names, a.ActionName())
	}
	if strings.Join(names, ",") != "UpdateTableMeta,AddSegment,UpdateTableCoverage" {
		t.Fatalf("commit 2 actions: %v", names)
	}
	st := e.tb.State()
	if st.Schema() == nil || len(st.Schema().Columns) != 3 || st.Coverage == nil || st.Coverage.Path != unionCoveragePath || st.CoverageVersion != 2 {
		t.Fatalf("state after first append: %+v", st)
	}
	// The next append commits its segment alone: the pointer already names
	// the segment-union marker.
	e.mustAppend(t, row{100, "h1", 1})
	if c, err := e.tb.log.readCommit(3); err != nil || len(c.Actions) != 1 || c.Actions[0].ActionName() != "AddSegment" {
		t.Fatalf("commit 3: %+v %v, want a lone AddSegment", c, err)
	}
	if !strings.HasPrefix(res.Segment.Path, "data/_managed/append/") || !strings.HasPrefix(res.Segment.CoveragePath, "_coverage/segments/segcov-") {
		t.Fatalf("paths %s %s", res.Segment.Path, res.Segment.CoveragePath)
	}
	// A single-identity append is Single.
	res, err = e.append(row{100, "h3", 1}, row{110, "h3", 2})
	if err != nil || res.Segment.Layout.Kind != LayoutSingle || res.Segment.Layout.Identity.String() != "h3" {
		t.Fatalf("second append: %+v %v", res, err)
	}
}

func TestAppendDuplicateIntervalWithinOneAppend(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	_, err := e.append(row{0, "h1", 1}, row{3, "h1", 2}, row{5, "h2", 3}, row{12, "h1", 4}, row{19, "h1", 5})
	var oe *OverlapError
	if !errors.As(err, &oe) || !oe.Within || oe.Count != 2 || !errors.Is(err, ErrOverlap) {
		t.Fatalf("got %v, want a within-append overlap of 2 intervals", err)
	}
	if !strings.Contains(err.Error(), "h1") || !strings.Contains(err.Error(), "[2024-06-01T00:00:00Z, 2024-06-01T00:00:10Z)") {
		t.Fatalf("message lacks the example identity and interval: %v", err)
	}
	if files := e.dataFiles(); len(files) != 0 {
		t.Fatalf("a refused append left %v", files)
	}
	if v := e.tb.State().Version; v != 1 {
		t.Fatalf("version %d after a refused append", v)
	}
}

func TestAppendOverlapAcrossAppends(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h1", 1}, row{10, "h1", 2}, row{0, "h2", 1})
	before := e.dataFiles()
	_, err := e.append(row{20, "h1", 1}, row{15, "h1", 2}, row{5, "h2", 3})
	var oe *OverlapError
	if !errors.As(err, &oe) || oe.Within || oe.Count != 2 || oe.Version != 2 {
		t.Fatalf("got %v, want an overlap of 2 pairs with version 2", err)
	}
	if !strings.Contains(err.Error(), "2024-06-01T00:00:") {
		t.Fatalf("no RFC 3339 interval in %v", err)
	}
	if after := e.dataFiles(); len(after) != len(before) {
		t.Fatalf("refused append left files: %d before, %d after", len(before), len(after))
	}
	// Different entities in one interval are fine.
	if _, err := e.append(row{0, "h3", 1}, row{0, "h4", 1}); err != nil {
		t.Fatalf("different entities in one interval: %v", err)
	}
}

func TestAppendRefusesNullKeys(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	if _, err := e.append(row{0, "h1", 1}, row{10, "", 2}); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), `entity column "host" is null`) {
		t.Fatalf("null entity: %v", err)
	}
	if _, err := e.append(row{0, "h1", 1}, row{-1, "h1", 2}); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), `index column "ts" is null`) {
		t.Fatalf("null index: %v", err)
	}
	if files := e.dataFiles(); len(files) != 0 {
		t.Fatalf("refused appends left %v", files)
	}
}

func TestAppendEmptyStream(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	rdr := readerOf(t, inSchema(), inBatch(e.mem), inBatch(e.mem))
	defer rdr.Release()
	if _, err := e.tb.Append(e.ctx, rdr, e.opts()); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("empty stream: %v", err)
	}
	// Zero-row batches between real ones are skipped.
	rdr2 := readerOf(t, inSchema(), inBatch(e.mem), inBatch(e.mem, row{0, "h", 1}), inBatch(e.mem))
	defer rdr2.Release()
	res, err := e.tb.Append(e.ctx, rdr2, e.opts())
	if err != nil || res.Segment.RowCount != 1 {
		t.Fatalf("zero-row batches: %+v %v", res, err)
	}
}

// TestAppendSchemaMatching covers the rules once a schema exists: by name,
// any order, strict nullability, no missing or extra columns.
func TestAppendSchemaMatching(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h1", 1})
	ts := arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}}
	host := arrow.Field{Name: "host", Type: arrow.BinaryTypes.String}
	v := arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	cases := []struct {
		name   string
		fields []arrow.Field
		msg    string
	}{
		{"missing key", []arrow.Field{ts, v}, `key column "host" is missing`},
		{"missing nullable before add-columns", []arrow.Field{ts, host}, `column "v" is missing`},
		{"extra column", []arrow.Field{ts, host, v, {Name: "w", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, `input column "w" is not in the table schema`},
		{"duplicate column", []arrow.Field{ts, host, v, v}, `column "v" appears twice`},
		{"nullability", []arrow.Field{ts, {Name: "host", Type: arrow.BinaryTypes.String, Nullable: true}, v}, `column "host" is nullable in the input but non-nullable in the table`},
		{"timestamp unit", []arrow.Field{{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}}, host, v}, `column "ts" has type timestamp[us, tz=UTC]`},
		{"narrowing", []arrow.Field{ts, host, {Name: "v", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, ""},
		{"sign change", []arrow.Field{ts, host, {Name: "v", Type: arrow.PrimitiveTypes.Uint32, Nullable: true}}, `column "v" has type uint32`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := arrow.NewSchema(c.fields, nil)
			b := array.NewRecordBuilder(e.mem, s)
			for i, f := range c.fields {
				switch f.Type.ID() {
				case arrow.TIMESTAMP:
					b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Hour).UnixNano()))
				case arrow.STRING:
					b.Field(i).(*array.StringBuilder).Append("h9")
				default:
					b.Field(i).AppendEmptyValue()
				}
			}
			rec := b.NewRecordBatch()
			b.Release()
			rdr := readerOf(t, s, rec)
			defer rdr.Release()
			_, err := e.tb.Append(e.ctx, rdr, e.opts())
			if c.msg == "" {
				if err != nil {
					t.Fatalf("int32 into int64 is a widening and must be accepted: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want ErrInvalidInput mentioning %q", err, c.msg)
			}
		})
	}
}

// TestAppendWidenings appends each allow-listed narrower type into its
// wider column and checks the stored value.
func TestAppendWidenings(t *testing.T) {
	cases := []struct {
		from, to arrow.DataType
		value    any
	}{
		{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int32, int8(-7)},
		{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int64, int8(-8)},
		{arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, int16(-300)},
		{arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int64, int16(-301)},
		{arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, int32(-70000)},
		{arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint64, uint8(200)},
		{arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint64, uint16(60000)},
		{arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64, uint32(4000000000)},
		{arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, float32(1.5)},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s to %s", c.from, c.to), func(t *testing.T) {
			e := newAppendEnv(t, IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 1}})
			wide := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: c.to, Nullable: true}}, nil)
			narrow := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: c.from, Nullable: true}}, nil)
			first := array.NewRecordBuilder(e.mem, wide)
			first.Field(0).(*array.Int64Builder).Append(1)
			first.Field(1).AppendNull()
			rdr := readerOf(t, wide, first.NewRecordBatch())
			first.Release()
			if _, err := e.tb.Append(e.ctx, rdr, e.opts()); err != nil {
				t.Fatal(err)
			}
			rdr.Release()
			b := array.NewRecordBuilder(e.mem, narrow)
			b.Field(0).(*array.Int64Builder).Append(2)
			// The narrow value, as its builder parses it from its text.
			if err := b.Field(1).AppendValueFromString(fmt.Sprint(c.value)); err != nil {
				t.Fatal(err)
			}
			b.Field(0).(*array.Int64Builder).Append(3)
			b.Field(1).AppendNull()
			rdr2 := readerOf(t, narrow, b.NewRecordBatch())
			b.Release()
			defer rdr2.Release()
			res, err := e.tb.Append(e.ctx, rdr2, e.opts())
			if err != nil {
				t.Fatal(err)
			}
			got := readColumn(t, e, res.Segment.Path, "x")
			want := fmt.Sprint(c.value)
			if len(got) != 2 || got[0] != want || got[1] != "(null)" {
				t.Fatalf("stored %v, want [%s (null)]", got, want)
			}
		})
	}
}

// TestAppendRefusesUnsupportedTypes: adopting a schema refuses each Arrow
// type without an exact logical form, naming the column and type.
func TestAppendRefusesUnsupportedTypes(t *testing.T) {
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16,
		arrow.PrimitiveTypes.Uint32, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.StringView, arrow.BinaryTypes.LargeBinary,
		arrow.BinaryTypes.BinaryView, arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date64, arrow.FixedWidthTypes.Timestamp_s,
		&arrow.Decimal256Type{Precision: 10, Scale: 2}, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
		arrow.LargeListOf(arrow.PrimitiveTypes.Int64), arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64), arrow.FixedWidthTypes.Float16,
		arrow.Null, arrow.FixedWidthTypes.Time32ms, arrow.FixedWidthTypes.Duration_s,
	}
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			e := newAppendEnv(t, IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 1}})
			s := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "bad", Type: typ, Nullable: true}}, nil)
			b := array.NewRecordBuilder(e.mem, s)
			b.Field(0).(*array.Int64Builder).Append(1)
			b.Field(1).AppendNull()
			rdr := readerOf(t, s, b.NewRecordBatch())
			b.Release()
			defer rdr.Release()
			_, err := e.tb.Append(e.ctx, rdr, e.opts())
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), `column "bad"`) {
				t.Fatalf("got %v, want ErrInvalidInput naming column \"bad\"", err)
			}
			if files := e.dataFiles(); len(files) != 0 {
				t.Fatalf("left %v", files)
			}
		})
	}
}

// TestAppendRefusesBeforeReadingInput: a table needing an unsupported
// writer feature refuses an append without consuming the stream.
func TestAppendRefusesBeforeReadingInput(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, "1", commitJSON(1, metaJSON(7, "[]", `["sorted_segments"]`, "", "")))
	tb := mustOpen(t, storage.Local(dir), nil)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rdr := &countingReader{RecordReader: readerOf(t, inSchema(), inBatch(mem, row{0, "h", 1}))}
	defer rdr.Release()
	before := dirSnapshot(t, dir)
	if _, err := tb.Append(context.Background(), rdr, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
	if rdr.nexts != 0 {
		t.Fatalf("the input was read (%d calls to Next) before the writer check", rdr.nexts)
	}
	if d := sameSnapshot(before, dirSnapshot(t, dir)); d != "" {
		t.Fatalf("files changed: %s", d)
	}
}

type countingReader struct {
	array.RecordReader
	nexts int
}

func (c *countingReader) Next() bool { c.nexts++; return c.RecordReader.Next() }

// TestConcurrentAppendRebases: two handles append disjoint data at the same
// version; the loser rebases on the winner's commit instead of failing.
// Overlapping data fails on the real overlap.
func TestConcurrentAppendRebases(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h1", 1})
	other := mustOpen(t, storage.Local(e.dir), nil)
	// other commits after e has refreshed but before e commits: simulate by
	// appending through other while e's handle still holds version 2.
	hook := func() {
		testHookBeforeCommit = nil // fire once: the other append must not recurse
		rdr := readerOf(t, inSchema(), inBatch(e.mem, row{100, "h2", 1}))
		defer rdr.Release()
		o := DefaultAppendOptions()
		o.Alloc = e.mem
		if _, err := other.Append(e.ctx, rdr, o); err != nil {
			t.Errorf("other append: %v", err)
		}
	}
	testHookBeforeCommit = hook
	res, err := e.append(row{200, "h3", 1})
	testHookBeforeCommit = nil
	if err != nil || res.Version != 4 || res.Retries != 1 {
		t.Fatalf("rebased append: %+v %v, want version 4 after one retry", res, err)
	}
	st := e.tb.State()
	if len(st.Segments) != 3 || st.Coverage.Path != unionCoveragePath {
		t.Fatalf("state: %d segments, coverage %s", len(st.Segments), st.Coverage.Path)
	}
	// Real overlap with what the other writer committed: fails.
	testHookBeforeCommit = func() {
		testHookBeforeCommit = nil
		rdr := readerOf(t, inSchema(), inBatch(e.mem, row{300, "h4", 1}))
		defer rdr.Release()
		o := DefaultAppendOptions()
		o.Alloc = e.mem
		if _, err := other.Append(e.ctx, rdr, o); err != nil {
			t.Errorf("other append: %v", err)
		}
	}
	_, err = e.append(row{305, "h4", 9})
	testHookBeforeCommit = nil
	if !errors.Is(err, ErrOverlap) {
		t.Fatalf("overlapping concurrent append: %v, want ErrOverlap", err)
	}
	if v := e.tb.State().Version; v != 5 {
		t.Fatalf("version %d, want 5", v)
	}
}

// readColumn reads one column of a segment file straight from Parquet and
// renders its values as strings ("(null)" for nulls).
func readColumn(t *testing.T, e *appendEnv, segPath, column string) []string {
	t.Helper()
	f, err := e.tb.fs.Open(segPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tbl, err := pqarrow.ReadTable(e.ctx, f, nil, pqarrow.ArrowReadProperties{}, e.mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	idx := tbl.Schema().FieldIndices(column)
	if len(idx) != 1 {
		t.Fatalf("column %s not in segment %s", column, segPath)
	}
	var out []string
	for _, chunk := range tbl.Column(idx[0]).Data().Chunks() {
		for i := 0; i < chunk.Len(); i++ {
			out = append(out, chunk.ValueStr(i))
		}
	}
	return out
}

// TestAppendRefusesOutOfRangeTimestamp: a timestamp the interval mapping
// cannot represent is refused (a table holding it would not reopen).
func TestAppendRefusesOutOfRangeTimestamp(t *testing.T) {
	e := newAppendEnv(t, IndexSpec{Column: "ts", Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}})
	s := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}}}, nil)
	b := array.NewRecordBuilder(e.mem, s)
	b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{0, 9e15}, nil)
	rdr := readerOf(t, s, b.NewRecordBatch())
	b.Release()
	defer rdr.Release()
	_, err := e.tb.Append(e.ctx, rdr, e.opts())
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "9000000000000000 at row 1") {
		t.Fatalf("got %v, want ErrInvalidInput naming the value and row", err)
	}
	if files := e.dataFiles(); len(files) != 0 {
		t.Fatalf("left %v", files)
	}
}

// TestAppendMetadataMustMatch: input annotations must equal the table's or
// be absent, as the reference requires.
func TestAppendMetadataMustMatch(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h", 1})
	md := arrow.NewMetadata([]string{"unit"}, []string{"percent"})
	fields := inSchema().Fields()
	fields[2].Metadata = md
	for name, s := range map[string]*arrow.Schema{
		"field":  arrow.NewSchema(fields, nil),
		"schema": arrow.NewSchema(inSchema().Fields(), &md),
	} {
		b := array.NewRecordBuilder(e.mem, s)
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Hour).UnixNano()))
		b.Field(1).(*array.StringBuilder).Append("h")
		b.Field(2).(*array.Int64Builder).Append(1)
		rdr := readerOf(t, s, b.NewRecordBatch())
		b.Release()
		_, err := e.tb.Append(e.ctx, rdr, e.opts())
		rdr.Release()
		if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "metadata") {
			t.Fatalf("%s metadata: %v", name, err)
		}
	}
}

// An entity value that is not UTF-8 cannot be given coverage: the append
// is refused naming the entity column and the row, and writes nothing
// (it used to store the row without coverage).
func TestAppendRefusesEntityNotUTF8(t *testing.T) {
	for _, entities := range [][]string{{"host"}, {"host", "v"}} {
		t.Run(strings.Join(entities, ","), func(t *testing.T) {
			spec := tsIndex()
			spec.EntityColumns = entities
			e := newAppendEnv(t, spec)
			_, err := e.append(row{0, "h1", 1}, row{10, "bad\xff", 2}, row{20, "h2", 3})
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "entity "+strings.Join(entities, ", ")+", row 1 of the batch") || !strings.Contains(err.Error(), "UTF-8") {
				t.Fatalf("append with a host that is not UTF-8: %v; want invalid input naming the entity and row 1", err)
			}
			if v := e.tb.State().Version; v != 1 {
				t.Fatalf("version %d after the refused append, want 1", v)
			}
			if files := e.dataFiles(); len(files) != 0 {
				t.Fatalf("the refused append left %v", files)
			}
			if _, err := e.append(row{0, "h1", 1}, row{10, "h2", 2}); err != nil {
				t.Fatalf("a good append after the refused one: %v", err)
			}
		})
	}
}
