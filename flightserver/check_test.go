// Tests of the check action over arrow-go: findings of damaged tables
// (including one the catalog cannot open) are answers, not failed calls;
// repair fixes the repairable ones; read tokens check but do not repair.

package flightserver

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

func (ts *testServer) check(ctx context.Context, body any) (CheckResult, error) {
	ts.t.Helper()
	raw, err := ts.action(ctx, ActionCheck, body)
	if err != nil {
		return CheckResult{}, err
	}
	res, err := strictJSON[CheckResult](raw)
	if err != nil {
		ts.t.Fatalf("check answer %s: %v", raw, err)
	}
	return res, nil
}

func (ts *testServer) mustCheck(ctx context.Context, body any) CheckResult {
	ts.t.Helper()
	res, err := ts.check(ctx, body)
	if err != nil {
		ts.t.Fatalf("check %v: %v", body, err)
	}
	return res
}

// checkCodes lists a table's findings as "code path", sorted.
func checkCodes(ct CheckTable) []string {
	var out []string
	for _, f := range ct.Findings {
		out = append(out, f.Code+" "+f.Path)
	}
	sort.Strings(out)
	return out
}

// tableCoveragePath is the table coverage snapshot of the table in dir.
func tableCoveragePath(t *testing.T, dir string) string {
	t.Helper()
	tb, err := tableformat.Open(context.Background(), storage.Local(dir), &tableformat.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return tb.State().Coverage.Path
}

func TestCheckAction(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	for _, name := range []string{"mem", "cpu"} {
		ts.createTSBS(ctx, name)
		ts.mustPut(ctx, pathDesc(name), genRows(t0, 30, 3), 40, 2)
		ts.mustPut(ctx, pathDesc(name), genRows(t0.Add(time.Hour), 10, 3), 40, 3)
	}

	// Healthy: every table, sorted; {} and an empty body alike.
	for _, body := range []any{map[string]any{}, ""} {
		res := ts.mustCheck(ctx, body)
		if !res.OK || res.Repair || len(res.Tables) != 2 || res.Tables[0].Table != "cpu" || res.Tables[1].Table != "mem" {
			t.Fatalf("healthy check %q: %+v", body, res)
		}
		for _, ct := range res.Tables {
			if !ct.OK || len(ct.Findings) != 0 || ct.Version != 3 || ct.Current != 3 || ct.Segments != 2 || ct.Rows != 120 {
				t.Fatalf("healthy %s: %+v", ct.Table, ct)
			}
		}
	}

	// Damage cpu: CURRENT garbage (the table does not open) and the file
	// its table coverage pointer names (the segment-union marker) gone;
	// mem: a malformed commit below CURRENT.
	cpu, mem := filepath.Join(ts.root, "cpu"), filepath.Join(ts.root, "mem")
	cov := tableCoveragePath(t, cpu)
	if err := os.Remove(filepath.Join(cpu, filepath.FromSlash(cov))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cpu, tableformat.LogDir, "CURRENT"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := tableformat.CommitPath(2)
	if err := os.WriteFile(filepath.Join(mem, filepath.FromSlash(c2)), []byte(`{"version":2`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ts.action(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	wantCode(t, "describe the damaged cpu", err, codes.DataLoss, "CURRENT")

	res := ts.mustCheck(ctx, map[string]any{"table": "cpu"})
	if res.OK || len(res.Tables) != 1 {
		t.Fatalf("check cpu: %+v", res)
	}
	ct := res.Tables[0]
	want := []string{tableformat.CheckCurrentInvalid + " " + tableformat.LogDir + "/CURRENT", tableformat.CheckTableCoverageMissing + " " + cov}
	if got := checkCodes(ct); strings.Join(got, "|") != strings.Join(want, "|") || ct.OK || ct.Version != 3 || ct.Current != 0 {
		t.Fatalf("check cpu: %v, %+v; want %v", got, ct, want)
	}
	for _, f := range ct.Findings {
		if !f.Repairable || f.Repaired || f.Problem == "" || f.Action == "" || f.Severity == "" {
			t.Fatalf("finding %+v", f)
		}
	}
	res = ts.mustCheck(ctx, map[string]any{"tables": []string{"mem", "cpu"}})
	if res.OK || len(res.Tables) != 2 || res.Tables[0].Table != "mem" || res.Tables[1].OK {
		t.Fatalf("check mem, cpu: %+v", res)
	}
	if got := checkCodes(res.Tables[0]); len(got) != 1 || got[0] != tableformat.CheckCommitMalformed+" "+c2 || res.Tables[0].Version != 1 {
		t.Fatalf("check mem: %v, %+v", got, res.Tables[0])
	}

	// Refusals.
	_, err = ts.check(ctx, map[string]any{"table": "nope"})
	wantCode(t, "unknown table", err, codes.NotFound, `"nope"`)
	_, err = ts.check(ctx, map[string]any{"tables": []string{"cpu", "nope2"}})
	wantCode(t, "unknown table in a list", err, codes.NotFound, `"nope2"`)
	_, err = ts.check(ctx, map[string]any{"table": "cpu", "tables": []string{"mem"}})
	wantCode(t, "table and tables", err, codes.InvalidArgument, `"table" or "tables", not both`)
	_, err = ts.check(ctx, map[string]any{"table": "../x"})
	wantCode(t, "bad name", err, codes.InvalidArgument, "not allowed")
	_, err = ts.check(ctx, map[string]any{"table": "cpu", "fix": true})
	wantCode(t, "unknown field", err, codes.InvalidArgument, "fix")
	_, err = ts.check(ctx, map[string]any{"tables": []string{"cpu", "cpu"}})
	wantCode(t, "a table twice", err, codes.InvalidArgument, "twice")

	// Repair: cpu is fixed (CURRENT republished, the marker written again,
	// which needs no commit); mem's commit is left alone.
	memCommit, _ := os.ReadFile(filepath.Join(mem, filepath.FromSlash(c2)))
	res = ts.mustCheck(ctx, map[string]any{"repair": true})
	if res.OK || !res.Repair || len(res.Tables) != 2 {
		t.Fatalf("repair: %+v", res)
	}
	ct = res.Tables[0]
	if !ct.OK || ct.Version != 3 || ct.Current != 3 || len(ct.Findings) != 2 {
		t.Fatalf("repaired cpu: %+v", ct)
	}
	for _, f := range ct.Findings {
		if !f.Repaired || f.Repair == "" {
			t.Fatalf("repaired cpu finding %+v", f)
		}
	}
	if res.Tables[1].OK || res.Tables[1].Findings[0].Repaired {
		t.Fatalf("mem after repair: %+v", res.Tables[1])
	}
	if b, _ := os.ReadFile(filepath.Join(mem, filepath.FromSlash(c2))); string(b) != string(memCommit) {
		t.Fatalf("repair rewrote a commit file")
	}
	if res := ts.mustCheck(ctx, map[string]any{"table": "cpu"}); !res.OK || len(res.Tables[0].Findings) != 0 {
		t.Fatalf("cpu after repair: %+v", res)
	}
	// The catalog's handle sees the repaired table and appends to it.
	if d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"}); d["version"] != float64(3) || d["rows"] != float64(120) {
		t.Fatalf("describe cpu after repair: %v", d)
	}
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0.Add(2*time.Hour), 5, 3), 40, 4)
	if res := ts.mustCheck(ctx, map[string]any{"table": "cpu"}); !res.OK || res.Tables[0].Rows != 135 {
		t.Fatalf("cpu after the append: %+v", res)
	}
}

// TestCheckActionScopes: a read token checks but cannot repair (nothing
// changes); the write token repairs.
func TestCheckActionScopes(t *testing.T) {
	e, ctx := startAuthCPU(t)
	dir := filepath.Join(e.root, "cpu")
	current := filepath.Join(dir, tableformat.LogDir, "CURRENT")
	if err := os.WriteFile(current, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w := bearer(ctx, e.read), bearer(ctx, e.write)

	res, err := e.check(r, map[string]any{"table": "cpu"})
	if err != nil || res.OK || len(res.Tables) != 1 || len(res.Tables[0].Findings) != 1 || res.Tables[0].Findings[0].Code != tableformat.CheckCurrentLagging {
		t.Fatalf("read token check: %v, %+v", err, res)
	}
	for _, body := range []any{
		map[string]any{"table": "cpu", "repair": true},
		map[string]any{"repair": true},
		`{"table":"cpu","Repair":true}`,
	} {
		_, err = e.check(r, body)
		wantCode(t, "read token repair", err, codes.PermissionDenied, "action check with repair needs write scope", "token reader has read scope")
	}
	if b, _ := os.ReadFile(current); string(b) != "1\n" {
		t.Fatalf("a refused repair changed CURRENT to %q", b)
	}
	res, err = e.check(w, map[string]any{"table": "cpu", "repair": true})
	if err != nil || !res.OK || !res.Tables[0].Findings[0].Repaired {
		t.Fatalf("write token repair: %v, %+v", err, res)
	}
	if b, _ := os.ReadFile(current); string(b) != "2\n" {
		t.Fatalf("CURRENT after the repair: %q", b)
	}
	if res, err := e.check(r, map[string]any{}); err != nil || !res.OK {
		t.Fatalf("read token check after the repair: %v, %+v", err, res)
	}
}

// TestScopeCheckBody: check reads unless its body, decoded as the action
// decodes it, repairs; a body the action refuses is judged as writing.
func TestScopeCheckBody(t *testing.T) {
	for _, c := range []struct {
		body  string
		write bool
	}{
		{``, false},
		{`{}`, false},
		{`{"table":"cpu"}`, false},
		{`{"tables":["cpu","mem"]}`, false},
		{`{"table":"cpu","repair":false}`, false},
		{`{"table":"cpu","repair":null}`, false},
		{`{"table":"cpu","repair":true}`, true},
		{`{"repair":true}`, true},
		{`{"table":"cpu","REPAIR":true}`, true},
		{`{"repair":true,"repair":null}`, true},
		{`{"table":"cpu","bogus":1}`, true},
		{`{"repair":"true"}`, true},
		{`{} {"repair":true}`, true},
		{`not json`, true},
	} {
		what, write := classifyAction(&flight.Action{Type: ActionCheck, Body: []byte(c.body)})
		if write != c.write {
			t.Errorf("check %s: write=%v (%s), want %v", c.body, write, what, c.write)
		}
	}
}
