package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// addFloorRows adds the Flight SQL floor's row of each big-segment query
// (2 ms against tsflight's 11 and DuckDB's 10 in addPyRows) and lists
// the floor as run.
func addFloorRows(r *report) {
	for _, w := range bigsegWorkloads {
		r.add(&measurement{Group: "bigseg", Workload: w, System: bigsegFloor, Times: []float64{0.002, 0.002}, CPU: []float64{0.001, 0.001}, Rows: 1})
	}
	r.Workloads = append(r.Workloads, bigsegFloorStep)
}

// TestReportBigsegFloor: with the floor measured, report.md gives each
// query's floor time and, beside the plain ratio, (tsflight − floor) /
// DuckDB; the check passes.
func TestReportBigsegFloor(t *testing.T) {
	dir := t.TempDir()
	r := fullReport()
	addStreamRows(r)
	addPyRows(r)
	addFloorRows(r)
	md := writeAndCheck(t, r, dir, "a complete report with the floor rows")
	for _, w := range bigsegWorkloads {
		wantInMarkdown(t, md,
			// The plain ratio, then the one less the floor, on the next line.
			"| bigseg | "+w+" | DuckDB | 1.1 | <= 1.2 | met |\n"+
				"| bigseg | "+w+", less the floor | DuckDB | 0.9 | none: (tsflight − floor) / DuckDB |  |\n",
			"| bigseg | "+w+" | tsflight | 11.00 ms |",
			"| bigseg | "+w+" | DuckDB | 10.00 ms |",
			"| bigseg | "+w+" | Flight SQL floor | 2.00 ms | 2.00 ms–2.00 ms | 2.00 ms | 2 | 1 | 500 | 1.00 ms | - |",
		)
	}
}

// TestCheckReportWantsBigsegFloor: a report whose workloads list the
// floor must hold its rows; one that does not list it (older reports)
// is checked without them.
func TestCheckReportWantsBigsegFloor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	r := fullReport()
	addStreamRows(r)
	addPyRows(r)
	addFloorRows(r)
	kept := r.Measurements[:0]
	for _, m := range r.Measurements {
		if m.System == bigsegFloor && m.Workload == bigsegWorkloads[1] {
			continue
		}
		kept = append(kept, m)
	}
	r.Measurements = kept
	err := wantCheckFails(t, r, path, "a report listing the floor without one query's floor row",
		`no measurement of bigseg "count(*), 10 minutes" on Flight SQL floor`,
		`no comparison of bigseg "count(*), 10 minutes, less the floor" against "DuckDB"`,
	)
	if strings.Contains(err.Error(), bigsegWorkloads[0]) {
		t.Errorf("the check faults the query whose floor row is there:\n%v", err)
	}

	// The same report without the floor listed: as before the floor.
	r.Workloads = r.Workloads[:len(r.Workloads)-1]
	r.Measurements = kept[:0]
	for _, m := range kept {
		if m.System != bigsegFloor {
			r.Measurements = append(r.Measurements, m)
		}
	}
	if err := checkJSON(t, r, path); err != nil {
		t.Errorf("a report from before the floor fails the check: %v", err)
	}
}
