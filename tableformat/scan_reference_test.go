package tableformat

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// Scans of the reference package's tables, compared with pyarrow.

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
				want := readExpected(t, file)
				dir := filepath.Join(set, name)
				tb := mustOpen(t, storage.Local(dir), &Options{ReadOnly: true})
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
	out := scTableSummary{Columns: map[string]*scColumnSummary{}}
	sums := map[string]*big.Int{}
	fsums := map[string]float64{}
	scanEach(t, context.Background(), tb, nil, opts, func(rec arrow.RecordBatch) {
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
	})
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
