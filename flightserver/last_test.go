package flightserver

// Tests of the last action through a real server and arrow-go's Flight
// client: the answer is an Arrow IPC stream of the newest row per entity,
// checked against the newest rows a full DoGet of the table holds.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/internal/testkit"
)

// lastAnswer is a decoded last answer: its schema and rows, in order.
// Columns the answer leaves out stay zero in the rows.
type lastAnswer struct {
	schema *arrow.Schema
	rows   []row
}

// last runs the last action and decodes its one result, which must be an
// IPC stream of exactly one record batch.
func (ts *testServer) last(ctx context.Context, body any) (*lastAnswer, error) {
	res, err := ts.action(ctx, ActionLast, body)
	if err != nil {
		return nil, err
	}
	return decodeLast(ts, res)
}

func decodeLast(ts *testServer, body []byte) (*lastAnswer, error) {
	rdr, err := ipc.NewReader(bytes.NewReader(body), ipc.WithAllocator(ts.cliMem))
	if err != nil {
		return nil, fmt.Errorf("the result is not an Arrow IPC stream: %w", err)
	}
	defer rdr.Release()
	a := &lastAnswer{schema: rdr.Schema()}
	batches := 0
	for rdr.Next() {
		batches++
		rec := rdr.RecordBatch()
		for i := range int(rec.NumRows()) {
			var r row
			for c, f := range rec.Schema().Fields() {
				// Checked: the fuzz tests read tables of other shapes.
				switch col := rec.Column(c).(type) {
				case *array.Timestamp:
					if f.Name == "ts" {
						r.ts = int64(col.Value(i))
					}
				case *array.String:
					if f.Name == "hostname" {
						r.host = col.Value(i)
					}
				case *array.Int64:
					switch f.Name {
					case "usage_user":
						r.user = col.Value(i)
					case "usage_system":
						r.system = col.Value(i)
					case "usage_idle":
						r.idle = col.Value(i)
					}
				}
			}
			a.rows = append(a.rows, r)
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, err
	}
	if batches != 1 {
		return nil, fmt.Errorf("the stream holds %d record batches, want 1", batches)
	}
	return a, nil
}

// newestPerHost is the brute-force answer: the row with the greatest
// index of every host, sorted by host.
func newestPerHost(rows []row) []row {
	best := map[string]row{}
	for _, r := range rows {
		if b, ok := best[r.host]; !ok || r.ts > b.ts {
			best[r.host] = r
		}
	}
	out := make([]row, 0, len(best))
	for _, r := range best {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.host, b.host) })
	return out
}

// hostRows are rows of one host at the given steps after t0.
func hostRows(host string, steps ...int) []row {
	var out []row
	for _, s := range steps {
		ts := t0.Add(timeOfStep(s)).UnixNano()
		out = append(out, row{ts: ts, host: host, user: int64(s) * 3, system: int64(len(host)), idle: int64(1000 + s)})
	}
	return out
}

// TestLastAction: after each append (and a compaction) the last action
// returns, for every host, the newest row a full scan holds, sorted by
// host; the entity filter and the projection select from it.
func TestLastAction(t *testing.T) {
	ts, ctx := startWithCPU(t)

	check := func(what string) {
		t.Helper()
		all, err := ts.fetchAll(ctx, ts.info(ctx, pathDesc("cpu")))
		if err != nil {
			t.Fatalf("%s: DoGet: %v", what, err)
		}
		got, err := ts.last(ctx, `{"table":"cpu"}`)
		if err != nil {
			t.Fatalf("%s: last: %v", what, err)
		}
		if !got.schema.Equal(tsbsSchemaOf(t, ts)) {
			t.Fatalf("%s: schema %s, want the table's", what, got.schema)
		}
		if want := newestPerHost(all.rows); !slices.Equal(got.rows, want) {
			t.Fatalf("%s: last\n  %+v\nwant\n  %+v", what, got.rows, want)
		}
	}
	// v2: hosts 0-2 at steps 0-9.
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 3), 7, 2)
	check("after the first append")
	// v3: hosts 0 and 1 move on; host_2 stays at step 9.
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0.Add(timeOfStep(10)), 5, 2), 100, 3)
	check("after the second append")
	// Compaction replaces the segments; the newest rows stay.
	ts.compactRun(t, map[string]any{"table": "cpu"})
	check("after compact")
	// An append of older rows (a new host, and host_0 before its newest)
	// and one newer row of host_2, in one stream.
	late := append(hostRows("host_9", 0, 1, 2), hostRows("host_0", 20)...)
	late = append(late, hostRows("host_2", 30)...)
	batches := buildBatches(ts.cliMem, late, 2)
	res, err := ts.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
	releaseAll(batches)
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%d PutResults", len(res))
	}
	if err != nil {
		t.Fatalf("late append: %v", err)
	}
	check("after a late append")
	all := ts.readAll(t, ctx, "cpu")
	newest := newestPerHost(all.rows)
	if len(newest) != 4 || newest[0].host != "host_0" || newest[3].host != "host_9" {
		t.Fatalf("the brute force is not what the test built: %+v", newest)
	}

	// A partial identity filter (every entity column, here one).
	for _, want := range newest {
		got, err := ts.last(ctx, map[string]any{"table": "cpu", "entity": map[string]any{"hostname": want.host}})
		if err != nil {
			t.Fatalf("last of %s: %v", want.host, err)
		}
		if len(got.rows) != 1 || got.rows[0] != want {
			t.Fatalf("last of %s: %+v, want %+v", want.host, got.rows, want)
		}
	}
	// A filter nothing matches: no rows, the full schema.
	got, err := ts.last(ctx, `{"table":"cpu","entity":{"hostname":"nobody"}}`)
	if err != nil || len(got.rows) != 0 || got.schema.NumFields() != 5 {
		t.Fatalf("last of nobody: %v, %v", got, err)
	}
	// An empty filter and empty columns mean none.
	if got, err := ts.last(ctx, `{"table":"cpu","entity":{},"columns":[]}`); err != nil || !slices.Equal(got.rows, newest) {
		t.Fatalf("last with empty entity and columns: %v, %v", got, err)
	}

	// Projection: the columns asked for, in that order.
	got, err = ts.last(ctx, `{"table":"cpu","columns":["usage_idle","hostname"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if names := fieldNamesOf(got.schema); !slices.Equal(names, []string{"usage_idle", "hostname"}) {
		t.Fatalf("projected schema: %v", names)
	}
	for i, r := range got.rows {
		if r.host != newest[i].host || r.idle != newest[i].idle || r.ts != 0 || r.user != 0 {
			t.Fatalf("projected row %d: %+v, want host and idle of %+v", i, r, newest[i])
		}
	}
	// Projection and filter together.
	got, err = ts.last(ctx, `{"table":"cpu","entity":{"hostname":"host_2"},"columns":["ts"]}`)
	if err != nil || len(got.rows) != 1 || got.rows[0].ts != newest[2].ts || got.schema.NumFields() != 1 {
		t.Fatalf("last ts of host_2: %+v, %v", got, err)
	}

	// The result is one message, sent as it is; RunAction's callers that
	// encode results as JSON get an error instead of base64.
	raw, err := ts.svc.RunAction(ctx, ActionLast, []byte(`{"table":"cpu"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(raw); err == nil || !strings.Contains(err.Error(), "Arrow IPC stream, not JSON") {
		t.Fatalf("encoding the last result as JSON: %v", err)
	}
	if _, ok := raw.(arrowResult); !ok {
		t.Fatalf("RunAction(last) returned %T", raw)
	}
}

func tsbsSchemaOf(t *testing.T, ts *testServer) *arrow.Schema {
	t.Helper()
	info := ts.info(ctxT(t), pathDesc("cpu"))
	return ts.schemaOf(info.Schema)
}

func fieldNamesOf(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

// TestLastActionIntegerEntity: an integer entity column takes the value
// as a JSON number or a string of digits; a non-integer is refused.
func TestLastActionIntegerEntity(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	ts.mustAction(ctx, ActionCreateTable, map[string]any{"table": "m", "index_column": "n", "index_type": "int64", "granularity": 1, "entity_columns": []string{"id"}})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(ts.cliMem, schema)
	for n := range int64(6) {
		b.Field(0).(*array.Int64Builder).Append(n)
		b.Field(1).(*array.Int32Builder).Append(int32(n % 3))
		b.Field(2).(*array.Float64Builder).Append(float64(n) / 2)
	}
	rec := b.NewRecordBatch()
	b.Release()
	_, err := ts.put(ctx, pathDesc("m"), schema, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"table":"m","entity":{"id":2}}`, `{"table":"m","entity":{"id":"2"}}`} {
		res, err := ts.action(ctx, ActionLast, body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		rdr, err := ipc.NewReader(bytes.NewReader(res), ipc.WithAllocator(ts.cliMem))
		if err != nil {
			t.Fatal(err)
		}
		if !rdr.Next() {
			t.Fatalf("%s: no batch", body)
		}
		got := rdr.RecordBatch()
		if got.NumRows() != 1 || got.Column(0).(*array.Int64).Value(0) != 5 || got.Column(1).(*array.Int32).Value(0) != 2 {
			t.Errorf("%s: %v, want n=5 id=2", body, got)
		}
		rdr.Release()
	}
	_, err = ts.action(ctx, ActionLast, `{"table":"m","entity":{"id":"two"}}`)
	wantCode(t, "id two", err, codes.InvalidArgument, `entity.id: "two" is not a 32-bit integer`)
	_, err = ts.action(ctx, ActionLast, `{"table":"m","entity":{"id":4294967296}}`)
	wantCode(t, "id 2^32", err, codes.InvalidArgument, `entity.id: 4294967296 is not a 32-bit integer`)
}

// TestLastActionErrors: each bad request gets its code and a message that
// names the field or value; none leaves memory behind.
func TestLastActionErrors(t *testing.T) {
	ts, ctx := startWithCPU(t)
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 4, 2), 100, 2)
	ts.mustAction(ctx, ActionCreateTable, map[string]any{"table": "plain", "index_column": "ts", "index_type": "timestamp", "granularity": "10s"})
	ts.mustPut(ctx, pathDesc("plain"), genRows(t0, 4, 1), 100, 2)
	ts.createTSBS(ctx, "fresh")
	for _, c := range []struct {
		body  string
		code  codes.Code
		frags []string
	}{
		{`{"table":"nosuch"}`, codes.NotFound, []string{`table "nosuch": not found`}},
		{`{"table":"../cpu"}`, codes.InvalidArgument, []string{`table name "../cpu"`, "is not allowed"}},
		{`{"table":`, codes.InvalidArgument, []string{"last: malformed JSON body"}},
		{`not json`, codes.InvalidArgument, []string{"last: malformed JSON body"}},
		{`{"table":"cpu"} {}`, codes.InvalidArgument, []string{"last: unexpected data after the JSON body"}},
		{`{"table":"cpu","entities":{"hostname":"host_0"}}`, codes.InvalidArgument, []string{"last: malformed JSON body", `unknown field "entities"`}},
		{`{"table":"cpu","version":1}`, codes.InvalidArgument, []string{`unknown field "version"`}},
		{`{"table":"cpu","table":"plain"}`, codes.InvalidArgument, []string{`last: the JSON body gives "table" more than once`}},
		{`{"table":"cpu","entity":{"usage_user":1}}`, codes.InvalidArgument, []string{`entity: "usage_user" is not an entity column (entity columns: hostname)`}},
		{`{"table":"cpu","entity":{"hostname":7}}`, codes.InvalidArgument, []string{"entity.hostname: expected a string, got 7"}},
		{`{"table":"cpu","entity":["host_0"]}`, codes.InvalidArgument, []string{"last: malformed JSON body"}},
		{`{"table":"cpu","columns":["nope"]}`, codes.InvalidArgument, []string{`table "cpu"`, `last: columns: unknown column "nope"`, `"usage_idle"`}},
		{`{"table":"cpu","columns":["ts","ts"]}`, codes.InvalidArgument, []string{`last: columns: column "ts" is listed twice`}},
		{`{"table":"cpu","columns":"ts"}`, codes.InvalidArgument, []string{"last: malformed JSON body"}},
		{`{"table":"plain"}`, codes.InvalidArgument, []string{`last: table "plain" has no entity columns`}},
		{`{"table":"plain","entity":{"hostname":"host_0"}}`, codes.InvalidArgument, []string{`last: table "plain" has no entity columns`}},
		{`{"table":"fresh","entity":{"hostname":"host_0"}}`, codes.InvalidArgument, []string{"entity: the table has no data yet"}},
		{`{"table":"fresh","columns":["ts"]}`, codes.InvalidArgument, []string{`unknown column "ts" (the table has no schema yet)`}},
	} {
		_, err := ts.action(ctx, ActionLast, c.body)
		wantCode(t, c.body, err, c.code, c.frags...)
	}
	// A table without data has no newest rows: an empty answer.
	got, err := ts.last(ctx, `{"table":"fresh"}`)
	if err != nil || len(got.rows) != 0 || got.schema.NumFields() != 0 {
		t.Fatalf("last of a table without data: %+v, %v", got, err)
	}
	// The server still answers.
	if got, err := ts.last(ctx, `{"table":"cpu"}`); err != nil || len(got.rows) != 2 {
		t.Fatalf("last after the errors: %+v, %v", got, err)
	}
}

// TestLastActionAboveSendLimit: an answer larger than the server sends in
// one message is refused with ResourceExhausted saying how to ask for
// less; a smaller one still goes through.
func TestLastActionAboveSendLimit(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxResultSize = 4 << 10 })
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 2, 200), 1000, 2)
	_, err := ts.action(ctx, ActionLast, `{"table":"cpu"}`)
	wantCode(t, "last of 200 hosts", err, codes.ResourceExhausted, "last: the answer is ", "more than the server sends in one message (4096, --max-send-msg-size)", "ask for fewer columns or filter by entity")
	got, err := ts.last(ctx, `{"table":"cpu","entity":{"hostname":"host_7"}}`)
	if err != nil || len(got.rows) != 1 || got.rows[0].host != "host_7" {
		t.Fatalf("last of one host: %+v, %v", got, err)
	}
}

// TestLastActionListed: ListActions describes last as returning Arrow.
func TestLastActionListed(t *testing.T) {
	ts := startServer(t, nil)
	found := false
	for _, a := range testkit.ListActions(t, ctxT(t), ts.client) {
		if a.Type == ActionLast {
			found = strings.Contains(a.Description, "Arrow IPC stream") && strings.Contains(a.Description, `"entity"`)
		}
	}
	if !found {
		t.Fatal("ListActions does not describe the last action")
	}
}
