package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// writeChart draws the peer comparisons as horizontal bars of tsflight's
// time ratio (1 = as fast as the peer, below 1 faster) with each target
// marked, in SVG. Absolute targets are listed under the bars.
func (r *report) writeChart(w io.Writer) error {
	var rel, abs []*comparison
	for _, c := range r.Comparisons {
		if c.Peer == "" {
			abs = append(abs, c)
		} else {
			rel = append(rel, c)
		}
	}
	const (
		left, barH, gap, top = 390, 16, 6, 96
		plotW                = 480
	)
	maxR := 2.0
	for _, c := range rel {
		if !math.IsNaN(c.Ratio) && !math.IsInf(c.Ratio, 0) {
			maxR = math.Max(maxR, c.Ratio)
		}
	}
	maxR = math.Min(math.Ceil(maxR*2)/2, 5) // beyond 5, bars are cut and labelled "> "
	x := func(v float64) float64 { return left + plotW*math.Min(v, maxR)/maxR }
	height := top + len(rel)*(barH+gap) + 40 + len(abs)*18 + 20
	// Wide enough for the longest header line (about 6.5 px a character).
	width := max(left+plotW+120, 20+len(versionLine(r))*13/2, 20+len(scaleLine(r))*13/2)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	text := func(x, y float64, anchor, s string, extra string) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="%s"%s>%s</text>`+"\n", x, y, anchor, extra, html.EscapeString(s))
	}
	text(10, 20, "start", fmt.Sprintf("tsflight benchmark, %s mode: time ratio against each peer (lower is better)", r.Mode), ` font-weight="bold" font-size="14"`)
	text(10, 38, "start", fmt.Sprintf("%s · %s", r.Machine["cpu"], r.Machine["cores"]+" cores, "+r.Machine["memory"]), "")
	text(10, 54, "start", scaleLine(r), "")
	text(10, 70, "start", versionLine(r), "")
	// Axis: ticks every 0.5, the parity line at 1.
	for v := 0.0; v <= maxR+1e-9; v += 0.5 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(v), top-8, x(v), top+len(rel)*(barH+gap))
		text(x(v), float64(top-12), "middle", fmt.Sprintf("%.1f", v), ` fill="#555"`)
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333" stroke-dasharray="4 3"/>`+"\n", x(1), top-8, x(1), top+len(rel)*(barH+gap))
	for i, c := range rel {
		y := top + i*(barH+gap)
		fill := "#9e9e9e"
		if c.Met != nil {
			fill = "#2e7d32"
			if !*c.Met {
				fill = "#c62828"
			}
		}
		text(left-8, float64(y+barH-4), "end", fmt.Sprintf("%s · %s vs %s", c.Group, c.Workload, c.Peer), "")
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y, x(c.Ratio)-left, barH, fill)
		label := fmt.Sprintf("%.2f", c.Ratio)
		if c.Ratio > maxR {
			label = "> " + label
		}
		text(x(c.Ratio)+4, float64(y+barH-4), "start", label+"  (target "+c.Target+")", ` fill="#333"`)
	}
	y := top + len(rel)*(barH+gap) + 28
	if len(abs) > 0 {
		text(10, float64(y), "start", "Absolute targets:", ` font-weight="bold"`)
		for _, c := range abs {
			y += 18
			verdict := ""
			if c.Met != nil {
				verdict = "met"
				if !*c.Met {
					verdict = "MISSED"
				}
			}
			text(20, float64(y), "start", fmt.Sprintf("%s · %s: %s %s (target %s) %s", c.Group, c.Workload, c.figure(), c.Unit, c.Target, verdict), "")
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func scaleLine(r *report) string {
	var parts []string
	for _, k := range sortedKeys(r.Scale) {
		parts = append(parts, k+" "+scaleValue(r.Scale[k]))
	}
	return strings.Join(parts, " · ")
}

// scaleValue prints a scale figure; numbers read back from JSON are
// float64, printed as integers when they are.
func scaleValue(v any) string {
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprint(v)
}

func versionLine(r *report) string {
	var parts []string
	for _, k := range sortedKeys(r.Versions) {
		parts = append(parts, k+" "+r.Versions[k])
	}
	return strings.Join(parts, " · ")
}
