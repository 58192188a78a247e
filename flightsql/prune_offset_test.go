//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/status"
)

// The rule DuckDB 1.5.6 applies to a UTC offset written in a timestamp
// string, per type the string becomes (by a cast, a typed literal, or a
// comparison with a column of that type): TIMESTAMP_NS and TIMESTAMPTZ
// apply the offset; TIMESTAMP, TIMESTAMP_MS and TIMESTAMP_S drop it and
// keep the wall clock. The pruner reads offsets by the same rule
// (offsetApplies); TestDuckDBOffsetRule keeps the two in step.

// TestDuckDBOffsetRule measures, on the embedded DuckDB, whether a string
// with +05:00 keeps its wall clock or is moved to UTC when cast to each
// timestamp type (CAST and typed literal) and when compared with a value
// of each type, and checks that offsetApplies says the same.
func TestDuckDBOffsetRule(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	for _, c := range []struct{ typ, id string }{
		{"TIMESTAMP_S", "TIMESTAMP_S"},
		{"TIMESTAMP_MS", "TIMESTAMP_MS"},
		{"TIMESTAMP", "TIMESTAMP"},
		{"TIMESTAMP_NS", "TIMESTAMP_NS"},
		{"TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE"},
	} {
		// The wall clock is 05:00:00; with the offset applied it is 00:00:00 UTC.
		const lit = "'2024-01-01 05:00:00+05:00'"
		cast := s.scalar(ctx, fmt.Sprintf("SELECT CAST(CAST(%s AS %s) AS VARCHAR)", lit, c.typ))
		typed := s.scalar(ctx, fmt.Sprintf("SELECT CAST(%s %s AS VARCHAR)", c.typ, lit))
		colon := s.scalar(ctx, fmt.Sprintf("SELECT CAST(%s::%s AS VARCHAR)", lit, c.typ))
		implicit := s.scalar(ctx, fmt.Sprintf("WITH c AS (SELECT CAST('2024-01-01 00:00:00' AS %s) AS ts) SELECT ts = %s FROM c", c.typ, lit))
		applied := strings.HasPrefix(cast, "2024-01-01 00:00:00")
		if !applied && !strings.HasPrefix(cast, "2024-01-01 05:00:00") {
			t.Fatalf("%s: CAST gives %s, neither the wall clock nor the UTC instant", c.typ, cast)
		}
		if typed != cast || colon != cast {
			t.Fatalf("%s: typed literal %s and :: %s differ from CAST %s", c.typ, typed, colon, cast)
		}
		if (implicit == "true") != applied {
			t.Fatalf("%s: comparing a value with the string applies the offset: %s; casting it: %v", c.typ, implicit, applied)
		}
		if got := offsetApplies(c.id); got != applied {
			t.Fatalf("%s: DuckDB applies the offset: %v; the pruner assumes %v", c.typ, applied, got)
		}
		t.Logf("%-13s CAST → %-26s offset applied: %v", c.typ, cast, applied)
	}
}

// offsetTable is one table of TestPruningDifferential: its index column's
// unit and zone.
type offsetTable struct {
	name string
	unit arrow.TimeUnit
	tz   string
}

// offsetBases are where the differential tables' segments start: three
// hours apart by the +05:00 offset, so that a literal's offset read the
// wrong way selects other segments.
var offsetBases = []time.Duration{-5 * time.Hour, 0, 5 * time.Hour}

// makeOffsetTable ingests 9 segments of 10 s each: three at each base of
// offsetBases. Each second holds rows at +0, +1 unit, +0.5 s and +0.5 s
// + 1 unit (one row per host and second).
func (s *sqlServer) makeOffsetTable(ctx context.Context, ot offsetTable) int {
	s.t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: ot.unit, TimeZone: ot.tz}},
		{Name: "host", Type: arrow.BinaryTypes.String},
	}, nil)
	unit := time.Duration(ot.unit.Multiplier())
	fracs := []time.Duration{0, unit, 500 * time.Millisecond, 500*time.Millisecond + unit}
	rows := 0
	for i, base := range offsetBases {
		for k := 0; k < 3; k++ {
			b := array.NewRecordBuilder(s.cliMem, sc)
			start := t0.Add(base + time.Duration(k)*10*time.Second)
			for sec := 0; sec < 10; sec++ {
				for h, f := range fracs {
					ts := start.Add(time.Duration(sec)*time.Second + f)
					v, err := arrow.TimestampFromTime(ts, ot.unit)
					if err != nil {
						s.t.Fatal(err)
					}
					b.Field(0).(*array.TimestampBuilder).Append(v)
					b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("h%d", h))
					rows++
				}
			}
			rec := b.NewRecordBatch()
			b.Release()
			mode := "append"
			if i == 0 && k == 0 {
				mode = "create"
			}
			_, err := s.ingest(ctx, ot.name, mode, map[string]string{"tsflight.granularity": "1s", "tsflight.entity_columns": "host"}, rec)
			rec.Release()
			if err != nil {
				s.t.Fatalf("%s: ingest: %v", ot.name, err)
			}
		}
	}
	return rows
}

// pruneShape is one predicate of the differential test.
type pruneShape struct{ table, where string }

// offsetShapes builds the predicates on table tb: every timestamp string
// (walls near segment edges, with fractions finer than some units, written
// with no offset, Z, +05:00, +05, +0530 or -05:00, with T or a space) read
// as a plain string and as each type (typed literal, CAST or ::, taken in
// turn), under each comparison (>=, >, <, <=, =, BETWEEN, IN, reversed
// operands, taken in turn).
func offsetShapes(tb string) []pruneShape {
	var walls []time.Time
	for _, base := range []time.Duration{0, 5 * time.Hour} {
		for _, d := range []time.Duration{
			10 * time.Second, 19500 * time.Millisecond, 20*time.Second - time.Nanosecond,
			10*time.Second + 400*time.Nanosecond, 9999500 * time.Microsecond, 20 * time.Second,
		} {
			walls = append(walls, t0.Add(base+d))
		}
	}
	offsets := []string{"", "Z", "+05:00", "+05", "+0530", "-05:00"}
	types := []string{"", "TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S", "TIMESTAMPTZ"}
	ops := []string{">=", ">", "<", "<=", "=", "between", "in", "rev>", "rev<="}
	var out []pruneShape
	for iw, w := range walls {
		for io, off := range offsets {
			for it, typ := range types {
				lit := func(w time.Time) string {
					sep := " "
					if (iw+io)%2 == 1 {
						sep = "T"
					}
					str := "'" + w.Format("2006-01-02") + sep + w.Format("15:04:05.999999999") + off + "'"
					switch {
					case typ == "":
						return str
					case (iw+it+io)%3 == 0:
						return typ + " " + str
					case (iw+it+io)%3 == 1:
						return "CAST(" + str + " AS " + typ + ")"
					}
					return str + "::" + typ
				}
				a, b := lit(w), lit(w.Add(3250*time.Millisecond))
				var where string
				switch op := ops[(iw+io*2+it)%len(ops)]; op {
				case "between":
					where = "ts BETWEEN " + a + " AND " + b
				case "in":
					where = "ts IN (" + a + ", " + b + ")"
				case "rev>":
					where = a + " > ts"
				case "rev<=":
					where = a + " <= ts"
				default:
					where = "ts " + op + " " + a
				}
				out = append(out, pruneShape{tb, where})
			}
		}
	}
	return out
}

// TestPruningDifferential compares, for index columns of every unit with
// and without a zone and for many literal shapes (offsetShapes), the count
// of a pruned query with DuckDB's unpruned count of the same predicate over
// the same files (count(*) FILTER (WHERE …) over the whole table, which
// has no WHERE to prune by). It also checks that the column types DuckDB
// reads from the segments are the types whose offset rule the pruner
// assumes, and that pruning happened at all.
func TestPruningDifferential(t *testing.T) {
	s := startSQL(t)
	// About 2,600 queries: 25 s alone, over 2 min under -race on 2 cores.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tables := []offsetTable{
		// The table format has no second unit (timestamp[s] is refused).
		{"ms_naive", arrow.Millisecond, ""}, {"us_naive", arrow.Microsecond, ""}, {"ns_naive", arrow.Nanosecond, ""},
		{"ms_utc", arrow.Millisecond, "UTC"}, {"us_utc", arrow.Microsecond, "UTC"}, {"ns_utc", arrow.Nanosecond, "UTC"},
	}
	checked, pruned, refused := 0, 0, 0
	for _, ot := range tables {
		s.makeOffsetTable(ctx, ot)
		tb, err := s.svc.Table(ctx, ot.name)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.scalar(ctx, "SELECT DISTINCT typeof(ts) FROM "+ot.name), indexDuckType(tb.State()); got != want {
			t.Fatalf("%s: DuckDB reads the index as %s; the pruner assumes %s", ot.name, got, want)
		}
		// The pruned queries first; a shape DuckDB refuses to bind (a
		// TIMESTAMP_NS column compared with a TIMESTAMPTZ needs an explicit
		// cast) must be refused unpruned too.
		var shapes []pruneShape
		var got []string
		var plans [][2]int
		for _, sh := range offsetShapes(ot.name) {
			q := "SELECT count(*) FROM " + sh.table + " WHERE " + sh.where
			r, err := s.query(ctx, q)
			if err != nil {
				if _, uerr := s.query(ctx, "SELECT count(*) FROM "+sh.table+" WHERE ("+sh.where+") OR false"); status.Code(uerr) != status.Code(err) {
					t.Errorf("%s: pruned %v, unpruned %v", q, err, uerr)
				}
				refused++
				continue
			}
			rows := r.rowsOf()
			r.release()
			planned, total := s.lastPlan(ot.name)
			shapes, got, plans = append(shapes, sh), append(got, rows[0]), append(plans, [2]int{planned, total})
		}
		filters := make([]string, len(shapes))
		for i, sh := range shapes {
			filters[i] = "count(*) FILTER (WHERE " + sh.where + ")"
		}
		ref, err := s.query(ctx, "SELECT "+strings.Join(filters, ", ")+" FROM "+ot.name)
		if err != nil {
			t.Fatalf("%s: the unpruned reference query of %d shapes: %v", ot.name, len(shapes), err)
		}
		wantRow := ref.rowsOf()[0]
		ref.release()
		if planned, total := s.lastPlan(ot.name); planned != total {
			t.Fatalf("%s: the reference query planned %d of %d segments", ot.name, planned, total)
		}
		want := strings.Split(wantRow, "|")
		for i, sh := range shapes {
			if got[i] != want[i] {
				t.Errorf("%s WHERE %s: pruned count %s (%d of %d segments), unpruned %s", sh.table, sh.where, got[i], plans[i][0], plans[i][1], want[i])
			}
			checked++
			if plans[i][0] < plans[i][1] {
				pruned++
			}
		}
	}
	t.Logf("%d pruning shapes over %d tables compared with DuckDB unpruned; %d of them pruned segments; %d more refused by DuckDB pruned and unpruned alike", checked, len(tables), pruned, refused)
	if pruned < checked/4 {
		t.Fatalf("only %d of %d shapes pruned anything: the test does not exercise the pruner", pruned, checked)
	}
}
