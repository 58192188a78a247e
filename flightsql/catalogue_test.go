//go:build duckdb_arrow

package flightsql

// The Flight SQL rows of the bad-input catalogue (issue 8; the Flight rows
// are in flightserver/catalogue*_test.go): bulk ingest, SQL and prepared
// statements a client can get wrong, sent through arrow-go's Flight SQL
// client and the ADBC Go Flight SQL driver to a real server. Each case
// runs on a fresh root holding table cpu (and whatever its setup adds: a
// damaged copy of cpu, say); the root (path, size and SHA-256 of every
// file) must not change from after the setup, no message may show the
// root's path, and cpu must still count its rows afterwards. The authentication cases run on the TLS listener with
// the Auth middleware of auth_test.go (a read and a write token); their
// fixture and after-check send the write token. With -update-catalogue the
// test rewrites its section of docs/reliability-catalogue.md, without it
// it checks the section.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/internal/testkit"
)

var updateCatalogue = flag.Bool("update-catalogue", false, "rewrite the Flight SQL section of docs/reliability-catalogue.md from the cases")

// sqlBadCase is one row of the catalogue.
type sqlBadCase struct {
	name, category, client, op string
	code                       codes.Code
	frags                      []string
	// auth runs the case on startSQLAuth's listener; ctx then carries
	// the write token and run sends its own credential.
	auth bool
	// tweak, when set, changes the Flight SQL options of the server the
	// case runs on (not with auth).
	tweak func(*Options)
	// setup prepares what the case meets (a damaged table, say) after
	// the fixture; the "before" snapshot is taken after it.
	setup func(e *sqlCatEnv)
	run   func(e *sqlCatEnv) error
}

type sqlCatEnv struct {
	*sqlServer
	ctx context.Context
	// bare is ctx without a credential; auth is the listener of an auth
	// case (nil otherwise).
	bare context.Context
	auth *sqlAuthEnv
}

// adbcAuthErr is adbcErr over the TLS listener of an auth case, with the
// ADBC Go driver sending authorization: header on every call.
func (e *sqlCatEnv) adbcAuthErr(header string, fn func(adbc.Connection) error) error {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(e.t, 0)
	cn, closeCn, err := e.auth.adbcOpen(e.bare, mem, map[string]string{adbcflightsql.OptionAuthorizationHeader: header})
	if err != nil {
		return grpcOf(err)
	}
	defer closeCn()
	return grpcOf(fn(cn))
}

// adbcIngestAppend bulk-ingests ten new rows into table through ADBC.
func adbcIngestAppend(ctx context.Context, table string) func(adbc.Connection) error {
	return adbcIngestMode(ctx, table, adbc.OptionValueIngestModeAppend)
}

// adbcIngestMode bulk-ingests ten new rows into table through ADBC in mode
// (an adbc.OptionValueIngestMode…).
func adbcIngestMode(ctx context.Context, table, mode string) func(adbc.Connection) error {
	return adbcIngestAt(ctx, table, mode, t0.AddDate(0, 0, 1))
}

// adbcIngestAt bulk-ingests ten rows of hosts a and b from start into
// table through ADBC in mode (an adbc.OptionValueIngestMode…).
func adbcIngestAt(ctx context.Context, table, mode string, start time.Time) func(adbc.Connection) error {
	return func(cn adbc.Connection) error {
		st, err := cn.NewStatement()
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.SetOption(adbc.OptionKeyIngestTargetTable, table); err != nil {
			return err
		}
		if err := st.SetOption(adbc.OptionKeyIngestMode, mode); err != nil {
			return err
		}
		// The driver does not release a bound batch when the ingest
		// fails (768 bytes leaked per call, ADBC Go 1.x), so this one
		// is not counted.
		rec := cpuBatch(memory.NewGoAllocator(), start, 10, "a", "b")
		defer rec.Release()
		if err := st.Bind(ctx, rec); err != nil {
			return err
		}
		_, err = st.ExecuteUpdate(ctx)
		return err
	}
}

// adbcErr runs fn on an ADBC Go Flight SQL connection to the server and
// turns the ADBC error it returns back into the gRPC status the driver
// received (the driver keeps the gRPC code as the vendor code).
func (e *sqlCatEnv) adbcErr(fn func(adbc.Connection) error) error {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(e.t, 0)
	db, err := adbcflightsql.NewDriver(mem).NewDatabase(map[string]string{adbc.OptionKeyURI: "grpc://" + e.srv.Addr().String()})
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	cn, err := db.Open(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer cn.Close()
	err = fn(cn)
	var ae adbc.Error
	if errors.As(err, &ae) {
		return status.Error(codes.Code(ae.VendorCode), ae.Msg)
	}
	return err
}

// adbcQuery runs q through ADBC and reads the whole result.
func adbcQuery(ctx context.Context, q string) func(adbc.Connection) error {
	return func(cn adbc.Connection) error { return adbcQueryEach(ctx, cn, q, nil) }
}

// adbcQueryEach runs q on cn through ADBC and calls fn, unless it is nil,
// with each batch of the result. When nothing else failed, the error of
// closing the statement is returned.
func adbcQueryEach(ctx context.Context, cn adbc.Connection, q string, fn func(arrow.RecordBatch)) (err error) {
	st, err := cn.NewStatement()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); err == nil {
			err = cerr
		}
	}()
	if err := st.SetSqlQuery(q); err != nil {
		return err
	}
	rdr, _, err := st.ExecuteQuery(ctx)
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
		if fn != nil {
			fn(rdr.RecordBatch())
		}
	}
	return rdr.Err()
}

// queryErr runs q through the Flight SQL client and reads the result.
func (e *sqlCatEnv) queryErr(q string) error {
	r, err := e.query(e.ctx, q)
	if err == nil {
		r.release()
	}
	return err
}

// preparedErr prepares q, binds params (nil: none; released) and executes
// it.
func (e *sqlCatEnv) preparedErr(q string, params arrow.RecordBatch) error {
	p, err := e.client.Prepare(e.ctx, q)
	if err != nil {
		if params != nil {
			params.Release()
		}
		return err
	}
	defer p.Close(e.ctx)
	return e.execPreparedErr(e.ctx, p, params)
}

// stringParams is a parameter batch of n strings of size bytes each, in
// one nullable string column p.
func stringParams(mem memory.Allocator, n, size int) arrow.RecordBatch {
	sb := array.NewStringBuilder(mem)
	for range n {
		sb.Append(strings.Repeat("y", size))
	}
	col := sb.NewArray()
	sb.Release()
	defer col.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "p", Type: arrow.BinaryTypes.String, Nullable: true}}, nil), []arrow.Array{col}, int64(n))
}

// oneRow builds a one-row batch of fields from values (string, float64,
// int64 or a list of int64).
func (e *sqlCatEnv) oneRow(fields []arrow.Field, values ...any) arrow.RecordBatch {
	b := array.NewRecordBuilder(e.cliMem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i, v := range values {
		switch x := v.(type) {
		case string:
			b.Field(i).(*array.StringBuilder).Append(x)
		case float64:
			b.Field(i).(*array.Float64Builder).Append(x)
		case int64:
			b.Field(i).(*array.Int64Builder).Append(x)
		case []int64:
			lb := b.Field(i).(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int64Builder).AppendValues(x, nil)
		case arrow.Timestamp:
			b.Field(i).(*array.TimestampBuilder).Append(x)
		}
	}
	return b.NewRecordBatch()
}

// damagedCopy copies cpu to table name, has the server open the copy, and
// applies damage to the file of its first segment; it returns that
// segment's table-relative path.
func (e *sqlCatEnv) damagedCopy(name string, damage func(file string)) string {
	e.t.Helper()
	copyDir(e.t, e.root, "cpu", name)
	tb, err := e.svc.Table(e.ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	seg := tb.State().Segments[0].Path
	damage(filepath.Join(e.root, name, filepath.FromSlash(seg)))
	return seg
}

// namesSegment fails the case when err's message does not name seg.
func (e *sqlCatEnv) namesSegment(err error, seg string) error {
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "segment "+seg) {
		e.t.Errorf("the error does not name the damaged segment %s: %s", seg, msg)
	}
	return err
}

// swapSegment overwrites file with the one segment of a new table, other
// (ten rows of host z): a valid segment of another size and row count.
func (e *sqlCatEnv) swapSegment(file string) {
	e.t.Helper()
	_, b := e.otherSegment(e.t, e.ctx)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// truncateHalf cuts file to half its size.
func (e *sqlCatEnv) truncateHalf(file string) {
	e.t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.Truncate(file, fi.Size()/2); err != nil {
		e.t.Fatal(err)
	}
}

// bindStrings prepares q (one VARCHAR parameter), binds n strings of size
// bytes and executes it.
func (e *sqlCatEnv) bindStrings(q string, n, size int) error {
	return e.preparedErr(q, stringParams(e.cliMem, n, size))
}

func sqlCatalogue() []sqlBadCase {
	const ingest = "bulk ingest"
	const sql = "SQL statement"
	const writes = "SQL write or file access"
	const prep = "prepared statement"
	const disk = "on disk"
	const bounds = "resource bounds"
	const auth = "authentication"
	reader := "token reader has read scope"
	goSQL := "arrow-go Flight SQL"
	goADBC := "ADBC Go driver"
	ingestBatch := func(e *sqlCatEnv) arrow.RecordBatch { return cpuBatch(e.cliMem, t0.AddDate(0, 0, 1), 10, "a", "b") }
	ingestErr := func(e *sqlCatEnv, table, mode string, opts map[string]string, rec arrow.RecordBatch) error {
		defer rec.Release()
		_, err := e.ingest(e.ctx, table, mode, opts, rec)
		return err
	}
	// seg is the segment a damage setup damaged, for its run to check
	// that the message names it.
	var seg string
	scanQuery := "SELECT count(*), sum(usage) FROM cpu2"
	// A server whose prepared statements may hold 4 MiB (1 MiB per
	// caller), so that the cases need not send 64 MiB.
	smallPrepared := func(o *Options) { o.MaxPreparedBytes = 4 << 20 }
	preparedFrags := []string{"budget of 1 MiB per caller", "a quarter of the server's 4 MiB", "--sql-prepared-bytes"}
	return []sqlBadCase{
		{name: "bulk ingest (append) into an unknown table", category: ingest, client: goSQL, op: "ExecuteIngest mode append", code: codes.NotFound, frags: []string{"nosuch", "does not exist"},
			run: func(e *sqlCatEnv) error { return ingestErr(e, "nosuch", "append", nil, ingestBatch(e)) }},
		{name: "bulk ingest into an unknown table", category: ingest, client: goADBC, op: "adbc.ingest.target_table, mode append", code: codes.NotFound, frags: []string{"nosuch", "does not exist"},
			run: func(e *sqlCatEnv) error { return e.adbcErr(adbcIngestAppend(e.ctx, "nosuch")) }},
		{name: "bulk ingest with a column of the wrong type", category: ingest, client: goSQL, op: "ExecuteIngest mode append", code: codes.InvalidArgument, frags: []string{`"usage"`, "utf8"},
			run: func(e *sqlCatEnv) error {
				rec := e.oneRow([]arrow.Field{cpuSchema.Field(0), cpuSchema.Field(1), {Name: "usage", Type: arrow.BinaryTypes.String, Nullable: true}},
					arrow.Timestamp(t0.AddDate(0, 0, 1).UnixMicro()), "a", "high")
				return ingestErr(e, "cpu", "append", nil, rec)
			}},
		{name: "bulk ingest of rows overlapping the table", category: ingest, client: goSQL, op: "ExecuteIngest mode append", code: codes.FailedPrecondition, frags: []string{"overlaps data already in the table", "nothing was committed"},
			run: func(e *sqlCatEnv) error { return ingestErr(e, "cpu", "append", nil, cpuBatch(e.cliMem, t0, 10, "a")) }},
		{name: "bulk ingest (create) of an existing table", category: ingest, client: goSQL, op: "ExecuteIngest mode create", code: codes.AlreadyExists, frags: []string{"cpu", "already exists"},
			run: func(e *sqlCatEnv) error { return ingestErr(e, "cpu", "create", cpuOpts, ingestBatch(e)) }},
		{name: "bulk ingest (create) of an existing table", category: ingest, client: goADBC, op: "adbc.ingest.target_table cpu, mode create", code: codes.AlreadyExists, frags: []string{"table cpu already exists", "mode create", "use mode append or create_append"},
			run: func(e *sqlCatEnv) error {
				return e.adbcErr(adbcIngestMode(e.ctx, "cpu", adbc.OptionValueIngestModeCreate))
			}},
		{name: "bulk ingest (create) without the index options", category: ingest, client: goSQL, op: "ExecuteIngest mode create", code: codes.InvalidArgument, frags: []string{"tsflight.granularity"},
			run: func(e *sqlCatEnv) error { return ingestErr(e, "newt", "create", nil, ingestBatch(e)) }},
		{name: "bulk ingest with an unknown option", category: ingest, client: goSQL, op: "ExecuteIngest mode create", code: codes.InvalidArgument, frags: []string{`unknown option "tsflight.bogus"`},
			run: func(e *sqlCatEnv) error {
				return ingestErr(e, "newt", "create", map[string]string{"tsflight.granularity": "1s", "tsflight.bogus": "x"}, ingestBatch(e))
			}},
		{name: "bulk ingest in mode replace", category: ingest, client: goSQL, op: "ExecuteIngest mode replace", code: codes.Unimplemented, frags: []string{"mode replace is not supported"},
			run: func(e *sqlCatEnv) error { return ingestErr(e, "cpu", "replace", cpuOpts, ingestBatch(e)) }},
		{name: "bulk ingest into a hostile table name", category: ingest, client: goSQL, op: "ExecuteIngest mode create, table ../escape", code: codes.InvalidArgument, frags: []string{`"../escape"`, "is not allowed"},
			run: func(e *sqlCatEnv) error { return ingestErr(e, "../escape", "create", cpuOpts, ingestBatch(e)) }},

		{name: "SQL syntax error", category: sql, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"syntax error", "SELEKT"},
			run: func(e *sqlCatEnv) error { return e.queryErr("SELEKT 1") }},
		{name: "SQL syntax error", category: sql, client: goADBC, op: "Statement.ExecuteQuery", code: codes.InvalidArgument, frags: []string{"syntax error", "SELEKT"},
			run: func(e *sqlCatEnv) error { return e.adbcErr(adbcQuery(e.ctx, "SELEKT 1")) }},
		{name: "query of an unknown table", category: sql, client: goSQL, op: "Execute", code: codes.NotFound, frags: []string{"nosuchtable"},
			run: func(e *sqlCatEnv) error { return e.queryErr("SELECT * FROM nosuchtable") }},
		{name: "query of an unknown table", category: sql, client: goADBC, op: "Statement.ExecuteQuery", code: codes.NotFound, frags: []string{"nosuchtable"},
			run: func(e *sqlCatEnv) error { return e.adbcErr(adbcQuery(e.ctx, "SELECT * FROM nosuchtable")) }},
		{name: "query of an unknown column", category: sql, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"nosuchcolumn"},
			run: func(e *sqlCatEnv) error { return e.queryErr("SELECT nosuchcolumn FROM cpu") }},
		{name: "two statements in one text", category: sql, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"2 statements"},
			run: func(e *sqlCatEnv) error { return e.queryErr("SELECT 1; SELECT 2") }},
		{name: "forged statement ticket", category: sql, client: goSQL, op: "DoGet", code: codes.InvalidArgument, frags: []string{"not a tsflight statement ticket"},
			run: func(e *sqlCatEnv) error { return e.doGetHandle(e.t, []byte("garbage")) }},

		{name: "INSERT", category: writes, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"read-only", "INSERT"},
			run: func(e *sqlCatEnv) error { return e.queryErr("INSERT INTO cpu VALUES (now(), 'x', 1)") }},
		{name: "INSERT", category: writes, client: goADBC, op: "Statement.ExecuteUpdate", code: codes.InvalidArgument, frags: []string{"read-only", "INSERT"},
			run: func(e *sqlCatEnv) error {
				return e.adbcErr(func(cn adbc.Connection) error {
					st, err := cn.NewStatement()
					if err != nil {
						return err
					}
					defer st.Close()
					if err := st.SetSqlQuery("INSERT INTO cpu VALUES (now(), 'x', 1)"); err != nil {
						return err
					}
					_, err = st.ExecuteUpdate(e.ctx)
					return err
				})
			}},
		{name: "DELETE as an update", category: writes, client: goSQL, op: "ExecuteUpdate", code: codes.InvalidArgument, frags: []string{"read-only", "DELETE"},
			run: func(e *sqlCatEnv) error {
				_, err := e.client.ExecuteUpdate(e.ctx, "DELETE FROM cpu")
				return err
			}},
		{name: "CREATE TABLE", category: writes, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"read-only", "CREATE"},
			run: func(e *sqlCatEnv) error { return e.queryErr("CREATE TABLE t (x INT)") }},
		{name: "COPY a table to a file", category: writes, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"read-only", "COPY"},
			run: func(e *sqlCatEnv) error {
				return e.queryErr("COPY cpu TO '" + filepath.Join(e.root, "out.csv") + "'")
			}},
		{name: "ATTACH a database file", category: writes, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"read-only", "ATTACH"},
			run: func(e *sqlCatEnv) error { return e.queryErr("ATTACH '" + filepath.Join(e.root, "x.db") + "' AS x") }},
		{name: "SET a setting", category: writes, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"read-only", "SET"},
			run: func(e *sqlCatEnv) error { return e.queryErr("SET threads = 1") }},
		{name: "read_csv of a file outside the root", category: writes, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"table function read_csv is not available"},
			run: func(e *sqlCatEnv) error { return e.queryErr("SELECT * FROM read_csv('/etc/passwd')") }},
		{name: "read_parquet of a path escaping the root", category: writes, client: goSQL, op: "Execute", code: codes.InvalidArgument, frags: []string{"table function read_parquet is not available"},
			run: func(e *sqlCatEnv) error {
				return e.queryErr("SELECT * FROM read_parquet('" + e.root + "/../x.parquet')")
			}},

		{name: "prepared statement executed without its parameters", category: prep, client: goSQL, op: "Prepare + Execute", code: codes.InvalidArgument, frags: []string{"2 parameters"},
			run: func(e *sqlCatEnv) error {
				return e.preparedErr("SELECT count(*) FROM cpu WHERE host = ? AND ts >= ?", nil)
			}},
		{name: "prepared statement with too few parameters", category: prep, client: goSQL, op: "Prepare + bind 1 of 2 + Execute", code: codes.InvalidArgument, frags: []string{"2 parameters", "1"},
			run: func(e *sqlCatEnv) error {
				return e.preparedErr("SELECT count(*) FROM cpu WHERE host = ? AND ts >= ?", e.oneRow([]arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}}, "a"))
			}},
		{name: "prepared statement with a parameter of the wrong type", category: prep, client: goSQL, op: "Prepare + bind + Execute", code: codes.InvalidArgument, frags: []string{"not a timestamp"},
			run: func(e *sqlCatEnv) error {
				return e.preparedErr("SELECT count(*) FROM cpu WHERE host = ? AND ts >= ?",
					e.oneRow([]arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}, {Name: "ts", Type: arrow.BinaryTypes.String}}, "a", "not a timestamp"))
			}},
		{name: "prepared statement with a list parameter", category: prep, client: goSQL, op: "Prepare + bind + Execute", code: codes.InvalidArgument, frags: []string{"cannot be bound as a parameter"},
			run: func(e *sqlCatEnv) error {
				return e.preparedErr("SELECT count(*) FROM cpu WHERE host = ?", e.oneRow([]arrow.Field{{Name: "p", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, []int64{1}))
			}},
		{name: "prepared write statement", category: prep, client: goSQL, op: "Prepare", code: codes.InvalidArgument, frags: []string{"read-only", "DELETE"},
			run: func(e *sqlCatEnv) error { return e.preparedErr("DELETE FROM cpu WHERE host = ?", nil) }},

		{name: "segment file swapped for another valid segment, then a query", category: disk, client: goSQL, op: "Execute " + scanQuery, code: codes.DataLoss, frags: []string{"table cpu2", "segment data/_managed/append/", "is damaged", "bytes, the table's log records"},
			setup: func(e *sqlCatEnv) { seg = e.damagedCopy("cpu2", e.swapSegment) },
			run:   func(e *sqlCatEnv) error { return e.namesSegment(e.queryErr(scanQuery), seg) }},
		{name: "segment file swapped for another valid segment, then a query", category: disk, client: goADBC, op: "Statement.ExecuteQuery " + scanQuery, code: codes.DataLoss, frags: []string{"table cpu2", "segment data/_managed/append/", "is damaged", "bytes, the table's log records"},
			setup: func(e *sqlCatEnv) { seg = e.damagedCopy("cpu2", e.swapSegment) },
			run:   func(e *sqlCatEnv) error { return e.namesSegment(e.adbcErr(adbcQuery(e.ctx, scanQuery)), seg) }},
		{name: "segment file truncated, then a query", category: disk, client: goSQL, op: "Execute " + scanQuery, code: codes.DataLoss, frags: []string{"table cpu2", "segment data/_managed/append/", "is damaged", "bytes, the table's log records"},
			setup: func(e *sqlCatEnv) { seg = e.damagedCopy("cpu2", e.truncateHalf) },
			run:   func(e *sqlCatEnv) error { return e.namesSegment(e.queryErr(scanQuery), seg) }},
		{name: "segment file truncated, then a query", category: disk, client: goADBC, op: "Statement.ExecuteQuery " + scanQuery, code: codes.DataLoss, frags: []string{"table cpu2", "segment data/_managed/append/", "is damaged", "bytes, the table's log records"},
			setup: func(e *sqlCatEnv) { seg = e.damagedCopy("cpu2", e.truncateHalf) },
			run:   func(e *sqlCatEnv) error { return e.namesSegment(e.adbcErr(adbcQuery(e.ctx, scanQuery)), seg) }},

		{name: "ts_gaps over a range with more gaps than one call returns", category: bounds, client: goSQL, op: "Execute SELECT count(*) FROM ts_gaps('holes', …), 4 gaps, the bound lowered from 500,000 to 3", code: codes.ResourceExhausted, frags: []string{"ts_gaps", "more than 3 gaps", "narrow the range or name an entity"},
			setup: func(e *sqlCatEnv) {
				// holes: host a at 0, 2, 4 and 6 s: gaps at 1, 3, 5 and
				// 7 s of [t0, t0+8s).
				rec := everyOtherSecond(e.cliMem, 0, 4)
				defer rec.Release()
				if _, err := e.ingest(e.ctx, "holes", "create", cpuOpts, rec); err != nil {
					e.t.Fatal(err)
				}
				saved := tsGapsMax
				tsGapsMax = 3
				e.t.Cleanup(func() { tsGapsMax = saved })
			},
			run: func(e *sqlCatEnv) error {
				return e.queryErr("SELECT count(*) FROM ts_gaps('holes', " + fmtTime(t0) + ", " + fmtTime(t0.Add(8*time.Second)) + ")")
			}},
		{name: "prepared statement text over the caller's byte budget", category: bounds, client: goSQL, op: "Prepare a 600 KiB text, server MaxPreparedBytes 4 MiB", code: codes.ResourceExhausted,
			frags: append([]string{"the statement's text would hold"}, preparedFrags...), tweak: smallPrepared,
			run: func(e *sqlCatEnv) error {
				return e.preparedErr("SELECT 1 AS v -- "+strings.Repeat("x", 600<<10), nil)
			}},
		{name: "prepared statement with bound parameters over the caller's byte budget", category: bounds, client: goSQL, op: "Prepare + bind 3 × 400 KiB strings + Execute, server MaxPreparedBytes 4 MiB", code: codes.ResourceExhausted,
			frags: append([]string{"the statement with its bound parameters would hold"}, preparedFrags...), tweak: smallPrepared,
			run: func(e *sqlCatEnv) error { return e.bindStrings("SELECT length(?::VARCHAR)", 3, 400<<10) }},

		{name: "query without a token", category: auth, client: goSQL, op: "Execute, no header", code: codes.Unauthenticated, frags: []string{"authentication required", "authorization: Bearer <token>"}, auth: true,
			run: func(e *sqlCatEnv) error {
				r, err := e.query(e.bare, "SELECT count(*) FROM cpu")
				if err == nil {
					r.release()
				}
				return err
			}},
		{name: "read token sends an update (CommandStatementUpdate)", category: auth, client: goSQL, op: "ExecuteUpdate DELETE, Bearer READER", code: codes.PermissionDenied, frags: []string{"DoPut (Flight SQL CommandStatementUpdate) needs write scope", reader}, auth: true,
			run: func(e *sqlCatEnv) error {
				_, err := e.client.ExecuteUpdate(bearerCtx(e.bare, e.auth.read), "DELETE FROM cpu")
				return err
			}},
		{name: "read token bulk-ingests (append)", category: auth, client: goADBC, op: "adbc.ingest.target_table cpu, mode append, authorization_header Bearer READER", code: codes.PermissionDenied, frags: []string{"DoPut (Flight SQL bulk ingest) needs write scope", reader}, auth: true,
			run: func(e *sqlCatEnv) error {
				return e.adbcAuthErr("Bearer "+e.auth.read, adbcIngestAppend(e.bare, "cpu"))
			}},
		{name: "read token bulk-ingests a new table (create)", category: auth, client: goSQL, op: "ExecuteIngest mode create newt, Bearer READER", code: codes.PermissionDenied, frags: []string{"DoPut (Flight SQL bulk ingest) needs write scope", reader}, auth: true,
			run: func(e *sqlCatEnv) error {
				rec := ingestBatch(e)
				defer rec.Release()
				_, err := e.ingest(bearerCtx(e.bare, e.auth.read), "newt", "create", cpuOpts, rec)
				if _, serr := os.Stat(filepath.Join(e.root, "newt")); !os.IsNotExist(serr) {
					e.t.Fatalf("table newt exists after the refused ingest (%v)", serr)
				}
				return err
			}},
	}
}

func TestSQLBadInputCatalogue(t *testing.T) {
	cases := append(sqlCatalogue(), asOfCatalogue()...)
	cases = append(cases, namesSQLCatalogue()...)
	for i, c := range cases {
		t.Run(fmt.Sprintf("%02d %s (%s)", i+1, c.name, c.client), func(t *testing.T) {
			var a *sqlAuthEnv
			var s *sqlServer
			if c.auth {
				if c.tweak != nil {
					t.Fatal("an auth case cannot tweak the server's options")
				}
				a = startSQLAuth(t)
				s = a.sqlServer
			} else {
				s = startSQLWith(t, c.tweak)
			}
			e := &sqlCatEnv{sqlServer: s, ctx: ctxT(t), auth: a}
			e.bare = e.ctx
			if a != nil {
				e.ctx = bearerCtx(e.bare, a.write)
			}
			s.makeCPU(e.ctx, 1)
			if c.setup != nil {
				c.setup(e)
			}
			before := testkit.Snapshot(t, s.root)
			err := c.run(e)
			wantCode(t, c.op, err, c.code, c.frags...)
			if msg := status.Convert(err).Message(); strings.Contains(msg, s.root) {
				t.Fatalf("%s: the message shows the server's root %s: %s", c.op, s.root, msg)
			}
			if a != nil {
				for _, secret := range []string{a.read, a.write} {
					if strings.Contains(err.Error(), secret[:12]) {
						t.Fatalf("%s: the error quotes a secret", c.op)
					}
				}
			}
			if d := testkit.SnapshotDiff(before, testkit.Snapshot(t, s.root)); len(d) > 0 {
				t.Fatalf("%s wrote to the root:\n  %s", c.op, strings.Join(d, "\n  "))
			}
			if got := s.scalar(e.ctx, "SELECT count(*) FROM cpu"); got != "7200" {
				t.Fatalf("after the case count(*) FROM cpu = %s, want 7200", got)
			}
		})
	}
	if t.Failed() {
		return
	}
	syncSQLSection(t, renderSQLSection(cases))
}

var codeWords = regexp.MustCompile(`([a-z])([A-Z])`)

func renderSQLSection(cases []sqlBadCase) string {
	cell := strings.NewReplacer("|", `\|`, "\n", " ").Replace
	var b strings.Builder
	fmt.Fprintf(&b, "## Flight SQL (arrow-go Flight SQL client and ADBC Go driver): %d cases\n\n", len(cases))
	b.WriteString("Run by `go test -tags duckdb_arrow ./flightsql -run TestSQLBadInputCatalogue`; all pass.\n\n")
	b.WriteString("| # | category | case | client call | expected code | message fragments | writes |\n|---|---|---|---|---|---|---|\n")
	for i, c := range cases {
		frags := make([]string, len(c.frags))
		for j, f := range c.frags {
			frags[j] = "`" + cell(f) + "`"
		}
		code := strings.ToUpper(codeWords.ReplaceAllString(c.code.String(), "${1}_${2}"))
		fmt.Fprintf(&b, "| S%d | %s | %s | %s | `%s` | %s | nothing |\n", i+1, cell(c.category), cell(c.name), cell(c.client+": "+c.op), code, strings.Join(frags, " · "))
	}
	return b.String()
}

// syncSQLSection rewrites (-update-catalogue) or checks the flightsql
// section of the doc; the Flight test owns the rest of the file and puts
// the section after its own.
func syncSQLSection(t *testing.T, content string) {
	t.Helper()
	const doc = "../docs/reliability-catalogue.md"
	begin, end := "<!-- flightsql catalogue: generated, do not edit -->\n", "<!-- end of flightsql catalogue -->\n"
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatalf("%v (run go test ./flightserver -run TestBadInputCatalogue -update-catalogue first)", err)
	}
	text, want := string(data), begin+content+end
	var next string
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i >= 0 && j > i {
		if text[i:j+len(end)] == want {
			return
		}
		next = text[:i] + want + text[j+len(end):]
	} else {
		at := strings.Index(text, "<!-- python catalogue:")
		if at < 0 {
			at = len(text)
		}
		next = text[:at] + want + "\n" + text[at:]
	}
	if !*updateCatalogue {
		t.Fatalf("%s: the flightsql section does not match the cases; run the test with -update-catalogue and commit the file", doc)
	}
	if err := os.WriteFile(doc, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote the flightsql section of %s", doc)
}
