package tableformat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// interop runs testdata/reference/interop.py and decodes its JSON output.
func interop(t *testing.T, out any, args ...string) {
	t.Helper()
	runPyJSON(t, requireReference(t), filepath.Join("..", "testdata", "reference", "interop.py"), 3*time.Minute, out, args...)
}

// runPyJSON runs the Python script with args under py, within timeout,
// and decodes its JSON output into out, integers kept exact.
func runPyJSON(t *testing.T, py, script string, timeout time.Duration, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(script), args[0], err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep integers exact
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%s %s output %q: %v", filepath.Base(script), args[0], b, err)
	}
}

// interopShape is a table shape that both implementations write: its
// index, the reference package's spelling of it, and its Arrow schema.
type interopShape struct {
	name   string
	spec   IndexSpec
	pySpec string
	schema *arrow.Schema
}

// interopBase is the first timestamp (ms) of the interop tables.
var interopBase = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// interopShapes are the two shapes of the interop tests: "entity", ts (ms)
// indexed at 10 s with entity host and v nullable int64, and "global", k
// int64 indexed by 10 and v nullable int64.
func interopShapes() (entity, global interopShape) {
	entity = interopShape{
		name:   "entity",
		spec:   IndexSpec{Column: "ts", EntityColumns: []string{"host"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}},
		pySpec: `{"index_column":"ts","index_type":"timestamp","index_granularity":"10s","entity_columns":["host"]}`,
		schema: arrow.NewSchema([]arrow.Field{
			{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
			{Name: "host", Type: arrow.BinaryTypes.String},
			{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		}, nil),
	}
	global = interopShape{
		name:   "global",
		spec:   IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 10}},
		pySpec: `{"index_column":"k","index_type":"int64","index_granularity":10}`,
		schema: arrow.NewSchema([]arrow.Field{
			{Name: "k", Type: arrow.PrimitiveTypes.Int64},
			{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		}, nil),
	}
	return entity, global
}

// interopCase is one table shape appended by both implementations.
type interopCase struct {
	interopShape
	batches func(mem memory.Allocator) []arrow.RecordBatch
}

func interopCases() []interopCase {
	entity, global := interopShapes()
	tsSchema, intSchema, base := entity.schema, global.schema, interopBase
	return []interopCase{
		{
			interopShape: entity,
			batches: func(mem memory.Allocator) []arrow.RecordBatch {
				var out []arrow.RecordBatch
				for part := 0; part < 3; part++ {
					b := array.NewRecordBuilder(mem, tsSchema)
					for h := 0; h < 5; h++ {
						for i := 0; i < 700; i++ {
							if (i+h)%9 == 0 { // holes
								continue
							}
							step := int64(part*700 + i)
							b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + step*10_000 + int64(h)*7))
							b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("host_%d", h+part%2))
							b.Field(2).(*array.Int64Builder).Append(step*10 + int64(h))
						}
					}
					out = append(out, b.NewRecordBatch())
					b.Release()
				}
				return out
			},
		},
		{
			interopShape: global,
			batches: func(mem memory.Allocator) []arrow.RecordBatch {
				var out []arrow.RecordBatch
				for part := 0; part < 3; part++ {
					b := array.NewRecordBuilder(mem, intSchema)
					for i := 0; i < 6000; i++ {
						if i%13 == 5 {
							continue
						}
						k := int64(part*6000+i)*10 - 50_000
						b.Field(0).(*array.Int64Builder).Append(k)
						b.Field(1).(*array.Int64Builder).Append(k / 3)
					}
					out = append(out, b.NewRecordBatch())
					b.Release()
				}
				return out
			},
		},
	}
}

func writeIPC(t *testing.T, path string, rec arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := ipc.NewWriter(f, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// contentID strips the attempt UUID from a sidecar file name.
func contentID(p string) string {
	base := strings.TrimSuffix(filepath.Base(p), ".roar")
	if i := strings.Index(base, "cov-"); i >= 0 {
		return base[:i+4+32]
	}
	return base
}

// TestInteropAppend: the same batches appended by tsflight and by the
// 0.9.0 package give byte-identical coverage sidecars (with the same content
// ids) and equal segment metadata; each implementation reads what the other
// wrote with equal row counts and sums; and a column added through tsflight
// reads correctly in the package. In the default mode tsflight's table
// coverage (which its appends do not write) encodes to the package's
// snapshot bytes; with AppendOptions.TableSnapshot its snapshot files are
// the package's.
func TestInteropAppend(t *testing.T) {
	requireReference(t)
	for _, mode := range []string{"marker", "snapshot"} {
		for _, c := range interopCases() {
			t.Run(mode+"/"+c.name, func(t *testing.T) { interopAppend(t, c, mode == "snapshot") })
		}
	}
}

func interopAppend(t *testing.T, c interopCase, snapshots bool) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	root := t.TempDir()
	ours, theirs := filepath.Join(root, "tsflight"), filepath.Join(root, "reference")
	tb := mustCreateTable(t, storage.Local(ours), CreateOptions{Index: c.spec}, nil)
	var files []string
	var rows, sum int64
	for i, rec := range c.batches(mem) {
		p := filepath.Join(root, fmt.Sprintf("batch%d.arrows", i))
		writeIPC(t, p, rec)
		files = append(files, p)
		rows += rec.NumRows()
		for _, v := range rec.Column(rec.Schema().FieldIndices("v")[0]).(*array.Int64).Int64Values() {
			sum += v
		}
		rdr := readerOf(t, c.schema, rec)
		o := DefaultAppendOptions()
		o.Alloc = mem
		o.TableSnapshot = snapshots
		if _, err := tb.Append(ctx, rdr, o); err != nil {
			t.Fatalf("tsflight append %d: %v", i, err)
		}
		rdr.Release()
	}
	var rep struct {
		Appends []struct {
			Version     uint64 `json:"version"`
			SegmentPath string `json:"segment_path"`
		} `json:"appends"`
	}
	interop(t, &rep, append([]string{"append", c.pySpec, theirs}, files...)...)
	if len(rep.Appends) != len(files) {
		t.Fatalf("reference made %d appends", len(rep.Appends))
	}
	ref := mustOpen(t, storage.Local(theirs), nil)
	// Version by version: segment metadata and sidecar bytes.
	for v := uint64(2); v <= ref.State().Version; v++ {
		oc, err := tb.log.readCommit(v)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := ref.log.readCommit(v)
		if err != nil {
			t.Fatal(err)
		}
		oseg, rseg := findSegment(oc), findSegment(rc)
		if oseg.RowCount != rseg.RowCount || oseg.IndexMin.Compare(rseg.IndexMin) != 0 || oseg.IndexMax.Compare(rseg.IndexMax) != 0 ||
			string(oseg.Layout.appendJSON(nil)) != string(rseg.Layout.appendJSON(nil)) {
			t.Errorf("version %d segment differs:\n ours %+v\ntheirs %+v", v, oseg, rseg)
		}
		compareSidecars(t, fmt.Sprintf("v%d segment", v), ours, oseg.CoveragePath, theirs, rseg.CoveragePath)
		if snapshots {
			compareSidecars(t, fmt.Sprintf("v%d table", v), ours, findCoverage(oc), theirs, findCoverage(rc))
		} else {
			compareTableCoverage(t, fmt.Sprintf("v%d table", v), tb, v, theirs, findCoverage(rc))
		}
	}
	// The package reads tsflight's table.
	var q struct {
		Rows [][]any `json:"rows"`
	}
	interop(t, &q, "query", ours, "SELECT count(*) AS n, sum(v) AS s FROM t")
	if fmt.Sprint(q.Rows) != fmt.Sprintf("[[%d %d]]", rows, sum) {
		t.Errorf("reference read of tsflight's table: %v, want [[%d %d]]", q.Rows, rows, sum)
	}
	// tsflight reads the package's table.
	n, s := scanCountSum(t, ref, mem, "v")
	if n != rows || s != sum {
		t.Errorf("tsflight scan of the reference table: %d rows sum %d, want %d, %d", n, s, rows, sum)
	}
	// A column added by tsflight, then an append without it and one
	// with it; the package reads nulls for the old rows.
	if _, err := tb.AddColumns(ctx, []Field{{Name: "score", Type: DataType{Kind: TypeFloat64}, Nullable: true}}); err != nil {
		t.Fatal(err)
	}
	extra := c.batches(mem)
	for _, r := range extra[1:] {
		r.Release()
	}
	shifted := shiftBatch(t, mem, extra[0], c)
	extra[0].Release()
	rdr := readerOf(t, c.schema, shifted)
	o := DefaultAppendOptions()
	o.Alloc = mem
	if _, err := tb.Append(ctx, rdr, o); err != nil {
		t.Fatalf("append omitting the added column: %v", err)
	}
	rdr.Release()
	interop(t, &q, "query", ours, "SELECT count(*) AS n, count(score) AS scored FROM t")
	if fmt.Sprint(q.Rows) != fmt.Sprintf("[[%d 0]]", rows+shifted.NumRows()) {
		t.Errorf("reference read after add-columns: %v", q.Rows)
	}
}

func findSegment(c *Commit) SegmentMeta {
	for _, a := range c.Actions {
		if s, ok := a.(AddSegment); ok {
			return s.Segment
		}
	}
	return SegmentMeta{}
}

func findCoverage(c *Commit) string {
	for _, a := range c.Actions {
		if u, ok := a.(UpdateTableCoverage); ok {
			return u.Coverage.Path
		}
	}
	return ""
}

// compareTableCoverage compares the table coverage tsflight holds for
// version v, encoded as a snapshot, with the reference's snapshot of that
// version: the same bytes and content id. (tsflight's appends point the
// table at the segment-union marker instead of writing snapshots; check
// --repair and checkpoints encode the union exactly so.)
func compareTableCoverage(t *testing.T, what string, tb *Table, v uint64, theirsRoot, theirsPath string) {
	t.Helper()
	ctx := context.Background()
	st := mustStateAt(t, tb, v)
	if !st.coverageIsUnion() {
		t.Errorf("%s: tsflight's pointer is %v, want the segment-union marker", what, st.Coverage)
	}
	cov, err := tb.loadCoverage(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	id, a := cov.encodeTable(uuid.New())
	b, err := os.ReadFile(filepath.Join(theirsRoot, theirsPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%s coverage bytes differ (%d vs %d bytes)", what, len(a), len(b))
	}
	if theirs := contentID(theirsPath); !strings.HasPrefix(id, strings.TrimPrefix(theirs, fmt.Sprintf("%d-", v))) {
		t.Errorf("%s content id %s, reference %s", what, id, theirs)
	}
}

func compareSidecars(t *testing.T, what, oursRoot, oursPath, theirsRoot, theirsPath string) {
	t.Helper()
	a, err := os.ReadFile(filepath.Join(oursRoot, oursPath))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(theirsRoot, theirsPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%s sidecar bytes differ (%d vs %d bytes)", what, len(a), len(b))
	}
	if contentID(oursPath) != contentID(theirsPath) {
		t.Errorf("%s content id %s, reference %s", what, contentID(oursPath), contentID(theirsPath))
	}
}

// shiftBatch returns rec with its index moved far past the test data, so
// that it can be appended again without overlap.
func shiftBatch(t *testing.T, mem memory.Allocator, rec arrow.RecordBatch, c interopCase) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, rec.Schema())
	defer b.Release()
	for col := 0; col < int(rec.NumCols()); col++ {
		src := rec.Column(col)
		switch src := src.(type) {
		case *array.Timestamp:
			for i := 0; i < src.Len(); i++ {
				b.Field(col).(*array.TimestampBuilder).Append(src.Value(i) + arrow.Timestamp(400*24*3600*1000))
			}
		case *array.Int64:
			shift := int64(0)
			if rec.Schema().Field(col).Name == c.spec.Column {
				shift = 1 << 40
			}
			for i := 0; i < src.Len(); i++ {
				b.Field(col).(*array.Int64Builder).Append(src.Value(i) + shift)
			}
		case *array.String:
			for i := 0; i < src.Len(); i++ {
				b.Field(col).(*array.StringBuilder).Append(src.Value(i))
			}
		}
	}
	return b.NewRecordBatch()
}

// scanCountSum scans the whole table and returns the row count and the sum
// of an int64 column.
func scanCountSum(t *testing.T, tb *Table, mem memory.Allocator, column string) (int64, int64) {
	t.Helper()
	var n, s int64
	scanEach(t, context.Background(), tb, tb.State(), ScanOptions{Columns: []string{column}, Alloc: mem}, func(rec arrow.RecordBatch) {
		n += rec.NumRows()
		col := rec.Column(0).(*array.Int64)
		for i := 0; i < col.Len(); i++ {
			if col.IsValid(i) {
				s += col.Value(i)
			}
		}
	})
	return n, s
}
