//go:build duckdb_arrow

// Command layoutquery is the DuckDB side of tableformat's
// BenchmarkTSBSLayouts: it runs the issue-21 queries (the seven TSBS
// queries and the one-big-segment queries) with DuckDB directly
// (flightsql.Direct: the server's engine and settings) on the segment of
// each layout table the benchmark kept, alternating the layouts run by
// run (forward, then backward), and prints the median wall time and
// process CPU per query and layout, and the geometric mean over the TSBS
// queries; with -tsflight, also through a tsflight server over ADBC. It
// lives in bench/ because tableformat may not import DuckDB.
//
//	TSFLIGHT_LAYOUT_DIR=/tmp/layouts go test -run '^$' -bench TSBSLayouts -benchtime 1x ./tableformat/
//	go run -tags duckdb_arrow ./bench/layoutquery -dir /tmp/layouts -runs 15
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/bench/tsbs"
	"github.com/tsflight/tsflight/flightsql"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

func main() {
	dir := flag.String("dir", "", "the directory of the layout tables (TSFLIGHT_LAYOUT_DIR)")
	runs := flag.Int("runs", 11, "timed runs of each query on each layout")
	only := flag.String("layouts", "", "comma-separated layouts (default: every table in -dir)")
	sqlOut := flag.String("queries", "", "write the queries here, one \"name<TAB>sql\" a line")
	skip := flag.String("skip", "", "comma-separated queries not to run (e.g. lastpoint)")
	flag.StringVar(&server, "tsflight", "", "HOST:PORT of a tsflight serving -dir (tsflight serve --root DIR --maintenance-interval 0): also run each query through it over ADBC (Flight SQL), on the table named as the layout")
	flag.IntVar(&serverPid, "tsflight-pid", 0, "the tsflight server's process id, to report its CPU per query")
	flag.Parse()
	if err := run(*dir, *runs, *only, *sqlOut, *skip); err != nil {
		fmt.Fprintln(os.Stderr, "layoutquery:", err)
		os.Exit(1)
	}
}

// queries are the measured queries: the seven TSBS queries of the bench
// over the benchmark's data (400 hosts, 6 hours from 2024-01-01, the
// names and columns of bench/tsbs), and the one-big-segment
// queries: one host over one hour, and a count over ten minutes.
func queries() []tsbs.Query {
	p := tsbs.Params{Hosts: 400, Start: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), Duration: 6 * time.Hour, Seed: 123}
	qs := p.Queries("cpu")
	from := p.Start.Add(150 * time.Minute)
	lit := func(t time.Time) string { return "'" + t.Format(time.RFC3339) + "'" }
	qs = append(qs,
		tsbs.Query{Name: "one-host-hour", SQL: "SELECT * FROM cpu WHERE hostname = 'host_217' AND time >= " + lit(from) + " AND time < " + lit(from.Add(time.Hour))},
		tsbs.Query{Name: "count-10min", SQL: "SELECT count(*) FROM cpu WHERE time >= " + lit(from) + " AND time < " + lit(from.Add(10*time.Minute))},
	)
	return qs
}

var (
	server    string
	serverPid int
)

// A layout is one table and how it is queried: DuckDB directly on its
// segment (d) or tsflight over ADBC (cnxn).
type layout struct {
	name string
	file string
	d    *flightsql.Direct
	cnxn adbc.Connection
}

// query runs sql (over a table named cpu) and counts its rows; the
// second duration is the CPU it cost: this process's, plus the server's
// for tsflight.
func (l *layout) query(ctx context.Context, sql string) (int64, time.Duration, error) {
	c0 := processCPU() + serverCPU()
	if l.cnxn == nil {
		n, err := count(ctx, l.d, sql)
		return n, processCPU() + serverCPU() - c0, err
	}
	sql = strings.ReplaceAll(sql, "FROM cpu", "FROM "+strconv.Quote(strings.TrimSuffix(l.name, " (tsflight)")))
	stmt, err := l.cnxn.NewStatement()
	if err != nil {
		return 0, 0, err
	}
	defer stmt.Close()
	if err := stmt.SetSqlQuery(sql); err != nil {
		return 0, 0, err
	}
	rdr, _, err := stmt.ExecuteQuery(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	return n, processCPU() + serverCPU() - c0, rdr.Err()
}

// serverCPU is the tsflight server's user and system CPU time (0 without
// -tsflight-pid).
func serverCPU() time.Duration {
	if serverPid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", serverPid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 of stat
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func run(dir string, runs int, only, sqlOut, skip string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	ctx := context.Background()
	names := strings.Split(only, ",")
	if only == "" {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		names = names[:0]
		for _, e := range ents {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	qs := slices.DeleteFunc(queries(), func(q tsbs.Query) bool { return slices.Contains(strings.Split(skip, ","), q.Name) })
	tsbsQueries := 0
	for _, q := range qs {
		if slices.Contains(tsbs.QueryNames(), q.Name) {
			tsbsQueries++
		}
	}
	if sqlOut != "" {
		var b strings.Builder
		for _, q := range qs {
			fmt.Fprintf(&b, "%s\t%s\n", q.Name, q.SQL)
		}
		if err := os.WriteFile(sqlOut, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	var ls []*layout
	for _, n := range names {
		root := filepath.Join(dir, n)
		tb, err := tableformat.Open(ctx, storage.Local(root), nil)
		if err != nil {
			return err
		}
		segs := tb.State().Segments
		if len(segs) != 1 {
			return fmt.Errorf("%s: %d live segments, want 1", n, len(segs))
		}
		d, err := flightsql.OpenDirect(ctx, root, nil)
		if err != nil {
			return err
		}
		defer d.Close()
		l := &layout{name: n, file: filepath.Join(root, filepath.FromSlash(segs[0].Path)), d: d}
		if err := d.Exec(ctx, "CREATE VIEW cpu AS SELECT * FROM read_parquet("+flightsql.QuoteString(l.file)+")"); err != nil {
			return err
		}
		ls = append(ls, l)
	}
	if server != "" {
		db, err := adbcflightsql.NewDriver(memory.DefaultAllocator).NewDatabase(map[string]string{adbc.OptionKeyURI: "grpc+tcp://" + server})
		if err != nil {
			return err
		}
		defer db.Close()
		for _, l := range slices.Clone(ls) {
			cnxn, err := db.Open(ctx)
			if err != nil {
				return err
			}
			defer cnxn.Close()
			ls = append(ls, &layout{name: l.name + " (tsflight)", file: l.file, cnxn: cnxn})
		}
	}
	var version string
	if len(ls) > 0 {
		version = scalar(ctx, ls[0].d, "SELECT version()")
	}
	type cell struct {
		wall, cpu []time.Duration
		rows      int64
	}
	res := map[string]map[string]*cell{}
	for _, q := range qs {
		res[q.Name] = map[string]*cell{}
		for _, l := range ls {
			rows, _, err := l.query(ctx, q.SQL) // warm-up, and the answer's size
			if err != nil {
				return fmt.Errorf("%s on %s: %w", q.Name, l.name, err)
			}
			res[q.Name][l.name] = &cell{rows: rows}
		}
	}
	for r := range runs {
		order := slices.Clone(ls)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, q := range qs {
			for _, l := range order {
				t0 := time.Now()
				rows, cpu, err := l.query(ctx, q.SQL)
				wall := time.Since(t0)
				c := res[q.Name][l.name]
				if err != nil || rows != c.rows {
					return fmt.Errorf("%s on %s: %d rows (first %d): %v", q.Name, l.name, rows, c.rows, err)
				}
				c.wall, c.cpu = append(c.wall, wall), append(c.cpu, cpu)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("DuckDB %s directly on one segment per layout (and through tsflight over ADBC); median of %d runs, wall ms (CPU ms: this process, plus the server's); load %s", version, runs, load)
	fmt.Printf("%-22s", "query")
	for _, l := range ls {
		fmt.Printf(" %18s", strings.Replace(l.name, " (tsflight)", "/ts", 1))
	}
	fmt.Println()
	geo := make([]float64, len(ls))
	for qi, q := range qs {
		fmt.Printf("%-22s", q.Name)
		for i, l := range ls {
			c := res[q.Name][l.name]
			w := median(c.wall)
			if qi < tsbsQueries {
				geo[i] += math.Log(ms(w))
			}
			fmt.Printf(" %9.2f (%6.2f)", ms(w), ms(median(c.cpu)))
		}
		fmt.Println()
	}
	fmt.Printf("%-22s", fmt.Sprintf("geomean (%d TSBS)", tsbsQueries))
	for i := range ls {
		fmt.Printf(" %18.2f", math.Exp(geo[i]/float64(tsbsQueries)))
	}
	fmt.Println()
	return nil
}

func count(ctx context.Context, d *flightsql.Direct, sql string) (int64, error) {
	rdr, err := d.Query(ctx, sql)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	return n, rdr.Err()
}

func scalar(ctx context.Context, d *flightsql.Direct, sql string) string {
	rdr, err := d.Query(ctx, sql)
	if err != nil {
		return "?"
	}
	defer rdr.Release()
	if rdr.Next() {
		return strings.Clone(rdr.RecordBatch().Column(0).ValueStr(0))
	}
	return "?"
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
