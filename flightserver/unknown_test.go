package flightserver

// Tests of the refusals that name what was sent and what is accepted:
// unknown actions (with the nearest name), descriptor and ticket shapes,
// Flight SQL actions and tickets on a server without Flight SQL; the one
// spelling "entity" of entity filters (with "entities" still accepted on
// scans); and roots that are URLs.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

func TestClosest(t *testing.T) {
	names := actionNames()
	for _, c := range []struct{ name, want string }{
		{"rollbak", "rollback"},
		{"Rollback", "rollback"}, // case does not count
		{"compcat", "compact"},   // two substitutions
		{"describe_table", "describe-table"},
		{"gap", "gaps"},
		{"lst", "last"},
		{"drop-table", ""},
		{"", ""},
		{"rollback", ""}, // a known name needs no suggestion
		{"xyzzy", ""},
		{strings.Repeat("a", 500), ""},
	} {
		if got := Closest(c.name, names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	if got := editDistance("kitten", "sitting", 10); got != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", got)
	}
	if got := editDistance("kitten", "sitting", 2); got != 2 {
		t.Errorf("editDistance capped at 2 = %d", got)
	}
	if got := editDistance("héllo", "hello", 5); got != 1 {
		t.Errorf("editDistance counts bytes, not letters: %d", got)
	}
}

func TestUnknownActionMessages(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	all := strings.Join(actionNames(), ", ")
	for _, c := range []struct {
		name  string
		code  codes.Code
		frags []string
		not   []string
	}{
		{"rollbak", codes.InvalidArgument, []string{`unknown action "rollbak"; did you mean "rollback"?`, "The actions are: " + all + " (ListActions describes them)"}, []string{"Flight SQL"}},
		{"drop-table", codes.InvalidArgument, []string{`unknown action "drop-table". The actions are: create-table, `}, []string{"did you mean"}},
		{"", codes.InvalidArgument, []string{`unknown action "".`}, nil},
		{strings.Repeat("x", 300), codes.InvalidArgument, []string{`unknown action "` + strings.Repeat("x", 64) + `…"`}, []string{strings.Repeat("x", 65)}},
		// A Flight SQL action, on a server without Flight SQL.
		{"CreatePreparedStatement", codes.Unimplemented, []string{"Flight SQL is not served", "duckdb_arrow", "got action CreatePreparedStatement"}, nil},
		{"CancelFlightInfo", codes.Unimplemented, []string{"Flight SQL is not served"}, nil},
	} {
		_, err := ts.action(ctx, c.name, `{"table":"cpu"}`)
		wantCode(t, "DoAction "+catalog.Truncate(c.name, 20), err, c.code, c.frags...)
		for _, n := range c.not {
			if strings.Contains(err.Error(), n) {
				t.Errorf("DoAction %s: the message holds %q: %v", catalog.Truncate(c.name, 20), n, err)
			}
		}
	}
	// With Flight SQL (the router's message), its actions are listed and
	// suggested too.
	err := UnknownAction("CreatePreparedStatment", true)
	wantCode(t, "UnknownAction with SQL", err, codes.InvalidArgument, `did you mean "CreatePreparedStatement"?`,
		"; Flight SQL: "+strings.Join(flightSQLActions, ", ")+" (ListActions")
}

// A read token sending an unknown action hears what the actions are, not
// that it lacks write scope; a known writing action is still refused.
func TestUnknownActionReadToken(t *testing.T) {
	e := startAuthServer(t)
	ctx := bearer(ctxT(t), e.read)
	_, err := e.action(ctx, "compcat", `{"table":"cpu"}`)
	wantCode(t, "read token, compcat", err, codes.InvalidArgument, `unknown action "compcat"; did you mean "compact"?`)
	_, err = e.action(ctx, ActionCompact, `{"table":"cpu"}`)
	wantCode(t, "read token, compact", err, codes.PermissionDenied, "needs write scope")
}

func TestUnknownDescriptorAndTicketShapes(t *testing.T) {
	ts, ctx := startWithCPU(t)
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 100, 2)
	before := snapshot(t, ts.root)
	stringAny := testkit.PackAny(t, wrapperspb.String("SELECT 1"))
	sqlTicket, err := proto.Marshal(&anypb.Any{TypeUrl: "type.googleapis.com/arrow.flight.protocol.sql.TicketStatementQuery", Value: []byte{0x0a, 0x01, 'x'}})
	if err != nil {
		t.Fatal(err)
	}

	scanForms := `send PATH ["TABLE"] or CMD holding a JSON scan request such as {"table":"cpu"}`
	for _, c := range []struct {
		what  string
		call  func() error
		code  codes.Code
		frags []string
	}{
		{"GetFlightInfo UNKNOWN", func() error {
			_, err := ts.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN, Path: []string{"cpu"}})
			return err
		}, codes.InvalidArgument, []string{"GetFlightInfo: unknown descriptor type UNKNOWN (0): " + scanForms}},
		{"GetSchema type 9", func() error {
			_, err := ts.client.GetSchema(ctx, &flight.FlightDescriptor{Type: 9, Cmd: []byte(`{"table":"cpu"}`)})
			return err
		}, codes.InvalidArgument, []string{"GetSchema: unknown descriptor type 9: " + scanForms}},
		{"GetFlightInfo CMD Any", func() error {
			_, err := ts.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: stringAny})
			return err
		}, codes.InvalidArgument, []string{`GetFlightInfo: the command is a protobuf Any of type "type.googleapis.com/google.protobuf.StringValue", which this server does not take: ` + scanForms}},
		{"DoPut UNKNOWN", func() error {
			return ts.putRows(ctx, &flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN}, genRows(t0, 1, 1))
		}, codes.InvalidArgument, []string{`DoPut: unknown descriptor type UNKNOWN (0): send PATH ["TABLE"] or CMD holding {"table":"TABLE"} (with "create": {…} to create it)`}},
		{"DoPut CMD Any", func() error {
			return ts.putRows(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: stringAny}, genRows(t0, 1, 1))
		}, codes.InvalidArgument, []string{`DoPut: the command is a protobuf Any of type "type.googleapis.com/google.protobuf.StringValue"`}},
		{"DoGet garbage", func() error { return ts.getErr(ctx, []byte("\x00\x01garbage")) },
			codes.InvalidArgument, []string{`ticket: not a tsflight ticket: got 9 bytes, "\x00\x01garbage" (a tsflight ticket starts with "tsf1:"; take tickets from the endpoints of a FlightInfo)`}},
		{"DoGet empty", func() error { return ts.getErr(ctx, nil) },
			codes.InvalidArgument, []string{"ticket: not a tsflight ticket: got nothing (0 bytes)"}},
		{"DoGet long", func() error { return ts.getErr(ctx, []byte(strings.Repeat("z", 1000))) },
			codes.InvalidArgument, []string{`got 1000 bytes, "` + strings.Repeat("z", 24) + `"…`}},
		{"DoGet Any", func() error { return ts.getErr(ctx, stringAny) },
			codes.InvalidArgument, []string{`ticket: not a tsflight ticket: got a protobuf Any of type "type.googleapis.com/google.protobuf.StringValue"`}},
		{"DoGet Flight SQL ticket", func() error { return ts.getErr(ctx, sqlTicket) },
			codes.Unimplemented, []string{"Flight SQL is not served", "arrow.flight.protocol.sql.TicketStatementQuery"}},
	} {
		wantCode(t, c.what, c.call(), c.code, c.frags...)
	}
	if d := testkit.SnapshotDiff(before, snapshot(t, ts.root)); len(d) > 0 {
		t.Fatalf("refused calls wrote to the root: %v", d)
	}
}

// putRows puts rows of the TSBS schema under desc and returns the error.
func (ts *testServer) putRows(ctx context.Context, desc *flight.FlightDescriptor, rows []row) error {
	bs := buildBatches(ts.cliMem, rows, 100)
	defer releaseAll(bs)
	_, err := ts.put(ctx, desc, tsbsSchema, bs...)
	return err
}

func (ts *testServer) getErr(ctx context.Context, ticket []byte) error {
	_, err := ts.doGet(ctx, &flight.Ticket{Ticket: ticket})
	return err
}

// TestEntitySpelling: scans take "entity", as coverage, gaps and last do;
// the deprecated "entities" still works on scans (the same rows), both at
// once is refused naming both, messages name the spelling sent, tickets
// carry "entity", and the actions hint at "entity" for "entities".
func TestEntitySpelling(t *testing.T) {
	ts, ctx := startWithCPU(t)
	rows := genRows(t0, 10, 3)
	ts.mustPut(ctx, pathDesc("cpu"), rows, 100, 2)
	var want int
	for _, r := range rows {
		if r.host == "host_1" {
			want++
		}
	}
	for _, field := range []string{"entity", "entities"} {
		info := ts.info(ctx, cmdDesc(t, `{"table":"cpu","`+field+`":{"hostname":"host_1"}}`))
		got, err := ts.fetchAll(ctx, info)
		if err != nil {
			t.Fatalf("scan with %q: %v", field, err)
		}
		if len(got.rows) != want {
			t.Fatalf("scan with %q: %d rows, want %d", field, len(got.rows), want)
		}
		for _, r := range got.rows {
			if r.host != "host_1" {
				t.Fatalf("scan with %q returned host %s", field, r.host)
			}
		}
		if info.TotalRecords != -1 {
			t.Fatalf("scan with %q: total_records %d, want -1 (filtered)", field, info.TotalRecords)
		}
		for _, ep := range info.Endpoint {
			tkt := string(ep.Ticket.Ticket)
			if !strings.Contains(tkt, `"entity":{"hostname":"host_1"}`) || strings.Contains(tkt, "entities") {
				t.Fatalf("ticket of a scan with %q: %s", field, tkt)
			}
		}
		// Refusals name the spelling sent.
		_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, `{"table":"cpu","`+field+`":{"hostname":7}}`))
		wantCode(t, "wrong value type with "+field, err, codes.InvalidArgument, field+".hostname: expected a string, got 7")
		// GetSchema takes both too.
		if _, err := ts.client.GetSchema(ctx, cmdDesc(t, `{"table":"cpu","`+field+`":{"hostname":"host_1"}}`)); err != nil {
			t.Fatalf("GetSchema with %q: %v", field, err)
		}
	}
	both := `both "entity" and "entities" are given; send "entity" only ("entities" is its deprecated spelling)`
	_, err := ts.client.GetFlightInfo(ctx, cmdDesc(t, `{"table":"cpu","entity":{"hostname":"host_1"},"entities":{"hostname":"host_1"}}`))
	wantCode(t, "both spellings", err, codes.InvalidArgument, "command: "+both)
	// Empty maps count as given.
	_, err = ts.client.GetFlightInfo(ctx, cmdDesc(t, `{"table":"cpu","entity":{},"entities":{}}`))
	wantCode(t, "both spellings, empty", err, codes.InvalidArgument, "command: "+both)
	// null is absent.
	if _, err := ts.client.GetFlightInfo(ctx, cmdDesc(t, `{"table":"cpu","entity":null,"entities":{"hostname":"host_1"}}`)); err != nil {
		t.Fatalf("entity null with entities: %v", err)
	}
	// A ticket giving both (tickets are opaque; a forged one).
	err = ts.getErr(ctx, []byte(`tsf1:{"table":"cpu","version":2,"part":0,"parts":1,"entity":{"hostname":"host_1"},"entities":{"hostname":"host_2"}}`))
	wantCode(t, "ticket with both spellings", err, codes.InvalidArgument, "ticket: "+both)
	// A ticket of an older server, which wrote "entities", still reads.
	got, err := ts.fetchAll(ctx, &flight.FlightInfo{Endpoint: []*flight.FlightEndpoint{{Ticket: &flight.Ticket{
		Ticket: []byte(`tsf1:{"table":"cpu","entities":{"hostname":"host_2"},"version":2,"part":0,"parts":1}`)}}}})
	if err != nil || len(got.rows) != want {
		t.Fatalf("ticket with entities: %v rows, %v", len(got.rows), err)
	}
	// The actions take "entity" only, and say so.
	for _, a := range []string{ActionCoverage, ActionGaps, ActionLast} {
		body := `{"table":"cpu","start":"2024-06-01T00:00:00Z","end":"2024-06-01T01:00:00Z","entities":{"hostname":"host_1"}}`
		if a == ActionLast {
			body = `{"table":"cpu","entities":{"hostname":"host_1"}}`
		}
		_, err := ts.action(ctx, a, body)
		wantCode(t, a+" with entities", err, codes.InvalidArgument, `unknown field "entities" (the entity filter is spelled "entity")`)
	}
	// Other actions do not get the hint.
	_, err = ts.action(ctx, ActionDescribeTable, `{"table":"cpu","entities":{}}`)
	wantCode(t, "describe-table with entities", err, codes.InvalidArgument, `unknown field "entities"`)
	if strings.Contains(err.Error(), "spelled") {
		t.Fatalf("describe-table hints at entity: %v", err)
	}
}

func TestScanRequestJSON(t *testing.T) {
	// The ticket form is what encodeTicket writes: "entity", never
	// "entities", and no unexported field.
	req := ScanRequest{Table: "cpu", Entities: map[string]json.RawMessage{"hostname": json.RawMessage(`"a"`)}}
	if err := req.normalize("command"); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&ticket{ScanRequest: req, Parts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"table":"cpu","entity":{"hostname":"a"},"part":0,"parts":1}` {
		t.Fatalf("ticket JSON %s", b)
	}
}

func TestCheckLocalRoot(t *testing.T) {
	for _, c := range []struct {
		root  string
		frags []string // nil: accepted
	}{
		{"/var/lib/tsflight", nil},
		{"./data", nil},
		{"data:v1", nil},
		{`C:\data`, nil},
		{"s3:/bucket", nil}, // one slash: a relative path, as odd as it is
		{"s3://bucket/x?endpoint=http://minio:9000&secret=abc", []string{`root s3://… is a URL (scheme "s3")`, "local directory only", "object storage is planned", "mount the bucket", "local path"}},
		{"gs://b", []string{`scheme "gs"`}},
		{"S3://B", []string{`root S3://… is a URL (scheme "S3")`}},
		{"az+blob://x", []string{`scheme "az+blob"`}},
		{"file:///srv/data", []string{`root file://… is a URL (scheme "file")`, "give the path itself: /srv/data"}},
		{"file://localhost/srv/data", []string{"give the path itself: /srv/data"}},
		{"file://host/srv", []string{"give the directory's path instead"}},
	} {
		err := CheckLocalRoot(c.root)
		if c.frags == nil {
			if err != nil {
				t.Errorf("CheckLocalRoot(%q): %v", c.root, err)
			}
			continue
		}
		wantCode(t, "CheckLocalRoot "+c.root, err, codes.InvalidArgument, c.frags...)
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "bucket/x") {
			t.Errorf("CheckLocalRoot(%q) repeats the URL: %v", c.root, err)
		}
	}
	dir := t.TempDir()
	_, err := New(DefaultOptions("s3://" + dir))
	wantCode(t, "New with a URL root", err, codes.InvalidArgument, `scheme "s3"`)
}
