package flightserver

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
)

// loadWindows creates a TSBS table with one segment per window of 1000
// steps (3 hosts) and returns the model, window by window.
func loadWindows(t *testing.T, ts *testServer, name string, windows int) [][]row {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, name)
	var out [][]row
	for w := range windows {
		rows := genRows(t0.Add(timeOfStep(w*1000)), 1000, 3)
		ts.mustPut(ctx, pathDesc(name), rows, 1024, uint64(2+w))
		out = append(out, rows)
	}
	return out
}

func flatten(ws [][]row) []row {
	var out []row
	for _, w := range ws {
		out = append(out, w...)
	}
	return out
}

func filterRows(rows []row, keep func(row) bool) []row {
	var out []row
	for _, r := range rows {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func rfc(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }

func TestScanTimeRangeHalfOpen(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	model := flatten(loadWindows(t, ts, "cpu", 4))
	full := ts.info(ctx, pathDesc("cpu"))

	// [step 100, step 200): the end instant itself is excluded, the start
	// included.
	start, end := t0.Add(timeOfStep(100)), t0.Add(timeOfStep(200))
	info := ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "start": rfc(timeOfStep(100)), "end": rfc(timeOfStep(200))}))
	got, err := ts.fetchAll(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	want := filterRows(model, func(r row) bool { return r.ts >= start.UnixNano() && r.ts < end.UnixNano() })
	if len(want) != 300 {
		t.Fatalf("model: %d rows in range, want 300", len(want))
	}
	sameRows(t, "range", got.rows, want)

	// Pruning: the narrow range lies in the first segment only.
	if len(info.Endpoint) != 1 {
		t.Fatalf("narrow range: %d endpoints, want 1", len(info.Endpoint))
	}
	if info.TotalBytes <= 0 || info.TotalBytes*3 > full.TotalBytes {
		t.Fatalf("narrow range plans %d bytes of %d; want about a quarter", info.TotalBytes, full.TotalBytes)
	}

	// Offsets are accepted; a range straddling two segments reads both.
	from := t0.Add(timeOfStep(990)).In(time.FixedZone("x", 2*3600))
	info = ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "start": from.Format(time.RFC3339), "end": rfc(timeOfStep(1010))}))
	if len(info.Endpoint) != 2 {
		t.Fatalf("straddling range: %d endpoints, want 2", len(info.Endpoint))
	}
	got, err = ts.fetchAll(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.rows) != 20*3 {
		t.Fatalf("straddling range: %d rows, want 60", len(got.rows))
	}

	// Open on one side.
	info = ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "start": rfc(timeOfStep(3990))}))
	if got, err = ts.fetchAll(ctx, info); err != nil || len(got.rows) != 30 {
		t.Fatalf("start only: %v rows, err %v; want 30", len(got.rows), err)
	}
	info = ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "end": rfc(timeOfStep(1))}))
	if got, err = ts.fetchAll(ctx, info); err != nil || len(got.rows) != 3 {
		t.Fatalf("end only: %v rows, err %v; want 3", len(got.rows), err)
	}

	// A range with no data plans no segment and returns no rows.
	info = ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "start": "2030-01-01T00:00:00Z", "end": "2030-01-02T00:00:00Z"}))
	if info.TotalBytes != 0 {
		t.Fatalf("empty range plans %d bytes", info.TotalBytes)
	}
	if got, err = ts.fetchAll(ctx, info); err != nil || len(got.rows) != 0 {
		t.Fatalf("empty range: %d rows, err %v", len(got.rows), err)
	}

	// Start must be before end.
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": "cpu", "start": rfc(timeOfStep(5)), "end": rfc(timeOfStep(5))}))
	wantCode(t, "start == end", err, codes.InvalidArgument, "start")
}

func TestScanColumnsAndEntities(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	model := flatten(loadWindows(t, ts, "cpu", 2))

	// Projection keeps the requested order.
	info := ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "columns": []string{"usage_system", "hostname", "ts"}}))
	wantSchema := arrow.NewSchema([]arrow.Field{tsbsSchema.Field(3), tsbsSchema.Field(1), tsbsSchema.Field(0)}, nil)
	if s := ts.schemaOf(info.Schema); !s.Equal(wantSchema) {
		t.Fatalf("FlightInfo schema %s, want %s", s, wantSchema)
	}
	got, err := ts.fetchAll(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if !got.schema.Equal(wantSchema) {
		t.Fatalf("DoGet schema %s, want %s", got.schema, wantSchema)
	}
	proj := make([]row, len(model))
	for i, r := range model {
		proj[i] = row{ts: r.ts, host: r.host, system: r.system}
	}
	sameRows(t, "projection", got.rows, proj)

	// "columns": [] means every column, in FlightInfo and DoGet alike.
	info = ts.info(ctx, cmdDesc(t, `{"table":"cpu","columns":[]}`))
	if s := ts.schemaOf(info.Schema); !s.Equal(tsbsSchema) {
		t.Fatalf("columns []: FlightInfo schema %s", s)
	}
	if got, err = ts.fetchAll(ctx, info); err != nil {
		t.Fatal(err)
	}
	if !got.schema.Equal(tsbsSchema) {
		t.Fatalf("columns []: DoGet schema %s", got.schema)
	}
	sameRows(t, "columns []", got.rows, model)

	// Entity filter, combined with a range and a projection that leaves
	// out the filtered column.
	info = ts.info(ctx, cmdDesc(t, map[string]any{
		"table": "cpu", "entity": map[string]any{"hostname": "host_1"},
		"start": rfc(timeOfStep(500)), "end": rfc(timeOfStep(1500)), "columns": []string{"ts", "usage_user"},
	}))
	if got, err = ts.fetchAll(ctx, info); err != nil {
		t.Fatal(err)
	}
	var want []row
	for _, r := range model {
		if r.host == "host_1" && r.ts >= t0.Add(timeOfStep(500)).UnixNano() && r.ts < t0.Add(timeOfStep(1500)).UnixNano() {
			want = append(want, row{ts: r.ts, user: r.user})
		}
	}
	if len(want) != 1000 {
		t.Fatalf("model: %d rows, want 1000", len(want))
	}
	sameRows(t, "entity filter", got.rows, want)
	// Without bounds or filters the count is known up front; with them it
	// is not.
	if info.TotalRecords != -1 {
		t.Fatalf("filtered scan TotalRecords %d, want -1 (unknown)", info.TotalRecords)
	}

	// Errors name what is wrong.
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": "cpu", "columns": []string{"nope"}}))
	wantCode(t, "unknown column", err, codes.InvalidArgument, `"nope"`)
	_, err = ts.client.GetSchema(ctx, cmdDesc(t, map[string]any{"table": "cpu", "columns": []string{"nope"}}))
	wantCode(t, "GetSchema unknown column", err, codes.InvalidArgument, `"nope"`)
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": "cpu", "columns": []string{"ts", "ts"}}))
	wantCode(t, "repeated column", err, codes.InvalidArgument, `"ts"`)
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": "cpu", "entity": map[string]any{"usage_user": 1}}))
	wantCode(t, "non-entity filter", err, codes.InvalidArgument, `"usage_user"`)
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": "cpu", "entity": map[string]any{"hostname": 7}}))
	wantCode(t, "entity of the wrong type", err, codes.InvalidArgument, "hostname", "7")
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": "cpu", "start": "yesterday"}))
	wantCode(t, "bad start", err, codes.InvalidArgument, "start", "yesterday")
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": "cpu", "end": 12345}))
	wantCode(t, "numeric end on a timestamp table", err, codes.InvalidArgument, "end", "12345")
}

func TestScanVersionPinning(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	windows := loadWindows(t, ts, "cpu", 2)
	old := flatten(windows)

	// Plan at version 3 (two segments), then append a third segment that
	// overlaps the planned range in time.
	planned := ts.info(ctx, pathDesc("cpu"))
	rangePlan := ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "start": rfc(0), "end": rfc(timeOfStep(5000))}))
	more := genRows(t0.Add(timeOfStep(2000)), 100, 3)
	ts.mustPut(ctx, pathDesc("cpu"), more, 1000, 4)

	got, err := ts.fetchAll(ctx, planned)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "old PATH tickets after a put", got.rows, old)
	if got, err = ts.fetchAll(ctx, rangePlan); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "old CMD tickets after a put", got.rows, old)

	// A new plan sees the new rows.
	if got, err = ts.fetchAll(ctx, ts.info(ctx, pathDesc("cpu"))); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "new plan", got.rows, append(append([]row{}, old...), more...))

	// "version" in the command pins an older snapshot explicitly.
	if got, err = ts.fetchAll(ctx, ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "version": 2}))); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "version 2", got.rows, windows[0])
	// Version 1 is the empty table with no schema yet.
	info := ts.info(ctx, cmdDesc(t, map[string]any{"table": "cpu", "version": 1}))
	if got, err = ts.fetchAll(ctx, info); err != nil || len(got.rows) != 0 || got.schema.NumFields() != 0 {
		t.Fatalf("version 1: %d rows, schema %v, err %v", len(got.rows), got.schema, err)
	}

	// Versions that do not exist.
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": "cpu", "version": 99}))
	wantCode(t, "GetFlightInfo version 99", err, codes.NotFound, "99")
	forged := []byte(`tsf1:{"table":"cpu","version":99,"part":0,"parts":1}`)
	_, err = ts.doGet(ctx, &flight.Ticket{Ticket: forged})
	wantCode(t, "ticket version 99", err, codes.NotFound, "version 99")
	forged = []byte(`tsf1:{"table":"cpu","version":0,"part":0,"parts":1}`)
	_, err = ts.doGet(ctx, &flight.Ticket{Ticket: forged})
	wantCode(t, "ticket version 0", err, codes.NotFound, "version 0")
}

// TestScanEndpointsSplit checks that a plan with more segments than the
// endpoint cap groups them, and that the groups cover every row once.
func TestScanEndpointsSplit(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxEndpoints = 3 })
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	var model []row
	for i := range 7 {
		rows := genRows(t0.Add(timeOfStep(i*100)), 100, 2+i%3)
		ts.mustPut(ctx, pathDesc("cpu"), rows, 64, uint64(2+i))
		model = append(model, rows...)
	}
	info := ts.info(ctx, pathDesc("cpu"))
	if len(info.Endpoint) != 3 {
		t.Fatalf("%d endpoints, want 3", len(info.Endpoint))
	}
	seen := map[string]bool{}
	for _, ep := range info.Endpoint {
		k := string(ep.Ticket.Ticket)
		if seen[k] {
			t.Fatalf("two endpoints share the ticket %s", k)
		}
		seen[k] = true
	}
	got, err := ts.fetchAll(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "split", got.rows, model)
}

// TestScanIntegerIndex scans int64 and uint64 tables with integer bounds.
func TestScanIntegerIndex(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.mustAction(ctx, ActionCreateTable, map[string]any{"table": "seq", "index_column": "n", "index_type": "int64", "granularity": 10})
	ns := make([]int64, 1000)
	for i := range ns {
		ns[i] = int64(i*10) - 5000
	}
	rec := int64Batch(ts, ns)
	defer rec.Release()
	if _, err := ts.put(ctx, pathDesc("seq"), rec.Schema(), rec); err != nil {
		t.Fatal(err)
	}
	info := ts.info(ctx, cmdDesc(t, `{"table":"seq","start":-100,"end":100,"columns":["v"]}`))
	got, err := ts.fetchAll(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.extra["v"]) != 20 || got.schema.NumFields() != 1 {
		t.Fatalf("[-100, 100): %d values, schema %s; want 20 values of v", len(got.extra["v"]), got.schema)
	}
	var sum float64
	for _, v := range got.extra["v"] {
		sum += v.(float64)
	}
	if sum != -50 { // (-100 + -90 + … + 90) / 2
		t.Fatalf("sum(v) over [-100, 100) = %v, want -50", sum)
	}
	for _, c := range []struct{ body, frag string }{
		{`{"table":"seq","start":1.5}`, "1.5"},
		{`{"table":"seq","start":"2024-06-01T00:00:00Z"}`, "2024-06-01T00:00:00Z"},
		{`{"table":"seq","end":9223372036854775808}`, "9223372036854775808"},
	} {
		_, err := ts.client.GetFlightInfo(ctx, cmdDesc(t, c.body))
		wantCode(t, c.body, err, codes.InvalidArgument, c.frag)
	}

	ts.mustAction(ctx, ActionCreateTable, map[string]any{"table": "useq", "index_column": "n", "index_type": "uint64", "granularity": "1"})
	b := array.NewRecordBuilder(ts.cliMem, arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Uint64}}, nil))
	b.Field(0).(*array.Uint64Builder).AppendValues([]uint64{1, 2, 3, 1 << 63, 1<<64 - 1}, nil)
	urec := b.NewRecordBatch()
	b.Release()
	defer urec.Release()
	if _, err := ts.put(ctx, pathDesc("useq"), urec.Schema(), urec); err != nil {
		t.Fatal(err)
	}
	if got, err = ts.fetchAll(ctx, ts.info(ctx, cmdDesc(t, `{"table":"useq","start":3,"end":18446744073709551615}`))); err != nil {
		t.Fatal(err)
	}
	if len(got.extra["n"]) != 2 {
		t.Fatalf("uint64 [3, 2^64-1): %v", got.extra["n"])
	}
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, `{"table":"useq","start":-1}`))
	wantCode(t, "negative uint64 bound", err, codes.InvalidArgument, "-1", "uint64")
}

// TestScanIntegerEntities filters and measures coverage by an int32 and a
// uint64 entity column together (a two-part identity).
func TestScanIntegerEntities(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.mustAction(ctx, ActionCreateTable, map[string]any{"table": "sensors", "index_column": "ts", "index_type": "timestamp", "granularity": "1m", "entity_columns": []string{"site", "sensor"}})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		{Name: "site", Type: arrow.PrimitiveTypes.Int32},
		{Name: "sensor", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "temp", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(ts.cliMem, schema)
	for m := range 30 {
		for site := int32(1); site <= 2; site++ {
			for sensor := uint64(10); sensor <= 12; sensor++ {
				if site == 2 && sensor == 12 && m%3 == 0 {
					continue // a sensor that misses every third minute
				}
				b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(m) * time.Minute).UnixMilli()))
				b.Field(1).(*array.Int32Builder).Append(site)
				b.Field(2).(*array.Uint64Builder).Append(sensor)
				b.Field(3).(*array.Float64Builder).Append(float64(m))
			}
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := ts.put(ctx, pathDesc("sensors"), schema, rec); err != nil {
		t.Fatal(err)
	}
	got, err := ts.fetchAll(ctx, ts.info(ctx, cmdDesc(t, `{"table":"sensors","entity":{"site":2,"sensor":12},"columns":["temp"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.extra["temp"]) != 20 {
		t.Fatalf("site 2 sensor 12: %d rows, want 20", len(got.extra["temp"]))
	}
	if got, err = ts.fetchAll(ctx, ts.info(ctx, cmdDesc(t, `{"table":"sensors","entity":{"site":1}}`))); err != nil || len(got.extra["temp"]) != 90 {
		t.Fatalf("site 1 (a partial identity): %d rows, %v; want 90", len(got.extra["temp"]), err)
	}
	res, err := ts.action(ctx, ActionCoverage, `{"table":"sensors","start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:30:00Z","entity":{"site":2,"sensor":12}}`)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "coverage of site 2 sensor 12", res, `{"table":"sensors","version":2,"start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:30:00Z",
		"entity":{"site":2,"sensor":12},"intervals":30,"identities":1,"expected":30,"covered":20,"ratio":0.6666666666666666}`)
	_, err = ts.action(ctx, ActionCoverage, `{"table":"sensors","start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:30:00Z","entity":{"site":2}}`)
	wantCode(t, "partial identity in coverage", err, codes.InvalidArgument, "sensor")
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, `{"table":"sensors","entity":{"site":3000000000}}`))
	wantCode(t, "int32 entity out of range", err, codes.InvalidArgument, "site", "3000000000")
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, `{"table":"sensors","entity":{"sensor":-1}}`))
	wantCode(t, "negative uint64 entity", err, codes.InvalidArgument, "sensor", "-1")
}
