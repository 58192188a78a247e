//go:build duckdb_arrow

package flightsql

import (
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
)

func TestQueryAggregatesOverSegments(t *testing.T) {
	s, ctx := startCPU(t, 4)

	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "28800" {
		t.Fatalf("count = %s, want 28800", got)
	}
	// usage = seconds since t0 (+1 for host b): sum over 4 h of a =
	// 0+1+...+14399.
	wantA := 14399 * 14400 / 2
	if got := s.scalar(ctx, "SELECT CAST(sum(usage) AS BIGINT) FROM cpu WHERE host = 'a'"); got != strconv.Itoa(wantA) {
		t.Fatalf("sum(a) = %s, want %d", got, wantA)
	}
	rows := s.mustQuery(ctx, "SELECT host, count(*), max(usage) FROM cpu GROUP BY host ORDER BY host").rowsOf()
	want := []string{"a|14400|14399", "b|14400|14400"}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("group by = %v, want %v", rows, want)
	}
	// Timestamps come back as UTC instants.
	r := s.mustQuery(ctx, "SELECT ts FROM cpu ORDER BY ts LIMIT 1")
	tt, ok := r.schema.Field(0).Type.(*arrow.TimestampType)
	if !ok || tt.TimeZone != "UTC" {
		t.Fatalf("ts type = %s, want a timestamp in UTC", r.schema.Field(0).Type)
	}
	got := r.recs[0].Column(0).ValueStr(0)
	if want := "2024-01-01T00:00:00Z"; got != want {
		t.Fatalf("first ts = %s, want %s", got, want)
	}
}

func TestQueryBatchesAreMerged(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	r := s.mustQuery(ctx, "SELECT i FROM range(0, 200000) t(i)")
	if r.rows != 200000 {
		t.Fatalf("rows = %d", r.rows)
	}
	// DuckDB produces 2048-row chunks; the server sends 64Ki-row batches.
	for i, rec := range r.recs[:len(r.recs)-1] {
		if rec.NumRows() < 1<<16 {
			t.Fatalf("batch %d has %d rows, want at least 65536", i, rec.NumRows())
		}
	}
	if len(r.recs) != 4 {
		t.Fatalf("%d batches, want 4", len(r.recs))
	}
}

func TestPruningPlansOnlyMatchingSegments(t *testing.T) {
	s, ctx := startCPU(t, 4)
	h := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

	cases := []struct {
		name    string
		where   string
		planned int
		rows    int
	}{
		{"half-open hour", fmt.Sprintf("ts >= %s AND ts < %s", fmtTime(h(1)), fmtTime(h(2))), 1, 7200},
		{"plain string literals", fmt.Sprintf("ts >= '%s' AND ts < '%s'", h(2).Format(time.RFC3339), h(3).Format(time.RFC3339)), 1, 7200},
		{"between two hours", fmt.Sprintf("ts BETWEEN %s AND %s", fmtTime(h(1)), fmtTime(h(2))), 2, 7202},
		{"flipped comparison", fmt.Sprintf("%s <= ts", fmtTime(h(3))), 1, 7200},
		{"equality", fmt.Sprintf("ts = %s", fmtTime(h(2).Add(10*time.Second))), 1, 2},
		{"in list", fmt.Sprintf("ts IN (%s, %s)", fmtTime(h(0)), fmtTime(h(1))), 2, 4},
		{"qualified column", fmt.Sprintf("c.ts < %s", fmtTime(h(1))), 1, 7200},
		{"entity and time", fmt.Sprintf("host = 'a' AND ts >= %s AND ts < %s", fmtTime(h(0)), fmtTime(h(1))), 1, 3600},
		{"empty range", fmt.Sprintf("ts >= %s AND ts < %s", fmtTime(h(2)), fmtTime(h(2))), 0, 0},
		{"after the data", fmt.Sprintf("ts >= %s", fmtTime(h(9))), 0, 0},
		// Predicates the planner does not understand read everything and
		// still answer right.
		{"expression on the column", fmt.Sprintf("ts + INTERVAL 1 HOUR < %s", fmtTime(h(1))), 4, 0},
		{"or", fmt.Sprintf("ts < %s OR ts >= %s", fmtTime(h(1)), fmtTime(h(3))), 4, 14400},
		{"cast to text", "CAST(ts AS VARCHAR) LIKE '2024-01-01 02:%'", 4, 7200},
		{"no predicate", "true", 4, 28800},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := "SELECT count(*) FROM cpu AS c WHERE " + c.where
			if got := s.scalar(ctx, q); got != strconv.Itoa(c.rows) {
				t.Fatalf("%s: count = %s, want %d", q, got, c.rows)
			}
			planned, total := s.lastPlan("cpu")
			if total != 4 || planned != c.planned {
				t.Fatalf("%s: planned %d of %d segments, want %d of 4", q, planned, total, c.planned)
			}
		})
	}
}

func TestPruningAcrossReferences(t *testing.T) {
	s, ctx := startCPU(t, 4)
	h := func(i int) string { return fmtTime(t0.Add(time.Duration(i) * time.Hour)) }
	cases := []struct {
		q       string
		want    string
		planned int
	}{
		// Two references with different ranges: the view reads the union.
		{fmt.Sprintf("SELECT (SELECT count(*) FROM cpu WHERE ts < %s) + (SELECT count(*) FROM cpu WHERE ts >= %s)", h(1), h(3)), "14400", 2},
		// One reference without a usable predicate reads everything.
		{fmt.Sprintf("SELECT (SELECT count(*) FROM cpu WHERE ts < %s) + (SELECT count(*) FROM cpu)", h(1)), "36000", 4},
		// A join: each side's WHERE conjuncts prune it.
		{fmt.Sprintf("SELECT count(*) FROM cpu x JOIN cpu y ON x.ts = y.ts AND x.host = y.host WHERE x.ts < %s AND y.ts < %s", h(1), h(1)), "7200", 1},
		// A CTE named like the table: never pruned by the CTE's WHERE.
		{fmt.Sprintf("WITH cpu AS (SELECT * FROM main.cpu WHERE ts < %s) SELECT count(*) FROM cpu WHERE ts >= %s", h(1), h(3)), "0", 4},
		// Qualified names are rewritten to the view.
		{fmt.Sprintf("SELECT count(*) FROM tsflight.main.cpu WHERE ts < %s", h(1)), "7200", 1},
		{fmt.Sprintf(`SELECT count(*) FROM "tsflight" . "main" . "cpu" t WHERE t.ts >= %s`, h(3)), "7200", 1},
		{"SELECT count(*) FROM main.cpu", "28800", 4},
	}
	for _, c := range cases {
		if got := s.scalar(ctx, c.q); got != c.want {
			t.Fatalf("%s: got %s, want %s", c.q, got, c.want)
		}
		if planned, _ := s.lastPlan("cpu"); planned != c.planned {
			t.Fatalf("%s: planned %d segments, want %d", c.q, planned, c.planned)
		}
	}
}

func TestQueryErrors(t *testing.T) {
	s, ctx := startCPU(t, 1)
	cases := []struct {
		q     string
		code  codes.Code
		frags []string
	}{
		{"INSERT INTO cpu VALUES (now(), 'x', 1)", codes.InvalidArgument, []string{"read-only", "INSERT", "ingest"}},
		{"DELETE FROM cpu", codes.InvalidArgument, []string{"read-only", "DELETE"}},
		{"CREATE TABLE t (x INT)", codes.InvalidArgument, []string{"read-only", "CREATE"}},
		{"DROP TABLE cpu", codes.InvalidArgument, []string{"read-only"}},
		{"SELECT 1; SELECT 2", codes.InvalidArgument, []string{"2 statements"}},
		{"SELEKT 1", codes.InvalidArgument, []string{"syntax"}},
		{"SELECT * FROM nosuchtable", codes.NotFound, []string{"nosuchtable"}},
		{"SELECT nosuchcolumn FROM cpu", codes.InvalidArgument, []string{"nosuchcolumn"}},
		// Functions that read files or change the shared engine are not
		// available (sqlguard.go), wherever they hide; DuckDB's own
		// catalog is not either.
		{"SELECT * FROM read_csv('/etc/passwd')", codes.InvalidArgument, []string{"table function read_csv is not available", "ts_gaps"}},
		{"SELECT * FROM read_parquet('" + s.root + "/../x.parquet')", codes.InvalidArgument, []string{"read_parquet"}},
		{"SELECT * FROM enable_logging('QueryLog')", codes.InvalidArgument, []string{"enable_logging"}},
		{"SELECT * FROM query('SELECT 1')", codes.InvalidArgument, []string{"table function query "}},
		{"WITH x AS (SELECT * FROM glob('*')) SELECT * FROM x", codes.InvalidArgument, []string{"glob"}},
		{"SELECT (SELECT count(*) FROM duckdb_settings())", codes.InvalidArgument, []string{"duckdb_settings"}},
		{"SELECT count(*) FROM cpu WHERE hostname IN (SELECT name FROM checkpoint())", codes.InvalidArgument, []string{"checkpoint"}},
		{"SELECT current_setting('allowed_directories')", codes.InvalidArgument, []string{"function current_setting is not available"}},
		{"SELECT write_log('x')", codes.InvalidArgument, []string{"write_log"}},
		{"SELECT * FROM pg_settings", codes.NotFound, []string{`table "pg_settings" does not exist`, "tables: cpu"}},
		{"SELECT * FROM information_schema.tables", codes.NotFound, []string{`table "information_schema.tables" does not exist`}},
		{"SELECT * FROM system.main.duckdb_logs", codes.NotFound, []string{`"system.main.duckdb_logs"`}},
		{"SET threads = 1", codes.InvalidArgument, []string{"read-only"}},
	}
	for _, c := range cases {
		_, err := s.query(ctx, c.q)
		wantCode(t, c.q, err, c.code, c.frags...)
	}
	// The server still answers, and the pure table functions, CTEs and
	// sampling still work.
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "7200" {
		t.Fatalf("count = %s", got)
	}
	s.wantScalars(ctx, map[string]string{
		"SELECT count(*) FROM range(10)":                                  "10",
		"SELECT count(*) FROM generate_series(1, 5)":                      "5",
		"SELECT sum(x) FROM unnest([1, 2, 3]) AS t(x)":                    "6",
		"WITH c AS (SELECT * FROM cpu) SELECT count(*) FROM c":            "7200",
		"SELECT count(*) FROM (SELECT * FROM cpu USING SAMPLE 10 ROWS) t": "10",
	})
}

func TestLatestRowPerEntityReadsOnlyNewestSegments(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	// Hour 0: hosts a, b, c; hour 1: a, b; hour 2: a; hour 3: b.
	// Newest rows: a in segment 2, b in 3, c in 0; segment 1 holds none.
	var recs []arrow.RecordBatch
	for i, hosts := range [][]string{{"a", "b", "c"}, {"a", "b"}, {"a"}, {"b"}} {
		recs = append(recs, cpuBatch(s.cliMem, t0.Add(time.Duration(i)*time.Hour), 600, hosts...))
	}
	s.ingestCPU(t, ctx, recs...)
	want := []string{
		"a|2024-01-01T02:09:59Z|7799",
		"b|2024-01-01T03:09:59Z|11399", // b is the batch's first host: no offset
		"c|2024-01-01T00:09:59Z|601",
	}
	// planned -1: the plan reads the table's last-value index, no segment.
	cases := []struct {
		q       string
		planned int
	}{
		{"SELECT DISTINCT ON (host) host, ts, usage FROM cpu ORDER BY host, ts DESC", -1},
		{"SELECT DISTINCT ON (c.host) c.host, c.ts, c.usage FROM cpu c ORDER BY c.ts DESC, c.host", -1},
		{"SELECT DISTINCT ON (host) host, ts, usage FROM cpu ORDER BY host, ts DESC LIMIT 10", -1},
		// Shapes that are not "newest row per entity" read everything.
		{"SELECT DISTINCT ON (host) host, ts, usage FROM cpu WHERE usage >= 0 ORDER BY host, ts DESC", 4},
		{"SELECT DISTINCT ON (host) host, ts, usage FROM cpu ORDER BY host, ts DESC NULLS FIRST", 4},
	}
	for _, c := range cases {
		rows := s.mustQuery(ctx, c.q).rowsOf()
		sort.Strings(rows)
		if fmt.Sprint(rows) != fmt.Sprint(want) {
			t.Fatalf("%s:\n got %v\nwant %v", c.q, rows, want)
		}
		planned, total := s.lastPlan("cpu")
		if c.planned < 0 {
			if !s.usedLastValues("cpu") || planned != 0 || total != 4 {
				t.Fatalf("%s: planned %d of %d segments (last values %v), want the last-value index", c.q, planned, total, s.usedLastValues("cpu"))
			}
			continue
		}
		if planned != c.planned || total != 4 || s.usedLastValues("cpu") {
			t.Fatalf("%s: planned %d of %d segments, want %d of 4", c.q, planned, total, c.planned)
		}
	}
	// Oldest row per host (ts ascending) needs every segment.
	rows := s.mustQuery(ctx, "SELECT DISTINCT ON (host) host, ts FROM cpu ORDER BY host, ts").rowsOf()
	if len(rows) != 3 || rows[0] != "a|2024-01-01T00:00:00Z" {
		t.Fatalf("oldest rows %v", rows)
	}
	if planned, _ := s.lastPlan("cpu"); planned != 4 {
		t.Fatalf("oldest per host planned %d segments, want 4", planned)
	}
	// Per value of a non-entity column: everything.
	s.mustQuery(ctx, "SELECT DISTINCT ON (usage) usage, ts FROM cpu ORDER BY usage, ts DESC")
	if planned, _ := s.lastPlan("cpu"); planned != 4 {
		t.Fatalf("distinct on a value column planned %d segments, want 4", planned)
	}
}

// The newest row per entity comes from the table's last-value index and
// stays equal to the answer of reading every segment (a WHERE that keeps
// every row turns the index off) through appends, a late row, compaction
// and a rollback.
func TestLatestRowPerEntityFollowsTheTable(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	const viaIndex = "SELECT DISTINCT ON (host) * FROM cpu ORDER BY host, ts DESC"
	const viaSegments = "SELECT DISTINCT ON (host) * FROM cpu WHERE usage > -1e12 ORDER BY host, ts DESC"
	// Each statement is answered from the index (directly, or by DuckDB
	// over the index file) and through the segments (a WHERE that keeps
	// every row): the same rows, in the same order, with the same schema.
	shapes := []struct {
		viaIndex, viaSegments string
		direct                bool
	}{
		{viaIndex, viaSegments, true},
		{"SELECT DISTINCT ON (host) usage, host FROM cpu ORDER BY host, ts DESC LIMIT 2",
			"SELECT DISTINCT ON (host) usage, host FROM cpu WHERE usage > -1e12 ORDER BY host, ts DESC LIMIT 2", true},
		{"SELECT DISTINCT ON (HOST) Ts, Host FROM cpu ORDER BY HOST, TS DESC",
			"SELECT DISTINCT ON (HOST) Ts, Host FROM cpu WHERE usage > -1e12 ORDER BY HOST, TS DESC", true},
		// Not the direct shape: DuckDB runs them over the index file.
		{"SELECT DISTINCT ON (host) * FROM cpu ORDER BY host DESC, ts DESC",
			"SELECT DISTINCT ON (host) * FROM cpu WHERE usage > -1e12 ORDER BY host DESC, ts DESC", false},
		{"SELECT DISTINCT ON (host) * FROM cpu ORDER BY host, ts DESC LIMIT 2 OFFSET 1",
			"SELECT DISTINCT ON (host) * FROM cpu WHERE usage > -1e12 ORDER BY host, ts DESC LIMIT 2 OFFSET 1", false},
		{"SELECT DISTINCT ON (host) * EXCLUDE (usage) FROM cpu ORDER BY host, ts DESC",
			"SELECT DISTINCT ON (host) * EXCLUDE (usage) FROM cpu WHERE usage > -1e12 ORDER BY host, ts DESC", false},
	}
	same := func(when string) {
		t.Helper()
		for _, sh := range shapes {
			g := s.mustQuery(ctx, sh.viaIndex)
			if !s.usedLastValues("cpu") || s.lastPlanFlag("cpu", "direct") != sh.direct {
				t.Fatalf("%s: %s: last values %v, direct %v; want the index, direct %v", when, sh.viaIndex, s.usedLastValues("cpu"), s.lastPlanFlag("cpu", "direct"), sh.direct)
			}
			w := s.mustQuery(ctx, sh.viaSegments)
			got, want := g.rowsOf(), w.rowsOf()
			if fmt.Sprint(got) != fmt.Sprint(want) || len(got) == 0 || !g.schema.Equal(w.schema) {
				t.Fatalf("%s: %s:\n got %v %s\nwant %v %s", when, sh.viaIndex, got, g.schema, want, w.schema)
			}
		}
	}
	put := func(start time.Time, n int, hosts ...string) {
		t.Helper()
		rec := cpuBatch(s.cliMem, start, n, hosts...)
		defer rec.Release()
		mode := "append"
		if _, err := s.svc.Table(ctx, "cpu"); err != nil {
			mode = "create"
		}
		if _, err := s.ingest(ctx, "cpu", mode, cpuOpts, rec); err != nil {
			t.Fatal(err)
		}
	}
	put(t0, 60, "a", "b", "c")
	same("first append")
	put(t0.Add(time.Hour), 60, "a", "b")
	same("second append")
	put(t0.Add(-time.Hour), 60, "c", "d") // late rows: c keeps its newer row, d is new
	same("late rows")
	tb, err := s.svc.Table(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Compact(ctx, nil); err != nil {
		t.Fatal(err)
	}
	same("compaction")
	if _, err := tb.Rollback(ctx, 2, nil); err != nil {
		t.Fatal(err)
	}
	same("rollback to version 2")
	if rows := s.mustQuery(ctx, viaIndex).rowsOf(); len(rows) != 3 {
		t.Fatalf("after the rollback to the first append: %v", rows)
	}
}
