package s3store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat"
)

var day = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// readings is a reader of one row per minute in [0, minutes) for each
// host: (time, host, temp = minute).
func readings(t *testing.T, minutes int, hosts ...string) array.RecordReader {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
		{Name: "temp", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, h := range hosts {
		for m := range minutes {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(day.Add(time.Duration(m) * time.Minute).UnixMicro()))
			b.Field(1).(*array.StringBuilder).Append(h)
			b.Field(2).(*array.Float64Builder).Append(float64(m))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

func appendRows(t *testing.T, tb *tableformat.Table, minutes int, hosts ...string) *tableformat.AppendResult {
	t.Helper()
	rdr := readings(t, minutes, hosts...)
	defer rdr.Release()
	res, err := tb.Append(context.Background(), rdr, nil)
	if err != nil {
		t.Fatalf("append %v: %v", hosts, err)
	}
	return res
}

// scanCount scans the whole table and returns its rows per host.
func scanCount(t *testing.T, tb *tableformat.Table) map[string]int {
	t.Helper()
	ctx := context.Background()
	out, err := tb.Scan(ctx, tb.State(), tableformat.ScanOptions{Columns: []string{"host"}})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	rows := map[string]int{}
	for out.Next() {
		col := out.RecordBatch().Column(0).(*array.String)
		for i := range col.Len() {
			rows[col.Value(i)]++
		}
	}
	if err := out.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestTableOnS3 runs a table through the S3 FS: create, append, scan, a
// second handle whose append conflicts and is rebased, two writers
// appending at once, coverage, a commit whose answer is lost, and a
// fresh handle that sees it all.
func TestTableOnS3(t *testing.T) {
	g := startGateway(t)
	ctx := context.Background()
	ft := newFaultTransport()
	fsys := g.newFS(t, ft, fastRetries)
	tb, err := tableformat.Create(ctx, fsys, tableformat.CreateOptions{Index: tableformat.IndexSpec{
		Column:        "time",
		EntityColumns: []string{"host"},
		Kind:          tableformat.IndexKind{Type: tableformat.IndexTimestamp, Time: tableformat.TimeGranularity{Unit: tableformat.Minutes, N: 1}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := appendRows(t, tb, 5, "a"); res.Version != 2 {
		t.Fatalf("first append made version %d", res.Version)
	}
	if got := scanCount(t, tb); got["a"] != 5 || len(got) != 1 {
		t.Fatalf("scan after one append = %v", got)
	}

	// A second handle, as another process would hold. Right before its
	// conditional create of commit 3 reaches the store, the first handle
	// commits 3: the second loses the race and rebases onto 4.
	ft2 := newFaultTransport(&rule{method: "PUT", suffix: tableformat.CommitPath(3), n: 1, run: func() {
		appendRows(t, tb, 3, "b")
	}})
	tb2, err := tableformat.Open(ctx, g.newFSOnSame(t, fsys, ft2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := appendRows(t, tb2, 3, "c"); res.Version != 4 || res.Retries < 1 {
		t.Fatalf("append of the stale handle = version %d after %d retries, want version 4 after a retry", res.Version, res.Retries)
	}

	// Two writers at once, on disjoint hosts: every append succeeds.
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for w, h := range []*tableformat.Table{tb, tb2} {
		rdrs := make([]array.RecordReader, 5) // built here: readings may t.Fatal
		for i := range rdrs {
			rdrs[i] = readings(t, 2, fmt.Sprintf("w%d-%d", w, i))
		}
		wg.Go(func() {
			for _, rdr := range rdrs {
				_, err := h.Append(ctx, rdr, nil)
				rdr.Release()
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}

	// A commit whose answer is lost after the store took it is resolved
	// by reading it back: the append succeeds, and exactly once.
	next := tableformat.CommitPath(15)
	ft.mu.Lock()
	ft.rules = append(ft.rules, &rule{method: "PUT", suffix: next, f: lostAfter, n: 1})
	ft.mu.Unlock()
	before := ft.byMethod()
	if res := appendRows(t, tb, 1, "late"); res.Version != 15 {
		t.Fatalf("append with the commit's answer lost = version %d, want 15", res.Version)
	}
	after := ft.byMethod()
	for m, n := range after {
		after[m] = n - before[m]
	}
	t.Logf("requests of one append (with one lost answer and its read-back): %v", after)
	if n := ft.count("PUT", next); n != 1 {
		t.Fatalf("commit 15 was put %d times, want once", n)
	}

	// A fresh handle sees every row exactly once.
	tb3, err := tableformat.Open(ctx, g.newFSOnSame(t, fsys, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := tb3.State().Version; v != 15 {
		t.Fatalf("fresh handle at version %d, want 15", v)
	}
	rows := scanCount(t, tb3)
	want := map[string]int{"a": 5, "b": 3, "c": 3, "late": 1}
	for w := range 2 {
		for i := range 5 {
			want[fmt.Sprintf("w%d-%d", w, i)] = 2
		}
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("rows per host = %v, want %v", rows, want)
	}

	rep, err := tb3.Coverage(ctx, tb3.State(), tableformat.CoverageQuery{
		Start: tableformat.TimeValue(day), End: tableformat.TimeValue(day.Add(5 * time.Minute)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Covered != 32 {
		t.Fatalf("coverage: %d (host, minute) pairs covered, want 32", rep.Covered)
	}

	// The log holds the 15 commits and CURRENT; no temporary object is
	// left behind.
	names, err := fsys.List(tableformat.LogDir)
	if err != nil {
		t.Fatal(err)
	}
	var commits int
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, "."):
			commits++
		case n == "CURRENT":
		default:
			t.Errorf("unexpected object in the log: %s", n)
		}
	}
	if commits != 15 {
		t.Fatalf("%d commit objects, want 15: %q", commits, names)
	}
	if cur, err := fsys.ReadFile(tableformat.LogDir + "/CURRENT"); err != nil || strings.TrimSpace(string(cur)) != "15" {
		t.Fatalf("CURRENT = %q, %v", cur, err)
	}
}
