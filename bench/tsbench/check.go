package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// tsbsQueryNames are the TSBS query types every run must measure.
var tsbsQueryNames = []string{"single-groupby-1-1-1", "single-groupby-5-8-1", "cpu-max-all-8", "double-groupby-1",
	"high-cpu-1", "lastpoint", "groupby-orderby-limit"}

// checkReport reads a report.json back and verifies that it holds every
// row a run must produce — each workload on each of its systems, with
// timed runs, rows where rows are read, and a finite ratio for every
// comparison — so CI proves the harness works end to end. It does not
// judge speed.
func checkReport(path string) error {
	r, err := readReport(path)
	if err != nil {
		return err
	}
	var errs []error
	want := func(group, workloadPrefix string, systems ...string) {
		for _, sys := range systems {
			var m *measurement
			for _, x := range r.Measurements {
				if x.Group == group && strings.HasPrefix(x.Workload, workloadPrefix) && x.System == sys {
					m = x
				}
			}
			switch {
			case m == nil:
				errs = append(errs, fmt.Errorf("no measurement of %s %q on %s", group, workloadPrefix, sys))
			case len(m.Times) == 0:
				errs = append(errs, fmt.Errorf("%s %q on %s: no timed runs", group, m.Workload, sys))
			default:
				for _, t := range m.Times {
					if !(t > 0) || math.IsInf(t, 0) {
						errs = append(errs, fmt.Errorf("%s %q on %s: run time %v", group, m.Workload, sys, t))
						break
					}
				}
				// A query may rightly find nothing (the run has checked that
				// every system agrees); ingest and scans read rows.
				if slices.Contains([]string{"ingest", "scan", "pyingest", "pyscan"}, group) && m.Rows <= 0 {
					errs = append(errs, fmt.Errorf("%s %q on %s: %d rows", group, m.Workload, sys, m.Rows))
				}
			}
		}
	}
	want("ingest", "all files", "tsflight", pkgName, "DuckDB COPY")
	want("scan", "whole table", "tsflight", pkgName)
	want("scan", "1 h", "tsflight", pkgName)
	for _, q := range tsbsQueryNames {
		want("sql", q, "tsflight", "DuckDB", pkgName)
	}
	want("coverage", "gaps, one entity", "tsflight")
	want("coverage", "coverage ratio, whole table", "tsflight")
	wantCmp := func(group, workloadPrefix, peer string, target bool) {
		for _, c := range r.Comparisons {
			if c.Group == group && strings.HasPrefix(c.Workload, workloadPrefix) && c.Peer == peer {
				if math.IsNaN(c.Ratio) || math.IsInf(c.Ratio, 0) || c.Ratio <= 0 {
					errs = append(errs, fmt.Errorf("comparison %s %q vs %q: ratio %v", group, c.Workload, peer, c.Ratio))
				}
				if target && c.Met == nil {
					errs = append(errs, fmt.Errorf("comparison %s %q vs %q: no verdict on its target", group, c.Workload, peer))
				}
				return
			}
		}
		errs = append(errs, fmt.Errorf("no comparison of %s %q against %q", group, workloadPrefix, peer))
	}
	wantCmp("ingest", "all files", "", true)
	wantCmp("ingest", "all files", pkgName, true)
	wantCmp("ingest", "all files", "DuckDB COPY", false)
	wantCmp("scan", "whole table", pkgName, false)
	wantCmp("scan", "1 h", pkgName, false)
	for _, q := range tsbsQueryNames {
		wantCmp("sql", q, "DuckDB", true)
		wantCmp("sql", q, pkgName, true)
	}
	wantCmp("coverage", "gaps, one entity, whole span (p50)", "", true)
	wantCmp("coverage", "coverage ratio, whole table, whole span (p50)", "", true)
	// The workloads of issue 21, checked in the reports whose run lists
	// them (older ones do not).
	ran := func(step string) bool { return slices.Contains(r.Workloads, step) }
	if ran("pyingest") {
		want("pyingest", pyIngestWorkload, "tsflight", pkgName)
		wantCmp("pyingest", pyIngestWorkload, pkgName, true)
	}
	if ran("pyscan") {
		want("pyscan", "whole table", "tsflight", cppName, pkgName)
		wantCmp("pyscan", "whole table", cppName, true)
		wantCmp("pyscan", "whole table", pkgName, true)
		wantCmp("pyscan", "whole table, tsflight (MB/s)", "", false)
		wantCmp("pyscan", "whole table, "+cppName+" (MB/s)", "", false)
	}
	if ran(pyColdStep) {
		want("pyscan", "whole table", pyColdName)
		wantCmp("pyscan", "whole table, cache off (every fetch decodes)", cppName, false)
		wantCmp("pyscan", "whole table, "+pyColdName+" (MB/s)", "", false)
	}
	if ran("latency") {
		for _, w := range []string{latSelect1, latPrepared, latFloor} {
			want("latency", w, "tsflight")
			wantCmp("latency", w+" (p90)", "", false)
		}
		wantCmp("latency", latSelect1+" (p50)", "", true)
		wantCmp("latency", latPrepared+" (p50)", "", true)
		wantCmp("latency", latFloor+" (p50)", "", false)
	}
	if ran("bigseg") {
		for _, w := range bigsegWorkloads {
			want("bigseg", w, "tsflight", "DuckDB")
			wantCmp("bigseg", w, "DuckDB", true)
		}
	}
	if ran(bigsegFloorStep) {
		for _, w := range bigsegWorkloads {
			want("bigseg", w, bigsegFloor)
			wantCmp("bigseg", bigsegLessFloor(w), "DuckDB", false)
		}
	}
	if ok, err := streamExpected(r); err != nil {
		errs = append(errs, err)
	} else if ok {
		for _, w := range streamMeasured {
			want(streamGroup, w.workload, w.systems...)
		}
		for _, c := range streamCompared {
			wantCmp(streamGroup, c.workload, c.peer, c.target)
		}
	}
	for _, k := range []string{"cpu", "cores", "memory"} {
		if r.Machine[k] == "" {
			errs = append(errs, fmt.Errorf("machine: no %s", k))
		}
	}
	for _, k := range []string{"go", "arrow-go", "DuckDB", pkgName, "tsflight"} {
		if r.Versions[k] == "" {
			errs = append(errs, fmt.Errorf("versions: no %s", k))
		}
	}
	return errors.Join(errs...)
}
