package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fullReport is a report holding every row a run produces, with made-up
// times: tsflight twice as fast as every peer.
func fullReport() *report {
	r := &report{Mode: "quick", Started: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		Machine:  map[string]string{"cpu": "test cpu", "cores": "2", "memory": "24 GiB"},
		Versions: map[string]string{"go": "go1.26", "arrow-go": "v18", "DuckDB": "v1.5.6", pkgName: "0.9.0", "tsflight": "dev"},
		Scale:    map[string]any{"hosts": 2}}
	add := func(group, workload, system string, secs float64, rows int64) {
		r.add(&measurement{Group: group, Workload: workload, System: system, Times: []float64{secs, secs * 1.1, secs * 0.9}, Rows: rows})
	}
	add("ingest", "all files", "tsflight", 1, 2_000_000)
	add("ingest", "all files", pkgName, 2, 2_000_000)
	add("ingest", "all files", "DuckDB COPY", 2, 2_000_000)
	for _, w := range []string{"whole table", "1 h [01:00, 02:00)"} {
		add("scan", w, "tsflight", 1, 100)
		add("scan", w, pkgName, 2, 100)
	}
	for _, q := range tsbsQueryNames {
		add("sql", q, "tsflight", 0.001, 0) // a query may find nothing
		add("sql", q, "DuckDB", 0.002, 0)
		add("sql", q, pkgName, 0.002, 0)
	}
	add("coverage", "gaps, one entity, whole span", "tsflight", 0.0002, 0)
	add("coverage", "coverage ratio, whole table, whole span", "tsflight", 0.0002, 0)
	r.targets()
	return r
}

func TestReportWritesAndChecks(t *testing.T) {
	dir := t.TempDir()
	r := fullReport()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	if err := checkReport(filepath.Join(dir, "report.json")); err != nil {
		t.Fatalf("a complete report fails the check: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| ingest | all files | (absolute) | 2 M rows/s | >= 1 M rows/s | met |",
		"| ingest | all files | timeseries-table-format | 0.5 | <= 0.5 (>= 2x the package) | met |",
		"| sql | lastpoint | DuckDB | 0.5 | <= 1.0 | met |",
		"| coverage | gaps, one entity, whole span (p50) | (absolute) | 0.2 ms | <= 1 ms | met |",
		"![ratios](ratios.svg)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "ratios.svg"))
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(svg))
	bars := 0
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "fill" && a.Value == "#2e7d32" {
					bars++
				}
			}
		}
	}
	// Met targets drawn green: ingest vs the package and both peers of
	// each of the seven queries.
	if want := 1 + 2*len(tsbsQueryNames); bars != want {
		t.Errorf("%d green bars, want %d", bars, want)
	}
}

func TestReportMissedTargetIsSaid(t *testing.T) {
	r := fullReport()
	m := r.find("sql", "lastpoint", "tsflight")
	m.Times = []float64{1, 1, 1}
	m.stat = statsOf(m.Times)
	retarget(r)
	var b bytes.Buffer
	if err := r.writeMarkdown(&b, ""); err != nil {
		t.Fatal(err)
	}
	if want := "| sql | lastpoint | DuckDB | 500 | <= 1.0 | **missed** |"; !strings.Contains(b.String(), want) {
		t.Errorf("missing %q in:\n%s", want, b.String())
	}
}

func TestCheckReportFindsWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	r := fullReport()
	// Drop the package's answer to one query and DuckDB's version.
	kept := r.Measurements[:0]
	for _, m := range r.Measurements {
		if !(m.Group == "sql" && m.Workload == "high-cpu-1" && m.System == pkgName) {
			kept = append(kept, m)
		}
	}
	r.Measurements = kept
	retarget(r)
	delete(r.Versions, "DuckDB")
	r.find("scan", "whole table", pkgName).Rows = 0
	if err := r.writeJSON(filepath.Join(dir, "report.json")); err != nil {
		t.Fatal(err)
	}
	err := checkReport(filepath.Join(dir, "report.json"))
	if err == nil {
		t.Fatal("an incomplete report passes the check")
	}
	for _, want := range []string{
		`no measurement of sql "high-cpu-1" on timeseries-table-format`,
		`no comparison of sql "high-cpu-1" against "timeseries-table-format"`,
		`scan "whole table" on timeseries-table-format: 0 rows`,
		"versions: no DuckDB",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the check does not say %q:\n%v", want, err)
		}
	}
}

// retarget recomputes the comparisons after a test changed r's rows.
func retarget(r *report) {
	r.Comparisons = nil
	r.targets()
}

// writeAndCheck retargets r, writes the whole report into dir and
// requires the check to pass (what names the report in the failure); it
// returns report.md as writeMarkdown writes it.
func writeAndCheck(t *testing.T, r *report, dir, what string) string {
	t.Helper()
	retarget(r)
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	if err := checkReport(filepath.Join(dir, "report.json")); err != nil {
		t.Fatalf("%s fails the check: %v", what, err)
	}
	var md bytes.Buffer
	if err := r.writeMarkdown(&md, ""); err != nil {
		t.Fatal(err)
	}
	return md.String()
}

// wantInMarkdown requires every line of want in report.md.
func wantInMarkdown(t *testing.T, md string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(md, w) {
			t.Errorf("report.md lacks %q:\n%s", w, md)
		}
	}
}

// checkJSON retargets r, writes its report.json to path and returns what
// the check says of it.
func checkJSON(t *testing.T, r *report, path string) error {
	t.Helper()
	retarget(r)
	if err := r.writeJSON(path); err != nil {
		t.Fatal(err)
	}
	return checkReport(path)
}

// wantCheckFails requires the check of r's report.json (at path) to fail
// (what names the report) and to say each of want; it returns what the
// check said.
func wantCheckFails(t *testing.T, r *report, path, what string, want ...string) error {
	t.Helper()
	err := checkJSON(t, r, path)
	if err == nil {
		t.Fatalf("%s passes the check", what)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the check does not say %q:\n%v", w, err)
		}
	}
	return err
}
