package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/tsflight/tsflight/bench/tsbs"
)

// config is one benchmark run's settings.
type config struct {
	mode     string
	tsflight string // the tsflight binary
	self     string // this binary, for its child modes
	python   string
	peer     string // bench/peers/ttf_peer.py
	// bench/peers/flight_peer.py: the pyarrow client, pyarrow's C++
	// Flight server and the Python ADBC driver (pyflight.go).
	flightPeer string
	work       string // generated data and tables
	out        string // the report
	params     tsbs.Params
	runs       int // timed runs of ingest and scans
	sqlRuns    int
	covRuns    int
	latRuns    int    // SELECT 1 and the Flight round trip, each
	bigRuns    int    // each big-segment query on each system, alternated
	floor      string // the floorserver binary (flightsql/internal/floorserver): bigseg's floor; "" for none
	// pyParams are the data of the Python workloads and of the big
	// segment: one DoPut's worth.
	pyParams tsbs.Params
	// The stream workload (stream.go): puts to its table A, and puts of
	// each of its concurrent writers.
	streamPuts, writerPuts int
}

// modes are the presets: quick proves the harness in CI in a few
// minutes; full is the README's numbers (4,000 hosts, one day, 34.56 M
// rows before drops).
func modeConfig(mode string) (config, error) {
	p := tsbs.DefaultParams()
	c := config{mode: mode}
	switch mode {
	case "quick":
		p.Hosts, p.Duration = 200, 6*time.Hour
		c.runs, c.sqlRuns, c.covRuns = 3, 5, 200
		c.latRuns, c.bigRuns = 200, 20
		c.streamPuts, c.writerPuts = 300, 100
	case "full":
		p.Hosts, p.Duration = 4000, 24*time.Hour
		c.runs, c.sqlRuns, c.covRuns = 3, 5, 500
		c.latRuns, c.bigRuns = 500, 50
		c.streamPuts, c.writerPuts = 10_000, 250
	default:
		return c, fmt.Errorf("unknown --mode %q (quick or full)", mode)
	}
	// TSBS IoT-style imperfections: a few rows never arrive, and a fifth
	// of the hours deliver part of their hosts late.
	p.DropFraction, p.LateFraction = 0.001, 0.2
	c.params = p
	c.pyParams = pyParams(mode, p)
	return c, nil
}

func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tsbench", flag.ContinueOnError)
	mode := fs.String("mode", "quick", "quick (CI, a few minutes) or full (4,000 hosts × 24 h)")
	tsBin := fs.String("tsflight", "", "the tsflight binary, built with -tags duckdb_arrow (required)")
	work := fs.String("work", "", "directory for the generated data and the tables (default: a temporary one, removed)")
	out := fs.String("out", ".", "directory for report.md, report.json and ratios.svg")
	python := fs.String("python", "python3", "the Python with timeseries-table-format 0.9.0")
	peer := fs.String("peer", "bench/peers/ttf_peer.py", "the Python peer runner")
	flightPeer := fs.String("flight-peer", "bench/peers/flight_peer.py", "the pyarrow / ADBC client and C++ Flight server runner")
	hosts := fs.Int("hosts", 0, "override the mode's host count")
	hours := fs.Int("hours", 0, "override the mode's duration, in hours")
	seed := fs.Uint64("seed", 0, "override the data and query seed")
	streamPuts := fs.Int("stream-puts", 0, "override the mode's number of 100-row puts to the stream table")
	writerPuts := fs.Int("writer-puts", 0, "override the mode's number of 100-row puts of each concurrent writer in the stream workload")
	floor := fs.String("floorserver", "", "the floorserver binary (go build -o floorserver ./flightsql/internal/floorserver): bigseg measures it as the floor of Flight SQL's round trips")
	only := fs.String("only", "", "run only these steps, comma-separated (generate,ingest,scan,sql,coverage,pyingest,pyscan,latency,bigseg,stream); a partial report is written but not judged complete")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := modeConfig(*mode)
	if err != nil {
		return err
	}
	if *tsBin == "" {
		return fmt.Errorf("--tsflight is required (go build -tags duckdb_arrow -o tsflight ./cmd/tsflight)")
	}
	if *hosts > 0 {
		cfg.params.Hosts = *hosts
		cfg.pyParams.Hosts = *hosts
	}
	if *hours > 0 {
		cfg.params.Duration = time.Duration(*hours) * time.Hour
		cfg.pyParams.Duration = cfg.params.Duration
	}
	if *seed > 0 {
		cfg.params.Seed = *seed
		cfg.pyParams.Seed = *seed
	}
	if *streamPuts > 0 {
		cfg.streamPuts = *streamPuts
	}
	if *writerPuts > 0 {
		cfg.writerPuts = *writerPuts
	}
	if err := cfg.params.Validate(); err != nil {
		return err
	}
	if err := cfg.pyParams.Validate(); err != nil {
		return err
	}
	cfg.floor = *floor
	cfg.tsflight, cfg.python, cfg.peer, cfg.flightPeer, cfg.out = *tsBin, *python, *peer, *flightPeer, *out
	if cfg.self, err = os.Executable(); err != nil {
		return err
	}
	if *work == "" {
		dir, err := os.MkdirTemp("", "tsbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.work = dir
	} else {
		cfg.work = *work
		if err := os.MkdirAll(cfg.work, 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	r := &report{Mode: cfg.mode, Started: time.Now(), Machine: machine(), Versions: versions(ctx, cfg)}
	p := cfg.params
	r.Scale = map[string]any{"hosts": p.Hosts, "hours": p.Duration.Hours(), "step": p.Step.String(), "seed": p.Seed,
		"rows": p.Rows(), "drop fraction": p.DropFraction, "late fraction": p.LateFraction,
		"Python workloads' hosts": cfg.pyParams.Hosts, "Python workloads' hours": cfg.pyParams.Duration.Hours()}
	b := &bench{cfg: cfg, r: r}
	defer b.stopServer() // also when a step fails
	defer b.stopPyServer()
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"generate", b.generate},
		{"ingest", b.ingest},
		{"scan", b.scan},
		{"sql", b.sql},
		{"coverage", b.coverage},
		{"pyingest", b.pyingest},
		{"pyscan", b.pyscan},
		{"latency", b.latency},
		{"bigseg", b.bigseg},
		{"stream", b.stream},
	}
	if *only != "" {
		want := map[string]bool{}
		for _, name := range strings.Split(*only, ",") {
			want[strings.TrimSpace(name)] = true
		}
		kept := steps[:0]
		for _, s := range steps {
			if want[s.name] {
				kept = append(kept, s)
				delete(want, s.name)
			}
		}
		if len(want) > 0 || len(kept) == 0 {
			return fmt.Errorf("--only %q: unknown or no step (generate, ingest, scan, sql, coverage, pyingest, pyscan, latency, bigseg, stream)", *only)
		}
		steps = kept
	}
	for _, s := range steps {
		r.Workloads = append(r.Workloads, s.name)
		if s.name == "bigseg" && cfg.floor != "" {
			r.Workloads = append(r.Workloads, bigsegFloorStep)
		}
		if s.name == "pyscan" {
			r.Workloads = append(r.Workloads, pyColdStep)
		}
	}
	for _, s := range steps {
		start := time.Now()
		logf("== %s", s.name)
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		logf("   %s took %.1f s", s.name, time.Since(start).Seconds())
		if s.name == "bigseg" {
			b.stopPyServer() // the stream workload runs servers of its own
		}
	}
	b.stopServer()
	b.stopPyServer()
	r.Notes = append(r.Notes, fmt.Sprintf("The client process (tsbench: generating the data, then tsflight's DoPut, DoGet and ADBC client) peaked at %s RSS.", humanMiB(selfRSS())))
	r.Took = time.Since(r.Started).Seconds()
	r.targets()
	if err := r.write(cfg.out); err != nil {
		return err
	}
	if *only != "" {
		return nil // a partial run: its report lacks the other steps' rows
	}
	// Read the report back: it must hold every row a run produces.
	return checkReport(filepath.Join(cfg.out, "report.json"))
}

// write puts report.json, ratios.svg and report.md in dir.
func (r *report) write(dir string) error {
	if err := r.writeJSON(filepath.Join(dir, "report.json")); err != nil {
		return err
	}
	svg, err := os.Create(filepath.Join(dir, "ratios.svg"))
	if err != nil {
		return err
	}
	if err := r.writeChart(svg); err != nil {
		svg.Close()
		return err
	}
	if err := svg.Close(); err != nil {
		return err
	}
	md, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	if err := r.writeMarkdown(md, "ratios.svg"); err != nil {
		md.Close()
		return err
	}
	if err := md.Close(); err != nil {
		return err
	}
	logf("report: %s", filepath.Join(dir, "report.md"))
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

// machine describes where the run happened.
func machine() map[string]string {
	m := map[string]string{"cores": fmt.Sprint(runtime.NumCPU()), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				m["memory"] = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
			}
		}
	}
	if h, err := os.Hostname(); err == nil {
		m["host"] = h
	}
	return m
}

// versions of everything measured.
func versions(ctx context.Context, cfg config) map[string]string {
	v := map[string]string{"go": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/apache/arrow-go/v18":
				v["arrow-go"] = d.Version
			case "github.com/duckdb/duckdb-go-bindings":
				v["duckdb-go-bindings"] = d.Version
			case "github.com/apache/arrow-adbc/go/adbc":
				v["adbc (Go)"] = d.Version
			}
		}
	}
	if out, err := exec.CommandContext(ctx, cfg.tsflight, "version").Output(); err == nil {
		v["tsflight"] = strings.TrimSpace(string(out))
	}
	return v
}
