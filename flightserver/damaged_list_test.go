package flightserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// damagedRoot is what makeDamagedRoot lays out under a server's root.
type damagedRoot struct {
	healthy []string          // readable tables
	broken  map[string]string // table → the state it is listed with
	frags   map[string]string // table → what its error must mention
	phantom []string          // log directories without a commit
}

// makeDamagedRoot fills ts's root with two healthy tables (alpha with two
// commits and data, beta just created), four that cannot be read (garbled:
// CURRENT holds garbage; ahead: CURRENT points past the commits; nocommit:
// commit 1 deleted; future: commit 1 needs a reader feature this build does
// not know) and two phantoms (ghost, ghost2: an empty _timeseries_log/ as a
// create refused for lack of space leaves, one with a stray temporary
// file).
func makeDamagedRoot(t *testing.T, ts *testServer) damagedRoot {
	t.Helper()
	ctx := ctxT(t)
	ts.createTSBS(ctx, "alpha")
	ts.mustPut(ctx, pathDesc("alpha"), genRows(t0, 10, 2), 100, 2)
	ts.createTSBS(ctx, "beta")
	log := func(table, file string) string {
		return filepath.Join(ts.root, table, filepath.FromSlash(file))
	}
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyTable(t, ts.root, "alpha", "garbled")
	write(log("garbled", tableformat.LogDir+"/CURRENT"), "garbage\n")
	copyTable(t, ts.root, "alpha", "ahead")
	write(log("ahead", tableformat.LogDir+"/CURRENT"), "9\n")
	copyTable(t, ts.root, "alpha", "nocommit")
	if err := os.Remove(log("nocommit", tableformat.CommitPath(1))); err != nil {
		t.Fatal(err)
	}
	copyTable(t, ts.root, "alpha", "future")
	requireReaderFeature(t, filepath.Join(ts.root, "future"), "time_travel")
	for _, g := range []string{"ghost", "ghost2"} {
		if err := os.MkdirAll(filepath.Join(ts.root, g, tableformat.LogDir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(log("ghost2", tableformat.LogDir+"/0000000001.json.tmp-0123abcd"), `{"version":1`)
	return damagedRoot{
		healthy: []string{"alpha", "beta"},
		broken:  map[string]string{"garbled": TableDamaged, "ahead": TableDamaged, "nocommit": TableDamaged, "future": TableUnreadable},
		frags: map[string]string{
			"garbled":  `_timeseries_log/CURRENT: CURRENT holds "garbage", not a version number`,
			"ahead":    "commit 3 is missing but CURRENT says 9",
			"nocommit": "commit 1 is missing but CURRENT says 2",
			"future":   "time_travel",
		},
		phantom: []string{"ghost", "ghost2"},
	}
}

// listed is every table the layout lists, sorted.
func (d damagedRoot) listed() []string {
	out := append([]string(nil), d.healthy...)
	for n := range d.broken {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func startLoggedServer(t *testing.T) (*testServer, *testkit.Buffer) {
	t.Helper()
	logs := &testkit.Buffer{}
	ts := startServer(t, func(o *Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs, JSONFormat: true})
	})
	return ts, logs
}

func listFlights(t *testing.T, ts *testServer) []*flight.FlightInfo {
	t.Helper()
	lf, err := ts.client.ListFlights(ctxT(t), &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := testkit.Collect(lf.Recv)
	if err != nil {
		t.Fatalf("ListFlights: %v", err)
	}
	return out
}

// logLines returns the JSON log lines whose @message is msg and whose
// table is table.
func logLines(t *testing.T, logs string, msg, table string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["@message"] == msg && m["table"] == table {
			if m["@level"] != "warn" {
				t.Errorf("log line %q: level %v, want warn", line, m["@level"])
			}
			n++
		}
	}
	return n
}

// TestListFlightsDamagedTables: ListFlights over a root with healthy,
// damaged, unsupported and phantom tables succeeds; it lists every table
// but the phantoms, healthy ones as before (no app_metadata), the others
// with an empty schema whose metadata says why, no endpoint, unknown
// totals and a TableProblem as app_metadata naming the table and the file
// at fault and never the root, and logs one warning per such table per
// call. Without the fix the damaged tables were left out (and only
// logged), the phantoms listed.
func TestListFlightsDamagedTables(t *testing.T) {
	ts, logs := startLoggedServer(t)
	d := makeDamagedRoot(t, ts)
	for call := 1; call <= 2; call++ {
		infos := listFlights(t, ts)
		var names []string
		for _, info := range infos {
			if p := info.FlightDescriptor.GetPath(); info.FlightDescriptor.GetType() != flight.DescriptorPATH || len(p) != 1 {
				t.Fatalf("ListFlights descriptor %v, want PATH [table]", info.FlightDescriptor)
			}
			name := info.FlightDescriptor.Path[0]
			names = append(names, name)
			sc := ts.schemaOf(info.Schema)
			state, broken := d.broken[name]
			if !broken {
				if len(info.AppMetadata) != 0 || len(info.Endpoint) == 0 || info.TotalRecords < 0 || info.TotalBytes < 0 {
					t.Errorf("%s: app_metadata %q, %d endpoints, %d rows, %d bytes; want none, some, known", name, info.AppMetadata, len(info.Endpoint), info.TotalRecords, info.TotalBytes)
				}
				if name == "alpha" && (sc.NumFields() != tsbsSchema.NumFields() || info.TotalRecords != 20) {
					t.Errorf("alpha: %d fields, %d rows; want %d and 20", sc.NumFields(), info.TotalRecords, tsbsSchema.NumFields())
				}
				continue
			}
			p, err := strictJSON[TableProblem](info.AppMetadata)
			if err != nil {
				t.Fatalf("%s: app_metadata %q: %v", name, info.AppMetadata, err)
			}
			wantCode := "DATA_LOSS"
			if state == TableUnreadable {
				wantCode = "FAILED_PRECONDITION"
			}
			if p.State != state || p.Code != wantCode || !strings.HasPrefix(p.Error, `table "`+name+`": `) ||
				!strings.Contains(p.Error, d.frags[name]) || strings.Contains(p.Error, ts.root) {
				t.Errorf("%s: problem %+v; want state %s, code %s, an error naming the table and %q, not the root", name, p, state, wantCode, d.frags[name])
			}
			if sc.NumFields() != 0 || len(info.Endpoint) != 0 || info.TotalRecords != -1 || info.TotalBytes != -1 {
				t.Errorf("%s: %d fields, %d endpoints, %d rows, %d bytes; want 0, 0, -1, -1", name, sc.NumFields(), len(info.Endpoint), info.TotalRecords, info.TotalBytes)
			}
			md := sc.Metadata()
			for k, want := range map[string]string{MetadataTableState: p.State, MetadataTableCode: p.Code, MetadataTableError: p.Error} {
				if i := md.FindKey(k); i < 0 || md.Values()[i] != want {
					t.Errorf("%s: schema metadata %v; want %s = %q", name, md, k, want)
				}
			}
			if n := logLines(t, logs.String(), "ListFlights: listing a table that cannot be read", name); n != call {
				t.Errorf("%s: logged %d times after %d calls, want once per call", name, n, call)
			}
		}
		if want := d.listed(); strings.Join(names, ",") != strings.Join(want, ",") {
			t.Fatalf("ListFlights call %d lists %v, want %v", call, names, want)
		}
	}
	if strings.Contains(logs.String(), ts.root) {
		t.Errorf("the logs name the root %s:\n%s", ts.root, logs)
	}
	if names, err := ts.svc.TableNames(); err != nil || strings.Join(names, ",") != strings.Join(d.listed(), ",") {
		t.Errorf("TableNames: %v, %v; want %v", names, err, d.listed())
	}
}

// TestDamagedTableByName: opening a table that cannot be read by name
// still fails, with its code, naming the table and the file at fault and
// never the root; a phantom is NOT_FOUND. Without the fix the DATA_LOSS
// messages did not name the table.
func TestDamagedTableByName(t *testing.T) {
	ts, _ := startLoggedServer(t)
	d := makeDamagedRoot(t, ts)
	ctx := ctxT(t)
	for name, state := range d.broken {
		code := codes.DataLoss
		if state == TableUnreadable {
			code = codes.FailedPrecondition
		}
		frags := []string{`table "` + name + `": `, d.frags[name]}
		what := func(s string) string { return name + ": " + s }
		check := func(op string, err error) {
			t.Helper()
			wantCode(t, what(op), err, code, frags...)
			if strings.Contains(status.Convert(err).Message(), ts.root) {
				t.Errorf("%s: %v names the root", what(op), err)
			}
		}
		_, err := ts.client.GetFlightInfo(ctx, pathDesc(name))
		check("GetFlightInfo", err)
		_, err = ts.client.GetSchema(ctx, pathDesc(name))
		check("GetSchema", err)
		_, err = ts.action(ctx, ActionDescribeTable, map[string]any{"table": name})
		check("describe-table", err)
		_, err = ts.action(ctx, ActionCreateTable, map[string]any{"table": name, "index_column": "ts", "index_type": "timestamp", "granularity": "10s"})
		check("create-table", err)
	}
	for _, g := range d.phantom {
		_, err := ts.client.GetFlightInfo(ctx, pathDesc(g))
		wantCode(t, g+": GetFlightInfo", err, codes.NotFound, `table "`+g+`"`)
		_, err = ts.action(ctx, ActionDescribeTable, map[string]any{"table": g})
		wantCode(t, g+": describe-table", err, codes.NotFound, `table "`+g+`"`)
	}
}

// TestCreateOverPhantom: a create of a phantom's name (create-table, and
// DoPut with create) succeeds at version 1 in the directory left behind,
// and the table is listed from then on.
func TestCreateOverPhantom(t *testing.T) {
	ts, _ := startLoggedServer(t)
	d := makeDamagedRoot(t, ts)
	ctx := ctxT(t)
	ts.createTSBS(ctx, "ghost")
	batches := buildBatches(ts.cliMem, genRows(t0, 10, 2), 100)
	defer releaseAll(batches)
	res, err := ts.put(ctx, cmdDesc(t, map[string]any{"table": "ghost2", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"hostname"}}}), tsbsSchema, batches...)
	if err != nil {
		t.Fatalf("DoPut with create over phantom ghost2: %v", err)
	}
	if len(res) != 1 || res[0].Version != 2 || res[0].Rows != 20 {
		t.Fatalf("DoPut with create over phantom ghost2: %+v, want version 2 with 20 rows", res)
	}
	want := append(d.listed(), d.phantom...)
	sort.Strings(want)
	var names []string
	for _, info := range listFlights(t, ts) {
		names = append(names, info.FlightDescriptor.Path[0])
		if n := info.FlightDescriptor.Path[0]; (n == "ghost" || n == "ghost2") && len(info.AppMetadata) != 0 {
			t.Errorf("%s after create: app_metadata %q", n, info.AppMetadata)
		}
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("ListFlights after the creates: %v, want %v", names, want)
	}
}

// TestListingHelpers: gRPC code names, and a root that cannot be read is
// UNAVAILABLE without its path.
func TestListingHelpers(t *testing.T) {
	for c, want := range map[codes.Code]string{codes.DataLoss: "DATA_LOSS", codes.FailedPrecondition: "FAILED_PRECONDITION",
		codes.NotFound: "NOT_FOUND", codes.Unavailable: "UNAVAILABLE", codes.Internal: "INTERNAL", codes.DeadlineExceeded: "DEADLINE_EXCEEDED"} {
		if got := codeName(c); got != want {
			t.Errorf("codeName(%v) = %q, want %q", c, got, want)
		}
	}
	p := ProblemOf(Status(&catalog.TableError{Name: "x", Err: &tableformat.CorruptionError{Path: "_timeseries_log/CURRENT", Reason: "CURRENT is empty"}}))
	if p.State != TableDamaged || p.Code != "DATA_LOSS" || p.Error != `table "x": corrupt table: _timeseries_log/CURRENT: CURRENT is empty` {
		t.Errorf("ProblemOf: %+v", p)
	}
}
