package flightserver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/codes"
)

func TestPutCreates(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	create := map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "1m", "entity_columns": []string{"hostname"}, "timezone": "Europe/Paris"}
	desc := cmdDesc(t, map[string]any{"table": "metrics", "create": create})

	// The first put creates the table (version 1) and appends (version 2).
	first := genRows(t0, 50, 2)
	for i := range first {
		first[i].ts = t0.Add(timeOfStep(6 * (i / 2))).UnixNano() // one row a minute per host
	}
	ts.mustPut(ctx, desc, first, 30, 2)
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "metrics"})
	ix := d["index"].(map[string]any)
	if ix["granularity"] != "1m" || ix["timezone"] != "Europe/Paris" || d["rows"] != float64(len(first)) {
		t.Fatalf("describe-table after create-on-put: %v", d)
	}

	// The same command again appends to the existing table, and so does a
	// PATH descriptor.
	second := genRows(t0.Add(timeOfStep(6*100)), 1, 2)
	ts.mustPut(ctx, desc, second, 10, 3)
	third := genRows(t0.Add(timeOfStep(6*200)), 1, 2)
	ts.mustPut(ctx, pathDesc("metrics"), third, 10, 4)
	// CMD without "create" appends to an existing table too.
	fourth := genRows(t0.Add(timeOfStep(6*300)), 1, 2)
	ts.mustPut(ctx, cmdDesc(t, map[string]any{"table": "metrics"}), fourth, 10, 5)

	got := ts.readAll(t, ctx, "metrics")
	all := append(append(append(append([]row{}, first...), second...), third...), fourth...)
	sameRows(t, "after four puts", got.rows, all)
}

func TestPutMissingTable(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	batches := buildBatches(ts.cliMem, genRows(t0, 10, 2), 100)
	defer releaseAll(batches)
	before := snapshot(t, ts.root)

	_, err := ts.put(ctx, pathDesc("nosuch"), tsbsSchema, batches...)
	wantCode(t, "PATH put to a missing table", err, codes.NotFound, `"nosuch"`)
	_, err = ts.put(ctx, cmdDesc(t, map[string]any{"table": "nosuch"}), tsbsSchema, batches...)
	wantCode(t, "CMD put without create to a missing table", err, codes.NotFound, `"nosuch"`)

	// Bad create options create nothing.
	_, err = ts.put(ctx, cmdDesc(t, map[string]any{"table": "nosuch", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "7x"}}), tsbsSchema, batches...)
	wantCode(t, "bad granularity", err, codes.InvalidArgument, "granularity", "7x")
	_, err = ts.put(ctx, cmdDesc(t, map[string]any{"table": "nosuch", "create": map[string]any{"table": "other", "index_column": "ts", "index_type": "timestamp", "granularity": "10s"}}), tsbsSchema, batches...)
	wantCode(t, "create.table differs", err, codes.InvalidArgument, `"other"`, `"nosuch"`)
	_, err = ts.put(ctx, cmdDesc(t, map[string]any{"table": "nosuch", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "colour": "red"}}), tsbsSchema, batches...)
	wantCode(t, "unknown create field", err, codes.InvalidArgument, "colour")

	// A stream whose schema does not fit the index creates nothing.
	err = ts.putColumns(ctx, cmdDesc(t, map[string]any{"table": "nosuch", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"hostname"}}}),
		[]arrow.Field{{Name: "ts", Type: arrow.PrimitiveTypes.Int64}, {Name: "hostname", Type: arrow.BinaryTypes.String}}, func(b *array.RecordBuilder) {
			b.Field(0).(*array.Int64Builder).Append(1)
			b.Field(1).(*array.StringBuilder).Append("h")
		})
	wantCode(t, "create with an index column of the wrong type", err, codes.InvalidArgument, `"ts"`)
	err = ts.putColumns(ctx, cmdDesc(t, map[string]any{"table": "nosuch", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"host"}}}),
		tsbsSchema.Fields(), func(b *array.RecordBuilder) {
			b.Field(0).(*array.TimestampBuilder).Append(0)
			b.Field(1).(*array.StringBuilder).Append("h")
			for c := 2; c <= 4; c++ {
				b.Field(c).(*array.Int64Builder).Append(1)
			}
		})
	wantCode(t, "create with a missing entity column", err, codes.InvalidArgument, `"host"`)

	sameSnapshot(t, "puts to a missing table", before, snapshot(t, ts.root))
	if _, err := os.Stat(filepath.Join(ts.root, "nosuch")); !os.IsNotExist(err) {
		t.Fatalf("a directory for the missing table was created: %v", err)
	}
}
