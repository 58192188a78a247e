//go:build duckdb_arrow

package flightsql

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
)

// copyDir copies table directory from to to under root.
func copyDir(t testing.TB, root, from, to string) {
	t.Helper()
	testkit.CopyDir(t, filepath.Join(root, from), filepath.Join(root, to))
}

// TestGetTablesDamagedTables: over a root with a healthy table (cpu), one
// whose CURRENT holds garbage (garbled), one whose commit 1 is gone
// (nocommit) and a phantom log directory (ghost), GetTables without and
// with schemas and GetDbSchemas succeed; the phantom is not listed, the
// damaged tables are, with an empty schema carrying the problem, and a
// warning per table per call; ADBC GetObjects at depth all, tables and
// columns succeeds and returns cpu's columns; SQL naming a damaged table
// is DATA_LOSS naming it. Without the fix GetTables with schemas (and so
// get_objects) failed with DATA_LOSS, and the phantom was listed.
func TestGetTablesDamagedTables(t *testing.T) {
	s, ctx := startCPU(t, 1)
	copyDir(t, s.root, "cpu", "garbled")
	if err := os.WriteFile(filepath.Join(s.root, "garbled", tableformat.LogDir, "CURRENT"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyDir(t, s.root, "cpu", "nocommit")
	if err := os.Remove(filepath.Join(s.root, "nocommit", filepath.FromSlash(tableformat.CommitPath(1)))); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.root, "ghost", tableformat.LogDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, include := range []bool{false, true} {
		info, err := s.client.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: include})
		if err != nil {
			t.Fatalf("GetTables(include_schema=%v): %v", include, err)
		}
		res, err := s.fetch(ctx, info)
		if err != nil {
			t.Fatalf("GetTables(include_schema=%v) DoGet: %v", include, err)
		}
		var names []string
		for _, rec := range res.recs {
			col := rec.Column(2).(*array.String)
			for i := 0; i < col.Len(); i++ {
				name := col.Value(i)
				names = append(names, name)
				if !include {
					continue
				}
				sc, err := flight.DeserializeSchema(rec.Column(4).(*array.Binary).Value(i), memory.DefaultAllocator)
				if err != nil {
					t.Fatal(err)
				}
				md := sc.Metadata()
				if name == "cpu" {
					if sc.NumFields() != 3 || md.Len() != 0 {
						t.Errorf("cpu: schema %v", sc)
					}
					continue
				}
				if i := md.FindKey(flightserver.MetadataTableState); sc.NumFields() != 0 || i < 0 || md.Values()[i] != flightserver.TableDamaged {
					t.Errorf("%s: schema %v, want empty and damaged", name, sc)
				}
				if i := md.FindKey(flightserver.MetadataTableError); i < 0 || !strings.Contains(md.Values()[i], `table "`+name+`"`) || strings.Contains(md.Values()[i], s.root) {
					t.Errorf("%s: schema metadata %v", name, md)
				}
			}
		}
		res.release()
		if strings.Join(names, ",") != "cpu,garbled,nocommit" {
			t.Errorf("GetTables(include_schema=%v): %v, want cpu,garbled,nocommit", include, names)
		}
	}
	for _, name := range []string{"garbled", "nocommit"} {
		if n := strings.Count(s.logs.String(), `"table":"`+name+`"`); n < 1 || !strings.Contains(s.logs.String(), "GetTables: listing a table that cannot be read") {
			t.Errorf("%s: %d log lines", name, n)
		}
	}
	info, err := s.client.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.fetch(ctx, info)
	if err != nil {
		t.Fatalf("GetDbSchemas: %v", err)
	}
	res.release()

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, err := adbcflightsql.NewDriver(mem).NewDatabase(map[string]string{adbc.OptionKeyURI: "grpc://" + s.srv.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cn, err := db.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	for _, depth := range []adbc.ObjectDepth{adbc.ObjectDepthAll, adbc.ObjectDepthTables, adbc.ObjectDepthColumns} {
		rdr, err := cn.GetObjects(ctx, depth, nil, nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("GetObjects(depth %v): %v", depth, err)
		}
		var dump strings.Builder
		for rdr.Next() {
			b, _ := rdr.RecordBatch().MarshalJSON()
			dump.Write(b)
		}
		if err := rdr.Err(); err != nil {
			t.Fatalf("GetObjects(depth %v): %v", depth, err)
		}
		rdr.Release()
		out := dump.String()
		for _, want := range []string{`"cpu"`, `"garbled"`, `"nocommit"`} {
			if !strings.Contains(out, want) {
				t.Errorf("GetObjects(depth %v) lacks %s: %s", depth, want, out)
			}
		}
		if strings.Contains(out, "ghost") || (depth != adbc.ObjectDepthTables && !strings.Contains(out, `"usage"`)) {
			t.Errorf("GetObjects(depth %v): %s", depth, out)
		}
	}
	_, err = s.query(ctx, "SELECT count(*) FROM garbled")
	wantCode(t, "SQL on garbled", err, codes.DataLoss, `table "garbled"`)
	_, err = s.query(ctx, "SELECT count(*) FROM ghost")
	wantCode(t, "SQL on ghost", err, codes.NotFound, "ghost")
}
