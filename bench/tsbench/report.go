package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// measurement is one workload on one system: its timed runs.
type measurement struct {
	Group    string    `json:"group"`    // ingest, scan, sql, coverage, pyingest, pyscan, latency, bigseg, stream
	Workload string    `json:"workload"` // e.g. "whole table", "lastpoint"
	System   string    `json:"system"`   // tsflight, "timeseries-table-format", DuckDB, cppName
	Times    []float64 `json:"times_s"`
	CPU      []float64 `json:"cpu_s,omitempty"` // per timed run: the CPU of the process that did the work
	Rows     int64     `json:"rows"`
	Bytes    int64     `json:"bytes,omitempty"`
	RSS      int64     `json:"peak_rss_bytes,omitempty"` // of the process that did the work
	Note     string    `json:"note,omitempty"`
	stat     stat
}

// comparison is tsflight against a peer on one workload, or tsflight
// against an absolute target.
type comparison struct {
	Group    string  `json:"group"`
	Workload string  `json:"workload"`
	Peer     string  `json:"peer"`  // "" for an absolute target
	Ratio    float64 `json:"ratio"` // tsflight time / peer time (or the figure for an absolute target)
	Target   string  `json:"target"`
	Met      *bool   `json:"met"` // nil: no target
	Unit     string  `json:"unit,omitempty"`
}

// report is a run's result.
type report struct {
	Mode         string            `json:"mode"`
	Started      time.Time         `json:"started"`
	Took         float64           `json:"took_s"`
	Machine      map[string]string `json:"machine"`
	Versions     map[string]string `json:"versions"`
	Scale        map[string]any    `json:"scale"`
	Measurements []*measurement    `json:"measurements"`
	Comparisons  []*comparison     `json:"comparisons"`
	Notes        []string          `json:"notes,omitempty"`
	Workloads    []string          `json:"workloads,omitempty"` // the run's steps, in order
	Stream       *streamFigures    `json:"stream,omitempty"`    // the stream workload's figures that are not times
}

func (r *report) add(m *measurement) *measurement {
	m.stat = statsOf(m.Times)
	r.Measurements = append(r.Measurements, m)
	return m
}

// find returns the measurement of workload on system, or nil.
func (r *report) find(group, workload, system string) *measurement {
	for _, m := range r.Measurements {
		if m.Group == group && m.Workload == workload && m.System == system {
			return m
		}
	}
	return nil
}

// compare adds tsflight / peer on a workload (median times). maxRatio > 0
// is the target (the ratio must not exceed it).
func (r *report) compare(group, workload, peer string, maxRatio float64, target string) {
	ts, p := r.find(group, workload, "tsflight"), r.find(group, workload, peer)
	if ts == nil || p == nil {
		return
	}
	c := &comparison{Group: group, Workload: workload, Peer: peer, Ratio: ts.stat.Median / p.stat.Median, Target: target}
	if maxRatio > 0 {
		met := c.Ratio <= maxRatio
		c.Met = &met
	}
	r.Comparisons = append(r.Comparisons, c)
}

// absolute adds a target on a figure of tsflight's alone.
func (r *report) absolute(group, workload, unit string, value float64, target string, met bool) {
	r.Comparisons = append(r.Comparisons, &comparison{Group: group, Workload: workload, Ratio: value, Unit: unit, Target: target, Met: &met})
}

// readReport loads a report.json, with each measurement's summary.
func readReport(path string) (*report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, m := range r.Measurements {
		m.stat = statsOf(m.Times)
	}
	return &r, nil
}

// renderReport writes report.md and ratios.svg of a saved run into dir,
// with the comparisons as they were judged in that run.
func renderReport(path, dir string) error {
	r, err := readReport(path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return r.write(dir)
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeMarkdown writes the report as RESULTS.md reads: the setting, the
// measurements, then every comparison with its target.
func (r *report) writeMarkdown(w io.Writer, chart string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# tsflight benchmark: %s mode\n\n", r.Mode)
	fmt.Fprintf(&b, "Run %s, took %.0f s. Every figure below was measured in this run, on this machine, beside its peer.\n\n",
		r.Started.UTC().Format(time.RFC3339), r.Took)
	b.WriteString("| | |\n|---|---|\n")
	for _, k := range sortedKeys(r.Machine) {
		fmt.Fprintf(&b, "| %s | %s |\n", k, r.Machine[k])
	}
	for _, k := range sortedKeys(r.Versions) {
		fmt.Fprintf(&b, "| %s | %s |\n", k, r.Versions[k])
	}
	for _, k := range sortedKeys(r.Scale) {
		fmt.Fprintf(&b, "| %s | %s |\n", k, scaleValue(r.Scale[k]))
	}
	b.WriteString("\n")
	if chart != "" {
		fmt.Fprintf(&b, "![ratios](%s)\n\n", chart)
	}
	b.WriteString("## Against the targets\n\nRatio = tsflight's median time / the peer's (below 1: tsflight is faster), or the figure itself for an absolute target")
	if r.Stream != nil {
		b.WriteString("; in the stream group, the stream table's figure / the bulk table's")
	}
	b.WriteString(".\n\n")
	b.WriteString("| group | workload | against | ratio / figure | target | |\n|---|---|---|---:|---|---|\n")
	for _, c := range r.Comparisons {
		peer := c.Peer
		if peer == "" {
			peer = "(absolute)"
		}
		verdict := ""
		if c.Met != nil {
			verdict = "met"
			if !*c.Met {
				verdict = "**missed**"
			}
		}
		fig := c.figure()
		if c.Unit != "" {
			fig += " " + c.Unit
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", c.Group, c.Workload, peer, fig, c.Target, verdict)
	}
	b.WriteString("\n## Measurements\n\nMedian of the timed runs (after a warm-up), the interquartile range around it, the mean CPU time per run (user + system, counted in 10 ms ticks) of the process that did the work where it was measured, and that process's peak RSS.\n\n")
	b.WriteString("| group | workload | system | median | p25–p75 | p99 | runs | rows | rows/s | CPU per run | peak RSS |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Measurements {
		s := m.stat
		rate := "-"
		if m.Rows > 0 && s.Median > 0 {
			rate = humanRate(float64(m.Rows) / s.Median)
		}
		cpu := "-"
		if len(m.CPU) > 0 {
			var sum float64
			for _, c := range m.CPU {
				sum += c
			}
			cpu = humanDur(sum / float64(len(m.CPU)))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s–%s | %s | %d | %d | %s | %s | %s |\n", m.Group, m.Workload, m.System,
			humanDur(s.Median), humanDur(s.P25), humanDur(s.P75), humanDur(s.P99), s.N, m.Rows, rate, cpu, humanMiB(m.RSS))
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// figure prints a comparison's ratio or figure: three significant digits,
// or whole numbers from 1,000 on (1180 MB/s, not 1.18e+03).
func (c *comparison) figure() string {
	if math.Abs(c.Ratio) >= 1000 && !math.IsInf(c.Ratio, 0) {
		return fmt.Sprintf("%.0f", c.Ratio)
	}
	return fmt.Sprintf("%.3g", c.Ratio)
}

func humanDur(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case s < 1e-3:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.2f ms", s*1e3)
	default:
		return fmt.Sprintf("%.2f s", s)
	}
}

func humanRate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2f M", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1f k", r/1e3)
	default:
		return fmt.Sprintf("%.0f", r)
	}
}

func humanMiB(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
