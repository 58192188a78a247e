package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Tests of the coverage and gaps commands on the fixture of
// cli_fixture_test.go, over its 90 intervals [00:00:00, 00:15:00).

var (
	cliStart = cliTime(0)
	cliEnd   = cliTime(90)
)

func TestCoverage(t *testing.T) {
	f := newCLIFixture(t)
	rangeArgs := []string{"--start", cliStart, "--end", cliEnd}
	cov := func(args ...string) string {
		t.Helper()
		return f.ok(t, append(append(append([]string{"coverage"}, rangeArgs...), args...), cliTable)...)
	}

	// The whole table: 160 of 2 × 90 entity-intervals.
	want := cliText(
		"table     m (version 3)",
		"range     [2024-06-01T00:00:00Z, 2024-06-01T00:15:00Z)",
		"entities  all entities",
		"coverage  88.89 %  (160 of 180 entity-intervals: 2 entities × 90 intervals)",
	)
	if out := cov(); out != want {
		t.Errorf("coverage:\n%s\nwant:\n%s", out, want)
	}
	header := "table,version,start,end,intervals,identities,expected,covered,ratio"
	if out := cov("--format", "csv"); out != cliText(header, "m,3,2024-06-01T00:00:00Z,2024-06-01T00:15:00Z,90,2,180,160,0.8888888888888888") {
		t.Errorf("coverage --format csv:\n%s", out)
	}
	// --entity: one host.
	want = cliText(
		"table     m (version 3)",
		"range     [2024-06-01T00:00:00Z, 2024-06-01T00:15:00Z)",
		"entities  host=a",
		"coverage  94.44 %  (85 of 90 entity-intervals: 1 entity × 90 intervals)",
	)
	if out := cov("--entity", "host=a"); out != want {
		t.Errorf("coverage --entity host=a:\n%s\nwant:\n%s", out, want)
	}
	if out := cov("--entity", "host=b", "--format", "csv"); out != cliText(header, "m,3,2024-06-01T00:00:00Z,2024-06-01T00:15:00Z,90,1,90,75,0.8333333333333334") {
		t.Errorf("coverage --entity host=b --format csv:\n%s", out)
	}
	if out := cov("--entity", "host=nobody", "--format", "csv"); out != cliText(header, "m,3,2024-06-01T00:00:00Z,2024-06-01T00:15:00Z,90,1,90,0,0") {
		t.Errorf("coverage --entity host=nobody --format csv:\n%s", out)
	}
	// --version: the first append only.
	if out := cov("--version", "2", "--format", "csv"); out != cliText(header, "m,2,2024-06-01T00:00:00Z,2024-06-01T00:15:00Z,90,2,180,102,0.5666666666666667") {
		t.Errorf("coverage --version 2 --format csv:\n%s", out)
	}
	// A sub-range, in another offset; a full one.
	if out := f.ok(t, "coverage", "--start", "2024-06-01T02:01:40+02:00", "--end", cliTime(20), "--format", "csv", cliTable); out != cliText(header, "m,3,2024-06-01T00:01:40Z,2024-06-01T00:03:20Z,10,2,20,10,0.5") {
		t.Errorf("coverage of b's first hole:\n%s", out)
	}
	if out := f.ok(t, "coverage", "--start", cliTime(20), "--end", cliTime(30), cliTable); !strings.HasSuffix(out, "\ncoverage  100.00 %  (20 of 20 entity-intervals: 2 entities × 10 intervals)\n") {
		t.Errorf("coverage of a covered run:\n%s", out)
	}

	// json is the server's answer.
	var a map[string]any
	if err := json.Unmarshal([]byte(cov("--format", "json")), &a); err != nil {
		t.Fatal(err)
	}
	wantJSON := map[string]any{"table": "m", "version": 3.0, "start": cliStart, "end": cliEnd, "intervals": 90.0,
		"identities": 2.0, "expected": 180.0, "covered": 160.0, "ratio": 160.0 / 180}
	if !reflect.DeepEqual(a, wantJSON) {
		t.Errorf("coverage --format json: %v\nwant %v", a, wantJSON)
	}

	f.failAll(t, "coverage", []cliFailure{
		{2, []string{"--start and --end are required (or draw all the data with --plot FILE)"}, []string{cliTable}},
		{2, []string{"--start and --end are required"}, []string{"--start", cliStart, cliTable}},
		{2, []string{"--start and --end are required"}, []string{"--end", cliEnd, cliTable}},
		{2, []string{"missing the table name"}, rangeArgs},
		{2, []string{`invalid value "parquet" for flag --format: must be one of table|csv|json`}, []string{"--format", "parquet", "--start", cliStart, "--end", cliEnd, cliTable}},
		{2, []string{`invalid value "host" for flag --entity: "host" is not COLUMN=VALUE`}, []string{"--entity", "host", "--start", cliStart, "--end", cliEnd, cliTable}},
		{1, []string{`start: "noon" is not an RFC 3339 timestamp`}, []string{"--start", "noon", "--end", cliEnd, cliTable}},
		{1, []string{`table "nope": not found`, "(not found)"}, []string{"--start", cliStart, "--end", cliEnd, "nope"}},
		{1, []string{`entity: "dc" is not an entity column (entity columns: host)`, "(invalid argument)"}, []string{"--entity", "dc=1", "--start", cliStart, "--end", cliEnd, cliTable}},
		{1, []string{"version 7 does not exist"}, []string{"--version", "7", "--start", cliStart, "--end", cliEnd, cliTable}},
	})
}

// cliGap is one gap as the csv format writes it.
type cliGap struct {
	from, to, intervals string
}

func TestGaps(t *testing.T) {
	f := newCLIFixture(t)
	gaps := func(args ...string) string {
		t.Helper()
		return f.ok(t, append(append([]string{"gaps", "--start", cliStart, "--end", cliEnd}, args...), cliTable)...)
	}
	csv := func(gaps ...cliGap) string {
		lines := []string{"start,end,intervals"}
		for _, g := range gaps {
			lines = append(lines, g.from+","+g.to+","+g.intervals)
		}
		return cliText(lines...)
	}
	// The gaps of the fixture: an interval is covered for the table only
	// when both hosts have it.
	holeB1 := cliGap{cliTime(10), cliTime(20), "10"}
	holeB2 := cliGap{cliTime(30), cliTime(35), "5"}
	holeA1 := cliGap{cliTime(45), cliTime(48), "3"}
	holeA2 := cliGap{cliTime(85), cliTime(87), "2"}
	if out := gaps("--format", "csv"); out != csv(holeB1, holeB2, holeA1, holeA2) {
		t.Errorf("gaps --format csv:\n%s", out)
	}
	if out := gaps("--format", "csv", "--entity", "host=a"); out != csv(holeA1, holeA2) {
		t.Errorf("gaps --entity host=a --format csv:\n%s", out)
	}
	if out := gaps("--format", "csv", "--entity", "host=b"); out != csv(holeB1, holeB2) {
		t.Errorf("gaps --entity host=b --format csv:\n%s", out)
	}
	if out := gaps("--format", "csv", "--version", "2"); out != csv(holeB1, holeB2, holeA1, cliGap{cliTime(60), cliTime(90), "30"}) {
		t.Errorf("gaps --version 2 --format csv:\n%s", out)
	}
	// A range that is not on interval boundaries yields whole intervals.
	if out := f.ok(t, "gaps", "--start", "2024-06-01T00:01:45Z", "--end", "2024-06-01T00:01:55Z", "--format", "csv", cliTable); out != csv(cliGap{cliTime(10), cliTime(12), "2"}) {
		t.Errorf("gaps of an unaligned range:\n%s", out)
	}
	if out := f.ok(t, "gaps", "--start", cliTime(20), "--end", cliTime(30), "--format", "csv", cliTable); out != csv() {
		t.Errorf("gaps of a covered run:\n%s", out)
	}

	// The table format, with the longest gap and the last covered run.
	table := cliText(
		"table m (version 3), range [2024-06-01T00:00:00Z, 2024-06-01T00:15:00Z): 20 intervals missing in 4 gap(s)",
		"",
		"start                 end                   intervals",
		"--------------------  --------------------  ---------",
		"2024-06-01T00:01:40Z  2024-06-01T00:03:20Z         10",
		"2024-06-01T00:05:00Z  2024-06-01T00:05:50Z          5",
		"2024-06-01T00:07:30Z  2024-06-01T00:08:00Z          3",
		"2024-06-01T00:14:10Z  2024-06-01T00:14:30Z          2",
		"",
		"longest gap   [2024-06-01T00:01:40Z, 2024-06-01T00:03:20Z) (10 intervals)",
		"last covered  [2024-06-01T00:14:30Z, 2024-06-01T00:15:00Z) (3 intervals)",
	)
	if out := gaps(); out != table {
		t.Errorf("gaps:\n%s\nwant:\n%s", out, table)
	}
	// --min-window: the last covered run of at least 5 intervals, of at
	// least 38 (there is none).
	if out := gaps("--min-window", "5"); out != strings.Replace(table,
		"last covered  [2024-06-01T00:14:30Z, 2024-06-01T00:15:00Z) (3 intervals)",
		"last covered  [2024-06-01T00:08:00Z, 2024-06-01T00:14:10Z) (37 intervals)", 1) {
		t.Errorf("gaps --min-window 5:\n%s", out)
	}
	if out := gaps("--min-window", "37"); !strings.HasSuffix(out, "\nlast covered  [2024-06-01T00:08:00Z, 2024-06-01T00:14:10Z) (37 intervals)\n") {
		t.Errorf("gaps --min-window 37:\n%s", out)
	}
	if out := gaps("--min-window", "38"); !strings.HasSuffix(out, "\nlast covered  none\n") {
		t.Errorf("gaps --min-window 38:\n%s", out)
	}
	// --limit lists the first gaps and says there are more; longest and
	// last covered still see the whole range.
	want := cliText(
		"table m (version 3), range [2024-06-01T00:00:00Z, 2024-06-01T00:15:00Z): 20 intervals missing in 2 gap(s) (more than listed: raise --limit)",
		"",
		"start                 end                   intervals",
		"--------------------  --------------------  ---------",
		"2024-06-01T00:01:40Z  2024-06-01T00:03:20Z         10",
		"2024-06-01T00:05:00Z  2024-06-01T00:05:50Z          5",
		"",
		"longest gap   [2024-06-01T00:01:40Z, 2024-06-01T00:03:20Z) (10 intervals)",
		"last covered  [2024-06-01T00:14:30Z, 2024-06-01T00:15:00Z) (3 intervals)",
	)
	if out := gaps("--limit", "2"); out != want {
		t.Errorf("gaps --limit 2:\n%s\nwant:\n%s", out, want)
	}
	if out := gaps("--limit", "2", "--format", "csv"); out != csv(holeB1, holeB2) {
		t.Errorf("gaps --limit 2 --format csv:\n%s", out)
	}
	if out := gaps("--limit", "4"); out != table {
		t.Errorf("gaps --limit 4:\n%s", out)
	}
	// No gaps; nothing but gaps.
	want = cliText(
		"table m (version 3), range [2024-06-01T00:03:20Z, 2024-06-01T00:05:00Z): no gaps",
		"longest gap   none",
		"last covered  [2024-06-01T00:03:20Z, 2024-06-01T00:05:00Z) (10 intervals)",
	)
	if out := f.ok(t, "gaps", "--start", cliTime(20), "--end", cliTime(30), cliTable); out != want {
		t.Errorf("gaps of a covered run:\n%s\nwant:\n%s", out, want)
	}
	want = cliText(
		"table m (version 3), range [2024-06-01T00:01:40Z, 2024-06-01T00:03:20Z): 10 intervals missing in 1 gap(s)",
		"",
		"start                 end                   intervals",
		"--------------------  --------------------  ---------",
		"2024-06-01T00:01:40Z  2024-06-01T00:03:20Z         10",
		"",
		"longest gap   [2024-06-01T00:01:40Z, 2024-06-01T00:03:20Z) (10 intervals)",
		"last covered  none",
	)
	if out := f.ok(t, "gaps", "--start", cliTime(10), "--end", cliTime(20), "--entity", "host=b", cliTable); out != want {
		t.Errorf("gaps of b's hole:\n%s\nwant:\n%s", out, want)
	}

	// json is the server's answer.
	type span struct {
		Start     string `json:"start"`
		End       string `json:"end"`
		Intervals int64  `json:"intervals"`
	}
	var a struct {
		Table            string `json:"table"`
		Version          int64  `json:"version"`
		Start            string `json:"start"`
		End              string `json:"end"`
		Gaps             []span `json:"gaps"`
		Longest          *span  `json:"longest"`
		LastCovered      *span  `json:"last_covered"`
		MissingIntervals int64  `json:"missing_intervals"`
		Truncated        bool   `json:"truncated"`
	}
	out := gaps("--format", "json", "--limit", "3", "--min-window", "10")
	d := json.NewDecoder(strings.NewReader(out))
	d.DisallowUnknownFields()
	if err := d.Decode(&a); err != nil {
		t.Fatalf("gaps --format json: %v\n%s", err, out)
	}
	wantGaps := []span{{cliTime(10), cliTime(20), 10}, {cliTime(30), cliTime(35), 5}, {cliTime(45), cliTime(48), 3}}
	if a.Table != "m" || a.Version != 3 || a.Start != cliStart || a.End != cliEnd || !reflect.DeepEqual(a.Gaps, wantGaps) ||
		*a.Longest != wantGaps[0] || *a.LastCovered != (span{cliTime(48), cliTime(85), 37}) || a.MissingIntervals != 20 || !a.Truncated {
		t.Errorf("gaps --format json: %+v", a)
	}

	f.failAll(t, "gaps", []cliFailure{
		{2, []string{"--start and --end are required"}, []string{cliTable}},
		{2, []string{"--start and --end are required"}, []string{"--start", cliStart, cliTable}},
		{2, []string{"--start and --end are required"}, []string{"--end", cliEnd, cliTable}},
		{2, []string{"--limit must not be negative, got -1"}, []string{"--start", cliStart, "--end", cliEnd, "--limit", "-1", cliTable}},
		{2, []string{"--min-window must not be negative, got -2"}, []string{"--start", cliStart, "--end", cliEnd, "--min-window", "-2", cliTable}},
		{2, []string{`invalid value "x" for flag --limit`}, []string{"--start", cliStart, "--end", cliEnd, "--limit", "x", cliTable}},
		{2, []string{"missing the table name"}, []string{"--start", cliStart, "--end", cliEnd}},
		{2, []string{`unexpected argument "x" after the table name`}, []string{"--start", cliStart, "--end", cliEnd, cliTable, "x"}},
		{1, []string{`end: "later" is not an RFC 3339 timestamp`}, []string{"--start", cliStart, "--end", "later", cliTable}},
		{1, []string{`table "nope": not found`, "(not found)"}, []string{"--start", cliStart, "--end", cliEnd, "nope"}},
		{1, []string{`entity: "dc" is not an entity column (entity columns: host)`}, []string{"--start", cliStart, "--end", cliEnd, "--entity", "dc=x", cliTable}},
	})
}

// TestGapsIntegerIndex: spans of an integer index print as integers.
func TestGapsIntegerIndex(t *testing.T) {
	f := newCLIServer(t)
	f.ok(t, "create", "--index-column", "seq", "--index-type", "int64", "--granularity", "10", "ints")
	if out := f.ok(t, "gaps", "--start", "0", "--end", "100", "--format", "csv", "ints"); out != cliText("start,end,intervals", "0,100,10") {
		t.Errorf("gaps of an empty integer table:\n%s", out)
	}
	want := cliText(
		"table     ints (version 1)",
		"range     [0, 100)",
		"entities  the table",
		"coverage  0.00 %  (0 of 10 entity-intervals: 1 entity × 10 intervals)",
	)
	if out := f.ok(t, "coverage", "--start", "0", "--end", "100", "ints"); out != want {
		t.Errorf("coverage of an empty integer table:\n%s\nwant:\n%s", out, want)
	}
}
