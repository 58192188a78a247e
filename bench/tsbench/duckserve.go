//go:build duckdb_arrow

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/tsflight/tsflight/flightsql"
	"github.com/tsflight/tsflight/internal/testkit"
)

// duckServe is the child "tsbench duck serve ARGS_JSON": DuckDB directly
// (the server's engine and settings, flightsql.Direct) on a view cpu over
// the given Parquet files, answering one query at a time so that its runs
// can alternate with tsflight's. It prints {"version"} first, then for
// each line {"sql", "keep"} of its input one duckAnswer line (the time is
// the query and the reading of every batch), and exits at the input's end.
func duckServe(ctx context.Context, raw string) error {
	var a struct {
		Root  string   `json:"root"`
		Files []string `json:"files"`
	}
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return err
	}
	d, err := flightsql.OpenDirect(ctx, a.Root, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	quoted := make([]string, len(a.Files))
	for i, f := range a.Files {
		quoted[i] = flightsql.QuoteString(f)
	}
	if err := d.Exec(ctx, "CREATE VIEW cpu AS SELECT * FROM read_parquet(["+strings.Join(quoted, ", ")+"])"); err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	if err := enc.Encode(map[string]string{"version": duckVersion(ctx, d)}); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	for in.Scan() {
		var q duckRequest
		var ans duckAnswer
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			ans.Error = "bad request: " + err.Error()
		} else {
			start := time.Now()
			res, n, err := func() (testkit.Rows, int64, error) {
				rdr, err := d.Query(ctx, q.SQL)
				if err != nil {
					return nil, 0, err
				}
				defer rdr.Release()
				return testkit.ReadRows(rdr, q.Keep)
			}()
			ans.Secs = time.Since(start).Seconds()
			if err != nil {
				ans.Error = err.Error()
			}
			ans.Rows, ans.Result = n, [][]any(res)
		}
		ans.PeakRSS = selfRSS()
		if err := enc.Encode(ans); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}
