package flightserver

// The request rows of the bad-input catalogue (see catalogue_test.go):
// unknown tables, hostile table names, malformed and forged tickets, bad
// scan requests and malformed action bodies.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
)

// act runs an action and returns only its error.
func (e *catEnv) act(name string, body any) error {
	_, err := e.action(e.ctx, name, body)
	return err
}

// get fetches a ticket and returns only the error.
func (e *catEnv) get(tkt string) error {
	_, err := e.doGet(e.ctx, &flight.Ticket{Ticket: []byte(tkt)})
	return err
}

// infoErr plans a scan of desc and returns only the error.
func (e *catEnv) infoErr(desc *flight.FlightDescriptor) error {
	_, err := e.client.GetFlightInfo(e.ctx, desc)
	return err
}

const day = `"start":"2024-06-01T00:00:00Z","end":"2024-06-02T00:00:00Z"`

func readCatalogue() []badCase {
	const unknown = "unknown table"
	const names = "hostile table name"
	const tickets = "DoGet: tickets"
	const scans = "scan request"
	const actions = "action body"
	notAllowed := "is not allowed"
	createBody := func(name string) map[string]any {
		return map[string]any{"table": name, "index_column": "ts", "index_type": "timestamp", "granularity": "10s"}
	}
	long := strings.Repeat("a", 300)
	cases := []badCase{
		// Unknown tables, through every kind of call.
		{name: "GetFlightInfo of an unknown table", category: unknown, op: "GetFlightInfo PATH [nosuch]", code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error { return e.infoErr(pathDesc("nosuch")) }},
		{name: "GetSchema of an unknown table", category: unknown, op: `GetSchema CMD {"table":"nosuch"}`, code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error {
				_, err := e.client.GetSchema(e.ctx, cmdDesc(e.t, `{"table":"nosuch"}`))
				return err
			}},
		{name: "describe-table of an unknown table", category: unknown, op: "DoAction describe-table", code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error { return e.act(ActionDescribeTable, `{"table":"nosuch"}`) }},
		{name: "coverage of an unknown table", category: unknown, op: "DoAction coverage", code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error { return e.act(ActionCoverage, `{"table":"nosuch",`+day+`}`) }},
		{name: "gaps of an unknown table", category: unknown, op: "DoAction gaps", code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error { return e.act(ActionGaps, `{"table":"nosuch",`+day+`}`) }},
		{name: "coverage-grid of an unknown table", category: unknown, op: "DoAction coverage-grid", code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error { return e.act(ActionCoverageGrid, `{"table":"nosuch"}`) }},
		{name: "check of an unknown table", category: unknown, op: `DoAction check {"table":"nosuch"}`, code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error { return e.act(ActionCheck, `{"table":"nosuch"}`) }},
		{name: "add-columns to an unknown table", category: unknown, op: "DoAction add-columns", code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error {
				return e.act(ActionAddColumns, `{"table":"nosuch","columns":[{"name":"x","type":"int64"}]}`)
			}},

		// Hostile names: each is refused before it reaches the disk.
		{name: `".." as a table name`, category: names, op: "GetFlightInfo PATH [..]", code: codes.InvalidArgument, frags: []string{`table name ".."`, notAllowed},
			run: func(e *catEnv) error { return e.infoErr(pathDesc("..")) }},
		{name: `"." as a table name`, category: names, op: "DoAction create-table", code: codes.InvalidArgument, frags: []string{`table name "."`, notAllowed},
			run: func(e *catEnv) error { return e.act(ActionCreateTable, createBody(".")) }},
		{name: `"a/b" (a path) as a table name`, category: names, op: "DoPut PATH [a/b]", code: codes.InvalidArgument, frags: []string{`table name "a/b"`, notAllowed},
			run: func(e *catEnv) error { return e.putTSBS(pathDesc("a/b"), newRows) }},
		{name: `"/etc" (an absolute path) as a table name`, category: names, op: "DoAction create-table", code: codes.InvalidArgument, frags: []string{`table name "/etc"`, notAllowed},
			run: func(e *catEnv) error { return e.act(ActionCreateTable, createBody("/etc")) }},
		{name: `"../cpu" as a table name`, category: names, op: `GetFlightInfo CMD {"table":"../cpu"}`, code: codes.InvalidArgument, frags: []string{`table name "../cpu"`, notAllowed},
			run: func(e *catEnv) error { return e.infoErr(cmdDesc(e.t, `{"table":"../cpu"}`)) }},
		{name: `"a\b" (a backslash) as a table name`, category: names, op: "GetSchema PATH", code: codes.InvalidArgument, frags: []string{`table name "a\\b"`, notAllowed},
			run: func(e *catEnv) error {
				_, err := e.client.GetSchema(e.ctx, pathDesc(`a\b`))
				return err
			}},
		{name: "empty table name", category: names, op: "DoAction describe-table", code: codes.InvalidArgument, frags: []string{"table name is empty"},
			run: func(e *catEnv) error { return e.act(ActionDescribeTable, `{"table":""}`) }},
		{name: "300-character table name", category: names, op: "DoAction create-table", code: codes.InvalidArgument, frags: []string{"300 characters", "at most 128"},
			run: func(e *catEnv) error { return e.act(ActionCreateTable, createBody(long)) }},
		{name: "unicode look-alike (Cyrillic р in cрu)", category: names, op: "DoPut CMD {table: cрu, create}", code: codes.InvalidArgument, frags: []string{`table name "cрu"`, notAllowed},
			run: func(e *catEnv) error {
				return e.putTSBS(cmdDesc(e.t, map[string]any{"table": "cрu", "create": catCreate}), newRows)
			}},
		{name: "NUL byte in a table name", category: names, op: "DoAction describe-table", code: codes.InvalidArgument, frags: []string{`table name "cpu\x00"`, notAllowed},
			run: func(e *catEnv) error { return e.act(ActionDescribeTable, map[string]any{"table": "cpu\x00"}) }},
		{name: "control character (newline) in a table name", category: names, op: "DoAction coverage", code: codes.InvalidArgument, frags: []string{`table name "cpu\n"`, notAllowed},
			run: func(e *catEnv) error {
				return e.act(ActionCoverage, map[string]any{"table": "cpu\n", "start": "2024-06-01T00:00:00Z", "end": "2024-06-02T00:00:00Z"})
			}},
		{name: "leading dot (.hidden) in a table name", category: names, op: "DoAction create-table", code: codes.InvalidArgument, frags: []string{`table name ".hidden"`, notAllowed},
			run: func(e *catEnv) error { return e.act(ActionCreateTable, createBody(".hidden")) }},
		{name: "leading digit (1abc) in a table name", category: names, op: "DoAction create-table", code: codes.InvalidArgument, frags: []string{`table name "1abc"`, "not starting with a digit"},
			run: func(e *catEnv) error { return e.act(ActionCreateTable, createBody("1abc")) }},
		{name: "a hostile table name in a check's list", category: names, op: `DoAction check {"tables":["cpu","../cpu"]}`, code: codes.InvalidArgument, frags: []string{`table name "../cpu"`, notAllowed},
			run: func(e *catEnv) error { return e.act(ActionCheck, `{"tables":["cpu","../cpu"]}`) }},

		// Tickets.
		{name: "ticket bytes without the tsf1: prefix", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{"not a tsflight ticket"},
			run: func(e *catEnv) error { return e.get("\x00\x01garbage") }},
		{name: "empty ticket", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{"not a tsflight ticket"},
			run: func(e *catEnv) error { return e.get("") }},
		{name: "ticket prefix followed by broken JSON", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{"ticket", "malformed JSON"},
			run: func(e *catEnv) error { return e.get("tsf1:{bad") }},
		{name: "forged ticket: part out of range", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{"part 2 of 2", "out of range"},
			run: func(e *catEnv) error { return e.get(`tsf1:{"table":"cpu","version":2,"part":2,"parts":2}`) }},
		{name: "forged ticket: more parts than the plan has", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{"version 2 has 1 part(s), the ticket says 3"},
			run: func(e *catEnv) error { return e.get(`tsf1:{"table":"cpu","version":2,"part":0,"parts":3}`) }},
		{name: "forged ticket: no version", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{"ticket: no version"},
			run: func(e *catEnv) error { return e.get(`tsf1:{"table":"cpu","part":0,"parts":1}`) }},
		{name: "forged ticket: negative version", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{"ticket", "version"},
			run: func(e *catEnv) error { return e.get(`tsf1:{"table":"cpu","version":-1,"part":0,"parts":1}`) }},
		{name: "forged ticket: absurd version", category: tickets, op: "DoGet", code: codes.NotFound, frags: []string{"version 18446744073709551615"},
			run: func(e *catEnv) error {
				return e.get(`tsf1:{"table":"cpu","version":18446744073709551615,"part":0,"parts":1}`)
			}},
		{name: "ticket for a version not written yet", category: tickets, op: "DoGet", code: codes.NotFound, frags: []string{"version 3"},
			run: func(e *catEnv) error { return e.get(`tsf1:{"table":"cpu","version":3,"part":0,"parts":1}`) }},
		{name: "forged ticket: unknown table", category: tickets, op: "DoGet", code: codes.NotFound, frags: []string{`table "ghost": not found`},
			run: func(e *catEnv) error { return e.get(`tsf1:{"table":"ghost","version":2,"part":0,"parts":1}`) }},
		{name: "forged ticket: hostile table name", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{`table name "../cpu"`},
			run: func(e *catEnv) error { return e.get(`tsf1:{"table":"../cpu","version":2,"part":0,"parts":1}`) }},
		{name: "forged ticket: extra field", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{`unknown field "admin"`},
			run: func(e *catEnv) error {
				return e.get(`tsf1:{"table":"cpu","version":2,"part":0,"parts":1,"admin":true}`)
			}},
		{name: "forged ticket: unknown column", category: tickets, op: "DoGet", code: codes.InvalidArgument, frags: []string{`"secret"`},
			run: func(e *catEnv) error {
				return e.get(`tsf1:{"table":"cpu","version":2,"columns":["secret"],"part":0,"parts":1}`)
			}},
		{name: "ticket of a table dropped after GetFlightInfo", category: tickets, op: "GetFlightInfo, rm -r the table, DoGet", code: codes.NotFound, frags: []string{`table "gone": not found`},
			setup: func(e *catEnv) {
				copyTable(e.t, e.root, "cpu", "gone")
				info := e.info(e.ctx, pathDesc("gone"))
				e.ticket = info.Endpoint[0].Ticket
				if err := os.RemoveAll(filepath.Join(e.root, "gone")); err != nil {
					e.t.Fatal(err)
				}
			},
			run: func(e *catEnv) error {
				_, err := e.doGet(e.ctx, e.ticket)
				return err
			}},

		// Scan requests (CMD descriptors).
		{name: "scan request that is not JSON", category: scans, op: "GetFlightInfo CMD `{`", code: codes.InvalidArgument, frags: []string{"malformed JSON"},
			run: func(e *catEnv) error { return e.infoErr(cmdDesc(e.t, `{`)) }},
		{name: "scan request with an unknown field", category: scans, op: `GetFlightInfo CMD {"colums":…}`, code: codes.InvalidArgument, frags: []string{`unknown field "colums"`},
			run: func(e *catEnv) error { return e.infoErr(cmdDesc(e.t, `{"table":"cpu","colums":["ts"]}`)) }},
		{name: "scan of an unknown column", category: scans, op: `GetFlightInfo CMD {"columns":["nope"]}`, code: codes.InvalidArgument, frags: []string{`"nope"`},
			run: func(e *catEnv) error { return e.infoErr(cmdDesc(e.t, `{"table":"cpu","columns":["ts","nope"]}`)) }},
		{name: "scan bound that is not RFC 3339", category: scans, op: `GetFlightInfo CMD {"start":"yesterday"}`, code: codes.InvalidArgument, frags: []string{"start", `"yesterday"`, "RFC 3339"},
			run: func(e *catEnv) error { return e.infoErr(cmdDesc(e.t, `{"table":"cpu","start":"yesterday"}`)) }},
		{name: "scan with start after end", category: scans, op: "GetFlightInfo CMD", code: codes.InvalidArgument, frags: []string{"start", "end"},
			run: func(e *catEnv) error {
				return e.infoErr(cmdDesc(e.t, `{"table":"cpu","start":"2024-06-02T00:00:00Z","end":"2024-06-01T00:00:00Z"}`))
			}},
		{name: "scan filter on a column that is not an entity column", category: scans, op: `GetFlightInfo CMD {"entity":{"usage_user":1}}`, code: codes.InvalidArgument, frags: []string{`"usage_user" is not an entity column`},
			run: func(e *catEnv) error { return e.infoErr(cmdDesc(e.t, `{"table":"cpu","entity":{"usage_user":1}}`)) }},
		{name: "scan of a version that does not exist", category: scans, op: `GetFlightInfo CMD {"version":99}`, code: codes.NotFound, frags: []string{"version 99"},
			run: func(e *catEnv) error { return e.infoErr(cmdDesc(e.t, `{"table":"cpu","version":99}`)) }},

		// Action bodies.
		{name: "unknown action", category: actions, op: "DoAction drop-table", code: codes.InvalidArgument, frags: []string{`unknown action "drop-table"`},
			run: func(e *catEnv) error { return e.act("drop-table", `{"table":"cpu"}`) }},
		{name: "action body that is not JSON", category: actions, op: "DoAction create-table", code: codes.InvalidArgument, frags: []string{"create-table: malformed JSON"},
			run: func(e *catEnv) error { return e.act(ActionCreateTable, `not json`) }},
		{name: "action body with an unknown field", category: actions, op: "DoAction describe-table", code: codes.InvalidArgument, frags: []string{`unknown field "verbose"`},
			run: func(e *catEnv) error { return e.act(ActionDescribeTable, `{"table":"cpu","verbose":true}`) }},
		{name: "action field of the wrong type", category: actions, op: `DoAction gaps {"limit":"ten"}`, code: codes.InvalidArgument, frags: []string{"gaps: malformed JSON", "limit"},
			run: func(e *catEnv) error { return e.act(ActionGaps, `{"table":"cpu",`+day+`,"limit":"ten"}`) }},
		{name: "coverage without start", category: actions, op: "DoAction coverage", code: codes.InvalidArgument, frags: []string{"start and end are required"},
			run: func(e *catEnv) error { return e.act(ActionCoverage, `{"table":"cpu","end":"2024-06-02T00:00:00Z"}`) }},
		{name: "gaps with start after end", category: actions, op: "DoAction gaps", code: codes.InvalidArgument, frags: []string{"start", "end"},
			run: func(e *catEnv) error {
				return e.act(ActionGaps, `{"table":"cpu","start":"2024-06-02T00:00:00Z","end":"2024-06-01T00:00:00Z"}`)
			}},
		{name: "gaps with a negative limit", category: actions, op: "DoAction gaps", code: codes.InvalidArgument, frags: []string{"limit -1 is negative"},
			run: func(e *catEnv) error { return e.act(ActionGaps, `{"table":"cpu",`+day+`,"limit":-1}`) }},
		{name: "gaps with a limit above the maximum", category: actions, op: fmt.Sprintf(`DoAction gaps {"limit":%d}`, MaxGapsLimit+1), code: codes.InvalidArgument,
			frags: []string{fmt.Sprintf("gaps: limit %d is above the maximum of %d", MaxGapsLimit+1, MaxGapsLimit), "page through the range with start and end"},
			run: func(e *catEnv) error {
				return e.act(ActionGaps, fmt.Sprintf(`{"table":"cpu",%s,"limit":%d}`, day, MaxGapsLimit+1))
			}},
		{name: "coverage for an entity column the table lacks", category: actions, op: `DoAction coverage {"entity":{"host":"a"}}`, code: codes.InvalidArgument, frags: []string{`"host" is not an entity column`, "hostname"},
			run: func(e *catEnv) error { return e.act(ActionCoverage, `{"table":"cpu",`+day+`,"entity":{"host":"a"}}`) }},
		{name: "create-table with a bad granularity", category: actions, op: `DoAction create-table {"granularity":"5 fortnights"}`, code: codes.InvalidArgument, frags: []string{"granularity", "fortnights"},
			run: func(e *catEnv) error {
				return e.act(ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"5 fortnights"}`)
			}},
		{name: "create-table with an unknown index type", category: actions, op: `DoAction create-table {"index_type":"float"}`, code: codes.InvalidArgument, frags: []string{"index_type", `"float"`},
			run: func(e *catEnv) error {
				return e.act(ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"float","granularity":"10s"}`)
			}},
		{name: "create-table with an unknown time zone", category: actions, op: `DoAction create-table {"timezone":"Mars/Olympus"}`, code: codes.InvalidArgument, frags: []string{`"Mars/Olympus"`, "IANA"},
			run: func(e *catEnv) error {
				return e.act(ActionCreateTable, `{"table":"t2","index_column":"ts","index_type":"timestamp","granularity":"10s","timezone":"Mars/Olympus"}`)
			}},
		{name: "create-table of an existing table", category: actions, op: "DoAction create-table", code: codes.AlreadyExists, frags: []string{`table "cpu"`, "already exists"},
			run: func(e *catEnv) error { return e.act(ActionCreateTable, createBody("cpu")) }},
		{name: "coverage-grid with columns out of range", category: actions, op: `DoAction coverage-grid {"columns":0}`, code: codes.InvalidArgument, frags: []string{"columns", "0"},
			run: func(e *catEnv) error { return e.act(ActionCoverageGrid, `{"table":"cpu","columns":0}`) }},
		{name: "coverage-grid of a table without data", category: actions, op: "DoAction coverage-grid", code: codes.FailedPrecondition, frags: []string{"no data"},
			run: func(e *catEnv) error { return e.act(ActionCoverageGrid, `{"table":"fresh"}`) }},
		{name: "add-columns with a column that is not nullable", category: actions, op: "DoAction add-columns", code: codes.InvalidArgument, frags: []string{`"x"`, "nullable"},
			run: func(e *catEnv) error {
				return e.act(ActionAddColumns, `{"table":"cpu","columns":[{"name":"x","type":"int64","nullable":false}]}`)
			}},
		{name: "add-columns with an unknown type", category: actions, op: "DoAction add-columns", code: codes.InvalidArgument, frags: []string{`"complex128"`},
			run: func(e *catEnv) error {
				return e.act(ActionAddColumns, `{"table":"cpu","columns":[{"name":"x","type":"complex128"}]}`)
			}},
		{name: "add-columns with a column the table has", category: actions, op: "DoAction add-columns", code: codes.InvalidArgument, frags: []string{`"usage_user"`},
			run: func(e *catEnv) error {
				return e.act(ActionAddColumns, `{"table":"cpu","columns":[{"name":"usage_user","type":"int64"}]}`)
			}},
		{name: "check naming both table and tables", category: actions, op: `DoAction check {"table":"cpu","tables":["fresh"]}`, code: codes.InvalidArgument, frags: []string{`check: give "table" or "tables", not both`},
			run: func(e *catEnv) error { return e.act(ActionCheck, `{"table":"cpu","tables":["fresh"]}`) }},
		{name: "check naming a table twice", category: actions, op: `DoAction check {"tables":["cpu","cpu"]}`, code: codes.InvalidArgument, frags: []string{`check: table "cpu" is named twice`},
			run: func(e *catEnv) error { return e.act(ActionCheck, `{"tables":["cpu","cpu"]}`) }},
		{name: "check with an unknown field", category: actions, op: `DoAction check {"table":"cpu","fix":true}`, code: codes.InvalidArgument, frags: []string{"check", `unknown field "fix"`},
			run: func(e *catEnv) error { return e.act(ActionCheck, `{"table":"cpu","fix":true}`) }},
	}
	return cases
}

// flightCatalogue is every Flight case, in the doc's order.
func flightCatalogue() []badCase {
	var out []badCase
	out = append(out, putCatalogue()...)
	out = append(out, readCatalogue()...)
	out = append(out, diskCatalogue()...)
	return out
}
