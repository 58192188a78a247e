package tableformat

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// BenchmarkOpenBesideReference opens one table of 10,000 commits (one
// segment each, as small appends leave it before compaction) with
// tsflight, from the checkpoint its commits wrote, and with the 0.9.0
// package (TimeSeriesTable.open, timed inside Python so that the
// interpreter's start is not counted; reported as ref-ns/op), in the same
// run. The package replays every commit; tsflight reads the checkpoint
// and the commits after it.
//
//	go test -run '^$' -bench OpenBesideReference -benchtime 20x ./tableformat/
func BenchmarkOpenBesideReference(b *testing.B) {
	const n = 10000
	dir := ckClonedLog(b, n)
	ctx := context.Background()
	l := &logStore{fs: storage.Local(dir), opts: DefaultOptions()}
	st, err := l.replayTo(ctx, nil, n)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.writeCheckpoint(st, nil); err != nil {
		b.Fatal(err)
	}
	py := os.Getenv("TSFLIGHT_PYTHON")
	if py == "" {
		py = "python3"
	}
	const script = `
import sys, time, timeseries_table_format as ttf
root, runs = sys.argv[1], int(sys.argv[2])
ttf.TimeSeriesTable.open(root)  # warm-up
best = []
for _ in range(runs):
    t = time.perf_counter_ns()
    tb = ttf.TimeSeriesTable.open(root)
    best.append(time.perf_counter_ns() - t)
    assert tb.version() == ` + "10000" + `
best.sort()
print(best[len(best) // 2])
`
	b.Run("tsflight", func(b *testing.B) {
		for b.Loop() {
			tb, err := Open(ctx, storage.Local(dir), &Options{ReadOnly: true})
			if err != nil || tb.State().Version != n {
				b.Fatalf("open: %v", err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		out, err := exec.Command(py, "-c", script, dir, strconv.Itoa(max(b.N, 3))).CombinedOutput()
		if err != nil {
			b.Skipf("the 0.9.0 package could not open the table (is it installed?): %v: %s", err, out)
		}
		ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatalf("reference output %q", out)
		}
		b.ReportMetric(ns, "ref-ns/op")
	})
}
