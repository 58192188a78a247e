//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tsflight/tsflight/internal/testkit"
)

// paramBatch builds a one-batch parameter binding: fields' types decide
// how each value (time.Time, string, int64, float64, bool or nil) is
// appended.
func paramBatch(t *testing.T, s *sqlServer, fields []arrow.Field, rows [][]any) arrow.RecordBatch {
	t.Helper()
	for i := range fields {
		fields[i].Nullable = true
	}
	b := array.NewRecordBuilder(s.cliMem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, row := range rows {
		for i, v := range row {
			fb := b.Field(i)
			if v == nil {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.TimestampBuilder:
				unit := fields[i].Type.(*arrow.TimestampType).Unit
				ts, err := arrow.TimestampFromTime(v.(time.Time), unit)
				if err != nil {
					t.Fatal(err)
				}
				fb.Append(ts)
			case *array.StringBuilder:
				fb.Append(v.(string))
			case *array.Int64Builder:
				fb.Append(v.(int64))
			case *array.Int32Builder:
				fb.Append(int32(v.(int64)))
			case *array.Float64Builder:
				fb.Append(v.(float64))
			case *array.BooleanBuilder:
				fb.Append(v.(bool))
			default:
				t.Fatalf("paramBatch: unexpected builder %T", fb)
			}
		}
	}
	return b.NewRecordBatch()
}

func tsType(unit arrow.TimeUnit, tz string) arrow.DataType {
	return &arrow.TimestampType{Unit: unit, TimeZone: tz}
}

// schemaOf decodes an IPC-serialized schema.
func (s *sqlServer) schemaOf(b []byte) *arrow.Schema {
	s.t.Helper()
	return testkit.Schema(s.t, b, s.cliMem)
}

// packCmd packs a Flight SQL message as a CMD descriptor.
func packCmd(t *testing.T, msg proto.Message) *flight.FlightDescriptor {
	t.Helper()
	var a anypb.Any
	if err := a.MarshalFrom(msg); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b}
}

// prepare prepares q and closes it at the end of the test.
func (s *sqlServer) prepare(ctx context.Context, q string) *flightsql.PreparedStatement {
	s.t.Helper()
	p, err := s.client.Prepare(ctx, q)
	if err != nil {
		s.t.Fatalf("prepare %s: %v", q, err)
	}
	s.t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// execPrepared binds rows (if any) and fetches every endpoint.
func (s *sqlServer) execPrepared(ctx context.Context, p *flightsql.PreparedStatement, params arrow.RecordBatch) (*flight.FlightInfo, *result, error) {
	if params != nil {
		p.SetParameters(params)
		params.Release()
	}
	info, err := p.Execute(ctx)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.fetch(ctx, info)
	return info, r, err
}

// mustExecPrepared is execPrepared failing t (what names the call) on an
// error; the result is released when t ends.
func (s *sqlServer) mustExecPrepared(t testing.TB, ctx context.Context, what string, p *flightsql.PreparedStatement, params arrow.RecordBatch) (*flight.FlightInfo, *result) {
	t.Helper()
	info, r, err := s.execPrepared(ctx, p, params)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(r.release)
	return info, r
}

// execPreparedErr is execPrepared for its error only.
func (s *sqlServer) execPreparedErr(ctx context.Context, p *flightsql.PreparedStatement, params arrow.RecordBatch) error {
	_, r, err := s.execPrepared(ctx, p, params)
	if err == nil {
		r.release()
	}
	return err
}

func TestPreparedSchemas(t *testing.T) {
	s, ctx := startCPU(t, 2)

	q := "SELECT ts, host, usage FROM cpu WHERE ts >= ? AND ts < ? AND host = ? AND usage > ? ORDER BY ts LIMIT ?"
	p := s.prepare(ctx, q)
	if v, ok := p.IsUpdate(); !ok || v {
		t.Fatalf("IsUpdate = %v, %v; want false, true (a query)", v, ok)
	}
	wantParams := arrow.NewSchema([]arrow.Field{
		{Name: "parameter_1", Type: tsType(arrow.Millisecond, "UTC"), Nullable: true},
		{Name: "parameter_2", Type: tsType(arrow.Millisecond, "UTC"), Nullable: true},
		{Name: "parameter_3", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "parameter_4", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "parameter_5", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	if ps := p.ParameterSchema(); ps == nil || !ps.Equal(wantParams) {
		t.Fatalf("parameter schema\n%v\nwant\n%v", ps, wantParams)
	}
	ds := p.DatasetSchema()
	if ds == nil || ds.NumFields() != 3 {
		t.Fatalf("dataset schema %v, want 3 fields", ds)
	}
	for i, want := range []string{"ts:timestamp[us, tz=UTC]", "host:utf8", "usage:float64"} {
		if got := ds.Field(i).Name + ":" + ds.Field(i).Type.String(); got != want {
			t.Fatalf("dataset field %d = %s, want %s", i, got, want)
		}
	}
	// GetSchema of the prepared statement returns the dataset schema.
	sr, err := p.GetSchema(ctx)
	if err != nil {
		t.Fatalf("GetSchema(prepared): %v", err)
	}
	if gs := s.schemaOf(sr.Schema); !gs.Equal(ds) {
		t.Fatalf("GetSchema(prepared) = %v, want the dataset schema %v", gs, ds)
	}

	// Bind the types the server declared and run: the stream's schema and
	// FlightInfo's schema are the dataset schema.
	params := paramBatch(t, s, wantParams.Fields(), [][]any{{t0.Add(time.Hour), t0.Add(2 * time.Hour), "b", 3700.0, int64(3)}})
	info, r := s.mustExecPrepared(t, ctx, "execute", p, params)
	if !r.schema.Equal(ds) {
		t.Fatalf("stream schema\n%v\nwant the dataset schema\n%v", r.schema, ds)
	}
	if is := s.schemaOf(info.Schema); !is.Equal(ds) {
		t.Fatalf("FlightInfo schema\n%v\nwant the dataset schema\n%v", is, ds)
	}
	want := []string{
		"2024-01-01T01:01:40Z|b|3701",
		"2024-01-01T01:01:41Z|b|3702",
		"2024-01-01T01:01:42Z|b|3703",
	}
	if got := r.rowsOf(); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}

	// A statement without parameters: an empty parameter schema, and it
	// runs without binding.
	p0 := s.prepare(ctx, "SELECT host, count(*) AS n FROM cpu GROUP BY host ORDER BY host")
	if ps := p0.ParameterSchema(); ps == nil || ps.NumFields() != 0 {
		t.Fatalf("parameter schema of a statement without parameters: %v", ps)
	}
	_, r0 := s.mustExecPrepared(t, ctx, "execute without parameters", p0, nil)
	if got := r0.rowsOf(); fmt.Sprint(got) != "[a|7200 b|7200]" {
		t.Fatalf("rows %v", got)
	}
	if !r0.schema.Equal(p0.DatasetSchema()) {
		t.Fatalf("stream schema %v, dataset schema %v", r0.schema, p0.DatasetSchema())
	}
}

func TestPreparedTimestampParameterUnits(t *testing.T) {
	s, ctx := startCPU(t, 4)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	q := "SELECT count(*), min(usage), max(usage) FROM cpu WHERE ts >= ? AND ts < ? AND host = ?"
	lo, hi := t0.Add(time.Hour), t0.Add(2*time.Hour)
	cases := []struct {
		name string
		typ  arrow.DataType
		lo   time.Time
		hi   time.Time
	}{
		{"ms UTC (declared)", tsType(arrow.Millisecond, "UTC"), lo, hi},
		{"us UTC", tsType(arrow.Microsecond, "UTC"), lo, hi},
		{"ns UTC", tsType(arrow.Nanosecond, "UTC"), lo, hi},
		{"s UTC", tsType(arrow.Second, "UTC"), lo, hi},
		{"us naive", tsType(arrow.Microsecond, ""), lo, hi},
		{"ns naive", tsType(arrow.Nanosecond, ""), lo, hi},
		{"us Europe/Berlin", tsType(arrow.Microsecond, "Europe/Berlin"), lo.In(berlin), hi.In(berlin)},
		{"ns +05:30", tsType(arrow.Nanosecond, "+05:30"), lo, hi},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := s.prepare(ctx, q)
			params := paramBatch(t, s, []arrow.Field{{Name: "lo", Type: c.typ}, {Name: "hi", Type: c.typ}, {Name: "h", Type: arrow.BinaryTypes.String}},
				[][]any{{c.lo, c.hi, "b"}})
			_, r := s.mustExecPrepared(t, ctx, "execute", p, params)
			// Hour 1 of host b: usage 3601..7200.
			if got := r.rowsOf(); fmt.Sprint(got) != "[3600|3601|7200]" {
				t.Fatalf("rows %v, want [3600|3601|7200]", got)
			}
			// The parameter values pruned the plan to hour 1.
			if planned, total := s.lastPlan("cpu"); planned != 1 || total != 4 {
				t.Fatalf("planned %d of %d segments, want 1 of 4", planned, total)
			}
		})
	}
	// A sub-second bound keeps its precision (ns → the row at .5 s is
	// excluded, the next second included).
	p := s.prepare(ctx, "SELECT min(ts), count(*) FROM cpu WHERE ts > ? AND ts <= ? AND host = 'a'")
	params := paramBatch(t, s, []arrow.Field{{Name: "lo", Type: tsType(arrow.Nanosecond, "UTC")}, {Name: "hi", Type: tsType(arrow.Nanosecond, "UTC")}},
		[][]any{{t0.Add(2*time.Hour + 500*time.Millisecond), t0.Add(2*time.Hour + 10*time.Second)}})
	_, r := s.mustExecPrepared(t, ctx, "execute", p, params)
	if got := r.rowsOf(); fmt.Sprint(got) != "[2024-01-01T02:00:01Z|10]" {
		t.Fatalf("rows %v, want [2024-01-01T02:00:01Z|10]", got)
	}
	if planned, _ := s.lastPlan("cpu"); planned != 1 {
		t.Fatalf("planned %d segments, want 1", planned)
	}
}

func TestPreparedIntAndStringParameters(t *testing.T) {
	s, ctx := startCPU(t, 2)

	p := s.prepare(ctx, "SELECT host, usage FROM cpu WHERE host = ? AND CAST(usage AS BIGINT) BETWEEN ? AND ? ORDER BY usage LIMIT ?")
	wantTypes := []string{"utf8", "int64", "int64", "int64"}
	for i, f := range p.ParameterSchema().Fields() {
		if f.Type.String() != wantTypes[i] {
			t.Fatalf("parameter %d type %s, want %s (schema %v)", i+1, f.Type, wantTypes[i], p.ParameterSchema())
		}
	}
	// Int32 where int64 is declared: the server converts.
	params := paramBatch(t, s, []arrow.Field{
		{Name: "h", Type: arrow.BinaryTypes.String},
		{Name: "lo", Type: arrow.PrimitiveTypes.Int64},
		{Name: "hi", Type: arrow.PrimitiveTypes.Int32},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	}, [][]any{{"b", int64(100), int64(7000), int64(2)}})
	_, r := s.mustExecPrepared(t, ctx, "execute", p, params)
	if got := r.rowsOf(); fmt.Sprint(got) != "[b|100 b|101]" {
		t.Fatalf("rows %v, want [b|100 b|101]", got)
	}
	// A host parameter prunes nothing here (each segment holds both
	// hosts) but must still filter; NULL matches nothing.
	params = paramBatch(t, s, []arrow.Field{
		{Name: "h", Type: arrow.BinaryTypes.String},
		{Name: "lo", Type: arrow.PrimitiveTypes.Int64},
		{Name: "hi", Type: arrow.PrimitiveTypes.Int64},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	}, [][]any{{nil, int64(0), int64(10), int64(5)}, {"a'; DROP TABLE cpu; --", int64(0), int64(10), int64(5)}, {"a", int64(7198), int64(99999), int64(5)}})
	_, r2 := s.mustExecPrepared(t, ctx, "execute", p, params)
	if got := r2.rowsOf(); fmt.Sprint(got) != "[a|7198 a|7199]" {
		t.Fatalf("rows %v, want [a|7198 a|7199]", got)
	}
}

// TestPreparedParameterRowsInOrder: several bound rows run the statement
// once per row, their results streamed in row order through one endpoint
// (docs/flightsql.md, "Prepared statements"), each run pruned by its own
// parameter values.
func TestPreparedParameterRowsInOrder(t *testing.T) {
	s, ctx := startCPU(t, 4)
	p := s.prepare(ctx, "SELECT min(ts), count(*) FROM cpu WHERE ts >= ? AND ts < ?")
	h := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }
	typ := tsType(arrow.Microsecond, "UTC")
	params := paramBatch(t, s, []arrow.Field{{Name: "lo", Type: typ}, {Name: "hi", Type: typ}},
		[][]any{{h(2), h(3)}, {h(0), h(1)}, {h(3), h(3).Add(30 * time.Minute)}, {h(7), h(8)}})
	p.SetParameters(params)
	params.Release()
	info, err := p.Execute(ctx)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if len(info.Endpoint) != 1 {
		t.Fatalf("%d endpoints, want 1 running every parameter row", len(info.Endpoint))
	}
	if !info.Ordered {
		t.Fatal("FlightInfo.ordered is false")
	}
	before := len(s.plans("cpu"))
	r, err := s.fetch(ctx, info)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	defer r.release()
	want := []string{"2024-01-01T02:00:00Z|7200", "2024-01-01T00:00:00Z|7200", "2024-01-01T03:00:00Z|3600", "(null)|0"}
	if got := r.rowsOf(); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v (one per parameter row, in order)", got, want)
	}
	if !r.schema.Equal(s.schemaOf(info.Schema)) {
		t.Fatalf("stream schema %v, FlightInfo schema %v", r.schema, s.schemaOf(info.Schema))
	}
	plans := s.plans("cpu")[before:]
	if fmt.Sprint(plans) != "[[1 4] [1 4] [1 4] [0 4]]" {
		t.Fatalf("plans of the four runs (planned, segments) = %v, want [[1 4] [1 4] [1 4] [0 4]]", plans)
	}

	// Binding again replaces the rows.
	params = paramBatch(t, s, []arrow.Field{{Name: "lo", Type: typ}, {Name: "hi", Type: typ}}, [][]any{{h(1), h(4)}})
	_, r2 := s.mustExecPrepared(t, ctx, "execute", p, params)
	if got := r2.rowsOf(); fmt.Sprint(got) != "[2024-01-01T01:00:00Z|21600]" {
		t.Fatalf("rebound: %v", got)
	}
	if planned, _ := s.lastPlan("cpu"); planned != 3 {
		t.Fatalf("rebound: planned %d, want 3", planned)
	}

	// Rows whose results span several batches stay in order, and a NULL
	// parameter row yields nothing in between.
	p2 := s.prepare(ctx, "SELECT ts, host FROM cpu WHERE ts >= ? AND ts < ? ORDER BY ts, host")
	params = paramBatch(t, s, []arrow.Field{{Name: "lo", Type: typ}, {Name: "hi", Type: typ}},
		[][]any{{h(3), h(4)}, {nil, h(1)}, {h(0), h(2)}})
	_, r3 := s.mustExecPrepared(t, ctx, "execute", p2, params)
	if r3.rows != 7200+14400 {
		t.Fatalf("%d rows, want %d", r3.rows, 7200+14400)
	}
	rows := r3.rowsOf()
	if rows[0] != "2024-01-01T03:00:00Z|a" || rows[7199] != "2024-01-01T03:59:59Z|b" || rows[7200] != "2024-01-01T00:00:00Z|a" || rows[len(rows)-1] != "2024-01-01T01:59:59Z|b" {
		t.Fatalf("rows out of order: %s, %s, %s, %s", rows[0], rows[7199], rows[7200], rows[len(rows)-1])
	}
}

func TestPreparedErrors(t *testing.T) {
	s, ctx := startCPU(t, 1)

	// Executing without binding the parameters.
	p := s.prepare(ctx, "SELECT count(*) FROM cpu WHERE host = ? AND ts >= ?")
	_, err := p.Execute(ctx)
	wantCode(t, "execute without parameters", err, codes.InvalidArgument, "2 parameters")

	// Binding the wrong number of columns.
	params := paramBatch(t, s, []arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}}, [][]any{{"a"}})
	p.SetParameters(params)
	params.Release()
	_, err = p.Execute(ctx)
	wantCode(t, "execute with 1 of 2 parameters", err, codes.InvalidArgument)

	// Binding a value DuckDB cannot convert.
	params = paramBatch(t, s, []arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}, {Name: "ts", Type: arrow.BinaryTypes.String}}, [][]any{{"a", "not a timestamp"}})
	_, r, err := s.execPrepared(ctx, p, params)
	if err == nil {
		r.release()
	}
	wantCode(t, "execute with a bad timestamp", err, codes.InvalidArgument, "not a timestamp")

	// Too many parameter rows: each is one execution (fifth review).
	one := s.prepare(ctx, "SELECT count(*) FROM cpu WHERE host = ?")
	many := make([][]any, MaxParameterRows+1)
	for i := range many {
		many[i] = []any{"a"}
	}
	params = paramBatch(t, s, []arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}}, many)
	one.SetParameters(params)
	params.Release()
	_, err = one.Execute(ctx)
	wantCode(t, "binding 10,001 parameter rows", err, codes.ResourceExhausted, "more than 10000 parameter rows")

	// A dictionary index beyond its dictionary (once a panic).
	dict := array.NewStringBuilder(s.cliMem)
	dict.Append("a")
	dictArr := dict.NewArray()
	dict.Release()
	idx := array.NewInt32Builder(s.cliMem)
	idx.Append(7)
	idxArr := idx.NewArray()
	idx.Release()
	bad := array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, idxArr, dictArr)
	idxArr.Release()
	dictArr.Release()
	badBatch := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "h", Type: bad.DataType()}}, nil), []arrow.Array{bad}, 1)
	bad.Release()
	one.SetParameters(badBatch)
	badBatch.Release()
	_, err = one.Execute(ctx)
	wantCode(t, "a dictionary index beyond its dictionary", err, codes.InvalidArgument, "parameter 1 (h)")

	// Closing, then using the handle.
	p2, err := s.client.Prepare(ctx, "SELECT count(*) FROM cpu WHERE host = ?")
	if err != nil {
		t.Fatal(err)
	}
	handle := p2.Handle()
	if err := p2.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	again := flightsql.NewPreparedStatement(s.client, handle)
	_, err = again.GetSchema(ctx)
	wantCode(t, "GetSchema after close", err, codes.NotFound)
	_, err = again.Execute(ctx)
	wantCode(t, "execute after close", err, codes.NotFound)
	params = paramBatch(t, s, []arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}}, [][]any{{"a"}})
	again.SetParameters(params)
	params.Release()
	_, err = again.Execute(ctx)
	wantCode(t, "bind after close", err, codes.NotFound)
	again.Close(ctx)

	// A made-up handle.
	bogus := flightsql.NewPreparedStatement(s.client, []byte("no-such-handle"))
	_, err = bogus.Execute(ctx)
	wantCode(t, "execute a made-up handle", err, codes.NotFound)

	// Writes are refused at prepare time.
	wantReadOnly(t, "prepare ", []string{
		"INSERT INTO cpu VALUES (now(), 'x', 1)",
		"CREATE TABLE t (x INT)",
		"UPDATE cpu SET usage = 0",
		"DROP TABLE cpu",
	}, func(q string) error {
		_, err := s.client.Prepare(ctx, q)
		return err
	})
	// Other prepare errors.
	_, err = s.client.Prepare(ctx, "SELECT * FROM nosuchtable WHERE x = ?")
	wantCode(t, "prepare over a missing table", err, codes.NotFound, "nosuchtable")
	_, err = s.client.Prepare(ctx, "SELEKT 1")
	wantCode(t, "prepare bad syntax", err, codes.InvalidArgument)

	// A query executed as an update is refused.
	p3 := s.prepare(ctx, "SELECT count(*) FROM cpu")
	_, err = p3.ExecuteUpdate(ctx)
	wantCode(t, "ExecuteUpdate of a prepared query", err, codes.InvalidArgument, "read-only")

	// The server still answers, and the table is intact.
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "7200" {
		t.Fatalf("count = %s", got)
	}
}

// TestPreparedRawIsUpdate reads the raw ActionCreatePreparedStatementResult.
func TestPreparedRawIsUpdate(t *testing.T) {
	s, ctx := startCPU(t, 1)
	var a anypb.Any
	if err := a.MarshalFrom(&pb.ActionCreatePreparedStatementRequest{Query: "SELECT host FROM cpu WHERE ts < ?"}); err != nil {
		t.Fatal(err)
	}
	body, err := proto.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.doAction(ctx, flightsql.CreatePreparedStatementActionType, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("%d results, want 1", len(res))
	}
	var container anypb.Any
	var msg pb.ActionCreatePreparedStatementResult
	if err := proto.Unmarshal(res[0], &container); err != nil {
		t.Fatal(err)
	}
	if err := container.UnmarshalTo(&msg); err != nil {
		t.Fatal(err)
	}
	defer flightsql.NewPreparedStatement(s.client, msg.PreparedStatementHandle).Close(ctx)
	if msg.IsUpdate == nil || *msg.IsUpdate {
		t.Fatalf("is_update = %v, want present and false", msg.IsUpdate)
	}
	if len(msg.DatasetSchema) == 0 {
		t.Fatal("no dataset_schema (JDBC would treat the query as an update)")
	}
	ds := s.schemaOf(msg.DatasetSchema)
	if ds.NumFields() != 1 || ds.Field(0).Name != "host" || ds.Field(0).Type.ID() != arrow.STRING {
		t.Fatalf("dataset schema %v", ds)
	}
	ps := s.schemaOf(msg.ParameterSchema)
	if ps.NumFields() != 1 || !arrow.TypeEqual(ps.Field(0).Type, tsType(arrow.Millisecond, "UTC")) {
		t.Fatalf("parameter schema %v, want one timestamp[ms, UTC]", ps)
	}
}

// ---- the statement path ----

func TestStatementSchemaMatchesStream(t *testing.T) {
	s, ctx := startCPU(t, 2)
	for _, q := range []string{
		"SELECT ts, host, usage FROM cpu WHERE ts < " + fmtTime(t0.Add(time.Hour)),
		"SELECT * FROM cpu",
		"SELECT host, count(*) AS n, avg(usage) AS a, max(ts) AS last FROM cpu GROUP BY host",
		"SELECT i, CAST(i AS VARCHAR) AS s, i::DOUBLE / 3 AS d, i % 2 = 0 AS even FROM range(0, 10) t(i)",
		"SELECT CAST('2024-01-01' AS DATE) AS d, TIMESTAMP '2024-01-01 00:00:00' AS naive, CAST(1.5 AS DECIMAL(10, 2)) AS dec",
		"SELECT * FROM ts_coverage('cpu', " + fmtTime(t0) + ", " + fmtTime(t0.Add(time.Hour)) + ")",
		"SELECT * FROM cpu WHERE false",
	} {
		sr, err := s.client.GetExecuteSchema(ctx, q)
		if err != nil {
			t.Fatalf("GetExecuteSchema %s: %v", q, err)
		}
		gs := s.schemaOf(sr.Schema)
		info, err := s.client.Execute(ctx, q)
		if err != nil {
			t.Fatalf("Execute %s: %v", q, err)
		}
		is := s.schemaOf(info.Schema)
		r, err := s.fetch(ctx, info)
		if err != nil {
			t.Fatalf("fetch %s: %v", q, err)
		}
		r.release()
		if !gs.Equal(r.schema) {
			t.Fatalf("%s: GetSchema\n%v\nstream\n%v", q, gs, r.schema)
		}
		if !is.Equal(r.schema) {
			t.Fatalf("%s: FlightInfo schema\n%v\nstream\n%v", q, is, r.schema)
		}
	}
	_, err := s.client.GetExecuteSchema(ctx, "SELECT * FROM nosuchtable")
	wantCode(t, "GetExecuteSchema over a missing table", err, codes.NotFound, "nosuchtable")
	_, err = s.client.GetExecuteSchema(ctx, "DELETE FROM cpu")
	wantCode(t, "GetExecuteSchema of a DELETE", err, codes.InvalidArgument, "read-only")
}

// wantReadOnly checks that run refuses each query of qs as a write
// (InvalidArgument, "read-only"); what, before the query, names the call.
func wantReadOnly(t *testing.T, what string, qs []string, run func(q string) error) {
	t.Helper()
	for _, q := range qs {
		wantCode(t, what+q, run(q), codes.InvalidArgument, "read-only")
	}
}

func TestStatementUpdateIsRefused(t *testing.T) {
	s, ctx := startCPU(t, 1)
	wantReadOnly(t, "ExecuteUpdate ", []string{
		"INSERT INTO cpu VALUES (now(), 'x', 1)",
		"DELETE FROM cpu",
		"CREATE TABLE t (x INT)",
		"SELECT 1",
	}, func(q string) error {
		_, err := s.client.ExecuteUpdate(ctx, q)
		return err
	})
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "7200" {
		t.Fatalf("count = %s", got)
	}
}

func TestTransactionIDsAreRefused(t *testing.T) {
	s, ctx := startCPU(t, 1)
	txn := []byte("txn-1")

	desc := packCmd(t, &pb.CommandStatementQuery{Query: "SELECT count(*) FROM cpu", TransactionId: txn})
	_, err := s.client.Client.GetFlightInfo(ctx, desc)
	wantCode(t, "GetFlightInfo(query, transaction)", err, codes.InvalidArgument, "transaction")
	_, err = s.client.Client.GetSchema(ctx, desc)
	wantCode(t, "GetSchema(query, transaction)", err, codes.InvalidArgument, "transaction")

	var a anypb.Any
	if err := a.MarshalFrom(&pb.ActionCreatePreparedStatementRequest{Query: "SELECT 1", TransactionId: txn}); err != nil {
		t.Fatal(err)
	}
	body, _ := proto.Marshal(&a)
	_, err = s.doAction(ctx, flightsql.CreatePreparedStatementActionType, body)
	wantCode(t, "CreatePreparedStatement(transaction)", err, codes.InvalidArgument, "transaction")

	rec := cpuBatch(s.cliMem, t0.Add(time.Hour), 10, "a")
	defer rec.Release()
	rdr, err := array.NewRecordReader(cpuSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	_, err = s.client.ExecuteIngest(ctx, rdr, &flightsql.ExecuteIngestOpts{
		Table:         "cpu",
		TransactionId: txn,
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{
			IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionFail,
			IfExists:   flightsql.TableDefinitionOptionsTableExistsOptionAppend,
		},
	})
	wantCode(t, "ingest(transaction)", err, codes.InvalidArgument, "transaction")

	// BeginTransaction is not offered.
	_, err = s.client.BeginTransaction(ctx)
	if err == nil {
		t.Fatal("BeginTransaction: no error")
	}
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "7200" {
		t.Fatalf("count = %s, want 7200 (nothing ingested)", got)
	}
}

// TestPreparedNaiveTimestampIndex: a table whose index is a timestamp
// without a zone declares its parameters timestamp[ms] without a zone;
// any unit binds, and the values prune.
func TestPreparedNaiveTimestampIndex(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: tsType(arrow.Nanosecond, "")},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	for hr := 0; hr < 3; hr++ {
		b := array.NewRecordBuilder(s.cliMem, sc)
		for i := 0; i < 3600; i++ {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(hr)*time.Hour + time.Duration(i)*time.Second).UnixNano()))
			b.Field(1).(*array.Int64Builder).Append(int64(hr*3600 + i))
		}
		rec := b.NewRecordBatch()
		b.Release()
		mode := "append"
		if hr == 0 {
			mode = "create"
		}
		_, err := s.ingest(ctx, "naive", mode, map[string]string{"tsflight.granularity": "1s"}, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := s.prepare(ctx, "SELECT min(v), max(v), count(*) FROM naive WHERE ts >= ? AND ts < ?")
	want := arrow.NewSchema([]arrow.Field{
		{Name: "parameter_1", Type: tsType(arrow.Millisecond, ""), Nullable: true},
		{Name: "parameter_2", Type: tsType(arrow.Millisecond, ""), Nullable: true},
	}, nil)
	if !p.ParameterSchema().Equal(want) {
		t.Fatalf("parameter schema %v, want %v", p.ParameterSchema(), want)
	}
	for _, typ := range []arrow.DataType{tsType(arrow.Millisecond, ""), tsType(arrow.Nanosecond, ""), tsType(arrow.Microsecond, "UTC")} {
		params := paramBatch(t, s, []arrow.Field{{Name: "a", Type: typ}, {Name: "b", Type: typ}}, [][]any{{t0.Add(time.Hour), t0.Add(2 * time.Hour)}})
		_, r, err := s.execPrepared(ctx, p, params)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		got := r.rowsOf()
		r.release()
		if fmt.Sprint(got) != "[3600|7199|3600]" {
			t.Fatalf("%s: %v, want [3600|7199|3600]", typ, got)
		}
		if planned, total := s.lastPlan("naive"); planned != 1 || total != 3 {
			t.Fatalf("%s: planned %d of %d, want 1 of 3", typ, planned, total)
		}
	}
}

// TestStatementTicketPinsSnapshot: a statement's DoGet reads the snapshot
// its GetFlightInfo planned on, whatever was appended in between.
func TestStatementTicketPinsSnapshot(t *testing.T) {
	s, ctx := startCPU(t, 2)
	info := s.mustExecute(t, ctx, "SELECT count(*) FROM cpu")
	p := s.prepare(ctx, "SELECT count(*) FROM cpu WHERE host = ?")
	params := paramBatch(t, s, []arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}}, [][]any{{"a"}})
	p.SetParameters(params)
	params.Release()
	pinfo, err := p.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := cpuBatch(s.cliMem, t0.Add(2*time.Hour), 3600, "a", "b")
	_, err = s.ingest(ctx, "cpu", "append", nil, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // twice: a ticket can be re-read
		r, err := s.fetch(ctx, info)
		if err != nil {
			t.Fatal(err)
		}
		got := r.rowsOf()
		r.release()
		if fmt.Sprint(got) != "[14400]" {
			t.Fatalf("pinned statement: %v, want [14400]", got)
		}
		r, err = s.fetch(ctx, pinfo)
		if err != nil {
			t.Fatal(err)
		}
		got = r.rowsOf()
		r.release()
		if fmt.Sprint(got) != "[7200]" {
			t.Fatalf("pinned prepared statement: %v, want [7200]", got)
		}
	}
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "21600" {
		t.Fatalf("a new statement: %s, want 21600", got)
	}
}

// One caller filling the prepared-statement store pushes out its own
// oldest statements, not other callers' (the third security review
// evicted everyone's with 4096 prepares).
func TestPreparedStoreShares(t *testing.T) {
	var p preparedStore
	p.init(8, time.Hour)
	for i := range 2 {
		p.put(fmt.Sprintf("b%d", i), &prepared{owner: "token:b"})
	}
	for i := range 20 {
		p.put(fmt.Sprintf("a%d", i), &prepared{owner: "token:a"})
	}
	owners := map[string]int{}
	for _, ps := range p.m {
		owners[ps.owner]++
	}
	if owners["token:b"] != 2 || owners["token:a"] != 2 {
		t.Fatalf("after 20 prepares by a: %v, want b's 2 kept and a holding a quarter (2)", owners)
	}
	if _, ok := p.m["a19"]; !ok {
		t.Fatal("a's newest statement was evicted")
	}
}
