//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
)

// TestPruningMatchesDuckDBSemantics: each query is compared with the same
// predicate made unprunable ((pred) OR false); the count must agree and the
// plan must read the segments said.
func TestPruningMatchesDuckDBSemantics(t *testing.T) {
	s, ctx := startCPU(t, 4)
	cases := []struct {
		name, where string
		planned     int
	}{
		// A TIMESTAMP (zoneless) literal keeps the wall clock and drops an
		// offset; TIMESTAMPTZ applies it.
		{"offset dropped by TIMESTAMP", "ts < TIMESTAMP '2024-01-01 02:00:00+05'", 2},
		{"offset applied by TIMESTAMPTZ", "ts < TIMESTAMPTZ '2024-01-01 06:00:00+05'", 1},
		{"offset applied to a string against a zoned column", "ts < '2024-01-01 06:00:00+05'", 1},
		// DATE keeps the day.
		{"date cast", "ts >= CAST('2024-01-01 02:00:00' AS DATE)", 4},
		// DuckDB rounds to microseconds.
		{"rounded up", "ts >= '2024-01-01 00:59:59.9999996'", 3},
		{"rounded down", "ts = '2024-01-01 00:59:59.0000004'", 1},
		// A sample is drawn before WHERE: no pruning.
		{"sample", "true", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from := "cpu"
			if c.name == "sample" {
				from = "cpu TABLESAMPLE reservoir(100 ROWS) REPEATABLE (1) WHERE ts < TIMESTAMPTZ '2024-01-01 01:00:00' AND "
			} else {
				from = "cpu WHERE "
			}
			got := s.scalar(ctx, "SELECT count(*) FROM "+from+c.where)
			planned, _ := s.lastPlan("cpu")
			want := s.scalar(ctx, "SELECT count(*) FROM "+from+"(("+c.where+") OR false)")
			if got != want {
				t.Fatalf("%s: pruned count %s, unpruned %s", c.where, got, want)
			}
			if planned != c.planned {
				t.Fatalf("%s: planned %d segments, want %d", c.where, planned, c.planned)
			}
		})
	}
}

func TestPruningRefusesUnsafeShapes(t *testing.T) {
	s, ctx := startCPU(t, 4)
	cases := []struct{ name, q, want string }{
		// ASOF matches the nearest row: pruning the right side would
		// change the match (05:30's match is 05:29:59, which WHERE drops).
		{"asof", "SELECT count(*) FROM (SELECT TIMESTAMPTZ '2024-01-01 03:30:00' AS ts, 'a' AS host) ev ASOF JOIN cpu b ON ev.host = b.host AND ev.ts >= b.ts WHERE b.ts < TIMESTAMPTZ '2024-01-01 01:00:00'", "0"},
		// Columns renamed in FROM: "ts" is the host column here.
		{"renamed columns", "SELECT count(*) FROM cpu AS t(x, ts) WHERE ts >= '2024-01-01 03:00:00'", "28800"},
		// Newest-row shapes that need more than the newest rows.
		{"window function", "SELECT max(n) FROM (SELECT DISTINCT ON (host) host, ts, count(*) OVER (PARTITION BY host) n FROM cpu ORDER BY host, ts DESC)", "14400"},
		{"group by all", "SELECT max(n) FROM (SELECT DISTINCT ON (host) host, count(*) n, max(ts) ts FROM cpu GROUP BY ALL ORDER BY host, ts DESC)", "14400"},
		{"alias hides the index", "SELECT min(usage) FROM (SELECT DISTINCT ON (host) host, usage, -epoch(ts) AS ts FROM cpu ORDER BY host, ts DESC)", "0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := s.scalar(ctx, c.q); got != c.want {
				t.Fatalf("%s: %s, want %s", c.q, got, c.want)
			}
			if planned, _ := s.lastPlan("cpu"); planned != 4 {
				t.Fatalf("%s: planned %d segments, want all 4", c.q, planned)
			}
		})
	}
}

// TestPruningAtTheLargestIndex: an inclusive bound at the largest int64
// has no exclusive bound above it and must not prune its segment away.
func TestPruningAtTheLargestIndex(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	sc := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(s.cliMem, sc)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{0, math.MaxInt64}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	_, err := s.ingest(ctx, "big", "create", map[string]string{"tsflight.index_column": "k", "tsflight.granularity": "1"}, rec)
	rec.Release()
	if err != nil {
		t.Skipf("the table format does not take the largest int64 index: %v", err)
	}
	for _, q := range []string{
		fmt.Sprintf("SELECT count(*) FROM big WHERE k = %d", int64(math.MaxInt64)),
		fmt.Sprintf("SELECT count(*) FROM big WHERE k <= %d AND k > 0", int64(math.MaxInt64)),
	} {
		if got := s.scalar(ctx, q); got != "1" {
			t.Fatalf("%s = %s, want 1", q, got)
		}
	}
}

// TestCancelFlightInfoStopsAStartedQuery: GetFlightInfo starts the query;
// CancelFlightInfo before any DoGet interrupts it and frees it at once.
func TestCancelFlightInfoStopsAStartedQuery(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	info := s.mustExecute(t, ctx, "SELECT count(*) FROM range(0, 10000000000000) t(i) WHERE i % 7 = 3")
	res, err := s.client.CancelFlightInfo(ctx, &flight.CancelFlightInfoRequest{Info: info})
	if err != nil || res.Status != flight.CancelStatusCancelled {
		t.Fatalf("cancel: %v, %v", res.Status, err)
	}
	s.sql.ready.mu.Lock()
	left := len(s.sql.ready.m)
	s.sql.ready.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d started queries left after CancelFlightInfo", left)
	}
	_, err = s.fetch(ctx, info)
	wantCode(t, "DoGet after cancel", err, codes.Canceled)
}

// TestRepeatedColumnNames: the announced schemas name columns as the
// stream does, repeated names included.
func TestRepeatedColumnNames(t *testing.T) {
	s, ctx := startCPU(t, 1)
	stmt, err := s.client.Prepare(ctx, "SELECT host AS x, usage AS x FROM cpu WHERE host = ? LIMIT 1")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close(context.Background())
	if got := stmt.DatasetSchema().Field(0).Name + " " + stmt.DatasetSchema().Field(1).Name; got != "x x" {
		t.Fatalf("dataset schema names %s", got)
	}
	pb := array.NewRecordBuilder(s.cliMem, stmt.ParameterSchema())
	pb.Field(0).(*array.StringBuilder).Append("a")
	params := pb.NewRecordBatch()
	pb.Release()
	stmt.SetParameters(params)
	params.Release()
	info, err := stmt.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := flight.DeserializeSchema(info.Schema, s.cliMem)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.fetch(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	if !sc.Equal(r.schema) {
		t.Fatalf("FlightInfo schema %s, stream %s", sc, r.schema)
	}
}

// TestEntityPruning: segments holding one entity each (the layout of
// per-device uploads) are pruned by equality and by IN lists on the entity
// column.
func TestEntityPruning(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	s.ingestCPU(t, ctx, cpuBatch(s.cliMem, t0, 600, "a"), cpuBatch(s.cliMem, t0, 600, "b"), cpuBatch(s.cliMem, t0, 600, "c"))
	cases := []struct {
		where   string
		rows    string
		planned int
	}{
		{"host = 'b'", "600", 1},
		{"host IN ('b')", "600", 1},
		{"host IN ('a', 'c')", "1200", 2},
		{"host IN ('a', 'zz')", "600", 1},
		{"host IN ('a', 'c') AND host = 'c'", "600", 1},
		{"host IN ('a', 'b') AND ts < TIMESTAMPTZ '2024-01-01 00:05:00'", "600", 2},
		{"host = 'a' OR host = 'b'", "1200", 3},
	}
	for _, c := range cases {
		q := "SELECT count(*) FROM cpu WHERE " + c.where
		if got := s.scalar(ctx, q); got != c.rows {
			t.Fatalf("%s = %s, want %s", q, got, c.rows)
		}
		if planned, total := s.lastPlan("cpu"); planned != c.planned || total != 3 {
			t.Fatalf("%s: planned %d of %d, want %d of 3", q, planned, total, c.planned)
		}
	}
}
