// Tests of the vacuum action through a real server: dry run, cutoff,
// apply, and the refusals.

package flightserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
)

// plantStray writes, under table dir, the files an append killed before
// its commit leaves (a copy of a real segment under a new name, both
// sidecars, a commit temporary file) and returns their paths, sorted.
func plantStray(t *testing.T, dir, segment string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(segment)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"data/_managed/append/7c9e6679-7425-40de-944b-e07fc1f90ae7.parquet":                                    data,
		"_coverage/segments/segcov-0123456789abcdef0123456789abcdef-7c9e6679-7425-40de-944b-e07fc1f90ae7.roar": []byte("roar"),
		"_coverage/table/3-tblcov-0123456789abcdef0123456789abcdef-7c9e6679-7425-40de-944b-e07fc1f90ae7.roar":  []byte("roar"),
		"_timeseries_log/.0000000003.json.tmp-00112233445566ff":                                                []byte(`{"version":3}`),
	}
	return testkit.WriteFiles(t, dir, files)
}

func vacuumPaths(res VacuumResult, disposition string) []string {
	var out []string
	for _, a := range res.Artifacts {
		if a.Disposition == disposition {
			out = append(out, a.Path)
		}
	}
	return out
}

func TestVacuumAction(t *testing.T) {
	ts, ctx := startWithCPU(t)
	pr := ts.mustPut(ctx, pathDesc("cpu"), genRows(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC), 30, 3), 40, 2)
	dir := filepath.Join(ts.root, "cpu")
	stray := plantStray(t, dir, pr.Segment)
	run := func(body any) VacuumResult {
		t.Helper()
		return runAction[VacuumResult](t, ts, ctx, ActionVacuum, body)
	}

	// Default: a dry run with 7 days' retention keeps the young files.
	res := run(map[string]any{"table": "cpu"})
	if res.Applied || res.Totals.Removable != 0 || res.Version != 2 || res.Table != "cpu" || res.Totals.Files != 7 || res.Totals.Referenced != 3 {
		t.Fatalf("default dry run: %+v", res)
	}
	if cut, err := time.Parse(time.RFC3339Nano, res.OlderThan); err != nil || time.Since(cut) < tableformat.DefaultVacuumRetention-time.Minute || time.Since(cut) > tableformat.DefaultVacuumRetention+time.Minute {
		t.Fatalf("default older_than %q (%v)", res.OlderThan, err)
	}
	for _, a := range res.Artifacts {
		want := "within_retention"
		if a.Path == pr.Segment {
			want = "referenced_by_commit"
		}
		if (a.Path == pr.Segment || strings.HasPrefix(a.Path, "data/_managed/append/7c9e")) && a.Reason != want {
			t.Fatalf("%s: %+v, want %s", a.Path, a, want)
		}
		if a.Modified == "" || a.Kind == "" || a.Size == 0 {
			t.Fatalf("artifact %+v lacks a field", a)
		}
	}

	// A cutoff of now: exactly the stray files, nothing deleted.
	now := time.Now().UTC().Format(time.RFC3339Nano)
	res = run(map[string]any{"table": "cpu", "older_than": now})
	if got := vacuumPaths(res, "removable"); strings.Join(got, " ") != strings.Join(stray, " ") || res.Totals.RemovableBytes == 0 {
		t.Fatalf("removable %v, want %v", got, stray)
	}
	for _, p := range stray {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Fatalf("a dry run removed %s", p)
		}
	}

	// A retention is counted back from the server's clock: 0s is a cutoff
	// of now, so the same stray files.
	res = run(map[string]any{"table": "cpu", "retention": "0s"})
	if got := vacuumPaths(res, "removable"); strings.Join(got, " ") != strings.Join(stray, " ") || res.Applied {
		t.Fatalf("retention 0s: removable %v, want %v", got, stray)
	}
	if cut, err := time.Parse(time.RFC3339Nano, res.OlderThan); err != nil || time.Since(cut) > time.Minute {
		t.Fatalf("retention 0s: older_than %q (%v), want about now", res.OlderThan, err)
	}

	// Files older than the default retention go without a cutoff.
	old := time.Now().Add(-tableformat.DefaultVacuumRetention - time.Hour)
	for _, p := range stray[:2] {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(p)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	res = run(map[string]any{"table": "cpu", "apply": true})
	if got := vacuumPaths(res, "deleted"); !res.Applied || strings.Join(got, " ") != strings.Join(stray[:2], " ") || res.Totals.Deleted != 2 {
		t.Fatalf("apply with the default retention deleted %v, want %v", got, stray[:2])
	}

	// Apply with a cutoff of now takes the rest.
	res = run(map[string]any{"table": "cpu", "older_than": time.Now().UTC().Format(time.RFC3339Nano), "apply": true})
	if got := vacuumPaths(res, "deleted"); strings.Join(got, " ") != strings.Join(stray[2:], " ") {
		t.Fatalf("apply deleted %v, want %v", got, stray[2:])
	}
	for _, p := range stray {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); !os.IsNotExist(err) {
			t.Fatalf("%s survived apply: %v", p, err)
		}
	}
	res = run(map[string]any{"table": "cpu", "older_than": time.Now().UTC().Format(time.RFC3339Nano)})
	if res.Totals.Removable != 0 || res.Totals.Files != 3 || res.Totals.Referenced != 3 {
		t.Fatalf("after apply: %+v", res.Totals)
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if d["rows"] != float64(90) || d["version"] != float64(2) {
		t.Fatalf("table after vacuum: %v", d)
	}
	ts.mustPut(ctx, pathDesc("cpu"), genRows(time.Date(2024, 6, 2, 0, 0, 0, 0, time.UTC), 5, 3), 40, 3)
}

func TestVacuumActionRefusals(t *testing.T) {
	ts, ctx := startWithCPU(t)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	wantRefusals(t, ts, ctx, ActionVacuum, []refusal{
		{"unknown table", `{"table":"nope"}`, codes.NotFound, []string{"nope"}},
		{"bad table name", `{"table":"../x"}`, codes.InvalidArgument, []string{"../x"}},
		{"bad older_than", `{"table":"cpu","older_than":"yesterday"}`, codes.InvalidArgument, []string{"older_than", "yesterday", "RFC 3339"}},
		{"future older_than", `{"table":"cpu","older_than":"` + future + `"}`, codes.InvalidArgument, []string{"older_than", "future"}},
		{"unknown field", `{"table":"cpu","dry_run":true}`, codes.InvalidArgument, []string{"dry_run"}},
		{"apply not a bool", `{"table":"cpu","apply":"yes"}`, codes.InvalidArgument, []string{"apply"}},
		{"bad retention", `{"table":"cpu","retention":"a while"}`, codes.InvalidArgument, []string{"retention", "a while", "duration"}},
		{"negative retention", `{"table":"cpu","retention":"-1h"}`, codes.InvalidArgument, []string{"retention", "-1h", "negative"}},
		{"older_than and retention", `{"table":"cpu","retention":"1h","older_than":"2024-01-01T00:00:00Z"}`, codes.InvalidArgument, []string{"older_than", "retention", "not both"}},
	})
}
