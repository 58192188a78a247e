package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// Tests of load's failures: rows already in the table, an unknown table,
// corrupt files, bad usage and an unreachable server.

// TestLoadOverlap: a file whose rows are already in the table is refused
// whole (FAILED_PRECONDITION); with several files, the ones before stay
// loaded and the message lists the ones not loaded.
func TestLoadOverlap(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 1000, 1000)
	f.mustLoad("cpu", a)
	_, stderr, code := f.load("cpu", a)
	if code != 1 || !strings.Contains(stderr, "a.parquet: the input overlaps data already in the table") ||
		!strings.Contains(stderr, "nothing was committed (failed precondition)\n") {
		t.Errorf("reloading a.parquet: exit %d, stderr:\n%s", code, stderr)
	}
	if v := f.version("cpu"); v != 2 {
		t.Errorf("version %d after the overlap, want 2", v)
	}

	b := f.writeParquet("b.parquet", loadFloatSchema, 1000, 100, 100)
	c := f.writeParquet("c.parquet", loadFloatSchema, 900, 200, 200) // overlaps a and b
	d := f.writeParquet("d.parquet", loadFloatSchema, 2000, 100, 100)
	_, stderr, code = f.load("cpu", b, c, d)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, w := range []string{"loaded " + b + ": 100 rows", "loaded 1 of 3 files: " + b + "; not loaded: " + c + ", " + d, c + ": the input overlaps"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if rows, _ := f.scan("cpu"); rows != 1100 {
		t.Errorf("%d rows, want 1100 (a and b)", rows)
	}
	if v := f.version("cpu"); v != 3 {
		t.Errorf("version %d, want 3", v)
	}
}

// TestLoadDuplicateInFile: rows repeated within one file are refused.
func TestLoadDuplicateInFile(t *testing.T) {
	f := newLoadFixture(t)
	f.mustLoad("cpu", f.writeParquet("a.parquet", loadFloatSchema, 0, 10, 10))
	dup := f.writeFile("dup.csv", "ts,host,value\n2024-06-01T05:00:00Z,h1,1\n2024-06-01T05:00:00Z,h1,2\n")
	_, stderr, code := f.load("cpu", dup)
	if code != 1 || !strings.Contains(stderr, "dup.csv: ") || !strings.Contains(stderr, "failed precondition") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if v := f.version("cpu"); v != 2 {
		t.Errorf("version %d, want 2", v)
	}
}

// TestLoadUnknownTable: exit 1 with a message naming the table.
func TestLoadUnknownTable(t *testing.T) {
	f := newLoadFixture(t)
	a := f.writeParquet("a.parquet", loadFloatSchema, 0, 10, 10)
	_, stderr, code := f.load("nope", a)
	if code != 1 || !strings.Contains(stderr, `table "nope" does not exist`) {
		t.Errorf("exit %d, stderr %q; want 1 and the table named", code, stderr)
	}
}

// TestLoadCorrupt: unreadable files are named; one that breaks half way
// commits nothing.
func TestLoadCorrupt(t *testing.T) {
	f := newLoadFixture(t)
	f.mustLoad("cpu", f.writeParquet("a.parquet", loadFloatSchema, 0, 10, 10))
	good := f.writeParquet("good.parquet", loadFloatSchema, 10_000, 3000, 1000)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := f.writeFile("truncated.parquet", string(data[:len(data)/2]))
	garbage := f.writeFile("garbage.arrow", strings.Repeat("not arrow ", 100))
	// Break the page header of the value column in the last row group: the
	// footer reads fine, so the file passes the check and fails mid-way.
	pf, err := file.OpenParquetFile(good, false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(2).ColumnChunk(2)
	if err != nil {
		t.Fatal(err)
	}
	off := cc.DataPageOffset()
	pf.Close()
	broken := bytes.Clone(data)
	copy(broken[off:], bytes.Repeat([]byte{0xff}, 32))
	midway := f.writeFile("midway.parquet", string(broken))
	// A CSV whose bad value comes after the first batch, which the check
	// parses.
	csvText := loadCSVText(20_000, 250)
	lines := strings.Split(csvText, "\n")
	lines[181] = strings.Replace(lines[181], "20180,", "oops,", 1)
	badCSV := f.writeFile("late.csv", strings.Join(lines, "\n"))
	missing := f.path("missing.parquet")
	for _, tc := range []struct {
		path string
		args []string
		want string
	}{
		{truncated, nil, "truncated.parquet: not a readable Parquet file"},
		{garbage, nil, "garbage.arrow: not a readable Arrow IPC file or stream"},
		{missing, nil, "missing.parquet: cannot read the file: no such file or directory"},
		{f.dir, []string{"--input-format", "csv"}, f.dir + ": is a directory"},
		{midway, []string{"--batch-rows", "1000"}, "midway.parquet: "},
		{badCSV, []string{"--batch-rows", "100"}, `late.csv: line 182, column "value": "oops" is not a valid float64`},
	} {
		_, stderr, code := f.load(append(append(tc.args, "cpu"), tc.path)...)
		t.Logf("%s: %s", filepath.Base(tc.path), stderr)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", filepath.Base(tc.path), code, stderr, tc.want)
		}
		if tc.path == midway || tc.path == badCSV {
			if !strings.Contains(stderr, "nothing of it was committed") {
				t.Errorf("%s: stderr %q does not say nothing was committed", filepath.Base(tc.path), stderr)
			}
		}
		if v := f.version("cpu"); v != 2 {
			t.Errorf("%s: version %d, want 2", filepath.Base(tc.path), v)
		}
	}
	if rows, _ := f.scan("cpu"); rows != 10 {
		t.Errorf("%d rows, want 10", rows)
	}
}

// TestLoadUsage: bad invocations exit 2 before any connection.
func TestLoadUsage(t *testing.T) {
	dir := t.TempDir()
	txt := filepath.Join(dir, "data.txt")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"load"}, "missing TABLE and FILE arguments"},
		{[]string{"load", "cpu"}, "missing FILE argument"},
		{[]string{"load", "cpu", txt}, txt + ` has an unknown extension ".txt"`},
		{[]string{"load", "cpu", filepath.Join(dir, "data")}, "data has no extension"},
		{[]string{"load", "--input-format", "xls", "cpu", txt}, "must be one of parquet|csv|arrow"},
		{[]string{"load", "--progress", "sometimes", "cpu", txt}, "must be one of auto|always|never"},
		{[]string{"load", "--batch-rows", "0", "cpu", txt}, "--batch-rows must be positive"},
	} {
		stdout, stderr, code := runCLI(t, nil, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("tsflight %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
	stdout, _, code := runCLI(t, nil, "load", "--help")
	if code != 0 || !strings.Contains(stdout, "Example:") || !strings.Contains(stdout, "--input-format") {
		t.Errorf("load --help: exit %d, stdout:\n%s", code, stdout)
	}
}

// TestLoadServerDown: an unreachable server is exit 3.
func TestLoadServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := filepath.Join(t.TempDir(), "a.csv")
	os.WriteFile(path, []byte("ts,value\n"), 0o644)
	_, stderr, code := runCLI(t, nil, "load", "--server", "grpc://"+addr, "cpu", path)
	if code != 3 || !strings.Contains(stderr, "cannot reach a tsflight server at "+addr) {
		t.Errorf("exit %d, stderr %q; want 3", code, stderr)
	}
}

// TestLoadOpenPanicCloses: a reader that panics on a corrupt file (an Arrow
// IPC file whose footer claims one byte) is an error, and the file is
// closed, not left open until a garbage collection.
func TestLoadOpenPanicCloses(t *testing.T) {
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skipf("no /proc/self/fd to count open files: %v", err)
	}
	b := append([]byte("ARROW1\x00\x00"), make([]byte, 32)...)
	b = binary.LittleEndian.AppendUint32(b, 1) // the footer's length
	b = append(b, "ARROW1"...)
	path := filepath.Join(t.TempDir(), "corrupt.arrow")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	openFiles := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no finalizer closes a leaked file meanwhile
	before := openFiles()
	for range 10 {
		var read atomic.Int64
		src, err := loadOpen(context.Background(), path, loadArrow, nil, memory.DefaultAllocator, 100, &read)
		if src != nil || err == nil || !strings.HasPrefix(err.Error(), "cannot read the file: ") {
			t.Fatalf("loadOpen of a corrupt file: %v, %v; want the reader's panic as an error", src, err)
		}
	}
	if after := openFiles(); after > before {
		t.Errorf("%d files open after 10 failed opens, %d before", after, before)
	}
}
