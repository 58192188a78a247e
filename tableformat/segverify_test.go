package tableformat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// svTable makes a table in dir with a 3-row and a 2-row segment and returns
// the two segments.
func svTable(t *testing.T, dir string) (*Table, SegmentMeta, SegmentMeta) {
	t.Helper()
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsIndex()}, nil)
	var segs []SegmentMeta
	for _, rows := range [][]row{{{0, "a", 1}, {10, "a", 2}, {20, "a", 3}}, {{100, "a", 4}, {110, "a", 5}}} {
		rec := inBatch(memory.DefaultAllocator, rows...)
		rdr, err := array.NewRecordReader(inSchema(), []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		res, err := tb.Append(context.Background(), rdr, nil)
		rdr.Release()
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, res.Segment)
	}
	return tb, segs[0], segs[1]
}

func svWant(t *testing.T, what string, err error, fragments ...string) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: %v, want a CorruptionError", what, err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("%s: %q does not mention %q", what, err, f)
		}
	}
}

// verifySegmentFile accepts the committed files and refuses a file swapped
// for another valid segment: by its size when the log records file_size,
// by the footer's row count when it does not (a same-size file with other
// rows is caught the same way), and a missing file.
func TestVerifySegmentFile(t *testing.T) {
	dir := t.TempDir()
	tb, a, b := svTable(t, dir)
	fsys := tb.FS()
	if a.FileSize == nil {
		t.Fatal("appends record file_size")
	}
	for _, s := range []SegmentMeta{a, b} {
		if err := verifySegmentFile(fsys, s); err != nil {
			t.Fatalf("committed segment %s: %v", s.Path, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(b.Path)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(a.Path)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	err = verifySegmentFile(fsys, a)
	svWant(t, "swapped file", err, a.Path, "file_size", "tsflight check")
	if strings.Contains(err.Error(), dir) {
		t.Fatalf("the error names an absolute path: %v", err)
	}

	// Without a recorded size (as the reference may write), the footer's
	// row count decides: this also stands for a same-size file with other
	// rows, which the size check cannot see.
	noSize := a
	noSize.FileSize = nil
	svWant(t, "swapped file, no file_size", verifySegmentFile(fsys, noSize), a.Path, "holds 2 rows", "row_count 3")
	sameSize := a
	n := uint64(len(data))
	sameSize.FileSize = &n
	svWant(t, "swapped file of the recorded size", verifySegmentFile(fsys, sameSize), a.Path, "holds 2 rows", "row_count 3")

	gone := a
	gone.Path = "data/none.parquet"
	svWant(t, "missing file", verifySegmentFile(fsys, gone), "data/none.parquet", "missing")
}

// A scan refuses the swapped segment before serving any of its rows.
func TestScanRefusesSwappedSegment(t *testing.T) {
	dir := t.TempDir()
	tb, a, b := svTable(t, dir)
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(b.Path)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(a.Path)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rr, err := tb.Scan(context.Background(), nil, ScanOptions{})
	if err == nil {
		for rr.Next() {
		}
		err = rr.Err()
		rr.Release()
	}
	svWant(t, "scan", err, a.Path, "tsflight check")
}
