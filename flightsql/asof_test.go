//go:build duckdb_arrow

package flightsql

// Reading a table as of a version ("cpu@v12", asof.go), through a real
// server and the arrow-go Flight SQL client. One history is built per
// server: appends, an add_columns, a compaction and more appends; the
// test keeps what every version holds (rows, columns, segments' index
// ranges) from what it appended, and every answer and plan is checked
// against that.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/tableformat"
)

// TestAsOfReadsEachVersion: "cpu@vN" reads exactly what version N held —
// rows, columns (none added later), segments (before and after the
// compaction) — bare, qualified, aliased and in any ASCII case, while the
// bare name reads the newest version.
func TestAsOfReadsEachVersion(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	h := buildHistory(t, s, ctx)
	newest := s.version(ctx, "cpu")
	for _, v := range h.versions() {
		ref := fmt.Sprintf("cpu@v%d", v)
		want := h.aggregate(v, allLo, allHi, "")
		if got := s.scalar(ctx, aggSQL+`"`+ref+`"`); got != want {
			t.Fatalf("version %d: %s, want %s", v, got, want)
		}
		p := s.lastRefPlan(ref)
		if p.version != v || p.segments != len(h.at[v].segs) || p.planned != p.segments {
			t.Fatalf("version %d: plan %+v, want version %d reading all %d segments", v, p, v, len(h.at[v].segs))
		}
		r := s.mustQuery(ctx, `SELECT * FROM "`+ref+`" LIMIT 0`)
		var names []string
		for _, f := range r.schema.Fields() {
			names = append(names, f.Name)
		}
		if !slices.Equal(names, h.at[v].cols) {
			t.Fatalf("version %d: columns %v, want %v", v, names, h.at[v].cols)
		}
	}
	// Versions before the first append hold no rows (the table's creation).
	for v := uint64(1); v < h.first; v++ {
		if got := s.scalar(ctx, fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d"`, v)); got != "0" {
			t.Fatalf("version %d before the first append: %s rows", v, got)
		}
	}
	// Compaction changed the segments, not the rows.
	if h.aggregate(h.fourth, allLo, allHi, "") != h.aggregate(h.compacted, allLo, allHi, "") || len(h.at[h.fourth].segs) != 4 || len(h.at[h.compacted].segs) != 1 {
		t.Fatalf("the history does not hold a compaction: %+v / %+v", h.at[h.fourth], h.at[h.compacted])
	}
	// The newest version by name and by number.
	if got, want := s.scalar(ctx, aggSQL+"cpu"), h.aggregate(newest, allLo, allHi, ""); got != want {
		t.Fatalf("newest: %s, want %s", got, want)
	}
	// temp counts only where it was appended (NULL in older segments).
	for _, v := range []uint64{h.added, h.fourth, h.compacted, h.fifth} {
		n := 0
		for _, r := range h.rows[:h.at[v].rows] {
			if r.temp != nil {
				n++
			}
		}
		if got := s.scalar(ctx, fmt.Sprintf(`SELECT count(temp) FROM "cpu@v%d"`, v)); got != strconv.Itoa(n) {
			t.Fatalf("count(temp) at version %d = %s, want %d", v, got, n)
		}
	}
	_, err := s.query(ctx, fmt.Sprintf(`SELECT count(temp) FROM "cpu@v%d"`, h.third))
	wantCode(t, "temp before add_columns", err, codes.InvalidArgument, "temp")

	// Other spellings of one reference.
	v := h.second
	want := h.aggregate(v, allLo, allHi, "")
	for _, from := range []string{
		fmt.Sprintf(`tsflight.main."cpu@v%d"`, v),
		fmt.Sprintf(`main."cpu@v%d" AS c`, v),
		fmt.Sprintf(`"CPU@V%d"`, v),
		fmt.Sprintf(`"cpu@v%03d"`, v),
	} {
		if got := s.scalar(ctx, aggSQL+from); got != want {
			t.Fatalf("FROM %s: %s, want %s", from, got, want)
		}
	}
	// A column qualified by the reference's name.
	q := fmt.Sprintf(`SELECT count("cpu@v%d".usage) FROM "cpu@v%d" WHERE "cpu@v%d".host = 'a'`, v, v, v)
	if got, wantN := s.scalar(ctx, q), strings.Split(h.aggregate(v, allLo, allHi, "a"), "|")[0]; got != wantN {
		t.Fatalf("%s = %s, want %s", q, got, wantN)
	}
	// A CTE of that name is the CTE where it is in scope; elsewhere the
	// name is the table at the version (read through a temporary view,
	// since the CTE's name is the relation's).
	if got := s.scalar(ctx, fmt.Sprintf(`WITH "cpu@v%d" AS (SELECT 42 AS x) SELECT x FROM "cpu@v%d"`, v, v)); got != "42" {
		t.Fatalf("CTE named like a version: %s", got)
	}
	q = fmt.Sprintf(`SELECT (SELECT count(*) FROM "cpu@v%d" WHERE ts < %s), (WITH "cpu@v%d" AS (SELECT 42 AS x) SELECT x FROM "cpu@v%d")`, v, tsLit(h.hours[1]), v, v)
	if got, want := s.scalar(ctx, q), strings.Split(h.aggregate(v, allLo, h.hours[1], ""), "|")[0]+"|42"; got != want {
		t.Fatalf("%s = %s, want %s", q, got, want)
	}
	if p := s.lastRefPlan(fmt.Sprintf("cpu@v%d", v)); p.planned != p.segments {
		t.Fatalf("a version whose name a CTE shares is pruned: %+v", p)
	}
}

// TestAsOfPrunes: the WHERE conjuncts prune a version's own segments, as
// they prune the newest state's; the pruned answer equals the unpruned
// one and the model's.
func TestAsOfPrunes(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	h := buildHistory(t, s, ctx)
	hour := func(i int) int64 { return h.hours[i] }
	cases := []struct {
		v      uint64
		lo, hi int64
	}{
		{h.third, hour(2), allHi},         // 1 of 3
		{h.third, allLo, hour(1)},         // 1 of 3
		{h.fourth, hour(1), hour(3)},      // 2 of 4
		{h.fourth, hour(3), allHi},        // 1 of 4, the one with temp
		{h.compacted, hour(3), allHi},     // the merged segment
		{h.fifth, hour(4), allHi},         // 1 of 2
		{h.fifth, hour(0), hour(0) + 1e6}, // the merged segment
		{h.second, hour(4), allHi},        // none
	}
	for _, c := range cases {
		ref := fmt.Sprintf("cpu@v%d", c.v)
		var conds []string
		if c.lo != allLo {
			conds = append(conds, "ts >= "+tsLit(c.lo))
		}
		if c.hi != allHi {
			conds = append(conds, "ts < "+tsLit(c.hi))
		}
		where := strings.Join(conds, " AND ")
		got := s.scalar(ctx, aggSQL+`"`+ref+`" WHERE `+where)
		p := s.lastRefPlan(ref)
		if want := h.aggregate(c.v, c.lo, c.hi, ""); got != want {
			t.Fatalf("%s WHERE %s: %s, want %s", ref, where, got, want)
		}
		if want := h.plannedAt(c.v, c.lo, c.hi); p.planned != want || p.segments != len(h.at[c.v].segs) || p.version != c.v {
			t.Fatalf("%s WHERE %s: plan %+v, want %d of %d segments of version %d", ref, where, p, want, len(h.at[c.v].segs), c.v)
		}
		if p.planned == p.segments && p.segments > 1 {
			t.Fatalf("%s WHERE %s: the case prunes nothing", ref, where)
		}
		if unpruned := s.scalar(ctx, aggSQL+`"`+ref+`" WHERE ((`+where+`) OR false)`); unpruned != got {
			t.Fatalf("%s WHERE %s: pruned %s, unpruned %s", ref, where, got, unpruned)
		}
	}
}

// TestAsOfJoinsVersions: two versions of one table, and a version with the
// newest, in one statement; each reference is pruned on its own.
func TestAsOfJoinsVersions(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	h := buildHistory(t, s, ctx)
	count := func(v uint64) int { return h.at[v].rows }
	old, cur := h.second, h.fifth
	q := fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d" AS o JOIN "cpu@v%d" AS n USING (ts, host) WHERE o.usage = n.usage`, old, cur)
	if got := s.scalar(ctx, q); got != strconv.Itoa(count(old)) {
		t.Fatalf("%s = %s, want %d", q, got, count(old))
	}
	q = fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d" AS n ANTI JOIN "cpu@v%d" AS o USING (ts, host)`, cur, old)
	if got := s.scalar(ctx, q); got != strconv.Itoa(count(cur)-count(old)) {
		t.Fatalf("%s = %s, want %d", q, got, count(cur)-count(old))
	}
	q = fmt.Sprintf(`SELECT (SELECT count(*) FROM cpu) - (SELECT count(*) FROM "cpu@v%d")`, h.first)
	if got := s.scalar(ctx, q); got != strconv.Itoa(count(s.version(ctx, "cpu"))-count(h.first)) {
		t.Fatalf("%s = %s", q, got)
	}
	// Each side pruned by its own conjuncts.
	lo := h.hours[2]
	q = fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d" o JOIN "cpu@v%d" n USING (ts, host) WHERE o.ts >= %s AND n.ts >= %s`, h.third, h.fifth, tsLit(lo), tsLit(lo))
	want := strings.Split(h.aggregate(h.third, lo, allHi, ""), "|")[0]
	if got := s.scalar(ctx, q); got != want {
		t.Fatalf("%s = %s, want %s", q, got, want)
	}
	for _, v := range []uint64{h.third, h.fifth} {
		p := s.lastRefPlan(fmt.Sprintf("cpu@v%d", v))
		if p.planned != h.plannedAt(v, lo, allHi) || p.segments != len(h.at[v].segs) {
			t.Fatalf("join side at version %d: plan %+v, want %d of %d", v, p, h.plannedAt(v, lo, allHi), len(h.at[v].segs))
		}
	}
	// Two spellings of one version read one snapshot.
	q = fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d" a JOIN "CPU@V%d" b USING (ts, host)`, old, old)
	if got := s.scalar(ctx, q); got != strconv.Itoa(count(old)) {
		t.Fatalf("%s = %s", q, got)
	}
}

// TestAsOfPreparedStatement: a prepared statement at a version has that
// version's schema, binds parameters that prune the version's segments,
// and keeps reading the version while the table moves on.
func TestAsOfPreparedStatement(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	h := buildHistory(t, s, ctx)
	for _, v := range []uint64{h.third, h.fourth} {
		p := s.prepare(ctx, fmt.Sprintf(`SELECT * FROM "cpu@v%d" WHERE host = ?`, v))
		var names []string
		for _, f := range p.DatasetSchema().Fields() {
			names = append(names, f.Name)
		}
		if !slices.Equal(names, h.at[v].cols) {
			t.Fatalf("prepared at version %d: dataset schema %v, want %v", v, names, h.at[v].cols)
		}
	}
	v := h.fourth
	ref := fmt.Sprintf("cpu@v%d", v)
	p := s.prepare(ctx, aggSQL+`"`+ref+`" WHERE ts >= ? AND host = ?`)
	if n := p.ParameterSchema().NumFields(); n != 2 {
		t.Fatalf("%d parameters, want 2", n)
	}
	run := func(lo int64, host string) string {
		t.Helper()
		params := paramBatch(t, s, []arrow.Field{{Name: "p1", Type: tsType(arrow.Microsecond, "UTC")}, {Name: "p2", Type: arrow.BinaryTypes.String}},
			[][]any{{time.UnixMicro(lo).UTC(), host}})
		_, r := s.mustExecPrepared(t, ctx, fmt.Sprintf("execute at %d, %s", lo, host), p, params)
		return r.rowsOf()[0]
	}
	for _, c := range []struct {
		lo   int64
		host string
	}{{h.hours[2], "a"}, {h.hours[3], "b"}, {h.hours[0], "b"}} {
		if got, want := run(c.lo, c.host), h.aggregate(v, c.lo, allHi, c.host); got != want {
			t.Fatalf("prepared at %d, %s: %s, want %s", c.lo, c.host, got, want)
		}
		if pl := s.lastRefPlan(ref); pl.planned != h.plannedAt(v, c.lo, allHi) || pl.segments != len(h.at[v].segs) {
			t.Fatalf("prepared at %d: plan %+v, want %d of %d", c.lo, pl, h.plannedAt(v, c.lo, allHi), len(h.at[v].segs))
		}
	}
	// The table moves on; the statement and a ticket of it still read v.
	info, err := s.client.Execute(ctx, aggSQL+`"`+ref+`"`)
	if err != nil {
		t.Fatal(err)
	}
	rec := cpuTempBatch(s.cliMem, t0.Add(5*time.Hour), 60, "a")
	if _, err := s.ingest(ctx, "cpu", "append", nil, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if got, want := run(h.hours[0], "a"), h.aggregate(v, h.hours[0], allHi, "a"); got != want {
		t.Fatalf("after an append: %s, want %s", got, want)
	}
	for i := 0; i < 2; i++ { // the started query, then a re-plan from the ticket
		r, err := s.fetch(ctx, info)
		if err != nil {
			t.Fatal(err)
		}
		got := r.rowsOf()[0]
		r.release()
		if want := h.aggregate(v, allLo, allHi, ""); got != want {
			t.Fatalf("fetch %d of the ticket: %s, want %s", i+1, got, want)
		}
	}
}

// TestAsOfCoverageFunctions: ts_coverage and ts_gaps take 'cpu@vN' and
// answer on that version.
func TestAsOfCoverageFunctions(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	h := buildHistory(t, s, ctx)
	v := h.second // hours 0 and 1
	start, end := tsLit(h.hours[0]), tsLit(h.hours[3])
	q := fmt.Sprintf(`SELECT table_name, version, identities, covered FROM ts_coverage('cpu@v%d', %s, %s)`, v, start, end)
	if got, want := s.scalar(ctx, q), fmt.Sprintf("cpu|%d|2|%d", v, h.at[v].rows); got != want {
		t.Fatalf("%s = %s, want %s", q, got, want)
	}
	q = fmt.Sprintf(`SELECT epoch_us(gap_start), epoch_us(gap_end) FROM ts_gaps('cpu@v%d', %s, %s, 'a')`, v, start, end)
	if got, want := s.mustQuery(ctx, q).rowsOf(), []string{fmt.Sprintf("%d|%d", h.hours[2], h.hours[3])}; !slices.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", q, got, want)
	}
	// The newest has no gap there.
	q = fmt.Sprintf(`SELECT count(*) FROM ts_gaps('cpu', %s, %s, 'a')`, start, end)
	if got := s.scalar(ctx, q); got != "0" {
		t.Fatalf("%s = %s, want 0", q, got)
	}
	// With a parameter naming the version.
	p := s.prepare(ctx, fmt.Sprintf(`SELECT version, covered FROM ts_coverage(?, %s, %s)`, start, end))
	params := paramBatch(t, s, []arrow.Field{{Name: "t", Type: arrow.BinaryTypes.String}}, [][]any{{fmt.Sprintf("cpu@v%d", h.first)}})
	_, r := s.mustExecPrepared(t, ctx, "execute", p, params)
	if got, want := r.rowsOf(), []string{fmt.Sprintf("%d|%d", h.first, h.at[h.first].rows)}; !slices.Equal(got, want) {
		t.Fatalf("ts_coverage(?) = %v, want %v", got, want)
	}
}

// TestAsOfErrors: malformed suffixes are INVALID_ARGUMENT naming the text;
// versions the table has not reached, and versions expired under the keep
// window, are NOT_FOUND naming the version and the newest version or the
// window and its property; DuckDB's AT clause and an unquoted cpu@v2 are
// INVALID_ARGUMENT saying how to write it. No message shows the root.
func TestAsOfErrors(t *testing.T) {
	s, ctx := startCPU(t, 3)
	tb, err := s.svc.Table(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	newest := tb.State().Version
	old := newest - 1
	// Prepared before the window shrinks, executed after.
	early := s.prepare(ctx, fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d" WHERE host = ?`, old))
	cov := func(table string) string {
		return fmt.Sprintf("SELECT * FROM ts_coverage('%s', %s, %s)", table, fmtTime(t0), fmtTime(t0.Add(time.Hour)))
	}
	ahead := newest + 1000
	notVersion := func(ref, suffix string) []string {
		return []string{fmt.Sprintf("%q", ref), fmt.Sprintf("%q is not a version", suffix), `"cpu@v12"`}
	}
	type errCase struct {
		q     string
		code  codes.Code
		frags []string
	}
	cases := []errCase{
		{`SELECT * FROM "cpu@vx"`, codes.InvalidArgument, notVersion("cpu@vx", "@vx")},
		{`SELECT * FROM "cpu@v"`, codes.InvalidArgument, notVersion("cpu@v", "@v")},
		{`SELECT * FROM "cpu@v-1"`, codes.InvalidArgument, notVersion("cpu@v-1", "@v-1")},
		{`SELECT * FROM "cpu@"`, codes.InvalidArgument, notVersion("cpu@", "@")},
		{`SELECT * FROM "cpu@2"`, codes.InvalidArgument, notVersion("cpu@2", "@2")},
		{`SELECT * FROM "cpu@v1.5"`, codes.InvalidArgument, notVersion("cpu@v1.5", "@v1.5")},
		{`SELECT * FROM "cpu@v+1"`, codes.InvalidArgument, notVersion("cpu@v+1", "@v+1")},
		{`SELECT * FROM "cpu@v1@v2"`, codes.InvalidArgument, notVersion("cpu@v1@v2", "@v1@v2")},
		{`SELECT * FROM main."cpu@vx" c`, codes.InvalidArgument, notVersion("cpu@vx", "@vx")},
		{`SELECT * FROM "cpu@v99999999999999999999"`, codes.InvalidArgument, []string{`"cpu@v99999999999999999999"`, "version 99999999999999999999 is out of range"}},
		{fmt.Sprintf(`SELECT * FROM "cpu@v%d"`, ahead), codes.NotFound, []string{fmt.Sprintf("table cpu at version %d", ahead), fmt.Sprintf("version %d does not exist (the table is at version %d)", ahead, newest)}},
		{`SELECT * FROM "cpu@v0"`, codes.NotFound, []string{fmt.Sprintf("version 0 does not exist (the table is at version %d)", newest)}},
		{`SELECT * FROM "nosuch@v2"`, codes.NotFound, []string{`"nosuch@v2" does not exist`}},
		{`SELECT * FROM cpu@v2`, codes.InvalidArgument, []string{`syntax error at or near "@"`, `quote the name with the version: FROM "cpu@v12"`}},
		{`SELECT * FROM cpu AT (VERSION => 2)`, codes.InvalidArgument, []string{"cpu AT (VERSION => …) is not supported", `"cpu@v12" reads version 12`}},
		{`SELECT * FROM cpu AS c AT (TIMESTAMP => now())`, codes.InvalidArgument, []string{"cpu AT (TIMESTAMP => …) is not supported"}},
		{cov("cpu@vx"), codes.InvalidArgument, append([]string{"ts_coverage: "}, notVersion("cpu@vx", "@vx")...)},
		{cov(fmt.Sprintf("cpu@v%d", ahead)), codes.NotFound, []string{fmt.Sprintf("version %d does not exist", ahead)}},
		{cov("nosuch@v2"), codes.NotFound, []string{`ts_coverage: table "nosuch@v2" does not exist`}},
	}
	check := func(c errCase) {
		t.Helper()
		_, err := s.query(ctx, c.q)
		wantCode(t, c.q, err, c.code, c.frags...)
		if msg := status.Convert(err).Message(); strings.Contains(msg, s.root) {
			t.Fatalf("%s: the message shows the root: %s", c.q, msg)
		}
	}
	for _, c := range cases {
		check(c)
	}
	// Inside the default window every version reads.
	if got := s.scalar(ctx, fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d"`, old)); got != "14400" {
		t.Fatalf("version %d: %s rows, want 14400", old, got)
	}

	// A ticket planned while the version is kept.
	ticket, err := s.client.Execute(ctx, fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d"`, old))
	if err != nil {
		t.Fatal(err)
	}

	// Keep no superseded version: old and newest are now superseded by
	// the property commit.
	if _, err := tb.SetProperties(ctx, newest, map[string]string{tableformat.PropertyKeepSnapshots: "0s"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past the property commit's timestamp
	expired := func(v uint64) []string {
		return []string{fmt.Sprintf("table cpu at version %d", v), fmt.Sprintf("version %d was superseded at ", v),
			"versions superseded more than 0s ago are not kept (table property tsflight.keep-snapshots)"}
	}
	for _, c := range []errCase{
		{fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d"`, old), codes.NotFound, expired(old)},
		{fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d" a, cpu b WHERE a.ts = b.ts`, newest), codes.NotFound, expired(newest)},
		{cov(fmt.Sprintf("cpu@v%d", old)), codes.NotFound, expired(old)},
	} {
		check(c)
	}
	// The ticket's first DoGet may stream the query its GetFlightInfo
	// started; a DoGet that plans again is refused.
	if r, err := s.fetch(ctx, ticket); err == nil {
		r.release()
	} else {
		wantCode(t, "first DoGet of a ticket at an expired version", err, codes.NotFound, expired(old)...)
	}
	_, err = s.fetch(ctx, ticket)
	wantCode(t, "DoGet of a ticket at an expired version", err, codes.NotFound, expired(old)...)
	params := paramBatch(t, s, []arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}}, [][]any{{"a"}})
	_, _, err = s.execPrepared(ctx, early, params)
	wantCode(t, "prepared statement at an expired version", err, codes.NotFound, expired(old)...)
	_, err = s.client.Prepare(ctx, fmt.Sprintf(`SELECT * FROM "cpu@v%d"`, old))
	wantCode(t, "preparing at an expired version", err, codes.NotFound, expired(old)...)
	// The newest version, by number too, still reads.
	cur := s.version(ctx, "cpu")
	if got := s.scalar(ctx, fmt.Sprintf(`SELECT count(*) FROM "cpu@v%d"`, cur)); got != "21600" {
		t.Fatalf("newest version %d by number: %s", cur, got)
	}
}
