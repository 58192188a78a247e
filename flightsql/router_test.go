//go:build duckdb_arrow

package flightsql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/internal/testkit"
)

// ---- helpers shared by this package's router, ingest, metadata, prepared
// and cancel tests ----

// doAction runs a Flight action and returns the bodies of its results.
func (s *sqlServer) doAction(ctx context.Context, typ string, body []byte) ([][]byte, error) {
	stream, err := s.client.Client.DoAction(ctx, &flight.Action{Type: typ, Body: body})
	if err != nil {
		return nil, err
	}
	results, err := testkit.Collect(stream.Recv)
	var out [][]byte
	for _, r := range results {
		out = append(out, r.Body)
	}
	return out, err
}

// actionJSON runs a tsflight action with a JSON body and decodes its single
// JSON result (numbers kept exact).
func (s *sqlServer) actionJSON(ctx context.Context, typ string, body any) (map[string]any, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	res, err := s.doAction(ctx, typ, raw)
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("action %s: %d results, want 1", typ, len(res))
	}
	dec := json.NewDecoder(strings.NewReader(string(res[0])))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("action %s: result %q: %v", typ, res[0], err)
	}
	return m, nil
}

func (s *sqlServer) mustActionJSON(ctx context.Context, typ string, body any) map[string]any {
	s.t.Helper()
	m, err := s.actionJSON(ctx, typ, body)
	if err != nil {
		s.t.Fatalf("action %s %v: %v", typ, body, err)
	}
	return m
}

// putResult is the app_metadata of a plain Flight DoPut's PutResult.
type putResult struct {
	Version uint64 `json:"version"`
	Rows    uint64 `json:"rows"`
	Segment string `json:"segment"`
}

// doPut streams batches under desc through plain Flight DoPut and returns
// the decoded PutResults.
func (s *sqlServer) doPut(ctx context.Context, desc *flight.FlightDescriptor, schema *arrow.Schema, batches ...arrow.RecordBatch) ([]putResult, error) {
	metas, err := testkit.Put(ctx, s.client.Client, s.cliMem, desc, schema, batches...)
	var out []putResult
	for _, m := range metas {
		var pr putResult
		if err := json.Unmarshal(m, &pr); err != nil {
			return out, fmt.Errorf("PutResult app_metadata %q: %v", m, err)
		}
		out = append(out, pr)
	}
	return out, err
}

// recRows renders batches like result.rowsOf: one string per row, columns
// joined by |.
func recRows(recs ...arrow.RecordBatch) []string {
	r := &result{recs: recs}
	return r.rowsOf()
}

// tableFiles lists the regular files under a table's directory, relative
// to it, sorted; nil when the directory does not exist.
func (s *sqlServer) tableFiles(name string) []string {
	s.t.Helper()
	dir := filepath.Join(s.root, name)
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.t.Fatalf("listing %s: %v", dir, err)
	}
	sort.Strings(out)
	return out
}

// segmentFiles are the .parquet files among tableFiles.
func (s *sqlServer) segmentFiles(name string) []string {
	var out []string
	for _, f := range s.tableFiles(name) {
		if strings.HasSuffix(f, ".parquet") {
			out = append(out, f)
		}
	}
	return out
}

// readFlight reads one plain Flight DoGet stream into batches (retained;
// release them).
func (s *sqlServer) readFlight(ctx context.Context, tkt *flight.Ticket) (*arrow.Schema, []arrow.RecordBatch, error) {
	rdr, err := testkit.DoGet(ctx, s.client.Client, s.cliMem, tkt)
	if err != nil {
		return nil, nil, err
	}
	defer rdr.Release()
	recs, err := testkit.ReadBatches(rdr)
	if err != nil {
		return nil, nil, err
	}
	return rdr.Schema(), recs, nil
}

func jsonUint(t *testing.T, m map[string]any, key string) uint64 {
	t.Helper()
	n, ok := m[key].(json.Number)
	if !ok {
		t.Fatalf("%s = %v (%T), want a number", key, m[key], m[key])
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		t.Fatalf("%s = %s: %v", key, n, err)
	}
	return v
}

func pathDescriptor(name string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
}

// ---- router: plain Flight on the Flight SQL listener ----

func TestRouterPlainFlightGetFlightInfoAndDoGet(t *testing.T) {
	s, ctx := startCPU(t, 3)

	info, err := s.client.Client.GetFlightInfo(ctx, pathDescriptor("cpu"))
	if err != nil {
		t.Fatalf("GetFlightInfo(PATH cpu): %v", err)
	}
	if len(info.Endpoint) == 0 {
		t.Fatal("GetFlightInfo(PATH cpu): no endpoints")
	}
	if info.TotalRecords != 21600 {
		t.Fatalf("TotalRecords = %d, want 21600", info.TotalRecords)
	}
	infoSchema, err := flight.DeserializeSchema(info.Schema, s.cliMem)
	if err != nil {
		t.Fatal(err)
	}
	if !infoSchema.Equal(cpuSchema) {
		t.Fatalf("FlightInfo schema\n%s\nwant\n%s", infoSchema, cpuSchema)
	}
	// Every row of every endpoint: usage = seconds since t0 + host number,
	// each (ts, host) exactly once.
	seen := map[string]bool{}
	for i, ep := range info.Endpoint {
		sc, recs, err := s.readFlight(ctx, ep.Ticket)
		if err != nil {
			t.Fatalf("DoGet endpoint %d: %v", i, err)
		}
		if !sc.Equal(cpuSchema) {
			t.Errorf("endpoint %d schema %s, want %s", i, sc, cpuSchema)
		}
		for _, rec := range recs {
			ts := rec.Column(0).(*array.Timestamp)
			host := rec.Column(1).(*array.String)
			usage := rec.Column(2).(*array.Float64)
			for r := 0; r < int(rec.NumRows()); r++ {
				tm := ts.Value(r).ToTime(arrow.Microsecond)
				h := host.Value(r)
				want := tm.Sub(t0).Seconds()
				if h == "b" {
					want++
				} else if h != "a" {
					t.Fatalf("row with host %q", h)
				}
				if usage.Value(r) != want {
					t.Fatalf("row %s/%s: usage %v, want %v", tm, h, usage.Value(r), want)
				}
				key := tm.Format(time.RFC3339Nano) + "/" + h
				if seen[key] {
					t.Fatalf("row %s returned twice", key)
				}
				seen[key] = true
			}
			rec.Release()
		}
	}
	if len(seen) != 21600 {
		t.Fatalf("read %d distinct rows, want 21600", len(seen))
	}

	// GetSchema with a PATH descriptor reaches the plain service too.
	sr, err := s.client.Client.GetSchema(ctx, pathDescriptor("cpu"))
	if err != nil {
		t.Fatalf("GetSchema(PATH cpu): %v", err)
	}
	gs, err := flight.DeserializeSchema(sr.Schema, s.cliMem)
	if err != nil {
		t.Fatal(err)
	}
	if !gs.Equal(cpuSchema) {
		t.Fatalf("GetSchema(PATH cpu) = %s, want %s", gs, cpuSchema)
	}

	// A PATH descriptor naming a missing table is the plain service's
	// NotFound, not Flight SQL's "could not unmarshal".
	_, err = s.client.Client.GetFlightInfo(ctx, pathDescriptor("nosuch"))
	wantCode(t, "GetFlightInfo(PATH nosuch)", err, codes.NotFound, "nosuch")
}

func TestRouterActions(t *testing.T) {
	s, ctx := startCPU(t, 2)

	d := s.mustActionJSON(ctx, "describe-table", map[string]any{"table": "cpu"})
	if d["table"] != "cpu" {
		t.Fatalf("describe-table table = %v", d["table"])
	}
	if got := jsonUint(t, d, "segments"); got != 2 {
		t.Fatalf("describe-table segments = %d, want 2", got)
	}
	if got := jsonUint(t, d, "rows"); got != 14400 {
		t.Fatalf("describe-table rows = %d, want 14400", got)
	}
	idx, _ := d["index"].(map[string]any)
	if idx["column"] != "ts" || idx["type"] != "timestamp" || idx["granularity"] != "1s" || fmt.Sprint(idx["entity_columns"]) != "[host]" {
		t.Fatalf("describe-table index = %v, want ts/timestamp/1s/[host]", idx)
	}
	var cols []string
	sch, _ := d["schema"].([]any)
	for _, f := range sch {
		fm := f.(map[string]any)
		cols = append(cols, fmt.Sprintf("%v:%v:%v", fm["name"], fm["type"], fm["nullable"]))
	}
	if want := "[ts:timestamp[us, tz=UTC]:false host:utf8:false usage:float64:true]"; fmt.Sprint(cols) != want {
		t.Fatalf("describe-table schema = %v, want %s", cols, want)
	}

	c := s.mustActionJSON(ctx, "coverage", map[string]any{"table": "cpu", "start": "2024-01-01T00:00:00Z", "end": "2024-01-01T04:00:00Z"})
	for k, want := range map[string]uint64{"intervals": 14400, "identities": 2, "expected": 28800, "covered": 14400} {
		if got := jsonUint(t, c, k); got != want {
			t.Fatalf("coverage %s = %d, want %d", k, got, want)
		}
	}
	if c["ratio"] != json.Number("0.5") {
		t.Fatalf("coverage ratio = %v, want 0.5", c["ratio"])
	}

	// Errors of tsflight actions keep their codes through the router.
	_, err := s.actionJSON(ctx, "describe-table", map[string]any{"table": "nosuch"})
	wantCode(t, "describe-table nosuch", err, codes.NotFound, "nosuch")
	// An action neither side knows: the router names it and lists both
	// sides' actions (not arrow-go's "the defined request is invalid.").
	_, err = s.doAction(ctx, "no-such-action", nil)
	wantCode(t, "unknown action", err, codes.InvalidArgument, `unknown action "no-such-action". The actions are: create-table, `,
		"; Flight SQL: "+strings.Join(flightserver.FlightSQLActions(), ", "))
	_, err = s.doAction(ctx, "gapps", nil)
	wantCode(t, "unknown action near gaps", err, codes.InvalidArgument, `did you mean "gaps"?`)
}

func TestRouterListActions(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	names := testkit.ActionNames(t, ctx, s.client.Client)
	for _, want := range []string{
		"create-table", "coverage", "gaps", "add-columns", "describe-table",
		"CreatePreparedStatement", "ClosePreparedStatement", "CancelFlightInfo",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("ListActions %v lacks %s", names, want)
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("ListActions lists %s twice: %v", n, names)
		}
		seen[n] = true
		// The router sends every listed action somewhere.
		if !flightserver.IsAction(n) && !flightserver.IsFlightSQLAction(n) {
			t.Errorf("ListActions lists %s, which the router refuses as unknown", n)
		}
	}
	// Every Flight SQL action reaches arrow-go's Flight SQL server (which
	// may refuse its empty body, but not as an unknown action).
	for _, n := range flightserver.FlightSQLActions() {
		_, err := s.doAction(ctx, n, nil)
		if err != nil && strings.Contains(err.Error(), "unknown action") {
			t.Errorf("Flight SQL action %s: %v", n, err)
		}
	}
}

func TestRouterListFlights(t *testing.T) {
	s, ctx := startCPU(t, 2)
	rec := cpuBatch(s.cliMem, t0, 10, "x")
	_, err := s.ingest(ctx, "cpu_small", "create", cpuOpts, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}

	stream, err := s.client.Client.ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := testkit.Collect(stream.Recv)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var order []string
	for _, info := range infos {
		d := info.FlightDescriptor
		if d == nil || d.Type != flight.DescriptorPATH || len(d.Path) != 1 {
			t.Fatalf("ListFlights descriptor %v, want a one-element PATH", d)
		}
		sc, err := flight.DeserializeSchema(info.Schema, s.cliMem)
		if err != nil {
			t.Fatal(err)
		}
		if !sc.Equal(cpuSchema) {
			t.Errorf("ListFlights %s schema %s, want %s", d.Path[0], sc, cpuSchema)
		}
		got[d.Path[0]] = info.TotalRecords
		order = append(order, d.Path[0])
	}
	want := map[string]int64{"cpu": 14400, "cpu_small": 10}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ListFlights = %v (order %v), want %v", got, order, want)
	}
}

func TestRouterDoPutPathAppends(t *testing.T) {
	s, ctx := startCPU(t, 1)

	rec := cpuBatch(s.cliMem, t0.Add(time.Hour), 1800, "a", "b")
	defer rec.Release()
	res, err := s.doPut(ctx, pathDescriptor("cpu"), cpuSchema, rec)
	if err != nil {
		t.Fatalf("DoPut(PATH cpu): %v", err)
	}
	if len(res) != 1 || res[0].Rows != 3600 {
		t.Fatalf("DoPut results %+v, want one with 3600 rows", res)
	}
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "10800" {
		t.Fatalf("count after DoPut = %s, want 10800", got)
	}
	// The appended rows are exactly those sent.
	r := s.mustQuery(ctx, fmt.Sprintf("SELECT ts, host, usage FROM cpu WHERE ts >= %s ORDER BY ts, host", fmtTime(t0.Add(time.Hour))))
	if got, want := r.rowsOf(), recRows(rec); !slices.Equal(got, want) {
		t.Fatalf("appended rows differ: %d rows, want %d (first %v vs %v)", len(got), len(want), head(got), head(want))
	}
	// And the SQL plan sees the new segment: 2 segments, 1 planned.
	if planned, total := s.lastPlan("cpu"); planned != 1 || total != 2 {
		t.Fatalf("plan %d of %d, want 1 of 2", planned, total)
	}

	// A PATH DoPut to a missing table: the plain service's NotFound.
	_, err = s.doPut(ctx, pathDescriptor("nosuch"), cpuSchema, rec)
	wantCode(t, "DoPut(PATH nosuch)", err, codes.NotFound, "nosuch")
}

func head(rows []string) []string {
	if len(rows) > 3 {
		return rows[:3]
	}
	return rows
}

// ---- ts_coverage / ts_gaps ----

func coverageRow(t *testing.T, m map[string]any) string {
	t.Helper()
	start, err := time.Parse(time.RFC3339Nano, m["start"].(string))
	if err != nil {
		t.Fatal(err)
	}
	end, err := time.Parse(time.RFC3339Nano, m["end"].(string))
	if err != nil {
		t.Fatal(err)
	}
	ratio, err := strconv.ParseFloat(string(m["ratio"].(json.Number)), 64)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s|%d|%s|%s|%d|%d|%d|%d|%s", m["table"], jsonUint(t, m, "version"),
		start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339),
		jsonUint(t, m, "intervals"), jsonUint(t, m, "identities"), jsonUint(t, m, "expected"), jsonUint(t, m, "covered"),
		arrowFloatStr(ratio))
}

// arrowFloatStr formats a float64 the way Float64.ValueStr does.
func arrowFloatStr(f float64) string {
	b := array.NewFloat64Builder(memory.NewGoAllocator())
	defer b.Release()
	b.Append(f)
	a := b.NewArray()
	defer a.Release()
	return a.ValueStr(0)
}

func gapRows(t *testing.T, m map[string]any) []string {
	t.Helper()
	var out []string
	gaps, _ := m["gaps"].([]any)
	for _, g := range gaps {
		gm := g.(map[string]any)
		start, err := time.Parse(time.RFC3339Nano, gm["start"].(string))
		if err != nil {
			t.Fatal(err)
		}
		end, err := time.Parse(time.RFC3339Nano, gm["end"].(string))
		if err != nil {
			t.Fatal(err)
		}
		incl, _ := gm["end_inclusive"].(bool)
		out = append(out, fmt.Sprintf("%s|%s|%v|%d", start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), incl, jsonUint(t, gm, "intervals")))
	}
	return out
}

// makeCPUWithHalfC is makeCPU(ctx, 2) with host c added for the second
// half hour of hour 0 only.
func (s *sqlServer) makeCPUWithHalfC(ctx context.Context) {
	s.t.Helper()
	s.makeCPU(ctx, 2)
	rec := cpuBatch(s.cliMem, t0.Add(30*time.Minute), 1800, "c")
	_, err := s.ingest(ctx, "cpu", "append", nil, rec)
	rec.Release()
	if err != nil {
		s.t.Fatal(err)
	}
}

// tsCall is a call of the table function fn over table cpu from start to
// end, with entity (SQL) as its fourth argument unless it is "".
func tsCall(fn string, start, end time.Time, entity string) string {
	call := fmt.Sprintf("%s('cpu', %s, %s", fn, fmtTime(start), fmtTime(end))
	if entity != "" {
		call += ", " + entity
	}
	return call + ")"
}

// rangeBody is the body of a coverage or gaps action over table cpu from
// start to end, for entity unless it is nil.
func rangeBody(start, end time.Time, entity map[string]any) map[string]any {
	b := map[string]any{"table": "cpu", "start": start.Format(time.RFC3339), "end": end.Format(time.RFC3339)}
	if entity != nil {
		b["entity"] = entity
	}
	return b
}

func TestTsCoverageMatchesAction(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	s.makeCPUWithHalfC(ctx)
	start, end := t0, t0.Add(4*time.Hour)
	cases := []struct {
		name   string
		entity string // SQL fourth argument; "" for none
		action map[string]any
		want   string // fixed expectation
	}{
		{"whole table", "", nil, "cpu|4|2024-01-01T00:00:00Z|2024-01-01T04:00:00Z|14400|3|43200|16200|0.375"},
		{"struct literal", "{'host': 'a'}", map[string]any{"host": "a"}, "cpu|4|2024-01-01T00:00:00Z|2024-01-01T04:00:00Z|14400|1|14400|7200|0.5"},
		{"json string", `'{"host":"c"}'`, map[string]any{"host": "c"}, "cpu|4|2024-01-01T00:00:00Z|2024-01-01T04:00:00Z|14400|1|14400|1800|0.125"},
		{"bare value", "'b'", map[string]any{"host": "b"}, "cpu|4|2024-01-01T00:00:00Z|2024-01-01T04:00:00Z|14400|1|14400|7200|0.5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := "SELECT * FROM " + tsCall("ts_coverage", start, end, c.entity)
			r := s.mustQuery(ctx, q)
			want := coverageRow(t, s.mustActionJSON(ctx, "coverage", rangeBody(start, end, c.action)))
			if want != c.want {
				t.Fatalf("coverage action = %s, want %s", want, c.want)
			}
			got := r.rowsOf()
			if len(got) != 1 || got[0] != want {
				t.Fatalf("%s = %v, want [%s] (the coverage action)", q, got, want)
			}
			wantCols := "table_name version start end intervals identities expected covered ratio"
			var cols []string
			for _, f := range r.schema.Fields() {
				cols = append(cols, f.Name)
			}
			if strings.Join(cols, " ") != wantCols {
				t.Fatalf("columns %v, want %s", cols, wantCols)
			}
		})
	}

	// ts_coverage is a table: it can be filtered, joined and aggregated.
	q := fmt.Sprintf("SELECT covered, ratio FROM ts_coverage('cpu', %s, %s, 'a') WHERE identities = 1", fmtTime(start), fmtTime(end))
	if got := s.mustQuery(ctx, q).rowsOf(); fmt.Sprint(got) != "[7200|0.5]" {
		t.Fatalf("%s = %v", q, got)
	}
}

// TestTsFunctionsWithParameters: the arguments of ts_coverage may be
// parameters (docs/flightsql.md: "Arguments must be literals or
// parameters"), which in Flight SQL means a prepared statement.
func TestTsFunctionsWithParameters(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	s.makeCPUWithHalfC(ctx)
	start, end := t0, t0.Add(4*time.Hour)
	p, err := s.client.Prepare(ctx, "SELECT covered FROM ts_coverage('cpu', ?, ?, ?)")
	if err != nil {
		t.Fatalf("prepare ts_coverage: %v", err)
	}
	defer p.Close(ctx)
	params := paramBatch(t, s, []arrow.Field{
		{Name: "s", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "e", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "h", Type: arrow.BinaryTypes.String},
	}, [][]any{{start, end, "c"}, {start, t0.Add(time.Hour), "a"}})
	p.SetParameters(params)
	params.Release()
	info, err := p.Execute(ctx)
	if err != nil {
		t.Fatalf("execute ts_coverage: %v", err)
	}
	res, err := s.fetch(ctx, info)
	if err != nil {
		t.Fatalf("fetch ts_coverage: %v", err)
	}
	defer res.release()
	if got := res.rowsOf(); fmt.Sprint(got) != "[1800 3600]" {
		t.Fatalf("prepared ts_coverage = %v, want [1800 3600]", got)
	}
}

func TestTsGapsMatchesAction(t *testing.T) {
	s, ctx := startCPU(t, 2) // hours 0 and 1
	// Hour 3 (hour 2 missing), host a only for the first half.
	rec := cpuBatch(s.cliMem, t0.Add(3*time.Hour), 3600, "b")
	rec2 := cpuBatch(s.cliMem, t0.Add(3*time.Hour), 1800, "a")
	for _, r := range []arrow.RecordBatch{rec, rec2} {
		if _, err := s.ingest(ctx, "cpu", "append", nil, r); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	start, end := t0, t0.Add(4*time.Hour)
	cases := []struct {
		name   string
		entity string
		action map[string]any
		want   []string
	}{
		// A run where any series is missing is a gap of the table.
		{"whole table", "", nil, []string{
			"2024-01-01T02:00:00Z|2024-01-01T03:00:00Z|false|3600",
			"2024-01-01T03:30:00Z|2024-01-01T04:00:00Z|false|1800",
		}},
		{"struct literal", "{'host': 'a'}", map[string]any{"host": "a"}, []string{
			"2024-01-01T02:00:00Z|2024-01-01T03:00:00Z|false|3600",
			"2024-01-01T03:30:00Z|2024-01-01T04:00:00Z|false|1800",
		}},
		{"json string", `'{"host":"b"}'`, map[string]any{"host": "b"}, []string{"2024-01-01T02:00:00Z|2024-01-01T03:00:00Z|false|3600"}},
		{"bare value", "'a'", map[string]any{"host": "a"}, []string{
			"2024-01-01T02:00:00Z|2024-01-01T03:00:00Z|false|3600",
			"2024-01-01T03:30:00Z|2024-01-01T04:00:00Z|false|1800",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := "SELECT * FROM " + tsCall("ts_gaps", start, end, c.entity) + " ORDER BY gap_start"
			got := s.mustQuery(ctx, q).rowsOf()
			want := gapRows(t, s.mustActionJSON(ctx, "gaps", rangeBody(start, end, c.action)))
			if !slices.Equal(want, c.want) {
				t.Fatalf("gaps action = %v, want %v", want, c.want)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s = %v, want %v (the gaps action)", q, got, want)
			}
		})
	}

	// No gaps: an empty result with the right columns.
	r := s.mustQuery(ctx, fmt.Sprintf("SELECT * FROM ts_gaps('cpu', %s, %s)", fmtTime(t0), fmtTime(t0.Add(2*time.Hour))))
	if r.rows != 0 {
		t.Fatalf("gaps over covered hours: %v", r.rowsOf())
	}
	var cols []string
	for _, f := range r.schema.Fields() {
		cols = append(cols, f.Name+":"+f.Type.String())
	}
	if want := "[gap_start:timestamp[us, tz=UTC] gap_end:timestamp[us, tz=UTC] end_inclusive:bool intervals:uint64]"; fmt.Sprint(cols) != want {
		t.Fatalf("empty ts_gaps columns %v, want %s", cols, want)
	}
}

func TestTsFunctionErrors(t *testing.T) {
	s, ctx := startCPU(t, 1)
	a, b := fmtTime(t0), fmtTime(t0.Add(time.Hour))
	cases := []struct {
		q     string
		code  codes.Code
		frags []string
	}{
		{"SELECT * FROM ts_coverage('cpu', " + a + ")", codes.InvalidArgument, []string{"ts_coverage", "3 or 4 arguments", "2"}},
		{"SELECT * FROM ts_gaps('cpu')", codes.InvalidArgument, []string{"ts_gaps", "3 or 4 arguments"}},
		{"SELECT * FROM ts_coverage('cpu', " + a + ", " + b + ", 'a', 'b')", codes.InvalidArgument, []string{"3 or 4 arguments", "5"}},
		{"SELECT * FROM cpu, ts_coverage('cpu', ts, " + b + ")", codes.InvalidArgument, []string{"ts_coverage", "argument 2", "constant"}},
		{"SELECT * FROM ts_gaps('cpu', " + a + ", now() + INTERVAL 1 HOUR)", codes.InvalidArgument, []string{"ts_gaps", "argument 3", "constant"}},
		{"SELECT * FROM ts_coverage('nosuch', " + a + ", " + b + ")", codes.NotFound, []string{"nosuch"}},
		{"SELECT * FROM ts_gaps('nosuch', " + a + ", " + b + ")", codes.NotFound, []string{"nosuch"}},
		{"SELECT * FROM ts_coverage(42, " + a + ", " + b + ")", codes.InvalidArgument, []string{"table"}},
		{"SELECT * FROM ts_coverage('cpu', 'not a time', " + b + ")", codes.InvalidArgument, []string{"start"}},
		{"SELECT * FROM ts_coverage('cpu', " + a + ", " + b + ", '{\"nosuchcol\": 1}')", codes.InvalidArgument, []string{"nosuchcol"}},
	}
	for _, c := range cases {
		_, err := s.query(ctx, c.q)
		wantCode(t, c.q, err, c.code, c.frags...)
	}
	// The server still answers.
	if got := s.scalar(ctx, "SELECT covered FROM ts_coverage('cpu', "+a+", "+b+")"); got != "7200" {
		t.Fatalf("covered = %s, want 7200", got)
	}
}
