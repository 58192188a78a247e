//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
)

// adbcQueryErr runs q over a fresh ADBC Go connection, reads the whole
// result and returns the gRPC status the driver got.
func (s *sqlServer) adbcQueryErr(ctx context.Context, mem memory.Allocator, q string) error {
	db, err := adbcflightsql.NewDriver(mem).NewDatabase(map[string]string{adbc.OptionKeyURI: "grpc://" + s.srv.Addr().String()})
	if err != nil {
		return err
	}
	defer db.Close()
	cn, err := db.Open(ctx)
	if err != nil {
		return grpcOf(err)
	}
	defer cn.Close()
	return grpcOf(adbcQueryEach(ctx, cn, q, nil))
}

// TestDamagedSegmentIsDataLoss: a planned segment that is truncated,
// missing or replaced by a valid segment of another size, after a query
// has read it (the server has its footer cached), is DATA_LOSS over
// arrow-go's Flight SQL client and the ADBC Go driver, naming the table
// and the segment's table-relative path and never the server's root. A
// query pruned to the other segments still answers.
func TestDamagedSegmentIsDataLoss(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, s *sqlServer, file string)
		frags  []string
	}{
		{"truncated", func(t *testing.T, s *sqlServer, file string) {
			fi, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(file, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, []string{"damaged", "bytes"}},
		{"missing", func(t *testing.T, s *sqlServer, file string) {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		}, []string{"missing"}},
		{"replaced by another valid segment", func(t *testing.T, s *sqlServer, file string) {
			_, b := s.otherSegment(t, ctxT(t))
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"damaged", "bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := startSQL(t)
			ctx := ctxT(t)
			s.makeCPU(ctx, 3)
			// A first read of every segment: the server has seen their
			// footers before they are damaged.
			if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "21600" {
				t.Fatalf("count %s, want 21600", got)
			}
			tb, err := s.svc.Table(ctx, "cpu")
			if err != nil {
				t.Fatal(err)
			}
			seg := tb.State().Segments[1].Path
			c.damage(t, s, filepath.Join(s.root, "cpu", filepath.FromSlash(seg)))
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			for _, q := range []string{
				"SELECT count(*), sum(usage) FROM cpu",
				"SELECT host, avg(usage) FROM cpu WHERE ts >= TIMESTAMPTZ '2024-01-01 01:30:00' GROUP BY host",
			} {
				for client, run := range map[string]func() error{
					"arrow-go flightsql": func() error {
						r, err := s.query(ctx, q)
						if err == nil {
							r.release()
						}
						return err
					},
					"ADBC Go": func() error { return s.adbcQueryErr(ctx, mem, q) },
				} {
					err := run()
					what := fmt.Sprintf("%s: %s", client, q)
					wantCode(t, what, err, codes.DataLoss, append([]string{"table cpu", "segment " + seg}, c.frags...)...)
					if msg := status.Convert(err).Message(); strings.Contains(msg, s.root) || strings.Contains(msg, filepath.Dir(s.root)) {
						t.Fatalf("%s: the message shows the server's root %s: %s", what, s.root, msg)
					}
					t.Logf("%s: %s", client, status.Convert(err).Message())
				}
			}
			// The segments left intact still answer a query pruned to them.
			if got := s.scalar(ctx, "SELECT count(*) FROM cpu WHERE ts < TIMESTAMPTZ '2024-01-01 01:00:00'"); got != "7200" {
				t.Fatalf("the first hour counts %s, want 7200", got)
			}
		})
	}
}

// TestDuckDBFileErrorsAreDataLoss: DuckDB's own errors reading a segment
// of the root (missing, truncated), as the embedded DuckDB reports them
// (the stat before a query makes them a race), map to DATA_LOSS naming the
// table and the segment and not the root; an error naming no file keeps
// its code (a footer overwritten in place: DuckDB does not say which
// file), still without the root.
func TestDuckDBFileErrorsAreDataLoss(t *testing.T) {
	s, ctx := startCPU(t, 3)
	tb, err := s.svc.Table(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	segs := tb.State().Segments
	file := func(i int) string { return filepath.Join(s.root, "cpu", filepath.FromSlash(segs[i].Path)) }
	if err := os.Remove(file(0)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file(1), fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file(2))
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) - 200; i < len(b)-8; i++ {
		b[i] = 0xA5 // the footer's metadata
	}
	if err := os.WriteFile(file(2), b, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDirect(ctx, s.root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range segs {
		rdr, err := d.Query(ctx, "SELECT count(*), sum(usage) FROM read_parquet("+sqlString(file(i))+")")
		if err == nil {
			for rdr.Next() {
			}
			err = rdr.Err()
			rdr.Release()
		}
		if err == nil {
			t.Fatalf("segment %d: DuckDB read the damaged file", i)
		}
		raw := err.Error()
		got := s.sql.sqlStatus(err)
		if i == 2 {
			// DuckDB names no file ("Invalid Error: Variable-length int
			// over 10 bytes."): the segment cannot be told, the code stays.
			if msg := status.Convert(got).Message(); strings.Contains(msg, s.root) {
				t.Fatalf("segment %d: the message shows the root: %s", i, msg)
			}
			t.Logf("DuckDB (footer overwritten): %s → %v", raw, got)
			continue
		}
		wantCode(t, fmt.Sprintf("segment %d (DuckDB: %s)", i, raw), got, codes.DataLoss, "table cpu", "segment "+segs[i].Path)
		if msg := status.Convert(got).Message(); strings.Contains(msg, s.root) {
			t.Fatalf("segment %d: the message shows the root: %s", i, msg)
		}
		t.Logf("DuckDB: %s\n  → %s", raw, status.Convert(got).Message())
	}
	if got := s.sql.sqlStatus(&duckError{typ: 0, msg: "Binder Error: column x does not exist"}); status.Code(got) == codes.DataLoss {
		t.Fatalf("an error naming no file became %v", got)
	}
	// A statement's own conversion error quoting a segment's path is not
	// data loss, and the root is scrubbed from it.
	r, err := d.Query(ctx, "SELECT CAST("+sqlString(file(1))+" AS INTEGER)")
	if err == nil {
		for r.Next() {
		}
		err = r.Err()
		r.Release()
	}
	got := s.sql.sqlStatus(err)
	wantCode(t, "conversion error quoting a segment", got, codes.InvalidArgument, "cpu/"+segs[1].Path)
	if strings.Contains(status.Convert(got).Message(), s.root) {
		t.Fatalf("the message shows the root: %v", got)
	}
}

// otherSegment creates table other, ten rows of host z, and returns its
// one segment and the segment file's bytes: a valid segment of another
// size and row count than cpu's.
func (s *sqlServer) otherSegment(t testing.TB, ctx context.Context) (tableformat.SegmentMeta, []byte) {
	t.Helper()
	rec := cpuBatch(s.cliMem, t0, 10, "z")
	defer rec.Release()
	if _, err := s.ingest(ctx, "other", "create", cpuOpts, rec); err != nil {
		t.Fatal(err)
	}
	tb, err := s.svc.Table(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	seg := tb.State().Segments[0]
	b, err := os.ReadFile(filepath.Join(s.root, "other", filepath.FromSlash(seg.Path)))
	if err != nil {
		t.Fatal(err)
	}
	return seg, b
}

// TestSegmentRowCountChecked: a table whose log records no file_size (the
// field is optional; older writers omit it) has a segment replaced by
// another valid segment after a query read it. The size check cannot see
// it, the footer's row count can: DATA_LOSS naming the segment and both
// counts, never the root. The server's footer cache is keyed by size and
// modification time, so the replaced file is read again.
func TestSegmentRowCountChecked(t *testing.T) {
	s, ctx := startCPU(t, 3)
	other, b := s.otherSegment(t, ctx)
	// cpu2: a copy of cpu whose commits omit file_size.
	src, dst := filepath.Join(s.root, "cpu"), filepath.Join(s.root, "cpu2")
	sizeField := regexp.MustCompile(`,\s*"file_size"\s*:\s*\d+`)
	testkit.CopyDirEdit(t, src, dst, func(rel string, b []byte) []byte {
		if strings.HasSuffix(rel, ".json") && path.Base(path.Dir(rel)) == "_timeseries_log" {
			return sizeField.ReplaceAll(b, nil)
		}
		return b
	})
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu2"); got != "21600" {
		t.Fatalf("cpu2 counts %s, want 21600", got)
	}
	tb, err := s.svc.Table(ctx, "cpu2")
	if err != nil {
		t.Fatal(err)
	}
	seg := tb.State().Segments[1]
	if seg.FileSize != nil {
		t.Fatalf("cpu2's segment still records file_size %d", *seg.FileSize)
	}
	file := filepath.Join(dst, filepath.FromSlash(seg.Path))
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.query(ctx, "SELECT count(*) FROM cpu2")
	wantCode(t, "replaced segment", err, codes.DataLoss, "table cpu2", "segment "+seg.Path, fmt.Sprintf("footer says %d rows", other.RowCount), fmt.Sprintf("log records %d", seg.RowCount))
	if msg := status.Convert(err).Message(); strings.Contains(msg, s.root) {
		t.Fatalf("the message shows the server's root: %s", msg)
	}
}
