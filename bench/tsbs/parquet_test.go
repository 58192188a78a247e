package tsbs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// parquetParams has late parts, drops, several batches per file and,
// with rowGroupRows lowered, several row groups per file.
func parquetParams() Params {
	p := small()
	p.Hosts, p.Duration, p.DropFraction, p.LateFraction, p.BatchRows = 13, 4*time.Hour, 0.05, 0.5, 1500
	return p
}

func withRowGroupRows(t *testing.T, n int64) {
	old := rowGroupRows
	rowGroupRows = n
	t.Cleanup(func() { rowGroupRows = old })
}

// TestParquetRoundTrip reads every file back with pqarrow and compares
// it with the delivery's batches in memory, and checks the manifest.
func TestParquetRoundTrip(t *testing.T) {
	withRowGroupRows(t, 2000)
	mem := newMem(t)
	p := parquetParams()
	dir := t.TempDir()
	files, err := p.writeParquet(mem, dir)
	if err != nil {
		t.Fatal(err)
	}
	ds := p.Deliveries()
	if len(files) != len(ds) || len(ds) != p.Hours()+2 {
		t.Fatalf("%d files for %d deliveries (%d hours, 2 late parts)", len(files), len(ds), p.Hours())
	}
	var total int64
	for i, f := range files {
		if filepath.Base(f.Path) != FileName(ds[i], len(ds)) || filepath.Dir(f.Path) != dir {
			t.Errorf("file %d is %s, want %s in %s", i, f.Path, FileName(ds[i], len(ds)), dir)
		}
		st, err := os.Stat(f.Path)
		if err != nil || st.Size() != f.Bytes {
			t.Errorf("%s: stat %v, %d bytes, want %d", f.Path, err, st.Size(), f.Bytes)
		}
		recs := collectAndRelease(t, mem, p, f.Delivery)
		var want int64
		for _, r := range recs {
			want += r.NumRows()
		}
		if f.Rows != want {
			t.Errorf("%s: %d rows, want %d", f.Path, f.Rows, want)
		}
		total += f.Rows
		compareFile(t, mem, f.Path, recs)
	}
	if total != p.Rows() {
		t.Errorf("files hold %d rows, Rows() = %d", total, p.Rows())
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Params != p.withDefaults() || m.Rows != total || m.Steps != p.Steps() || !reflect.DeepEqual(m.Files, files) {
		t.Errorf("manifest %+v does not describe %+v", m, files)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName+".tmp")); err == nil {
		t.Error("a temporary file was left behind")
	}
}

// compareFile checks the Parquet file at path holds recs' rows, with the
// package's schema, zstd and row groups of at most rowGroupRows.
func compareFile(t *testing.T, mem memory.Allocator, path string, recs []arrow.RecordBatch) {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false, file.WithReadProps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	for g := range rdr.NumRowGroups() {
		rg := md.RowGroup(g)
		if rg.NumRows() > rowGroupRows || (g < rdr.NumRowGroups()-1 && rg.NumRows() != rowGroupRows) {
			t.Errorf("%s: row group %d has %d rows, limit %d", path, g, rg.NumRows(), rowGroupRows)
		}
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Compression() != compress.Codecs.Zstd {
				t.Errorf("%s: column %d is %s, want zstd", path, c, cc.Compression())
			}
		}
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	// pqarrow adds PARQUET:field_id metadata; the rest must be the same.
	got := tbl.Schema()
	for i, f := range Schema().Fields() {
		g := got.Field(i)
		if got.NumFields() != Schema().NumFields() || g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) || g.Nullable != f.Nullable {
			t.Fatalf("%s: schema %s, want %s", path, got, Schema())
		}
	}
	var want int64
	for _, r := range recs {
		want += r.NumRows()
	}
	if tbl.NumRows() != want {
		t.Fatalf("%s: %d rows, want %d", path, tbl.NumRows(), want)
	}
	if want == 0 {
		return
	}
	for c := range int(tbl.NumCols()) {
		var wantChunks []arrow.Array
		for _, r := range recs {
			wantChunks = append(wantChunks, r.Column(c))
		}
		w, err := array.Concatenate(wantChunks, mem)
		if err != nil {
			t.Fatal(err)
		}
		g, err := array.Concatenate(tbl.Column(c).Data().Chunks(), mem)
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(g, w) {
			t.Errorf("%s: column %s differs from the batches", path, tbl.Schema().Field(c).Name)
		}
		g.Release()
		w.Release()
	}
}

// TestParquetByteIdentical writes the same params twice: every file and
// the manifest must be byte-identical, and a different seed must differ.
func TestParquetByteIdentical(t *testing.T) {
	p := parquetParams()
	a, b := t.TempDir(), t.TempDir()
	fa, err := p.WriteParquet(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := p.WriteParquet(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(fa) != len(fb) {
		t.Fatalf("%d and %d files", len(fa), len(fb))
	}
	same := func(x, y string) bool {
		bx, err := os.ReadFile(x)
		if err != nil {
			t.Fatal(err)
		}
		by, err := os.ReadFile(y)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Equal(bx, by)
	}
	for i := range fa {
		if !same(fa[i].Path, fb[i].Path) {
			t.Errorf("%s and %s differ", fa[i].Path, fb[i].Path)
		}
	}
	if !same(filepath.Join(a, ManifestName), filepath.Join(b, ManifestName)) {
		t.Error("the manifests differ")
	}
	// Rewriting in place gives the same bytes too.
	if _, err := p.WriteParquet(a); err != nil {
		t.Fatal(err)
	}
	for i := range fa {
		if !same(fa[i].Path, fb[i].Path) {
			t.Errorf("%s differs after a rewrite", fa[i].Path)
		}
	}
	q := p
	q.Seed++
	c := t.TempDir()
	fc, err := q.WriteParquet(c)
	if err != nil {
		t.Fatal(err)
	}
	if same(fa[0].Path, fc[0].Path) {
		t.Error("a different seed wrote the same file")
	}
}

// TestParquetRefusesForeignFiles: a directory with Parquet files of
// another data set is refused, lest a reader glob them together.
func TestParquetRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "other.parquet"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parquetParams().WriteParquet(dir); err == nil {
		t.Fatal("WriteParquet wrote beside a foreign Parquet file")
	}
	if _, err := ReadManifest(dir); err == nil {
		t.Fatal("ReadManifest read a manifest that was never written")
	}
}

// BenchmarkWriteParquet writes one hour of 1,000 hosts and reports rows/s.
func BenchmarkWriteParquet(b *testing.B) {
	p := DefaultParams()
	p.Hosts, p.Duration = 1000, time.Hour
	dir := b.TempDir()
	for b.Loop() {
		if _, err := p.WriteParquet(dir); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(p.Rows())*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
