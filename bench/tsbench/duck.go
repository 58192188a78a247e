//go:build duckdb_arrow

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tsflight/tsflight/flightsql"
)

// runDuck is the child "tsbench duck copy|serve ARGS_JSON" (serve:
// duckserve.go): DuckDB used
// directly, with the server's engine and settings (flightsql.Direct), in
// its own process so that its memory is its own. It prints one JSON
// object.
func runDuck(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: tsbench duck copy|serve ARGS_JSON")
	}
	if args[0] == "serve" {
		return duckServe(ctx, args[1])
	}
	var out any
	var err error
	switch args[0] {
	case "copy":
		out, err = duckCopy(ctx, args[1])
	default:
		return fmt.Errorf("unknown duck mode %q", args[0])
	}
	if err != nil {
		return err
	}
	switch r := out.(type) {
	case *duckCopyResult:
		r.PeakRSS = selfRSS()
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func duckVersion(ctx context.Context, d *flightsql.Direct) string {
	rdr, err := d.Query(ctx, "SELECT version()")
	if err != nil {
		return "?"
	}
	defer rdr.Release()
	if rdr.Next() { // copied: the string lives in DuckDB's chunk
		return strings.Clone(rdr.RecordBatch().Column(0).ValueStr(0))
	}
	return "?"
}

// duckCopy loads each file into a table (untimed) and times COPY of the
// table TO zstd Parquet: DuckDB's encoding cost of the same rows.
func duckCopy(ctx context.Context, raw string) (*duckCopyResult, error) {
	var a struct {
		Root  string   `json:"root"`
		Files []string `json:"files"`
		Out   string   `json:"out"`
		Runs  int      `json:"runs"`
	}
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return nil, err
	}
	d, err := flightsql.OpenDirect(ctx, a.Root, nil)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	res := &duckCopyResult{Version: duckVersion(ctx, d)}
	// Warm-up: the first file, untimed.
	if len(a.Files) > 0 {
		warm := filepath.Join(a.Out, "warmup.parquet")
		if err := os.MkdirAll(a.Out, 0o755); err != nil {
			return nil, err
		}
		for _, q := range []string{
			"CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet(" + flightsql.QuoteString(a.Files[0]) + ")",
			"COPY t TO " + flightsql.QuoteString(warm) + " (FORMAT parquet, COMPRESSION zstd)",
		} {
			if err := d.Exec(ctx, q); err != nil {
				return nil, err
			}
		}
		os.Remove(warm)
	}
	for run := range a.Runs {
		dir := filepath.Join(a.Out, fmt.Sprint(run))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		var total time.Duration
		var rows int64
		for i, f := range a.Files {
			if err := d.Exec(ctx, "CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet("+flightsql.QuoteString(f)+")"); err != nil {
				return nil, err
			}
			n, err := scalarInt(ctx, d, "SELECT count(*) FROM t")
			if err != nil {
				return nil, err
			}
			rows += n
			out := filepath.Join(dir, fmt.Sprintf("%04d.parquet", i))
			start := time.Now()
			err = d.Exec(ctx, "COPY t TO "+flightsql.QuoteString(out)+" (FORMAT parquet, COMPRESSION zstd)")
			total += time.Since(start)
			if err != nil {
				return nil, err
			}
		}
		if err := d.Exec(ctx, "DROP TABLE t"); err != nil {
			return nil, err
		}
		os.RemoveAll(dir)
		res.Rows = rows
		res.TimesS = append(res.TimesS, total.Seconds())
	}
	return res, nil
}

func scalarInt(ctx context.Context, d *flightsql.Direct, q string) (int64, error) {
	rdr, err := d.Query(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	if !rdr.Next() {
		return 0, fmt.Errorf("%s: no row", q)
	}
	var n int64
	_, err = fmt.Sscan(rdr.RecordBatch().Column(0).ValueStr(0), &n)
	return n, err
}
