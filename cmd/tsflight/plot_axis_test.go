package main

import (
	"encoding/json"
	"image/color"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of the heat map's index axis: an integer index, and time ticks.

// An integer index, as the action's JSON has it: numbers in start, end and
// the edges, decoded into the grid.
func TestPlotIntegerIndex(t *testing.T) {
	doc := `{"table":"ticks","version":3,"start":0,"end":1000,"intervals":1000,"identities":2,
		"entity_columns":["host","cpu"],
		"edges":[0,250,500,750,1000],"column_intervals":[250,250,250,250],
		"rows":[{"first":"a/0","last":"a/0","identities":1},{"first":"b/1","last":"b/1","identities":1}],
		"covered":[[250,250,0,250],[250,125,250,250]]}`
	var g coverageGrid
	if err := json.Unmarshal([]byte(doc), &g); err != nil {
		t.Fatal(err)
	}
	svg, p, _ := plotRenderSVG(t, &g, "")
	texts := svg.texts["texts"]
	joined := strings.Join(texts, "\n")
	for _, want := range []string{"index 0 to 1000", "host, cpu", "a/0", "b/1", "index"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q in %q", want, texts)
		}
	}
	// The x tick labels are integers, rising, ending at 1000.
	var ticks []int64
	for _, tx := range p.texts {
		if tx.y == p.layout.plotY+p.layout.plotH+plotTickLen+2+11 {
			n, err := strconv.ParseInt(tx.s, 10, 64)
			if err != nil {
				t.Fatalf("x tick %q: %v", tx.s, err)
			}
			ticks = append(ticks, n)
		}
	}
	if len(ticks) < 3 || ticks[len(ticks)-1] != 1000 {
		t.Errorf("x ticks %v", ticks)
	}
	for i := 1; i < len(ticks); i++ {
		if ticks[i] <= ticks[i-1] {
			t.Errorf("x ticks %v", ticks)
		}
	}
	img, _ := plotRenderPNG(t, &g, "")
	at := func(r, c int) color.RGBA {
		rc := p.layout.cellRect(r, c)
		return color.RGBAModel.Convert(img.At(rc.Min.X+1, rc.Min.Y+1)).(color.RGBA)
	}
	if at(0, 0) != plotRampColor(1) || at(0, 2) != plotRampColor(0) || at(1, 1) != plotRampColor(0.5) {
		t.Errorf("cells %v %v %v", at(0, 0), at(0, 2), at(1, 1))
	}
	// json.Number edges (a decoder with UseNumber) read the same.
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var gn coverageGrid
	if err := d.Decode(&gn); err != nil {
		t.Fatal(err)
	}
	if _, err := plotPrepare(&gn, "", 0, 0); err != nil {
		t.Error(err)
	}
}

func TestPlotTimeTicks(t *testing.T) {
	base := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, tc := range []struct {
		span     time.Duration
		maxTicks int
		want     []string // some labels
		title    string
	}{
		{2 * time.Hour, 10, []string{"00:00", "00:15", "02:00"}, "time (UTC) on 2024-06-01"},
		{90 * time.Second, 10, []string{"00:00:00", "00:00:10", "00:01:30"}, "time (UTC) on 2024-06-01"},
		{48 * time.Hour, 10, []string{"00:00", "06:00", "18:00"}, "time (UTC) from 2024-06-01"},
		{30 * 24 * time.Hour, 10, []string{"2024-06-03", "2024-06-10", "2024-07-01"}, "time (UTC)"}, // Mondays
		{10 * 24 * time.Hour, 10, []string{"2024-06-01", "2024-06-02", "2024-06-11"}, "time (UTC)"},
		{800 * 24 * time.Hour, 10, []string{"2024-07", "2025-01"}, "time (UTC)"},
	} {
		ax := &plotAxis{times: true, edges: []int64{base, base + int64(tc.span)}}
		ticks, title := plotTicks(ax, tc.maxTicks)
		var labels []string
		for _, tk := range ticks {
			labels = append(labels, tk.label)
		}
		if len(ticks) > tc.maxTicks+1 || len(ticks) < 2 {
			t.Errorf("%v: %d ticks %q", tc.span, len(ticks), labels)
		}
		for _, w := range tc.want {
			if !strings.Contains(" "+strings.Join(labels, " ")+" ", " "+w+" ") {
				t.Errorf("%v: no tick %q in %q", tc.span, w, labels)
			}
		}
		if title != tc.title {
			t.Errorf("%v: axis title %q, want %q", tc.span, title, tc.title)
		}
	}
	// Across midnight the new day's date is under its first tick.
	ax := &plotAxis{times: true, edges: []int64{base - int64(3*time.Hour), base + int64(3*time.Hour)}}
	ticks, _ := plotTicks(ax, 8)
	dates := 0
	for _, tk := range ticks {
		if tk.date != "" {
			dates++
			if tk.date != "2024-06-01" || tk.label != "00:00" {
				t.Errorf("date %q under %q", tk.date, tk.label)
			}
		}
	}
	if dates != 1 {
		t.Errorf("%d dates in %+v", dates, ticks)
	}
}
