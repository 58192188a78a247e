package main

import (
	"encoding/json"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// tsflight coverage --plot, end to end: a table with known holes on a real
// server, the real binary drawing the PNG, and the picture read back: every
// cell where a host had data has the palette's full-coverage colour (dark
// blue), every cell of a hole its gap colour (red).
func TestCoveragePlotEndToEnd(t *testing.T) {
	srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0")
	env := []string{"TSFLIGHT_SERVER=grpc://" + srv.addr}
	if out, errOut, code := runCLI(t, env, "create", "--index-column", "ts", "--granularity", "1m", "--entity", "host", "m"); code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	// Four hosts, one row a minute for an hour. h1 misses minutes 20-29,
	// h3 minutes 40-59, and every host minute 5.
	hosts := []string{"h0", "h1", "h2", "h3"}
	hole := func(h, minute int) bool {
		return minute == 5 || (h == 1 && minute >= 20 && minute < 30) || (h == 3 && minute >= 40)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		{Name: "host", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	for m := range 60 {
		for h, name := range hosts {
			if !hole(h, m) {
				b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(m)*60_000))
				b.Field(1).(*array.StringBuilder).Append(name)
			}
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	ctx := testCtx(t)
	c := dial(t, srv.addr)
	stream, err := c.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"m"}})
	err = w.Write(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	stream.CloseSend()
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("put: %v", err)
	}

	path := filepath.Join(t.TempDir(), "m.png")
	out, errOut, code := runCLI(t, env, "coverage", "--plot", path, "--plot-columns", "60", "m")
	if code != 0 {
		t.Fatalf("coverage --plot: exit %d: %s", code, errOut)
	}
	if want := "wrote " + path + ": m, 4 entities in 4 rows × 60 intervals in 60 columns"; strings.TrimSpace(out) != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The same grid, asked for directly, gives the layout the picture used.
	raw := mustAction(t, ctx, c, "coverage-grid", map[string]any{"table": "m", "columns": 60, "rows": 4})
	js, _ := json.Marshal(raw)
	var g coverageGrid
	if err := json.Unmarshal(js, &g); err != nil {
		t.Fatal(err)
	}
	p, err := plotPrepare(&g, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != p.layout.width || b.Dy() != p.layout.height {
		t.Fatalf("image %v, layout %dx%d", b, p.layout.width, p.layout.height)
	}
	at := func(row, col int) color.RGBA {
		r := p.layout.cellRect(row, col)
		x, y := (r.Min.X+r.Max.X)/2, (r.Min.Y+r.Max.Y)/2
		return color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
	}
	// The colours the renderer gives full coverage and a gap, which must
	// be the documented ends of the scale (docs/cli.md): dark blue and red.
	full, gap := plotLevelColor(plotLevel(1, 1, false, true)), plotLevelColor(plotLevel(0, 1, true, false))
	if !(full.B > 2*full.R && full.B > 2*full.G) || !(gap.R > 2*gap.G && gap.R > 2*gap.B) {
		t.Fatalf("full coverage is drawn %v and a gap %v: want dark blue and red", full, gap)
	}
	for h := range hosts {
		for m := range 60 {
			want := full
			if hole(h, m) {
				want = gap
			}
			if got := at(h, m); got != want {
				t.Errorf("host %s minute %d: colour %v, want %v (hole %v)", hosts[h], m, got, want, hole(h, m))
			}
		}
	}
}
