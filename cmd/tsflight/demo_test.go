package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/tableformat"
)

// startServerStdout is startServer waiting up to wait (the demo takes a
// while under -race), and then for the whole connect help on stdout.
func startServerStdout(t *testing.T, wait time.Duration, args ...string) (*serverProc, *syncBuffer) {
	t.Helper()
	p := startServerWait(t, wait, nil, args...)
	stdout := p.stdout
	// The connect help follows the "listening" line on stdout; wait until
	// it is complete (its SQL line, then a blank line).
	deadline := time.Now().Add(wait)
	for out := stdout.String(); !strings.Contains(out, "\n  SQL ") || !strings.HasSuffix(out, "\n\n"); out = stdout.String() {
		if time.Now().After(deadline) {
			t.Fatalf("no complete connect help on stdout within %s:\n%s", wait, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p, stdout
}

// The demo table as the tests read demo.go's description of it: 200
// hosts, one row every 10 s (8640 steps) on 2016-01-01, except
//
//	13:00–13:20  every host (ingest outage)
//	04:00–06:30  host_7
//	00:00–09:00  host_42
//	18:00–19:00  host_100 … host_109
//	10:00–10:10  host_150, the steps n with (n + 150) % 3 == 0
//	20:00–24:00  host_199
const (
	demoTestHosts = 200
	demoTestSteps = 8640
)

func demoTestMissing(host, step int) bool {
	minute := step / 6
	switch {
	case minute >= 13*60 && minute < 13*60+20:
		return true
	case host == 7:
		return minute >= 4*60 && minute < 6*60+30
	case host == 42:
		return minute < 9*60
	case host >= 100 && host < 110:
		return minute >= 18*60 && minute < 19*60
	case host == 150:
		return minute >= 10*60 && minute < 10*60+10 && (step+host)%3 == 0
	case host == 199:
		return minute >= 20*60
	}
	return false
}

// demoTestTime is the RFC 3339 time of step.
func demoTestTime(step int) string {
	return time.Date(2016, 1, 1, 0, 0, 10*step, 0, time.UTC).Format(time.RFC3339)
}

// demoTestGaps is the csv of the gaps of the steps for which covered
// reports false.
func demoTestGaps(from, to int, covered func(step int) bool) string {
	lines := []string{"start,end,intervals"}
	for s := from; s < to; {
		if covered(s) {
			s++
			continue
		}
		e := s
		for e < to && !covered(e) {
			e++
		}
		lines = append(lines, fmt.Sprintf("%s,%s,%d", demoTestTime(s), demoTestTime(e), e-s))
		s = e
	}
	return cliText(lines...)
}

// TestServeDemo: serve --demo fills an empty root with the cpu table, tells
// how to connect, and leaves the root alone when restarted.
func TestServeDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo table takes a minute to write under -race")
	}
	root := t.TempDir()
	// Stopped while it writes the demo table (Ctrl-C, or killed), --demo
	// leaves no partial table behind: the next --demo writes it whole.
	demoInterrupted(t, root, os.Interrupt)
	demoInterrupted(t, root, os.Kill)
	began := time.Now()
	p, stdout := startServerStdout(t, 8*time.Minute, "--root", root, "--listen", "127.0.0.1:0", "--demo")
	t.Logf("serve --demo was listening after %s (race detector %v)", time.Since(began).Round(time.Millisecond), raceEnabled)
	p.waitLog("--demo: removing an unfinished demo table: dir="+root+"/.demo-", time.Second)
	uri := "grpc://" + p.addr

	// The rows: every host at every step but the holes.
	var rows int64
	for h := range demoTestHosts {
		for s := range demoTestSteps {
			if !demoTestMissing(h, s) {
				rows++
			}
		}
	}
	// 200 × 8640 minus 200×120 + 900 + 3240 + 10×360 + 20 + 1440 missing.
	if rows != 1_694_800 {
		t.Fatalf("the test's reading of the demo holes gives %d rows, want 1694800", rows)
	}
	p.waitLog(fmt.Sprintf("--demo: demo table written: table=cpu rows=%d", rows), time.Second)

	// How to connect, on stdout (the log is on stderr).
	out := stdout.String()
	want := []string{
		"",
		"tsflight is serving the tables under " + root + " at " + uri,
		`demo table "cpu": 200 hosts, one row per host every 10 s on 2016-01-01, with holes (try the gaps command)`,
		"",
		"  CLI      tsflight tables --server " + uri,
		"           tsflight gaps --start 2016-01-01T00:00:00Z --end 2016-01-02T00:00:00Z cpu",
		"           tsflight coverage --plot coverage.svg cpu",
		"  pyarrow  import pyarrow.flight as fl",
		`           c = fl.connect("` + uri + `")`,
		`           info = c.get_flight_info(fl.FlightDescriptor.for_path("cpu"))`,
		// Every endpoint: a whole-table FlightInfo has one per core.
		"           print(sum(c.do_get(e.ticket).read_all().num_rows for e in info.endpoints))",
	}
	lines := cliLines(t, out)
	if len(lines) < len(want)+2 || strings.Join(lines[:len(want)], "\n") != strings.Join(want, "\n") || lines[len(lines)-1] != "" {
		t.Errorf("serve --demo stdout:\n%s\nwant it to start with:\n%s", out, cliText(want...))
	}
	rest := strings.Join(lines[len(want):], "\n")
	sqlLine := ""
	if sqlEnabled {
		wantRest := []string{
			`  ADBC     adbc_driver_flightsql.dbapi.connect("` + uri + `")`,
			"  JDBC     jdbc:arrow-flight-sql://" + p.addr + "?useEncryption=false",
			"",
		}
		sqlLine = lines[len(want)]
		if !strings.HasPrefix(sqlLine, `  SQL      tsflight sql "SELECT `) || !strings.HasSuffix(sqlLine, `"`) ||
			strings.Join(lines[len(want)+1:], "\n") != strings.Join(wantRest, "\n") {
			t.Errorf("serve --demo stdout, after the pyarrow lines:\n%s\nwant an SQL example, then:\n%s", rest, cliText(wantRest...))
		}
	} else if want := "  SQL      off: this binary was built without -tags duckdb_arrow (ADBC and JDBC need it)\n"; rest != want {
		t.Errorf("serve --demo stdout, after the pyarrow lines:\n%q\nwant %q", rest, want)
	}
	if strings.Contains(out, "[INFO]") || strings.Contains(p.stderr.String(), "tsflight is serving") {
		t.Errorf("log and connect help mixed up:\nstdout:\n%s", out)
	}
	// The pyarrow snippet, run as printed, counts every row.
	printed := want
	if len(lines) >= len(want) {
		printed = lines[:len(want)]
	}
	var snippet []string
	for _, l := range printed[7:] {
		if len(l) > len("  pyarrow  ") {
			snippet = append(snippet, l[len("  pyarrow  "):])
		}
	}
	demoRunPython(t, strings.Join(snippet, "\n")+"\n", fmt.Sprint(rows))

	env := []string{"TSFLIGHT_SERVER=" + uri}
	ok := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := runCLI(t, env, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("tsflight %q: exit %d, stderr %q", args, code, stderr)
		}
		return stdout
	}
	// The commands the help shows work as shown.
	if out := ok("tables", "--server", uri); !strings.HasPrefix(out, "table  ") || !strings.Contains(out, fmt.Sprintf("\ncpu    %d  ", rows)) {
		t.Errorf("tsflight tables:\n%s", out)
	}
	if out := ok("gaps", "--start", "2016-01-01T00:00:00Z", "--end", "2016-01-02T00:00:00Z", "cpu"); !strings.HasPrefix(out, "table cpu (version 25), range [2016-01-01T00:00:00Z, 2016-01-02T00:00:00Z): 5180 intervals missing in 24 gap(s)\n") {
		t.Errorf("tsflight gaps:\n%s", out)
	}
	if sqlEnabled {
		query := strings.TrimSuffix(strings.TrimPrefix(sqlLine, `  SQL      tsflight sql "`), `"`)
		if out := ok("sql", query); !strings.HasSuffix(out, "\n(5 rows)\n") {
			t.Errorf("tsflight sql %q:\n%s", query, out)
		}
	}

	// The table.
	var tables struct {
		Table   string `json:"table"`
		Rows    int64  `json:"rows"`
		Columns int    `json:"columns"`
	}
	if err := json.Unmarshal([]byte(ok("tables", "--format", "json")), &tables); err != nil || tables.Table != "cpu" || tables.Rows != rows || tables.Columns != 21 {
		t.Errorf("tables --format json: %+v, %v; want cpu, %d rows, 21 columns", tables, err, rows)
	}
	var d struct {
		Version  int64 `json:"version"`
		Segments int64 `json:"segments"`
		Rows     int64 `json:"rows"`
		Index    struct {
			Column        string   `json:"column"`
			Granularity   string   `json:"granularity"`
			EntityColumns []string `json:"entity_columns"`
		} `json:"index"`
	}
	if err := json.Unmarshal([]byte(ok("describe", "--format", "json", "cpu")), &d); err != nil || d.Version != 25 || d.Segments != 24 || d.Rows != rows ||
		d.Index.Column != "time" || d.Index.Granularity != "10s" || len(d.Index.EntityColumns) != 1 || d.Index.EntityColumns[0] != "hostname" {
		t.Errorf("describe cpu: %+v, %v; want version 25 (create + 24 hourly appends), 24 segments, %d rows, index time 10s by hostname", d, err, rows)
	}
	wantCoverage := cliText("table,version,start,end,intervals,identities,expected,covered,ratio",
		fmt.Sprintf("cpu,25,2016-01-01T00:00:00Z,2016-01-02T00:00:00Z,8640,200,1728000,%d,%s", rows, strconv.FormatFloat(float64(rows)/1_728_000, 'g', -1, 64)))
	if out := ok("coverage", "--start", "2016-01-01T00:00:00Z", "--end", "2016-01-02T00:00:00Z", "--format", "csv", "cpu"); out != wantCoverage {
		t.Errorf("coverage of the day:\n%s\nwant:\n%s", out, wantCoverage)
	}

	// host_7 rebooted: nothing in [04:00, 06:30), every row in [07:00,
	// 08:00); its gaps are the reboot and the outage.
	host7 := []string{"--entity", "hostname=host_7", "--columns", "time", "--format", "csv"}
	if out := ok(append(append([]string{"scan", "--start", "2016-01-01T04:00:00Z", "--end", "2016-01-01T06:30:00Z"}, host7...), "cpu")...); out != "time\n" {
		t.Errorf("host_7 in [04:00, 06:30):\n%s", out)
	}
	lines = cliLines(t, ok(append(append([]string{"scan", "--start", "2016-01-01T07:00:00Z", "--end", "2016-01-01T08:00:00Z"}, host7...), "cpu")...))
	if len(lines) != 1+360 || lines[1] != "2016-01-01T07:00:00Z" || lines[360] != "2016-01-01T07:59:50Z" {
		t.Errorf("host_7 in [07:00, 08:00): %d rows from %q to %q; want 360 from 07:00:00 to 07:59:50", len(lines)-1, lines[1], lines[len(lines)-1])
	}
	if out := ok("gaps", "--entity", "hostname=host_7", "--start", "2016-01-01T00:00:00Z", "--end", "2016-01-02T00:00:00Z", "--format", "csv", "cpu"); out != cliText(
		"start,end,intervals",
		"2016-01-01T04:00:00Z,2016-01-01T06:30:00Z,900",
		"2016-01-01T13:00:00Z,2016-01-01T13:20:00Z,120",
	) {
		t.Errorf("gaps of host_7:\n%s", out)
	}
	// host_42 joined late: its first row is at 09:00.
	if out := ok("scan", "--entity", "hostname=host_42", "--columns", "time,hostname", "--end", "2016-01-01T09:00:10Z", "--format", "csv", "cpu"); out != cliText("time,hostname", "2016-01-01T09:00:00Z,host_42") {
		t.Errorf("host_42 before 09:00:10:\n%s", out)
	}
	// host_150's flaky agent lost one sample in three for ten minutes.
	if out := ok("gaps", "--entity", "hostname=host_150", "--start", "2016-01-01T10:00:00Z", "--end", "2016-01-01T10:10:00Z", "--format", "csv", "cpu"); out != demoTestGaps(3600, 3660, func(s int) bool { return !demoTestMissing(150, s) }) {
		t.Errorf("gaps of host_150 in [10:00, 10:10):\n%s", out)
	}
	// The whole table: an interval is covered when every host has it.
	wantGaps := demoTestGaps(0, demoTestSteps, func(s int) bool {
		for h := range demoTestHosts {
			if demoTestMissing(h, s) {
				return false
			}
		}
		return true
	})
	for _, g := range []string{"\n2016-01-01T00:00:00Z,2016-01-01T09:00:00Z,3240\n", "\n2016-01-01T13:00:00Z,2016-01-01T13:20:00Z,120\n",
		"\n2016-01-01T18:00:00Z,2016-01-01T19:00:00Z,360\n", "\n2016-01-01T20:00:00Z,2016-01-02T00:00:00Z,1440\n"} {
		if !strings.Contains(wantGaps, g) {
			t.Errorf("the test's whole-table gaps lack %q:\n%s", g, wantGaps)
		}
	}
	if out := ok("gaps", "--start", "2016-01-01T00:00:00Z", "--end", "2016-01-02T00:00:00Z", "--format", "csv", "cpu"); out != wantGaps {
		t.Errorf("gaps of the day:\n%s\nwant:\n%s", out, wantGaps)
	}

	// Nothing of the interrupted attempts is left.
	if entries, err := os.ReadDir(root); err != nil || len(entries) != 1 || entries[0].Name() != "cpu" {
		t.Errorf("the root holds %v (%v), want the table cpu only", entries, err)
	}

	// Restarted with --demo on the same root: nothing is added.
	p.stop()
	p2, stdout2 := startServerStdout(t, time.Minute, "--root", root, "--listen", "127.0.0.1:0", "--demo")
	p2.waitLog("--demo: the root already holds tables; not adding demo data: tables=1", time.Second)
	if log := p2.stderr.String(); strings.Contains(log, "writing the demo table") {
		t.Errorf("the restarted server wrote the demo table again:\n%s", log)
	}
	if out := stdout2.String(); !strings.Contains(out, "\n"+`demo table "cpu": 200 hosts`) || !strings.Contains(out, "at grpc://"+p2.addr+"\n") {
		t.Errorf("restarted serve --demo stdout:\n%s", out)
	}
	env = []string{"TSFLIGHT_SERVER=grpc://" + p2.addr}
	if err := json.Unmarshal([]byte(ok("describe", "--format", "json", "cpu")), &d); err != nil || d.Version != 25 || d.Segments != 24 || d.Rows != rows {
		t.Errorf("describe cpu after the restart: %+v, %v; want version 25, 24 segments, %d rows", d, err, rows)
	}
	p2.stop()
}

// demoInterrupted starts serve --demo on root, stops it with sig once the
// demo table has two of its 24 hours, and checks that no table cpu is
// left (a Ctrl-C also leaves no temporary directory).
func demoInterrupted(t *testing.T, root string, sig os.Signal) {
	t.Helper()
	cmd := exec.Command(binPath, "serve", "--root", root, "--listen", "127.0.0.1:0", "--demo")
	cmd.Env = cleanEnv()
	stderr, done := startCollecting(t, cmd)
	// The table's log, wherever it is written: create and two appends.
	logs := []string{filepath.Join(root, "cpu", tableformat.LogDir), filepath.Join(root, ".*", "cpu", tableformat.LogDir)}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		n := 0
		for _, pattern := range logs {
			dirs, _ := filepath.Glob(pattern)
			for _, d := range dirs {
				entries, _ := os.ReadDir(d)
				n = max(n, len(entries))
			}
		}
		if n >= 3 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve --demo exited (%v) before the demo table had two hours; log:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the demo table did not get two hours in 4 minutes; log:\n%s", stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Logf("serve --demo stopped by %v while writing: %v", sig, err)
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("serve --demo still running a minute after %v; log:\n%s", sig, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(root, "cpu")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after %v while writing the demo table, %s/cpu exists (%v); log:\n%s", sig, root, err, stderr.String())
	}
	if sig == os.Kill { // killed: the table's temporary directory stays, for the next --demo to remove
		if dirs, _ := filepath.Glob(filepath.Join(root, ".demo-*")); len(dirs) != 1 {
			t.Errorf("after SIGKILL while writing the demo table: temporary directories %q, want one", dirs)
		}
	}
	if sig == os.Interrupt {
		if !strings.Contains(stderr.String(), "interrupted while writing the demo table") {
			t.Errorf("log after Ctrl-C:\n%s", stderr.String())
		}
		if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
			t.Errorf("after Ctrl-C while writing the demo table, the root holds %v (%v)", entries, err)
		}
	}
}

// demoRunPython runs script with python3 and checks that it prints want.
// Without python3 and pyarrow the check is skipped, except in CI
// (CI=true), which has them.
func demoRunPython(t *testing.T, script, want string) {
	t.Helper()
	if err := exec.Command("python3", "-c", "import pyarrow.flight").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Errorf("python3 with pyarrow.flight is needed in CI: %v", err)
		} else {
			t.Logf("not running the pyarrow snippet: no python3 with pyarrow.flight (%v)", err)
		}
		return
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("python3", "-")
	cmd.Stdin = strings.NewReader(script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || strings.TrimSpace(stdout.String()) != want {
		t.Errorf("the pyarrow snippet:\n%s\nprinted %q (%v; stderr %s), want %s", script, stdout.String(), err, stderr.String(), want)
	}
}

// TestServeDemoLeavesOtherTables: --demo on a root that holds tables adds
// nothing and does not talk about the demo table.
func TestServeDemoLeavesOtherTables(t *testing.T) {
	root := t.TempDir()
	p := startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0")
	if _, stderr, code := runCLI(t, nil, "create", "--server", "grpc://"+p.addr, "--index-column", "ts", "--granularity", "1m", "mine"); code != 0 {
		t.Fatalf("create: exit %d, %s", code, stderr)
	}
	p.stop()
	p2, stdout := startServerStdout(t, time.Minute, "--root", root, "--listen", "127.0.0.1:0", "--demo")
	p2.waitLog("--demo: the root already holds tables; not adding demo data: tables=1", time.Second)
	if out := stdout.String(); strings.Contains(out, "demo table") || !strings.Contains(out, "tsflight is serving the tables under "+root+" at grpc://"+p2.addr+"\n") {
		t.Errorf("serve --demo stdout:\n%s", out)
	}
	out, stderr, code := runCLI(t, nil, "tables", "--server", "grpc://"+p2.addr, "--format", "csv")
	if code != 0 || out != cliText("table,rows,bytes,columns", "mine,0,0,0") {
		t.Errorf("tables: exit %d, %q, %q", code, out, stderr)
	}
	p2.stop()
}
