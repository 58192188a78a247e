package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The module's layering (docs/design.md): cmd/tsflight → servers
// (flightserver, flightsql) → tableformat → coverage. These tests read
// the import graph as the go command resolves it (go list, with and
// without the duckdb_arrow tag) and fail naming the package and the
// import that points the wrong way.

const module = "github.com/tsflight/tsflight"

// listedPackage is the part of `go list -json` the rules read.
type listedPackage struct {
	ImportPath string
	Imports    []string // direct, of the package's non-test files
	Deps       []string // transitive
}

// listPackages runs go list over the module's packages with tags.
func listPackages(t *testing.T, tags string) map[string]listedPackage {
	t.Helper()
	args := []string{"list", "-json"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, module+"/...")
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	for _, want := range []string{"coverage", "tableformat", "flightserver", "cmd/tsflight"} {
		if _, ok := pkgs[module+"/"+want]; !ok {
			t.Fatalf("go list (tags %q) did not list %s/%s", tags, module, want)
		}
	}
	return pkgs
}

// within reports whether pkg is dir or below it (dir relative to the module).
func within(pkg, dir string) bool {
	p := module + "/" + dir
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

// importRule forbids packages under dir to reach what bad matches,
// directly (direct) or through any chain of imports.
type importRule struct {
	dir    string
	direct bool
	why    string
	bad    func(imp string) bool
}

func moduleDir(dirs ...string) func(string) bool {
	return func(imp string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return within(imp, d) })
	}
}

func isDuckDB(imp string) bool {
	return strings.HasPrefix(imp, "github.com/duckdb/") || strings.HasPrefix(imp, "github.com/marcboeker/go-duckdb")
}

// layerRules are the brief's directions. Third-party packages may pull in
// what they like (pqarrow imports arrow/flight and so gRPC), so the rules
// on gRPC and file IO look at direct imports only.
var layerRules = []importRule{
	{dir: "coverage", why: "coverage math knows no table and no server", bad: moduleDir("tableformat", "flightserver", "flightsql", "cmd", "bench", "examples")},
	{dir: "coverage", direct: true, why: "coverage math knows no files", bad: func(imp string) bool {
		return slices.Contains([]string{"os", "io/fs", "io/ioutil", "path/filepath", "syscall", "os/exec"}, imp)
	}},
	{dir: "tableformat", why: "the table knows no server", bad: moduleDir("flightserver", "flightsql", "cmd", "bench", "examples")},
	{dir: "tableformat", direct: true, why: "the table knows no server (no gRPC codes or Flight types in the table)", bad: func(imp string) bool {
		return strings.HasPrefix(imp, "google.golang.org/grpc") || strings.HasPrefix(imp, "github.com/apache/arrow-go/v18/arrow/flight")
	}},
	{dir: "tableformat", why: "the catalog sits above the table: the table does not know it", bad: moduleDir("tableformat/catalog")},
	{dir: "tableformat/storage", why: "the storage seam knows no table", bad: func(imp string) bool { return imp == module+"/tableformat" }},
	{dir: "tableformat", why: "DuckDB stays inside flightsql", bad: isDuckDB},
	{dir: "coverage", why: "DuckDB stays inside flightsql", bad: isDuckDB},
	{dir: "flightserver", why: "plain Flight never needs DuckDB", bad: isDuckDB},
	{dir: "flightserver", why: "plain Flight never needs Flight SQL or the command", bad: moduleDir("flightsql", "cmd", "bench", "examples")},
	{dir: "flightsql", why: "servers do not reach up to the command or the benchmarks", bad: moduleDir("cmd", "bench", "examples")},
	{dir: "flightserver/guard", why: "the security layer knows no table and no service", bad: func(imp string) bool {
		return imp == module+"/flightserver" || within(imp, "tableformat") || within(imp, "coverage")
	}},
	{dir: "internal/testkit", why: "every package's tests may use the test kit, so it imports none of them", bad: moduleDir("coverage", "tableformat", "flightserver", "flightsql", "cmd", "examples")},
}

// violations lists, for every package, the rules it breaks.
func violations(pkgs map[string]listedPackage, rules []importRule) []string {
	var out []string
	for _, path := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[path]
		for _, r := range rules {
			if !within(path, r.dir) {
				continue
			}
			imps := p.Deps
			how := "reaches"
			if r.direct {
				imps, how = p.Imports, "imports"
			}
			for _, imp := range imps {
				if r.bad(imp) {
					out = append(out, path+" "+how+" "+imp+": "+r.why)
				}
			}
		}
	}
	return out
}

// DuckDB is imported directly by flightsql alone (bench and the command
// reach it through flightsql).
func directDuckDB(pkgs map[string]listedPackage) []string {
	var out []string
	for _, path := range slices.Sorted(maps.Keys(pkgs)) {
		if within(path, "flightsql") {
			continue
		}
		for _, imp := range pkgs[path].Imports {
			if isDuckDB(imp) {
				out = append(out, path+" imports "+imp+": DuckDB stays inside flightsql")
			}
		}
	}
	return out
}

func TestImportsPointOneWay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	for _, tags := range []string{"", "duckdb_arrow"} {
		t.Run("tags="+tags, func(t *testing.T) {
			pkgs := listPackages(t, tags)
			bad := append(violations(pkgs, layerRules), directDuckDB(pkgs)...)
			for _, v := range bad {
				t.Error(v)
			}
		})
	}
}

// TestImportRulesCatch feeds the rules a graph with one forbidden edge of
// each kind the issue names and checks each is reported: a rule that
// matched nothing would pass TestImportsPointOneWay for ever.
func TestImportRulesCatch(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	cases := map[string]listedPackage{
		"tableformat → a server": {ImportPath: m("tableformat"), Deps: []string{m("coverage"), m("flightserver")}},
		"table → gRPC codes":     {ImportPath: m("tableformat/storage"), Imports: []string{"google.golang.org/grpc/codes"}},
		"flightserver → DuckDB":  {ImportPath: m("flightserver"), Deps: []string{"github.com/duckdb/duckdb-go-bindings"}},
		"flightserver → SQL":     {ImportPath: m("flightserver"), Deps: []string{m("flightsql")}},
		"coverage → file IO":     {ImportPath: m("coverage"), Imports: []string{"os"}},
		"coverage → the table":   {ImportPath: m("coverage"), Deps: []string{m("tableformat/storage")}},
		"flightsql → cmd":        {ImportPath: m("flightsql"), Deps: []string{m("cmd/tsflight")}},
		"table → catalog":        {ImportPath: m("tableformat"), Deps: []string{m("tableformat/catalog")}},
		"storage → table":        {ImportPath: m("tableformat/storage"), Deps: []string{m("tableformat")}},
		"guard → the service":    {ImportPath: m("flightserver/guard"), Deps: []string{m("flightserver")}},
		"guard → a table":        {ImportPath: m("flightserver/guard"), Deps: []string{m("tableformat/catalog")}},
		"test kit → the table":   {ImportPath: m("internal/testkit"), Deps: []string{m("bench/tsbs"), m("tableformat")}},
	}
	for name, p := range cases {
		got := violations(map[string]listedPackage{p.ImportPath: p}, layerRules)
		if len(got) != 1 {
			t.Errorf("%s: %d violations reported, want 1: %q", name, len(got), got)
		}
	}
	allowed := map[string]listedPackage{
		"tableformat → coverage, pqarrow's gRPC": {ImportPath: m("tableformat"), Imports: []string{m("coverage"), "github.com/apache/arrow-go/v18/parquet/pqarrow"},
			Deps: []string{m("coverage"), "google.golang.org/grpc", "os"}},
		"catalog → table, storage":              {ImportPath: m("tableformat/catalog"), Deps: []string{m("tableformat"), m("tableformat/storage"), m("coverage")}},
		"coverage → roaring (which may use os)": {ImportPath: m("coverage"), Imports: []string{"github.com/RoaringBitmap/roaring/v2/roaring64"}, Deps: []string{"os"}},
		"flightsql → DuckDB, the table":         {ImportPath: m("flightsql"), Imports: []string{"github.com/duckdb/duckdb-go-bindings", m("tableformat")}},
	}
	for name, p := range allowed {
		pkgs := map[string]listedPackage{p.ImportPath: p}
		if got := append(violations(pkgs, layerRules), directDuckDB(pkgs)...); len(got) != 0 {
			t.Errorf("%s: allowed edge reported: %q", name, got)
		}
	}
	if got := directDuckDB(map[string]listedPackage{m("bench/tsbench"): {ImportPath: m("bench/tsbench"), Imports: []string{"github.com/duckdb/duckdb-go/v2"}}}); len(got) != 1 {
		t.Errorf("bench importing DuckDB directly: %q, want one violation", got)
	}
}
