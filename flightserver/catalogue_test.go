package flightserver

// The bad-input catalogue (issue 8): a table of requests a client can get
// wrong, each sent through arrow-go's Flight client to a real server on a
// loopback port, with the gRPC code and the message fragments naming the
// fault it must get. Every case runs on a fresh root; the whole root is
// snapshotted (path, size and SHA-256 of every file) before
// and after and must not change, no message may show the root's path, and
// the server must still answer a describe and a scan afterwards. With
// -update-catalogue the test rewrites its sections of
// docs/reliability-catalogue.md; without it, it fails when that file and
// the cases disagree. The cases are in catalogue_*_test.go;
// those with auth set run on a server with the Auth middleware
// (catalogue_cases_auth_test.go).

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/internal/testkit"
)

var updateCatalogue = flag.Bool("update-catalogue", false, "rewrite the catalogue sections of docs/reliability-catalogue.md from the cases")

// badCase is one row of the catalogue.
type badCase struct {
	name     string // what is wrong, as the doc lists it
	category string
	op       string // the client call that carries it
	code     codes.Code
	frags    []string // the message must contain each
	// recvLimit, when set, is the server's gRPC receive limit in bytes.
	recvLimit int
	// auth runs the server with the Auth middleware and the tokens of
	// newCatTokens: the fixture, setup and the after-check send the write
	// token, run picks its own credential (e.anonymous, e.sending,
	// e.reader), and the message must quote no secret.
	auth bool
	// setup prepares an on-disk fault (or a ticket); the "before"
	// snapshot is taken after it.
	setup func(e *catEnv)
	run   func(e *catEnv) error
	// row, when set, is the case's number in the doc (160 for F160):
	// branches written side by side take ranges of their own, so that
	// their numbers stay put when merged. It must exceed the number
	// before it; 0 is that number plus one.
	row int
}

// catEnv is what a case runs against: a server whose root holds table cpu
// (TSBS-like, 20 rows, version 2) and table fresh (created, no data yet).
type catEnv struct {
	*testServer
	ctx context.Context
	// ticket is a ticket a setup obtained for the case to use.
	ticket *flight.Ticket
	// bare is ctx without a credential; tok the tokens of an auth case
	// (ctx then carries the write token).
	bare context.Context
	tok  *catTokens
}

// catFixtureRows are the rows of cpu: steps 0..9 of host_0 and host_1.
var catFixtureRows = genRows(t0, 10, 2)

// runCatalogue runs each case on a fresh server and checks code, message,
// the unchanged root and that the server still answers.
func runCatalogue(t *testing.T, cases []badCase) {
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("two cases are named %q", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			var extra []grpc.ServerOption
			if c.recvLimit > 0 {
				extra = append(extra, grpc.MaxRecvMsgSize(c.recvLimit))
			}
			var tok *catTokens
			if c.auth {
				tok = newCatTokens(t)
				extra = append(extra, tok.serverOptions()...)
			}
			ts := startGatedServer(t, nil, nil, extra...)
			e := &catEnv{testServer: ts, ctx: ctxT(t), tok: tok}
			e.bare = e.ctx
			if tok != nil {
				e.ctx = bearer(e.bare, tok.write)
			}
			ts.createTSBS(e.ctx, "cpu")
			ts.mustPut(e.ctx, pathDesc("cpu"), catFixtureRows, 100, 2)
			ts.createTSBS(e.ctx, "fresh")
			if c.setup != nil {
				c.setup(e)
			}
			before := snapshot(t, ts.root)
			err := c.run(e)
			wantCode(t, c.op, err, c.code, c.frags...)
			if msg := status.Convert(err).Message(); strings.Contains(msg, ts.root) {
				t.Fatalf("%s: the message shows the server's root %s: %s", c.op, ts.root, msg)
			}
			if tok != nil {
				tok.assertNotQuoted(t, err)
			}
			d := testkit.SnapshotDiff(before, snapshot(t, ts.root))
			if len(d) > 0 {
				t.Fatalf("%s wrote to the root:\n  %s", c.op, strings.Join(d, "\n  "))
			}
			e.stillAnswers(t)
		})
	}
}

// stillAnswers checks that cpu still describes at version 2 and scans to
// its 20 rows: the server neither died nor committed anything.
func (e *catEnv) stillAnswers(t *testing.T) {
	t.Helper()
	got := e.mustAction(e.ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if got["version"] != float64(2) || got["rows"] != float64(len(catFixtureRows)) {
		t.Fatalf("after the case cpu is at version %v with %v rows, want 2 and %d", got["version"], got["rows"], len(catFixtureRows))
	}
	f, err := e.fetchAll(e.ctx, e.info(e.ctx, pathDesc("cpu")))
	if err != nil {
		t.Fatalf("scan after the case: %v", err)
	}
	if len(f.rows) != len(catFixtureRows) || sumUser(f.rows) != sumUser(catFixtureRows) {
		t.Fatalf("scan after the case: %d rows, want %d", len(f.rows), len(catFixtureRows))
	}
}

func TestBadInputCatalogue(t *testing.T) {
	cases := append(flightCatalogue(), authCatalogue()...)
	cases = append(cases, rollbackCatalogue()...)
	cases = append(cases, format6Catalogue()...)
	cases = append(cases, lastCatalogue()...)
	cases = append(cases, namesCatalogue()...)
	if len(cases) < 40 {
		t.Fatalf("the catalogue holds %d cases; issue 8 asks for at least 40", len(cases))
	}
	runCatalogue(t, cases)
	if t.Failed() {
		return
	}
	rows := make([]catalogueRow, len(cases))
	num := 0
	for i, c := range cases {
		switch {
		case c.row == 0:
			num++
		case c.row <= num:
			t.Fatalf("case %q asks for row F%d, after row F%d", c.name, c.row, num)
		default:
			num = c.row
		}
		rows[i] = catalogueRow{num: num, category: c.category, name: c.name, client: "arrow-go Flight: " + c.op, code: c.code.String(), frags: c.frags}
	}
	syncCatalogueDoc(t, "flight", catalogueSection("Arrow Flight (arrow-go client)", "F", "go test ./flightserver -run TestBadInputCatalogue", rows))
	checkPythonCases(t)
	syncCatalogueDoc(t, "python", pythonCatalogueSection)
}

// ---- docs/reliability-catalogue.md ----

const catalogueDoc = "../docs/reliability-catalogue.md"

// catalogueHeader starts the file; each test owns the section between its
// markers.
const catalogueHeader = `# Bad-input catalogue

Requests a client can get wrong, each sent through a real client to a real
tsflight server, with the gRPC status code it gets and text its message
must contain (every fragment listed, separated by " · "). Every case also
proves that it **writes nothing**: the whole root directory (relative
path, size and SHA-256 of every file) is the same before and
after, counted from after the setup for cases whose fault the test puts on
disk itself (a corrupt commit, a deleted segment, …). And the server still
answers afterwards: a describe and a scan of the untouched table succeed,
at the version it had, so no case panicked it or committed anything. In the
Go sections no message shows the path of the server's root directory.

The authentication cases run on a server with the token middleware
([security.md](security.md)) and four tokens: READER (read scope, named
reader), WRITER (write scope, named writer), OLD (write scope, named old,
expired 2020-01-01) and GONE (write scope, named gone, which the setup
revokes); the Flight SQL ones, on its TLS listener, have READER and WRITER.
The fixture, the setups and the after-check send WRITER; each case sends
the credential its row names, and its message must quote no secret.

The Go sections are generated: ` + "`go test ./flightserver -run TestBadInputCatalogue -update-catalogue`" + ` and
` + "`go test -tags duckdb_arrow ./flightsql -run TestSQLBadInputCatalogue -update-catalogue`" + `
rewrite them, and the same tests without the flag fail when this file
and their cases disagree. The Python section is kept by hand in
` + "`flightserver/catalogue_python_test.go`" + ` (the Go test checks that every case it lists
exists in ` + "`examples/python/test_bad_input.py`" + `). Codes follow
[flight.md](flight.md#errors) and [flightsql.md](flightsql.md).
`

// catalogueRow is one line of a generated table.
type catalogueRow struct {
	num                          int // its number (0: its position)
	category, name, client, code string
	frags                        []string
	writes                       string // "" = nothing

}

// mdCell escapes text for a markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func mdCode(s string) string {
	if strings.Contains(s, "`") {
		return "``" + mdCell(s) + " ``"
	}
	return "`" + mdCell(s) + "`"
}

// grpcName spells a code as the gRPC spec does (INVALID_ARGUMENT).
func grpcName(code string) string {
	re := regexp.MustCompile(`([a-z])([A-Z])`)
	return strings.ToUpper(re.ReplaceAllString(code, "${1}_${2}"))
}

// catalogueSection renders a section: a heading, how to run it and a table
// of case → code, grouped by category in order of first appearance.
func catalogueSection(title, prefix, command string, rows []catalogueRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s: %d cases\n\n", title, len(rows))
	fmt.Fprintf(&b, "Run by `%s`; all pass.\n\n", command)
	b.WriteString("| # | category | case | client call | expected code | message fragments | writes |\n|---|---|---|---|---|---|---|\n")
	for i, r := range rows {
		frags := make([]string, len(r.frags))
		for j, f := range r.frags {
			frags[j] = mdCode(f)
		}
		writes := r.writes
		if writes == "" {
			writes = "nothing"
		}
		num := r.num
		if num == 0 {
			num = i + 1
		}
		fmt.Fprintf(&b, "| %s%d | %s | %s | %s | `%s` | %s | %s |\n", prefix, num, mdCell(r.category), mdCell(r.name), mdCell(r.client), grpcName(r.code), strings.Join(frags, " · "), mdCell(writes))
	}
	return b.String()
}

func sectionMarkers(name string) (string, string) {
	return "<!-- " + name + " catalogue: generated, do not edit -->\n", "<!-- end of " + name + " catalogue -->\n"
}

// syncCatalogueDoc rewrites (with -update-catalogue) or checks the named
// section of the doc. Sections are kept in the order flight, flightsql,
// python; a missing one is added at its place.
func syncCatalogueDoc(t *testing.T, name, content string) {
	t.Helper()
	data, err := os.ReadFile(catalogueDoc)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	doc := string(data)
	if doc == "" {
		doc = catalogueHeader
	}
	begin, end := sectionMarkers(name)
	want := begin + content + end
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	var next string
	switch {
	case i >= 0 && j > i:
		if doc[i:j+len(end)] == want {
			return
		}
		next = doc[:i] + want + doc[j+len(end):]
	default:
		// Insert before the first section that comes later in the order.
		order := []string{"flight", "flightsql", "python"}
		at := len(doc)
		after := false
		for _, o := range order {
			if o == name {
				after = true
				continue
			}
			if b, _ := sectionMarkers(o); after {
				if k := strings.Index(doc, b); k >= 0 && k < at {
					at = k
				}
			}
		}
		if at < len(doc) {
			next = doc[:at] + want + "\n" + doc[at:]
		} else {
			next = strings.TrimRight(doc, "\n") + "\n\n" + want
		}
	}
	if !*updateCatalogue {
		t.Fatalf("%s: the %s section does not match the cases; run the test with -update-catalogue and commit the file", catalogueDoc, name)
	}
	if err := os.WriteFile(catalogueDoc, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote the %s section of %s", name, catalogueDoc)
}
