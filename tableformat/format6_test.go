package tableformat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// format6Names are the fixtures testdata/format6/make_fixtures.py wrote
// with timeseries-table-format 0.4.0.
var format6Names = []string{"ts_entity", "int64", "uint64"}

// format6Case is one fixture of one set.
type format6Case struct{ set, name string }

// format6Cases is every fixture of every set; the sets after the first
// (committed) one are named "fresh/NAME" in test names.
func format6Cases() []format6Case {
	var out []format6Case
	for _, set := range format6Sets() {
		for _, n := range format6Names {
			out = append(out, format6Case{set, n})
		}
	}
	return out
}

func (c format6Case) String() string {
	if c.set == format6Dir {
		return c.name
	}
	return "fresh/" + c.name
}

// format6Expected is NAME.expected.json: the rows the script appended, in
// (index, entities) order, and the version the package reported.
type format6Expected struct {
	Name    string           `json:"name"`
	Version uint64           `json:"version"`
	Rows    []map[string]any `json:"rows"`
}

// format6Dir is the committed set of format-6 fixtures.
var format6Dir = filepath.Join("..", "testdata", "format6", "tables")

// format6Sets are the sets of format-6 tables to check: the committed one
// and, when TSFLIGHT_FORMAT6_TABLES names one, a set make_fixtures.sh
// wrote fresh in this CI run.
func format6Sets() []string {
	sets := []string{format6Dir}
	if d := os.Getenv("TSFLIGHT_FORMAT6_TABLES"); d != "" {
		sets = append(sets, d)
	}
	return sets
}

// copyFormat6 copies committed fixture name into a fresh temporary
// directory and returns the table root and what the script expects.
func copyFormat6(t *testing.T, name string) (string, *format6Expected) {
	t.Helper()
	return copyFormat6From(t, format6Dir, name)
}

// copyFormat6From is copyFormat6 from the set in directory src.
func copyFormat6From(t *testing.T, src, name string) (string, *format6Expected) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	rpCopy(t, filepath.Join(src, name), dst)
	raw, err := os.ReadFile(filepath.Join(src, name+".expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want format6Expected
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&want); err != nil {
		t.Fatal(err)
	}
	return dst, &want
}

// rowsJSON scans the whole table and returns its rows as canonical JSON
// lines (timestamps as integer milliseconds since the epoch), sorted.
// wantRowsJSON checks that tb's rows, as rowsJSON renders them, are exp;
// what says when.
func wantRowsJSON(t *testing.T, what string, tb *Table, mem memory.Allocator, exp []string) {
	t.Helper()
	if got := rowsJSON(t, tb, mem); strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Fatalf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
}

func rowsJSON(t *testing.T, tb *Table, mem memory.Allocator) []string {
	t.Helper()
	var out []string
	scanEach(t, context.Background(), tb, tb.State(), ScanOptions{Alloc: mem}, func(rec arrow.RecordBatch) {
		for i := 0; i < int(rec.NumRows()); i++ {
			row := map[string]any{}
			for c, f := range rec.Schema().Fields() {
				row[f.Name] = cellValue(t, rec.Column(c), i)
			}
			out = append(out, jsonLine(t, row))
		}
	})
	sort.Strings(out)
	return out
}

// jsonLine is row encoded as one line of JSON (keys sorted).
func jsonLine(t *testing.T, row map[string]any) string {
	t.Helper()
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func cellValue(t *testing.T, col arrow.Array, i int) any {
	if col.IsNull(i) {
		return nil
	}
	switch a := col.(type) {
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return json.Number(fmt.Sprint(int64(a.Value(i)) * int64(unit.Multiplier()) / int64(arrow.Millisecond.Multiplier())))
	case *array.String:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Int64:
		return json.Number(fmt.Sprint(a.Value(i)))
	case *array.Uint64:
		return json.Number(fmt.Sprint(a.Value(i)))
	}
	t.Fatalf("column type %s not handled", col.DataType())
	return nil
}

// expectedRowsJSON renders the fixture's rows the way rowsJSON does.
func expectedRowsJSON(t *testing.T, want *format6Expected) []string {
	t.Helper()
	var out []string
	for _, r := range want.Rows {
		row := map[string]any{}
		for k, v := range r {
			if n, ok := v.(json.Number); ok && !strings.ContainsAny(n.String(), ".eE") {
				row[k] = n
				continue
			}
			if n, ok := v.(json.Number); ok {
				f, err := n.Float64()
				if err != nil || math.IsInf(f, 0) {
					t.Fatalf("%s: %v", n, err)
				}
				row[k] = f
				continue
			}
			row[k] = v
		}
		out = append(out, jsonLine(t, row))
	}
	sort.Strings(out)
	return out
}

func sameDigests(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	reportDiff(t, what, got, want, "changed or vanished", "appeared")
}

// Every format-6 fixture opens read-only: the version the package
// reported, the rows the script appended, metadata held as protocol 7
// with LegacyFormat 6.
func TestFormat6OpensReadOnly(t *testing.T) {
	for _, c := range format6Cases() {
		name := c.name
		t.Run(c.String(), func(t *testing.T) {
			dir, want := copyFormat6From(t, c.set, name)
			tb := mustOpen(t, storage.Local(dir), nil)
			st := tb.State()
			if st.Version != want.Version {
				t.Errorf("version %d, want %d", st.Version, want.Version)
			}
			if !st.Meta.NeedsUpgrade() || st.Meta.LegacyFormat != 6 || st.Meta.Protocol != ProtocolVersion {
				t.Errorf("meta: legacy %d protocol %d, want 6 and %d", st.Meta.LegacyFormat, st.Meta.Protocol, ProtocolVersion)
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			got, exp := rowsJSON(t, tb, mem), expectedRowsJSON(t, want)
			if strings.Join(got, "\n") != strings.Join(exp, "\n") {
				t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
			}
			if name == "ts_entity" {
				checkFormat6Coverage(t, tb, want)
			}
		})
	}
}

// checkFormat6Coverage: the coverage of [first hour, last hour + 1h) counts
// exactly the distinct (symbol, hour) pairs of the appended rows.
func checkFormat6Coverage(t *testing.T, tb *Table, want *format6Expected) {
	t.Helper()
	pairs := map[string]bool{}
	var lo, hi int64 = math.MaxInt64, math.MinInt64
	for _, r := range want.Rows {
		ms, err := r["ts"].(json.Number).Int64()
		if err != nil {
			t.Fatal(err)
		}
		pairs[fmt.Sprint(r["symbol"], ms/3_600_000)] = true
		lo, hi = min(lo, ms), max(hi, ms)
	}
	q := CoverageQuery{Start: TimeValue(time.UnixMilli(lo)), End: TimeValue(time.UnixMilli(hi).Add(time.Hour))}
	rep, err := tb.Coverage(context.Background(), tb.State(), q)
	if err != nil {
		t.Fatalf("coverage: %v", err)
	}
	if rep.Covered != uint64(len(pairs)) {
		t.Fatalf("coverage counts %d covered (identity, hour) pairs, the rows hold %d", rep.Covered, len(pairs))
	}
}

// Every write on a format-6 table is refused with ErrNeedsUpgrade naming
// the upgrade command, and nothing under the table root changes.
func TestFormat6WritesRefused(t *testing.T) {
	dir, _ := copyFormat6(t, "ts_entity")
	before := testkit.Snapshot(t, dir)
	tb := mustOpen(t, storage.Local(dir), nil)
	ctx := context.Background()
	v := tb.State().Version
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := func() array.RecordReader {
		b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{
			{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
			{Name: "symbol", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "close", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		}, nil))
		defer b.Release()
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(1_800_000_000_000))
		b.Field(1).(*array.StringBuilder).Append("ZZZ")
		b.Field(2).(*array.Float64Builder).Append(1)
		r := b.NewRecordBatch()
		defer r.Release()
		rdr, err := array.NewRecordReader(r.Schema(), []arrow.RecordBatch{r})
		if err != nil {
			t.Fatal(err)
		}
		return rdr
	}
	writes := map[string]func() error{
		"append": func() error {
			r := rec()
			defer r.Release()
			_, err := tb.Append(ctx, r, nil)
			return err
		},
		"add_columns": func() error {
			_, err := tb.AddColumns(ctx, []Field{{Name: "extra", Type: DataType{Kind: TypeFloat64}, Nullable: true}})
			return err
		},
		"compact": func() error { _, err := tb.Compact(ctx, DefaultCompactOptions()); return err },
		"set_properties": func() error {
			_, err := tb.SetProperties(ctx, v, map[string]string{"tsflight.keep-snapshots": "1h"})
			return err
		},
		"vacuum": func() error {
			o := DefaultVacuumOptions()
			o.Apply = true
			_, err := tb.Vacuum(ctx, o)
			return err
		},
		"commit": func() error {
			_, err := tb.Commit(ctx, v, []Action{RemoveSegment{Path: tb.State().Segments[0].Path}})
			return err
		},
	}
	for what, w := range writes {
		err := w()
		if !errors.Is(err, ErrNeedsUpgrade) || !strings.Contains(err.Error(), "tsflight upgrade TABLE") {
			t.Errorf("%s: %v, want ErrNeedsUpgrade naming `tsflight upgrade TABLE`", what, err)
		}
	}
	sameDigests(t, "after refused writes", testkit.Snapshot(t, dir), before)
}

// Check reads a format-6 table like any other (no findings); asked to
// repair a lagging CURRENT it refuses with ErrNeedsUpgrade and writes
// nothing.
func TestFormat6Check(t *testing.T) {
	dir, want := copyFormat6(t, "ts_entity")
	ctx := context.Background()
	rep, err := Check(ctx, storage.Local(dir), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Version != want.Version || rep.Rows != uint64(len(want.Rows)) {
		t.Fatalf("check of the format-6 table: %+v", rep)
	}
	if err := os.WriteFile(filepath.Join(dir, LogDir, "CURRENT"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := testkit.Snapshot(t, dir)
	rep, err = Check(ctx, storage.Local(dir), CheckOptions{Repair: true})
	if err == nil {
		for _, f := range rep.Findings {
			if f.Repaired || !strings.Contains(f.Repair, "tsflight upgrade TABLE") {
				t.Errorf("finding %+v: want it left unrepaired, naming the upgrade", f)
			}
		}
		if len(rep.Findings) == 0 {
			t.Fatal("the lagging CURRENT was not found")
		}
	} else if !errors.Is(err, ErrNeedsUpgrade) {
		t.Fatalf("check --repair: %v, want ErrNeedsUpgrade", err)
	}
	sameDigests(t, "after check --repair", testkit.Snapshot(t, dir), before)
}
