// Tests of format-6 tables and the upgrade action through a real server:
// a table written by timeseries-table-format 0.4.0 is served read-only,
// every write is refused with FAILED_PRECONDITION naming the upgrade, the
// dry run writes nothing, and after the upgrade the table is writable.

package flightserver

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/internal/testkit"
)

// copyFormat6Table copies testdata/format6/tables/ts_entity into the
// server's root as table name and returns the rows the fixture script
// appended, as "ts,symbol,close" lines, sorted.
func copyFormat6Table(t *testing.T, ts *testServer, name string) []string {
	t.Helper()
	var out []string
	for _, r := range testkit.CopyFormat6Table(t, filepath.Join("..", "testdata"), filepath.Join(ts.root, name)) {
		out = append(out, fmt.Sprintf("%d,%s,%v", r.TS, r.Symbol, r.Close))
	}
	sort.Strings(out)
	return out
}

// servedRows reads the whole table with DoGet as "ts,symbol,close" lines.
func servedRows(t *testing.T, ts *testServer, name string) []string {
	t.Helper()
	ctx := ctxT(t)
	f := ts.readAll(t, ctx, name)
	var out []string
	for i, r := range f.rows {
		out = append(out, fmt.Sprintf("%d,%v,%v", r.ts, f.extra["symbol"][i], f.extra["close"][i]))
	}
	sort.Strings(out)
	return out
}

func TestFormat6ServedAndUpgraded(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	want := copyFormat6Table(t, ts, "old")

	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "old"})
	wantFormat := map[string]any{"protocol": 7.0, "legacy_format": 6.0, "reader_features": []any{}, "writer_features": []any{}, "needs_upgrade": true}
	if fmt.Sprint(d["format"]) != fmt.Sprint(wantFormat) || d["protocol_version"] != 7.0 {
		t.Fatalf("describe of a format-6 table: format %v, protocol_version %v", d["format"], d["protocol_version"])
	}
	if got := servedRows(t, ts, "old"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("served rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Every write is refused, names the upgrade, and writes nothing.
	before := snapshot(t, ts.root)
	for _, w := range []struct {
		action string
		body   map[string]any
	}{
		{ActionAddColumns, map[string]any{"table": "old", "columns": []any{map[string]any{"name": "x", "type": "float64", "nullable": true}}}},
		{ActionSetProperties, map[string]any{"table": "old", "properties": map[string]any{"tsflight.keep-snapshots": "1h"}}},
		{ActionCompact, map[string]any{"table": "old"}},
		{ActionVacuum, map[string]any{"table": "old", "apply": true}},
	} {
		_, err := ts.action(ctx, w.action, w.body)
		wantCode(t, w.action, err, codes.FailedPrecondition, "format-6", "tsflight upgrade")
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
		{Name: "symbol", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "close", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(ts.cliMem, schema)
	b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(1_717_560_000_000))
	b.Field(1).(*array.StringBuilder).Append("NVDA")
	b.Field(2).(*array.Float64Builder).Append(2.5)
	rec := b.NewRecordBatch()
	b.Release()
	_, err := ts.put(ctx, pathDesc("old"), schema, rec)
	wantCode(t, "DoPut", err, codes.FailedPrecondition, "tsflight upgrade")
	sameSnapshot(t, "refused writes", before, snapshot(t, ts.root))

	// Bad requests.
	_, err = ts.action(ctx, ActionUpgrade, map[string]any{"table": "old", "dryrun": true})
	wantCode(t, "unknown field", err, codes.InvalidArgument, "dryrun")
	_, err = ts.action(ctx, ActionUpgrade, map[string]any{"table": "nosuch"})
	wantCode(t, "missing table", err, codes.NotFound, "nosuch")
	_, err = ts.action(ctx, ActionUpgrade, map[string]any{"table": "../x"})
	wantCode(t, "bad table name", err, codes.InvalidArgument)

	// The dry run writes nothing.
	dry := ts.mustAction(ctx, ActionUpgrade, map[string]any{"table": "old", "dry_run": true})
	if dry["dry_run"] != true || dry["converted_commits"] != 5.0 || dry["legacy_format"] != 6.0 || dry["table"] != "old" {
		t.Fatalf("dry run: %v", dry)
	}
	sameSnapshot(t, "upgrade dry run", before, snapshot(t, ts.root))

	res := ts.mustAction(ctx, ActionUpgrade, map[string]any{"table": "old"})
	if res["dry_run"] != false || res["converted_commits"] != 5.0 || res["swap"] != "exchange" || !strings.HasPrefix(fmt.Sprint(res["backup"]), "_timeseries_log.format6-") {
		t.Fatalf("upgrade: %v", res)
	}
	d = ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "old"})
	f := d["format"].(map[string]any)
	if _, ok := f["legacy_format"]; ok || f["needs_upgrade"] != false || d["version"] != res["committed_version"] {
		t.Fatalf("describe after the upgrade: %v", d)
	}
	if got := servedRows(t, ts, "old"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows after the upgrade\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := ts.put(ctx, pathDesc("old"), schema, rec); err != nil {
		t.Fatalf("DoPut after the upgrade: %v", err)
	}
	rec.Release()
	if got := servedRows(t, ts, "old"); len(got) != len(want)+1 {
		t.Fatalf("%d rows after the append, want %d", len(got), len(want)+1)
	}
}
