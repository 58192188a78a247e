// Tests of the scope table: every action the server lists is classified on
// purpose (a new action fails here until it is added to the expected
// table), vacuum is judged by its body, and every Flight SQL DoPut command
// reads or writes as intended.

package flightserver

import (
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tsflight/tsflight/internal/testkit"
)

// flightActionWrites is the expected scope of every plain Flight action:
// true when it needs write scope (vacuum: without apply; with apply, see
// TestScopeVacuumBody).
var flightActionWrites = map[string]bool{
	ActionCreateTable:   true,
	ActionAddColumns:    true,
	ActionSetProperties: true,
	ActionDescribeTable: false,
	ActionCoverage:      false,
	ActionGaps:          false,
	ActionCoverageGrid:  false,
	ActionVacuum:        false,
	ActionCheck:         false, // with repair it writes: TestScopeCheckBody
	ActionCompact:       true,  // a dry run too: it plans a rewrite of the table
	ActionRollback:      true,  // a dry run too, as compact
	ActionUpgrade:       true,  // a dry run too, as compact
	ActionMaintenance:   false, // pausing and resuming write: TestScopeMaintenanceBody
	ActionLast:          false,
}

func TestScopeFlightActionsClassified(t *testing.T) {
	ts := startServer(t, nil)
	listed, err := actionTypesOf(ctxT(t), ts.client)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) == 0 {
		t.Fatal("ListActions listed nothing")
	}
	seen := map[string]bool{}
	for _, typ := range listed {
		seen[typ] = true
		want, ok := flightActionWrites[typ]
		if !ok {
			t.Errorf("ListActions lists %q, which the scope test does not know: decide whether it writes and add it here (and to readActions in scope.go if it only reads)", typ)
			continue
		}
		what, write := classifyAction(&flight.Action{Type: typ, Body: []byte(`{"table":"cpu"}`)})
		if write != want {
			t.Errorf("action %s: write=%v, want %v", typ, write, want)
		}
		if what != "action "+typ {
			t.Errorf("action %s is described as %q", typ, what)
		}
	}
	for typ := range flightActionWrites {
		if !seen[typ] {
			t.Errorf("the expected table holds %q, which ListActions does not list", typ)
		}
	}
	// An action no service knows runs nothing: it passes as a read, so
	// that a read token too hears what the actions are (UnknownAction)
	// instead of PERMISSION_DENIED. A known one that readActions does not
	// list writes (the table above; a new action fails it until classified).
	for _, typ := range []string{"drop-table", "Describe-Table", "", "describe-table ", "rollbak"} {
		if _, write := classifyAction(&flight.Action{Type: typ}); write {
			t.Errorf("unknown action %q needs write scope", typ)
		}
	}
	for _, typ := range FlightSQLActions() {
		if _, write := classifyAction(&flight.Action{Type: typ}); write != !readActions[typ] {
			t.Errorf("Flight SQL action %s: write=%v, want %v", typ, write, !readActions[typ])
		}
	}
	long := string(make([]byte, 200))
	if what, _ := classifyAction(&flight.Action{Type: long}); len(what) > 80 {
		t.Errorf("a long action type is described in %d bytes", len(what))
	}
}

func TestScopeVacuumBody(t *testing.T) {
	for _, c := range []struct {
		body  string
		write bool
	}{
		{`{"table":"cpu"}`, false},
		{`{"table":"cpu","apply":false}`, false},
		{`{"table":"cpu","apply":null}`, false},
		{`{"table":"cpu","older_than":"2024-01-01T00:00:00Z"}`, false},
		{`{"table":"cpu","apply":true}`, true},
		{`{"table":"cpu","Apply":true}`, true}, // encoding/json matches keys as the action does
		{`{"apply":false,"apply":true}`, true}, // a key twice is refused, as by the action
		// The security review's bypass: a later null left a *bool nil
		// here while the action's bool stayed true.
		{`{"table":"cpu","apply":true,"apply":null}`, true},
		{`{"table":"cpu","APPLY":true,"apply":null}`, true},
		{`{"table":"cpu","bogus":1}`, true}, // the action refuses it too
		{`{"table":"cpu","apply":"true"}`, true},
		{`{"table":"cpu"} {"apply":true}`, true},
		{`not json`, true},
		{``, true},
	} {
		what, write := classifyAction(&flight.Action{Type: ActionVacuum, Body: []byte(c.body)})
		if write != c.write {
			t.Errorf("vacuum %s: write=%v (%s), want %v", c.body, write, what, c.write)
		}
	}
}

// TestScopeMaintenanceBody: reading maintenance status is a read; a body
// that pauses or resumes, or that the action would refuse, needs write.
func TestScopeMaintenanceBody(t *testing.T) {
	for _, c := range []struct {
		body  string
		write bool
	}{
		{`{}`, false},
		{`{"table":"cpu"}`, false},
		{`{"table":"cpu","paused":null}`, false},
		{`{"table":"cpu","paused":true}`, true},
		{`{"paused":false}`, true},
		{`{"table":"cpu","Paused":true}`, true}, // matched as the action matches it
		{`{"paused":true,"paused":null}`, true}, // a key twice is refused
		{`{"table":"cpu","PAUSED":true,"paused":null}`, true},
		{`{"table":"../x"}`, true}, // the action refuses it too
		{`{"table":"cpu","bogus":1}`, true},
		{`{"paused":"true"}`, true},
		{`not json`, true},
	} {
		what, write := classifyAction(&flight.Action{Type: ActionMaintenance, Body: []byte(c.body)})
		if write != c.write {
			t.Errorf("maintenance %s: write=%v (%s), want %v", c.body, write, what, c.write)
		}
	}
}

// sqlDesc is a DoPut descriptor carrying a packed Flight SQL command.
func sqlDesc(t *testing.T, m proto.Message) *flight.FlightDescriptor {
	t.Helper()
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: testkit.PackAny(t, m)}
}

func TestScopeFlightSQLPutCommands(t *testing.T) {
	for _, c := range []struct {
		name  string
		desc  *flight.FlightDescriptor
		write bool
		what  string
	}{
		{"ingest", sqlDesc(t, &pb.CommandStatementIngest{Table: "cpu"}), true, "DoPut (Flight SQL bulk ingest)"},
		{"update", sqlDesc(t, &pb.CommandStatementUpdate{Query: "DELETE FROM cpu"}), true, "DoPut (Flight SQL CommandStatementUpdate)"},
		{"prepared update", sqlDesc(t, &pb.CommandPreparedStatementUpdate{PreparedStatementHandle: []byte("h")}), true, "DoPut (Flight SQL CommandPreparedStatementUpdate)"},
		{"prepared query parameters", sqlDesc(t, &pb.CommandPreparedStatementQuery{PreparedStatementHandle: []byte("h")}), false, "DoPut (binding query parameters)"},
		{"substrait plan", sqlDesc(t, &pb.CommandStatementSubstraitPlan{}), true, "DoPut (Flight SQL CommandStatementSubstraitPlan)"},
		{"a query sent to DoPut", sqlDesc(t, &pb.CommandStatementQuery{Query: "SELECT 1"}), true, "DoPut (Flight SQL CommandStatementQuery)"},
		{"a non-SQL Any", sqlDesc(t, &pb.Empty{}), true, "DoPut (append)"},
		{"tsflight JSON command", &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"table":"cpu"}`)}, true, "DoPut (append)"},
		{"path", pathDesc("cpu"), true, "DoPut (append to cpu)"},
		{"no descriptor", nil, true, "DoPut"},
		{"unknown descriptor type", &flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN}, true, "DoPut"},
	} {
		what, write := classifyPut(c.desc)
		if write != c.write || what != c.what {
			t.Errorf("%s: %q write=%v, want %q write=%v", c.name, what, write, c.what, c.write)
		}
	}
}

func TestScopeMethods(t *testing.T) {
	for _, m := range []string{"Handshake", "ListFlights", "GetFlightInfo", "PollFlightInfo", "GetSchema", "DoGet", "ListActions"} {
		if what, write := classifyMethod(flightService + m); write || what != m {
			t.Errorf("%s: %q write=%v, want read", m, what, write)
		}
	}
	for _, m := range []string{flightService + "DoExchange", flightService + "DoPut", flightService + "DoAction", flightService + "Reticulate", "/other.Service/ListFlights"} {
		if _, write := classifyMethod(m); !write {
			t.Errorf("%s classified read", m)
		}
	}
}

func TestDuplicateKey(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1,"b":2}`:                       "",
		`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`: "",
		`{"a":1,"a":2}`:                       "a",
		`{"apply":true,"APPLY":null}`:         "APPLY",
		`{"x":{"k":1,"k":2}}`:                 "k",
		`[{"k":1},{"k":1,"K":2}]`:             "K",
		`{"a":[1,{"b":2}],"c":"a","a":3}`:     "a",
		`"a"`:                                 "",
		`not json`:                            "",
	} {
		key, dup, _ := duplicateKey([]byte(body))
		if dup != (want != "") || key != want {
			t.Errorf("duplicateKey(%s) = %q, %v; want %q", body, key, dup, want)
		}
	}
	err := Status(decodeJSON("vacuum", []byte(`{"table":"cpu","apply":true,"apply":null}`), &vacuumRequest{}))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `vacuum: the JSON body gives "apply" more than once`) {
		t.Errorf("decodeJSON of a duplicate key: %v", err)
	}
	// Deep nesting is refused before it costs anything (the fifth review
	// made the server hold 5 GB with 60 MB of {"": …), and so are big
	// bodies.
	deep := []byte(strings.Repeat(`{"":`, 200_000))
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	err = Status(decodeJSON("gaps", deep, &vacuumRequest{}))
	runtime.ReadMemStats(&m)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "gaps: the JSON body nests deeper than 32 levels") {
		t.Errorf("decodeJSON of 200,000 nested objects: %v", err)
	}
	if grew := m.TotalAlloc - before; grew > 1<<20 {
		t.Errorf("refusing 200,000 nested objects allocated %d bytes", grew)
	}
	err = Status(decodeJSON("gaps", []byte(`{"table":"`+strings.Repeat("x", MaxJSONBody)+`"}`), &vacuumRequest{}))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most 1048576 are accepted") {
		t.Errorf("decodeJSON of a body over 1 MiB: %v", err)
	}
}
