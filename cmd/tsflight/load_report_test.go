package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Tests of what load reports: the progress line and --format json.

// TestLoadProgressAlways: off a terminal, --progress always prints plain
// lines (no carriage returns), then the summary.
func TestLoadProgressAlways(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 5000, 1000)
	_, stderr := f.mustLoad("--progress", "always", "--batch-rows", "1000", "cpu", a)
	if strings.Contains(stderr, "\r") {
		t.Errorf("carriage return off a terminal: %q", stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	progress := regexp.MustCompile(`^a\.parquet: \d+ rows, [\d.]+ (B|KiB|MiB) of [\d.]+ KiB \(\d+%\), [\d.]+ (B|KiB|MiB|GiB)/s, [\d.]+[kM]? rows/s, [\d.]+ s$`)
	if len(lines) < 2 {
		t.Fatalf("want progress lines and a summary, got:\n%s", stderr)
	}
	for _, l := range lines[:len(lines)-1] {
		if !progress.MatchString(l) {
			t.Errorf("progress line %q does not match %s", l, progress)
		}
	}
	if !loadedRE.MatchString(lines[len(lines)-1]) {
		t.Errorf("last line %q is not the summary", lines[len(lines)-1])
	}
	_, stderr = f.mustLoad("--progress", "never", "cpu", f.writeParquet("b.parquet", loadFloatSchema, 5000, 10, 10))
	if strings.Count(stderr, "\n") != 1 {
		t.Errorf("--progress never: %q", stderr)
	}
}

// TestLoadJSON: --format json writes one object per file on stdout.
func TestLoadJSON(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 100, 100)
	b := f.writeFile("b.csv", loadCSVText(100, 50))
	empty := f.writeFile("empty.csv", "ts,host,value\n")
	stdout, stderr := f.mustLoad("--format", "json", "cpu", a, empty, b)
	var got []loadResult
	dec := json.NewDecoder(strings.NewReader(stdout))
	for dec.More() {
		var r loadResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("stdout %q: %v", stdout, err)
		}
		got = append(got, r)
	}
	if len(got) != 3 || strings.Count(stdout, "\n") != 3 {
		t.Fatalf("want 3 JSON lines, got:\n%s", stdout)
	}
	if got[0].File != a || got[0].Rows != 100 || got[0].Version == nil || *got[0].Version != 2 || !strings.HasPrefix(got[0].Segment, "data/") || got[0].Table != "cpu" {
		t.Errorf("first object %+v", got[0])
	}
	if got[1].File != empty || got[1].Rows != 0 || got[1].Version != nil {
		t.Errorf("empty file %+v", got[1])
	}
	if got[2].File != b || got[2].Rows != 50 || got[2].Version == nil || *got[2].Version != 3 {
		t.Errorf("third object %+v", got[2])
	}
	if !strings.Contains(stderr, "skipped "+empty+": no rows, nothing to load") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// TestLoadProgressBytes: load prints sizes as describe does (humanBytes):
// a count just under a unit rounds up to the unit, not to "1024.0 KiB".
func TestLoadProgressBytes(t *testing.T) {
	var b bytes.Buffer
	p := newLoadProgress(&b, loadProgressLines, "/data/cpu.parquet", 1048575)
	p.update(10, 1048575)
	if s := b.String(); !strings.HasPrefix(s, "cpu.parquet: 10 rows, 1.0 MiB of 1.0 MiB (100%), ") || strings.Contains(s, "1024.0") {
		t.Errorf("progress line %q", s)
	}
}

// TestLoadProgressRedraw: on a terminal the line is redrawn in place (a
// carriage return, padded over a longer previous line) at most ten times a
// second, and cleared before the summary.
func TestLoadProgressRedraw(t *testing.T) {
	var b bytes.Buffer
	p := newLoadProgress(&b, loadProgressRedraw, "/data/cpu.parquet", 10<<20)
	p.update(65536, 5<<20)
	p.update(131072, 6<<20) // within 100 ms of the first: not drawn
	if n := strings.Count(b.String(), "\r"); n != 1 {
		t.Fatalf("%d redraws, want 1: %q", n, b.String())
	}
	first := strings.TrimPrefix(b.String(), "\r")
	if !regexp.MustCompile(`^cpu\.parquet: 65536 rows, 5\.0 MiB of 10\.0 MiB \(50%\), `).MatchString(first) || strings.Contains(first, "\n") {
		t.Errorf("first draw %q", first)
	}
	p.last = p.last.Add(-time.Second)
	// As if the previous line was longer; by more than the rates' text
	// can vary (they depend on the timing).
	p.width += 40
	prev := p.width
	p.update(131072, 6<<20)
	second := b.String()[len(first)+1:]
	if !strings.HasPrefix(second, "\rcpu.parquet: 131072 rows, 6.0 MiB of 10.0 MiB (60%)") || !strings.HasSuffix(second, "     ") || len(second) != 1+prev {
		t.Errorf("second draw %q", second)
	}
	b.Reset()
	p.clear()
	if s := b.String(); !strings.HasPrefix(s, "\r") || !strings.HasSuffix(s, "\r") || strings.TrimSpace(s) != "" {
		t.Errorf("clear wrote %q", s)
	}
	b.Reset()
	p.clear()
	if b.Len() != 0 {
		t.Errorf("a second clear wrote %q", b.String())
	}
}
