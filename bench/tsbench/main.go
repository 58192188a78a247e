// Command tsbench is tsflight's benchmark harness: it generates TSBS
// cpu-only data (package bench/tsbs), runs ingest, scan, SQL and coverage
// workloads on tsflight and on its peers — the timeseries-table-format
// 0.9.0 Python package, DuckDB reading the same Parquet files — each in
// its own process where a network is involved, then the same seen from
// Python (a pyarrow client beside the package and pyarrow's C++ Flight
// server, the per-query latency over the Python ADBC driver, pyflight.go)
// and a table of one big segment against DuckDB (bigseg.go), then the
// stream workload (a table
// fed by many small DoPuts against the same rows in one; stream.go), and
// writes a report of medians and ratios (report.md, report.json,
// ratios.svg). See bench/README.md.
//
//	tsbench [--mode quick|full] --tsflight BIN --work DIR --out DIR
//	tsbench duck copy|sql|serve ARGS.json  (child: DuckDB directly)
//	tsbench check report.json        (every row a run must produce is there)
//	tsbench render report.json DIR   (report.md and ratios.svg again from the JSON)
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	ctx := context.Background()
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "duck":
		err = runDuck(ctx, os.Args[2:])
	case len(os.Args) == 4 && os.Args[1] == "render":
		err = renderReport(os.Args[2], os.Args[3])
	case len(os.Args) == 3 && os.Args[1] == "check":
		if err = checkReport(os.Args[2]); err == nil {
			fmt.Println("report complete:", os.Args[2])
		}
	default:
		err = runBench(ctx, os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tsbench:", err)
		os.Exit(1)
	}
}
