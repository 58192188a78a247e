//go:build duckdb_arrow

package flightsql

// The bad-input catalogue's rows for reading a table as of a version
// ("cpu@v12", asof.go); TestSQLBadInputCatalogue runs them after
// sqlCatalogue's, on the same fixture (table cpu, at version 2).

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/tableformat"
)

func asOfCatalogue() []sqlBadCase {
	goSQL := "arrow-go Flight SQL"
	goADBC := "ADBC Go driver"
	const asOf = "SQL at a version"
	// keepNone sets cpu's keep window to 0s: every version but the newest
	// is expired (the newest, 2, is superseded by the property commit).
	keepNone := func(e *sqlCatEnv) {
		tb, err := e.svc.Table(e.ctx, "cpu")
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := tb.SetProperties(e.ctx, tb.State().Version, map[string]string{tableformat.PropertyKeepSnapshots: "0s"}); err != nil {
			e.t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // past the property commit's timestamp
	}
	expiredFrags := []string{"table cpu at version 2", "version 2 was superseded at ", "versions superseded more than 0s ago are not kept (table property tsflight.keep-snapshots)"}
	var early *flightsql.PreparedStatement
	return []sqlBadCase{
		{name: "table named at a malformed version", category: asOf, client: goSQL, op: `Execute SELECT * FROM "cpu@vx"`, code: codes.InvalidArgument, frags: []string{`"cpu@vx"`, `"@vx" is not a version`, `"cpu@v12"`},
			run: func(e *sqlCatEnv) error { return e.queryErr(`SELECT * FROM "cpu@vx"`) }},
		{name: "table named at a malformed version", category: asOf, client: goADBC, op: `Statement.ExecuteQuery SELECT * FROM "cpu@v-1"`, code: codes.InvalidArgument, frags: []string{`"cpu@v-1"`, `"@v-1" is not a version`, `"cpu@v12"`},
			run: func(e *sqlCatEnv) error { return e.adbcErr(adbcQuery(e.ctx, `SELECT * FROM "cpu@v-1"`)) }},
		{name: "table named at a version it has not reached", category: asOf, client: goSQL, op: `Execute SELECT * FROM "cpu@v99"`, code: codes.NotFound, frags: []string{"table cpu at version 99", "version 99 does not exist (the table is at version 2)"},
			run: func(e *sqlCatEnv) error { return e.queryErr(`SELECT * FROM "cpu@v99"`) }},
		{name: "table named at a version expired under the keep window", category: asOf, client: goSQL, op: `Execute SELECT count(*) FROM "cpu@v2", tsflight.keep-snapshots 0s`, code: codes.NotFound, frags: expiredFrags,
			setup: keepNone,
			run:   func(e *sqlCatEnv) error { return e.queryErr(`SELECT count(*) FROM "cpu@v2"`) }},
		{name: "table named at a version expired under the keep window", category: asOf, client: goADBC, op: `Statement.ExecuteQuery SELECT count(*) FROM "cpu@v2", tsflight.keep-snapshots 0s`, code: codes.NotFound, frags: expiredFrags,
			setup: keepNone,
			run:   func(e *sqlCatEnv) error { return e.adbcErr(adbcQuery(e.ctx, `SELECT count(*) FROM "cpu@v2"`)) }},
		{name: "prepared statement at a version that expired after it was prepared", category: asOf, client: goSQL, op: `Prepare SELECT count(*) FROM "cpu@v2" WHERE host = ?, keep-snapshots set to 0s, bind + Execute`, code: codes.NotFound, frags: expiredFrags,
			setup: func(e *sqlCatEnv) {
				var err error
				if early, err = e.client.Prepare(e.ctx, `SELECT count(*) FROM "cpu@v2" WHERE host = ?`); err != nil {
					e.t.Fatal(err)
				}
				keepNone(e)
			},
			run: func(e *sqlCatEnv) error {
				defer early.Close(e.ctx)
				return e.execPreparedErr(e.ctx, early, e.oneRow([]arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}}, "a"))
			}},
		{name: "ts_coverage of a table at a malformed version", category: asOf, client: goSQL, op: `Execute SELECT * FROM ts_coverage('cpu@v', …)`, code: codes.InvalidArgument, frags: []string{"ts_coverage", `"cpu@v"`, `"@v" is not a version`},
			run: func(e *sqlCatEnv) error {
				return e.queryErr("SELECT * FROM ts_coverage('cpu@v', " + fmtTime(t0) + ", " + fmtTime(t0.Add(time.Hour)) + ")")
			}},
		{name: "table at a version without quotes", category: asOf, client: goSQL, op: "Execute SELECT * FROM cpu@v2", code: codes.InvalidArgument, frags: []string{`syntax error at or near "@"`, `FROM "cpu@v12"`},
			run: func(e *sqlCatEnv) error { return e.queryErr("SELECT * FROM cpu@v2") }},
		{name: "DuckDB's AT (VERSION => …) clause", category: asOf, client: goSQL, op: "Execute SELECT * FROM cpu AT (VERSION => 1)", code: codes.InvalidArgument, frags: []string{"cpu AT (VERSION => …) is not supported", `"cpu@v12" reads version 12`},
			run: func(e *sqlCatEnv) error { return e.queryErr("SELECT * FROM cpu AT (VERSION => 1)") }},
	}
}
