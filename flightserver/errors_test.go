package flightserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
)

// TestHostileTableNames sends names that are not table names through every
// request that takes one: each is InvalidArgument naming the name, and
// nothing appears on disk, inside the root or next to it.
func TestHostileTableNames(t *testing.T) {
	ts, ctx := startWithCPU(t)
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 100, 2)
	batches := buildBatches(ts.cliMem, genRows(t0, 10, 2), 100)
	defer releaseAll(batches)
	parent := filepath.Dir(ts.root)
	before := snapshot(t, parent)

	long := strings.Repeat("a", 129)
	for _, name := range []string{"..", "a/b", "", long, "tab le", "tåble", "1abc", ".", "../cpu", "cpu/..", "/etc", `a\b`, "cpu\x00"} {
		frag := fmt.Sprintf("%q", name)
		switch name {
		case "":
			frag = "empty"
		case long:
			frag = "129 characters"
		}
		check := func(what string, err error) {
			t.Helper()
			wantCode(t, fmt.Sprintf("%s with table %q", what, name), err, codes.InvalidArgument, frag)
		}
		createBody := map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s"}
		_, err := ts.client.GetFlightInfo(ctx, pathDesc(name))
		check("GetFlightInfo PATH", err)
		_, err = ts.client.GetSchema(ctx, pathDesc(name))
		check("GetSchema PATH", err)
		_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, map[string]any{"table": name}))
		check("GetFlightInfo CMD", err)
		_, err = ts.client.GetSchema(ctx, cmdDesc(t, map[string]any{"table": name, "columns": []string{"ts"}}))
		check("GetSchema CMD", err)
		_, err = ts.put(ctx, pathDesc(name), tsbsSchema, batches...)
		check("DoPut PATH", err)
		_, err = ts.put(ctx, cmdDesc(t, map[string]any{"table": name, "create": createBody}), tsbsSchema, batches...)
		check("DoPut CMD create", err)
		body := map[string]any{"table": name}
		for k, v := range createBody {
			body[k] = v
		}
		_, err = ts.action(ctx, ActionCreateTable, body)
		check("create-table", err)
		_, err = ts.action(ctx, ActionDescribeTable, map[string]any{"table": name})
		check("describe-table", err)
		_, err = ts.action(ctx, ActionCoverage, map[string]any{"table": name, "start": "2024-06-01T00:00:00Z", "end": "2024-06-02T00:00:00Z"})
		check("coverage", err)
		_, err = ts.action(ctx, ActionGaps, map[string]any{"table": name, "start": "2024-06-01T00:00:00Z", "end": "2024-06-02T00:00:00Z"})
		check("gaps", err)
		_, err = ts.action(ctx, ActionAddColumns, map[string]any{"table": name, "columns": []any{map[string]any{"name": "x", "type": "int64"}}})
		check("add-columns", err)
		tkt, _ := json.Marshal(map[string]any{"table": name, "version": 2, "part": 0, "parts": 1})
		_, err = ts.doGet(ctx, &flight.Ticket{Ticket: append([]byte("tsf1:"), tkt...)})
		check("DoGet", err)
	}

	// A PATH descriptor holds exactly one element.
	for _, p := range [][]string{nil, {"cpu", "x"}, {"..", "cpu"}} {
		_, err := ts.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: p})
		wantCode(t, fmt.Sprintf("PATH %q", p), err, codes.InvalidArgument, "exactly one element", fmt.Sprintf("got %d", len(p)))
	}
	_, err := ts.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN, Path: []string{"cpu"}})
	wantCode(t, "descriptor type UNKNOWN", err, codes.InvalidArgument, "descriptor type")

	sameSnapshot(t, "hostile names", before, snapshot(t, parent))
}

// TestMalformedRequests covers JSON that does not parse, has unknown
// fields or values of the wrong shape, and unknown actions.
func TestMalformedRequests(t *testing.T) {
	ts, ctx := startWithCPU(t)
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 100, 2)
	before := snapshot(t, ts.root)

	for _, c := range []struct {
		body  string
		frags []string
	}{
		{`{`, []string{"malformed JSON"}},
		{``, []string{"malformed JSON"}},
		{`[]`, []string{"malformed JSON"}},
		{`{"table":"cpu"} {}`, []string{"after the JSON body"}},
		{`{"table":"cpu","colums":["ts"]}`, []string{`"colums"`}},
		{`{"table":5}`, []string{"malformed JSON", "table"}},
		{`{"table":"cpu","columns":"ts"}`, []string{"malformed JSON", "columns"}},
		{`{"table":"cpu","version":-1}`, []string{"malformed JSON", "version"}},
		{`{"table":"cpu","entities":{"hostname":null}}`, []string{"entities.hostname"}},
		{`{"table":"cpu","start":true}`, []string{"start", "true"}},
	} {
		_, err := ts.client.GetFlightInfo(ctx, cmdDesc(t, c.body))
		wantCode(t, "GetFlightInfo "+c.body, err, codes.InvalidArgument, c.frags...)
	}

	for _, c := range []struct {
		action, body string
		frags        []string
	}{
		{ActionCreateTable, `{"table":"t2",`, []string{"create-table", "malformed JSON"}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularty":"10s"}`, []string{`"granularty"`}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"float","granularity":"10s"}`, []string{"index_type", `"float"`}},
		{ActionCreateTable, `{"table":"t2","index_type":"timestamp","granularity":"10s"}`, []string{"index_column"}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp"}`, []string{"granularity"}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"0s"}`, []string{"granularity", `"0s"`}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"5 fortnights"}`, []string{"granularity", "fortnights"}},
		{ActionCreateTable, `{"table":"t2","index_column":"n","index_type":"int64","granularity":"10s"}`, []string{"granularity", "10s"}},
		{ActionCreateTable, `{"table":"t2","index_column":"n","index_type":"int64","granularity":0}`, []string{"granularity", "0"}},
		{ActionCreateTable, `{"table":"t2","index_column":"n","index_type":"int64","granularity":5,"timezone":"UTC"}`, []string{"timezone"}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"10s","timezone":"Mars/Olympus"}`, []string{"timezone", `"Mars/Olympus"`, "IANA"}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"10s","timezone":""}`, []string{"timezone", `""`}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"10s","timezone":"Local"}`, []string{"timezone", `"Local"`}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"10s","entity_columns":["ts"]}`, []string{`"ts"`, "index column"}},
		{ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"10s","entity_columns":["h","h"]}`, []string{`"h"`, "twice"}},
		{ActionDescribeTable, `{"table":"cpu","verbose":true}`, []string{`"verbose"`}},
		{ActionDescribeTable, `not json`, []string{"describe-table", "malformed JSON"}},
		{ActionCoverage, `{"table":"cpu","start":"2024-06-01T00:00:00Z","end":"2024-06-01T01:00:00Z","entities":{}}`, []string{`"entities"`}},
		{ActionGaps, `{"table":"cpu","start":"2024-06-01T00:00:00Z","end":"2024-06-01T01:00:00Z","limit":"ten"}`, []string{"limit"}},
		{ActionAddColumns, `{"table":"cpu","columns":{"name":"x"}}`, []string{"columns"}},
		{"drop-table", `{"table":"cpu"}`, []string{`"drop-table"`}},
		{"", `{}`, []string{`""`}},
	} {
		_, err := ts.action(ctx, c.action, c.body)
		wantCode(t, c.action+" "+c.body, err, codes.InvalidArgument, c.frags...)
	}

	// Create of an existing table.
	_, err := ts.action(ctx, ActionCreateTable, map[string]any{"table": "cpu", "index_column": "ts", "index_type": "timestamp", "granularity": "10s"})
	wantCode(t, "create of an existing table", err, codes.AlreadyExists, `"cpu"`)
	// Describing a table that does not exist.
	_, err = ts.action(ctx, ActionDescribeTable, map[string]any{"table": "nosuch"})
	wantCode(t, "describe of a missing table", err, codes.NotFound, `"nosuch"`)
	_, err = ts.client.GetFlightInfo(ctx, pathDesc("nosuch"))
	wantCode(t, "GetFlightInfo of a missing table", err, codes.NotFound, `"nosuch"`)

	sameSnapshot(t, "malformed requests", before, snapshot(t, ts.root))
}

// putWithSchema builds one batch of the given schema from column values and
// puts it.
func (ts *testServer) putColumns(ctx context.Context, desc *flight.FlightDescriptor, fields []arrow.Field, fill func(b *array.RecordBuilder)) error {
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(ts.cliMem, schema)
	fill(b)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	_, err := ts.put(ctx, desc, schema, rec)
	return err
}

func TestPutRefusals(t *testing.T) {
	ts, ctx := startWithCPU(t)
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 100, 2)
	ts.createTSBS(ctx, "fresh") // no schema yet
	before := snapshot(t, ts.root)

	f := tsbsSchema.Fields()
	tsField, hostField, user, system, idle := f[0], f[1], f[2], f[3], f[4]
	fillTS := func(b *array.RecordBuilder, col int, steps ...int) {
		for _, s := range steps {
			b.Field(col).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(timeOfStep(s)).UnixNano()))
		}
	}
	at := func(d string) arrow.Timestamp {
		ts, _ := arrow.TimestampFromString(d, arrow.Nanosecond)
		return ts
	}

	// Wrong column type.
	err := ts.putColumns(ctx, pathDesc("cpu"), []arrow.Field{tsField, hostField, {Name: "usage_user", Type: arrow.BinaryTypes.String, Nullable: true}, system, idle}, func(b *array.RecordBuilder) {
		fillTS(b, 0, 100)
		b.Field(1).(*array.StringBuilder).Append("host_0")
		b.Field(2).(*array.StringBuilder).Append("lots")
		b.Field(3).(*array.Int64Builder).Append(1)
		b.Field(4).(*array.Int64Builder).Append(1)
	})
	wantCode(t, "wrong column type", err, codes.InvalidArgument, `"usage_user"`, "utf8")
	// Missing columns: a payload column and the entity column.
	err = ts.putColumns(ctx, pathDesc("cpu"), []arrow.Field{tsField, hostField, user, system}, func(b *array.RecordBuilder) {
		fillTS(b, 0, 100)
		b.Field(1).(*array.StringBuilder).Append("host_0")
		b.Field(2).(*array.Int64Builder).Append(1)
		b.Field(3).(*array.Int64Builder).Append(1)
	})
	wantCode(t, "missing payload column", err, codes.InvalidArgument, `"usage_idle"`)
	err = ts.putColumns(ctx, pathDesc("cpu"), []arrow.Field{tsField, user, system, idle}, func(b *array.RecordBuilder) {
		fillTS(b, 0, 100)
		for c := 1; c <= 3; c++ {
			b.Field(c).(*array.Int64Builder).Append(1)
		}
	})
	wantCode(t, "missing entity column", err, codes.InvalidArgument, `"hostname"`)
	// An extra column.
	err = ts.putColumns(ctx, pathDesc("cpu"), append(tsbsSchema.Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64}), func(b *array.RecordBuilder) {
		fillTS(b, 0, 100)
		b.Field(1).(*array.StringBuilder).Append("host_0")
		for c := 2; c <= 5; c++ {
			b.Field(c).(*array.Int64Builder).Append(1)
		}
	})
	wantCode(t, "extra column", err, codes.InvalidArgument, `"extra"`)
	// Nulls in the entity column, on a table whose first put would adopt
	// a nullable entity column.
	nullableHost := arrow.Field{Name: "hostname", Type: arrow.BinaryTypes.String, Nullable: true}
	err = ts.putColumns(ctx, pathDesc("fresh"), []arrow.Field{tsField, nullableHost, user, system, idle}, func(b *array.RecordBuilder) {
		fillTS(b, 0, 0, 1, 2)
		b.Field(1).(*array.StringBuilder).AppendValues([]string{"host_0", "", "host_0"}, []bool{true, false, true})
		for c := 2; c <= 4; c++ {
			b.Field(c).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		}
	})
	wantCode(t, "null entity", err, codes.InvalidArgument, `"hostname"`, "null", "row 1")
	// A null index value.
	nullableTS := arrow.Field{Name: "ts", Type: tsField.Type, Nullable: true}
	err = ts.putColumns(ctx, pathDesc("fresh"), []arrow.Field{nullableTS, hostField, user, system, idle}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{at("2024-06-01T00:00:00Z"), 0}, []bool{true, false})
		b.Field(1).(*array.StringBuilder).AppendValues([]string{"host_0", "host_0"}, nil)
		for c := 2; c <= 4; c++ {
			b.Field(c).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
		}
	})
	wantCode(t, "null index", err, codes.InvalidArgument, `"ts"`, "null")
	// An index column of the wrong type on a fresh table.
	err = ts.putColumns(ctx, pathDesc("fresh"), []arrow.Field{{Name: "ts", Type: arrow.PrimitiveTypes.Int64}, hostField}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).Append(1)
		b.Field(1).(*array.StringBuilder).Append("host_0")
	})
	wantCode(t, "int64 index column on a timestamp table", err, codes.InvalidArgument, `"ts"`)

	// Duplicate intervals inside one put: two (host, 10 s interval) pairs
	// hold two rows each.
	err = ts.putColumns(ctx, pathDesc("cpu"), tsbsSchema.Fields(), func(b *array.RecordBuilder) {
		b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{
			at("2024-06-02T00:00:00Z"), at("2024-06-02T00:00:05Z"), at("2024-06-02T00:00:20Z"), at("2024-06-02T00:00:29Z"), at("2024-06-02T00:00:20Z"),
		}, nil)
		b.Field(1).(*array.StringBuilder).AppendValues([]string{"host_0", "host_0", "host_1", "host_1", "host_0"}, nil)
		for c := 2; c <= 4; c++ {
			b.Field(c).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4, 5}, nil)
		}
	})
	wantCode(t, "duplicate intervals in the stream", err, codes.FailedPrecondition, "2 (identity, index interval) pairs", "host_0", "2024-06-02T00:00:00Z")
	// Overlap with committed data: steps 5..14 of host_0 against 0..9.
	bs := buildBatches(ts.cliMem, genRows(t0.Add(timeOfStep(5)), 10, 1), 4)
	_, err = ts.put(ctx, pathDesc("cpu"), tsbsSchema, bs...)
	releaseAll(bs)
	wantCode(t, "overlap with committed data", err, codes.FailedPrecondition, "version 2", "5 (identity, index interval) pairs", "host_0", "2024-06-01T00:00:50Z")

	// A schema that changes in the middle of the stream.
	stream, err := ts.client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := buildBatches(ts.cliMem, genRows(t0.Add(timeOfStep(500)), 3, 2), 100)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(ts.cliMem))
	w.SetFlightDescriptor(pathDesc("cpu"))
	_ = w.Write(good[0])
	w.Close()
	other := arrow.NewSchema([]arrow.Field{tsField, hostField, user}, nil)
	w2 := flight.NewRecordWriter(stream, ipc.WithSchema(other), ipc.WithAllocator(ts.cliMem))
	ob := array.NewRecordBuilder(ts.cliMem, other)
	fillTS(ob, 0, 600)
	ob.Field(1).(*array.StringBuilder).Append("host_0")
	ob.Field(2).(*array.Int64Builder).Append(1)
	orec := ob.NewRecordBatch()
	ob.Release()
	_ = w2.Write(orec)
	w2.Close()
	orec.Release()
	releaseAll(good)
	_ = stream.CloseSend()
	_, err = stream.Recv()
	wantCode(t, "schema change mid-stream", err, codes.InvalidArgument, "Schema")

	// A stream with a schema and no batches, and one with no messages.
	_, err = ts.put(ctx, pathDesc("cpu"), tsbsSchema)
	wantCode(t, "schema-only stream", err, codes.InvalidArgument, "no rows")
	stream, err = ts.client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	_, err = stream.Recv()
	wantCode(t, "empty stream", err, codes.InvalidArgument, "descriptor", "schema")
	// A stream without a descriptor.
	stream, err = ts.client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	one := buildBatches(ts.cliMem, genRows(t0.Add(timeOfStep(700)), 1, 1), 10)
	w = flight.NewRecordWriter(stream, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(ts.cliMem))
	_ = w.Write(one[0])
	w.Close()
	releaseAll(one)
	_ = stream.CloseSend()
	_, err = stream.Recv()
	wantCode(t, "stream without a descriptor", err, codes.InvalidArgument, "descriptor")

	sameSnapshot(t, "refused puts", before, snapshot(t, ts.root))
}

func TestForgedTickets(t *testing.T) {
	ts, ctx := startWithCPU(t)
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 100, 2)
	info := ts.info(ctx, pathDesc("cpu"))
	if len(info.Endpoint) != 1 {
		t.Fatalf("%d endpoints, want 1", len(info.Endpoint))
	}
	real := string(info.Endpoint[0].Ticket.Ticket)
	if !strings.HasPrefix(real, "tsf1:") {
		t.Fatalf("ticket %q lacks the version prefix", real)
	}
	for _, c := range []struct {
		ticket string
		code   codes.Code
		frags  []string
	}{
		{"\x00\x01garbage", codes.InvalidArgument, []string{"not a tsflight ticket"}},
		{"", codes.InvalidArgument, []string{"not a tsflight ticket"}},
		{"tsf2:" + real[5:], codes.InvalidArgument, []string{"not a tsflight ticket"}},
		{"tsf1:{bad", codes.InvalidArgument, []string{"ticket", "malformed JSON"}},
		{"tsf1:", codes.InvalidArgument, []string{"ticket", "malformed JSON"}},
		{`tsf1:{"table":"cpu","part":0,"parts":1}`, codes.InvalidArgument, []string{"ticket", "version"}},
		{`tsf1:{"table":"cpu","version":2,"part":2,"parts":2}`, codes.InvalidArgument, []string{"part 2 of 2"}},
		{`tsf1:{"table":"cpu","version":2,"part":-1,"parts":1}`, codes.InvalidArgument, []string{"part -1 of 1"}},
		{`tsf1:{"table":"cpu","version":2,"part":0,"parts":0}`, codes.InvalidArgument, []string{"part 0 of 0"}},
		{`tsf1:{"table":"cpu","version":2,"part":3,"parts":5}`, codes.InvalidArgument, []string{"1 part", "5"}},
		{`tsf1:{"table":"cpu","version":2,"part":0,"parts":1,"admin":true}`, codes.InvalidArgument, []string{`"admin"`}},
		{`tsf1:{"table":"cpu","version":2,"part":0,"parts":1,"columns":["secret"]}`, codes.InvalidArgument, []string{`"secret"`}},
		{`tsf1:{"table":"ghost","version":2,"part":0,"parts":1}`, codes.NotFound, []string{`"ghost"`}},
		{`tsf1:{"table":"cpu","version":3,"part":0,"parts":1}`, codes.NotFound, []string{"version 3"}},
	} {
		_, err := ts.doGet(ctx, &flight.Ticket{Ticket: []byte(c.ticket)})
		wantCode(t, fmt.Sprintf("ticket %q", c.ticket), err, c.code, c.frags...)
	}
	// The real ticket still works.
	got, err := ts.doGet(ctx, info.Endpoint[0].Ticket)
	if err != nil || len(got.rows) != 20 {
		t.Fatalf("real ticket: %v rows, %v", got, err)
	}
}

// copyTable copies a table directory under the root to a new name.
func copyTable(t *testing.T, root, from, to string) {
	t.Helper()
	testkit.CopyDir(t, filepath.Join(root, from), filepath.Join(root, to))
}

// requireReaderFeature rewrites commit 1 of the table in dir to require
// reader feature f.
func requireReaderFeature(t *testing.T, dir, f string) {
	t.Helper()
	commit1 := filepath.Join(dir, filepath.FromSlash(tableformat.CommitPath(1)))
	data, err := os.ReadFile(commit1)
	if err != nil {
		t.Fatal(err)
	}
	patched := strings.Replace(string(data), `"required_reader_features":[]`, `"required_reader_features":["`+f+`"]`, 1)
	if patched == string(data) {
		t.Fatalf("commit 1 has no empty required_reader_features: %s", data)
	}
	if err := os.WriteFile(commit1, []byte(patched), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenTablesOnDisk covers tables the service must refuse to read:
// an unsupported reader feature, a corrupt commit and a missing segment.
func TestBrokenTablesOnDisk(t *testing.T) {
	ts, ctx := startWithCPU(t)
	rows := genRows(t0, 10, 2)
	ts.mustPut(ctx, pathDesc("cpu"), rows, 100, 2)
	batches := buildBatches(ts.cliMem, genRows(t0.Add(timeOfStep(100)), 10, 2), 100)
	defer releaseAll(batches)

	// A table whose first commit requires reader feature time_travel.
	copyTable(t, ts.root, "cpu", "future")
	requireReaderFeature(t, filepath.Join(ts.root, "future"), "time_travel")

	// A table whose second commit is not JSON.
	copyTable(t, ts.root, "cpu", "broken")
	if err := os.WriteFile(filepath.Join(ts.root, "broken", filepath.FromSlash(tableformat.CommitPath(2))), []byte(`{"version":2,"base_vers`), 0o644); err != nil {
		t.Fatal(err)
	}

	// A table whose segment file was deleted.
	copyTable(t, ts.root, "cpu", "lost")
	var seg string
	for _, p := range segmentFiles(t, filepath.Join(ts.root, "lost")) {
		if strings.HasSuffix(p, ".parquet") {
			seg = p
		}
	}
	if err := os.Remove(filepath.Join(ts.root, "lost", filepath.FromSlash(seg))); err != nil {
		t.Fatal(err)
	}

	before := snapshot(t, ts.root)
	for _, c := range []struct {
		table string
		code  codes.Code
		frags []string
	}{
		{"future", codes.FailedPrecondition, []string{"time_travel"}},
		{"broken", codes.DataLoss, []string{tableformat.CommitPath(2)}},
	} {
		what := func(s string) string { return c.table + ": " + s }
		_, err := ts.client.GetFlightInfo(ctx, pathDesc(c.table))
		wantCode(t, what("GetFlightInfo"), err, c.code, c.frags...)
		_, err = ts.client.GetSchema(ctx, pathDesc(c.table))
		wantCode(t, what("GetSchema"), err, c.code, c.frags...)
		_, err = ts.put(ctx, pathDesc(c.table), tsbsSchema, batches...)
		wantCode(t, what("DoPut"), err, c.code, c.frags...)
		_, err = ts.put(ctx, cmdDesc(t, map[string]any{"table": c.table, "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s"}}), tsbsSchema, batches...)
		wantCode(t, what("DoPut with create"), err, c.code, c.frags...)
		_, err = ts.action(ctx, ActionDescribeTable, map[string]any{"table": c.table})
		wantCode(t, what("describe-table"), err, c.code, c.frags...)
		_, err = ts.action(ctx, ActionCreateTable, map[string]any{"table": c.table, "index_column": "ts", "index_type": "timestamp", "granularity": "10s"})
		wantCode(t, what("create-table"), err, c.code, c.frags...)
		_, err = ts.action(ctx, ActionGaps, map[string]any{"table": c.table, "start": "2024-06-01T00:00:00Z", "end": "2024-06-02T00:00:00Z"})
		wantCode(t, what("gaps"), err, c.code, c.frags...)
		_, err = ts.action(ctx, ActionAddColumns, map[string]any{"table": c.table, "columns": []any{map[string]any{"name": "x", "type": "int64"}}})
		wantCode(t, what("add-columns"), err, c.code, c.frags...)
		tkt, _ := json.Marshal(map[string]any{"table": c.table, "version": 2, "part": 0, "parts": 1})
		_, err = ts.doGet(ctx, &flight.Ticket{Ticket: append([]byte("tsf1:"), tkt...)})
		wantCode(t, what("DoGet"), err, c.code, c.frags...)
	}

	// The lost segment: planning works from the log; reading it fails.
	info := ts.info(ctx, pathDesc("lost"))
	_, err := ts.fetchAll(ctx, info)
	wantCode(t, "DoGet of a deleted segment", err, codes.DataLoss, seg)
	sameSnapshot(t, "broken tables", before, snapshot(t, ts.root))

	// ListFlights lists every table; one that cannot be opened carries its
	// problem in app_metadata (and no endpoints) instead of being skipped.
	var names []string
	problems := map[string]TableProblem{}
	for _, info := range listFlights(t, ts) {
		name := info.FlightDescriptor.Path[0]
		names = append(names, name)
		if len(info.AppMetadata) > 0 {
			var p TableProblem
			if err := json.Unmarshal(info.AppMetadata, &p); err != nil {
				t.Fatalf("%s: app_metadata %q: %v", name, info.AppMetadata, err)
			}
			problems[name] = p
		}
	}
	if strings.Join(names, ",") != "broken,cpu,future,lost" {
		t.Fatalf("ListFlights lists %v, want [broken cpu future lost]", names)
	}
	if p := problems["broken"]; p.State != TableDamaged || p.Code != "DATA_LOSS" || !strings.Contains(p.Error, tableformat.CommitPath(2)) {
		t.Fatalf("broken: problem %+v", p)
	}
	if p := problems["future"]; p.State != TableUnreadable || p.Code != "FAILED_PRECONDITION" || !strings.Contains(p.Error, "time_travel") {
		t.Fatalf("future: problem %+v", p)
	}
	if len(problems) != 2 {
		t.Fatalf("problems reported for %v, want broken and future only", problems)
	}
}
