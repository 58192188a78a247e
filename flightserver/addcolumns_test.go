package flightserver

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/codes"
)

func TestAddColumns(t *testing.T) {
	ts, ctx := startWithCPU(t)
	old := genRows(t0, 10, 2)
	ts.mustPut(ctx, pathDesc("cpu"), old, 8, 2)

	before := snapshot(t, ts.root)
	for _, c := range []struct {
		what  string
		body  any
		code  codes.Code
		frags []string
	}{
		{"unknown type", map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": "temp", "type": "float128", "nullable": true}}}, codes.InvalidArgument, []string{`"float128"`, `"temp"`}},
		{"not nullable", map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": "temp", "type": "float64", "nullable": false}}}, codes.InvalidArgument, []string{`"temp"`, "nullable"}},
		{"existing column", map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": "usage_user", "type": "int64", "nullable": true}}}, codes.InvalidArgument, []string{`"usage_user"`}},
		{"listed twice", map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": "a", "type": "int64"}, map[string]any{"name": "a", "type": "int64"}}}, codes.InvalidArgument, []string{`"a"`}},
		{"no columns", map[string]any{"table": "cpu", "columns": []any{}}, codes.InvalidArgument, []string{"columns"}},
		{"bad decimal", map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": "d", "type": "decimal128(3, 5)"}}}, codes.InvalidArgument, []string{"decimal128(3, 5)"}},
		{"unknown field", map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": "a", "type": "int64", "default": 0}}}, codes.InvalidArgument, []string{"default"}},
		{"missing table", map[string]any{"table": "nosuch", "columns": []any{map[string]any{"name": "a", "type": "int64"}}}, codes.NotFound, []string{"nosuch"}},
	} {
		_, err := ts.action(ctx, ActionAddColumns, c.body)
		wantCode(t, c.what, err, c.code, c.frags...)
	}
	sameSnapshot(t, "refused add-columns", before, snapshot(t, ts.root))

	res := ts.mustAction(ctx, ActionAddColumns, map[string]any{"table": "cpu", "columns": []any{
		map[string]any{"name": "temp", "type": "float64", "nullable": true},
		map[string]any{"name": "note", "type": "utf8"},
		map[string]any{"name": "seen", "type": "timestamp[us, UTC]", "nullable": true},
	}})
	if !reflect.DeepEqual(res, map[string]any{"table": "cpu", "version": 3.0}) {
		t.Fatalf("add-columns result %v", res)
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if !reflect.DeepEqual(d["reader_features"], []any{"schema_add_columns"}) {
		t.Fatalf("reader features %v, want [schema_add_columns]", d["reader_features"])
	}
	schema := d["schema"].([]any)
	if len(schema) != 8 || !reflect.DeepEqual(schema[7], map[string]any{"name": "seen", "type": "timestamp[us, tz=UTC]", "nullable": true}) {
		t.Fatalf("schema after add-columns: %v", schema)
	}

	// A put in the old schema (the new columns omitted) still works.
	mid := genRows(t0.Add(timeOfStep(100)), 5, 2)
	ts.mustPut(ctx, pathDesc("cpu"), mid, 8, 4)

	// A put with a value for temp.
	withTemp := arrow.NewSchema(append(tsbsSchema.Fields(), arrow.Field{Name: "temp", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	b := array.NewRecordBuilder(ts.cliMem, withTemp)
	newRows := genRows(t0.Add(timeOfStep(200)), 1, 2)
	for _, r := range newRows {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
		b.Field(1).(*array.StringBuilder).Append(r.host)
		b.Field(2).(*array.Int64Builder).Append(r.user)
		b.Field(3).(*array.Int64Builder).Append(r.system)
		b.Field(4).(*array.Int64Builder).Append(r.idle)
		b.Field(5).(*array.Float64Builder).Append(21.5)
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := ts.put(ctx, pathDesc("cpu"), withTemp, rec); err != nil {
		t.Fatal(err)
	}

	// Rows written before the column existed read null.
	got, err := ts.fetchAll(ctx, ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "columns": []string{"temp", "ts", "note"}})))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.rows) != len(old)+len(mid)+len(newRows) {
		t.Fatalf("%d rows, want %d", len(got.rows), len(old)+len(mid)+len(newRows))
	}
	var nulls, vals int
	for _, v := range got.extra["temp"] {
		switch v {
		case nil:
			nulls++
		case 21.5:
			vals++
		default:
			t.Fatalf("temp value %v", v)
		}
	}
	if nulls != len(old)+len(mid) || vals != len(newRows) {
		t.Fatalf("temp: %d nulls and %d values, want %d and %d", nulls, vals, len(old)+len(mid), len(newRows))
	}
	if got.nulls["note"] != len(got.rows) {
		t.Fatalf("note: %d nulls of %d rows", got.nulls["note"], len(got.rows))
	}
}

// TestAddColumnsDuringPuts adds a column while puts commit: the action
// rebases instead of failing with a conflict, and every put lands.
func TestAddColumnsDuringPuts(t *testing.T) {
	ts, ctx := startWithCPU(t)
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 100, 2)
	const puts = 12
	var wg sync.WaitGroup
	errs := make([]error, puts)
	for i := range puts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batches := buildBatches(ts.cliMem, genRows(t0.Add(timeOfStep(100*(i+1))), 20, 2), 10)
			defer releaseAll(batches)
			_, errs[i] = ts.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
		}()
	}
	var addErrs []error
	for i := range 4 {
		_, err := ts.action(ctx, ActionAddColumns, map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": fmt.Sprintf("c%d", i), "type": "int64"}}})
		addErrs = append(addErrs, err)
	}
	wg.Wait()
	for i, err := range append(errs, addErrs...) {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	// Puts may share commits (group commit): between one and puts commits
	// of them, and the four add-columns.
	if v := d["version"].(float64); v < 2+1+4 || v > float64(2+puts+4) || len(d["schema"].([]any)) != 9 || d["rows"] != float64(20+puts*40) {
		t.Fatalf("after puts and add-columns: %v", d)
	}
}
