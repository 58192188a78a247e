//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
)

// metaFetch fetches a metadata FlightInfo and checks that both its schema
// and the stream's are exactly want.
func (s *sqlServer) metaFetch(ctx context.Context, what string, info *flight.FlightInfo, err error, want *arrow.Schema) *result {
	s.t.Helper()
	if err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
	if is := s.schemaOf(info.Schema); !is.Equal(want) {
		s.t.Fatalf("%s: FlightInfo schema\n%v\nwant\n%v", what, is, want)
	}
	if len(info.Endpoint) != 1 {
		s.t.Fatalf("%s: %d endpoints, want 1", what, len(info.Endpoint))
	}
	r, err := s.fetch(ctx, info)
	if err != nil {
		s.t.Fatalf("%s: DoGet: %v", what, err)
	}
	s.t.Cleanup(r.release)
	if !r.schema.Equal(want) {
		s.t.Fatalf("%s: stream schema\n%v\nwant\n%v", what, r.schema, want)
	}
	return r
}

func strp(s string) *string { return &s }

// makeMetaTables creates cpu, cpu2 and disk (an int64 and a bool column).
func (s *sqlServer) makeMetaTables(ctx context.Context) {
	s.t.Helper()
	s.makeCPU(ctx, 1)
	rec := cpuBatch(s.cliMem, t0, 5, "z")
	_, err := s.ingest(ctx, "cpu2", "create", cpuOpts, rec)
	rec.Release()
	if err != nil {
		s.t.Fatal(err)
	}
	drec := diskBatch(s.cliMem)
	_, err = s.ingest(ctx, "disk", "create", map[string]string{"tsflight.granularity": "1m", "tsflight.entity_columns": "dev"}, drec)
	drec.Release()
	if err != nil {
		s.t.Fatal(err)
	}
}

var diskSchema = arrow.NewSchema([]arrow.Field{
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "dev", Type: arrow.BinaryTypes.String},
	{Name: "free", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
}, nil)

func diskBatch(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, diskSchema)
	defer b.Release()
	for i := 0; i < 3; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(i) * time.Minute).UnixMicro()))
		b.Field(1).(*array.StringBuilder).Append("sda")
		b.Field(2).(*array.Int64Builder).Append(int64(1000 - i))
		b.Field(3).(*array.BooleanBuilder).Append(i%2 == 0)
	}
	return b.NewRecordBatch()
}

func TestMetadataCatalogsAndSchemas(t *testing.T) {
	s, ctx := startCPU(t, 1)

	info, err := s.client.GetCatalogs(ctx)
	r := s.metaFetch(ctx, "GetCatalogs", info, err, schema_ref.Catalogs)
	if got := r.rowsOf(); fmt.Sprint(got) != "[tsflight]" {
		t.Fatalf("catalogs %v, want [tsflight]", got)
	}

	cases := []struct {
		catalog, pattern *string
		want             string
	}{
		{nil, nil, "[tsflight|main]"},
		{strp("tsflight"), nil, "[tsflight|main]"},
		{strp("tsflight"), strp("main"), "[tsflight|main]"},
		{nil, strp("m%"), "[tsflight|main]"},
		{nil, strp("%"), "[tsflight|main]"},
		{nil, strp("m__n"), "[tsflight|main]"},
		{nil, strp("x%"), "[]"},
		{nil, strp("mai"), "[]"},
		{strp("other"), nil, "[]"},
		{strp("other"), strp("main"), "[]"},
	}
	for _, c := range cases {
		what := fmt.Sprintf("GetDBSchemas(catalog %v, pattern %v)", deref(c.catalog), deref(c.pattern))
		info, err := s.client.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{Catalog: c.catalog, DbSchemaFilterPattern: c.pattern})
		r := s.metaFetch(ctx, what, info, err, schema_ref.DBSchemas)
		if got := fmt.Sprint(r.rowsOf()); got != c.want {
			t.Fatalf("%s = %s, want %s", what, got, c.want)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

func TestMetadataTables(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	s.makeMetaTables(ctx)

	all := "[tsflight|main|cpu|TABLE tsflight|main|cpu2|TABLE tsflight|main|disk|TABLE]"
	cases := []struct {
		opts *flightsql.GetTablesOpts
		want string
	}{
		{&flightsql.GetTablesOpts{}, all},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("%")}, all},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("cpu")}, "[tsflight|main|cpu|TABLE]"},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("cp_")}, "[tsflight|main|cpu|TABLE]"},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("cpu_")}, "[tsflight|main|cpu2|TABLE]"},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("c%")}, "[tsflight|main|cpu|TABLE tsflight|main|cpu2|TABLE]"},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("%k")}, "[tsflight|main|disk|TABLE]"},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("d__k")}, "[tsflight|main|disk|TABLE]"},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("_")}, "[]"},
		{&flightsql.GetTablesOpts{TableNameFilterPattern: strp("x%")}, "[]"},
		{&flightsql.GetTablesOpts{TableTypes: []string{"TABLE"}}, all},
		{&flightsql.GetTablesOpts{TableTypes: []string{"VIEW"}}, "[]"},
		{&flightsql.GetTablesOpts{TableTypes: []string{"VIEW", "TABLE"}}, all},
		{&flightsql.GetTablesOpts{TableTypes: []string{"SYSTEM TABLE"}}, "[]"},
		{&flightsql.GetTablesOpts{Catalog: strp("tsflight"), DbSchemaFilterPattern: strp("main")}, all},
		{&flightsql.GetTablesOpts{Catalog: strp("other")}, "[]"},
		{&flightsql.GetTablesOpts{DbSchemaFilterPattern: strp("x%")}, "[]"},
		{&flightsql.GetTablesOpts{DbSchemaFilterPattern: strp("m%"), TableNameFilterPattern: strp("disk"), TableTypes: []string{"TABLE"}}, "[tsflight|main|disk|TABLE]"},
	}
	for _, c := range cases {
		o := c.opts
		what := fmt.Sprintf("GetTables(catalog %s, schema %s, table %s, types %v)", deref(o.Catalog), deref(o.DbSchemaFilterPattern), deref(o.TableNameFilterPattern), o.TableTypes)
		info, err := s.client.GetTables(ctx, o)
		r := s.metaFetch(ctx, what, info, err, schema_ref.Tables)
		if got := fmt.Sprint(r.rowsOf()); got != c.want {
			t.Fatalf("%s = %s, want %s", what, got, c.want)
		}
	}
}

func TestMetadataTablesIncludeSchema(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	s.makeMetaTables(ctx)

	info, err := s.client.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true})
	r := s.metaFetch(ctx, "GetTables(include_schema)", info, err, schema_ref.TablesWithIncludedSchema)
	want := map[string]struct {
		schema *arrow.Schema
		types  []string
	}{
		"cpu":  {cpuSchema, []string{"TIMESTAMPTZ", "VARCHAR", "DOUBLE"}},
		"cpu2": {cpuSchema, []string{"TIMESTAMPTZ", "VARCHAR", "DOUBLE"}},
		"disk": {diskSchema, []string{"TIMESTAMPTZ", "VARCHAR", "BIGINT", "BOOLEAN"}},
	}
	var names []string
	for _, rec := range r.recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			name := rec.Column(2).(*array.String).Value(i)
			names = append(names, name)
			if c, sch := rec.Column(0).(*array.String).Value(i), rec.Column(1).(*array.String).Value(i); c != "tsflight" || sch != "main" {
				t.Fatalf("%s: catalog %q schema %q", name, c, sch)
			}
			if typ := rec.Column(3).(*array.String).Value(i); typ != "TABLE" {
				t.Fatalf("%s: type %q", name, typ)
			}
			sc, err := flight.DeserializeSchema(rec.Column(4).(*array.Binary).Value(i), s.cliMem)
			if err != nil {
				t.Fatalf("%s: table_schema does not decode: %v", name, err)
			}
			w, ok := want[name]
			if !ok {
				t.Fatalf("unexpected table %s", name)
			}
			if sc.NumFields() != w.schema.NumFields() {
				t.Fatalf("%s: table_schema %v, want the fields of %v", name, sc, w.schema)
			}
			// The columns SQL sees, by name and type.
			sqlRes := s.mustQuery(ctx, "SELECT * FROM "+name+" LIMIT 0")
			for j, f := range sc.Fields() {
				wf := w.schema.Field(j)
				if f.Name != wf.Name || !arrow.TypeEqual(f.Type, wf.Type) || f.Nullable != wf.Nullable {
					t.Fatalf("%s: column %d = %s %s nullable=%v, want %s %s nullable=%v", name, j, f.Name, f.Type, f.Nullable, wf.Name, wf.Type, wf.Nullable)
				}
				sf := sqlRes.schema.Field(j)
				if sf.Name != f.Name || !arrow.TypeEqual(sf.Type, f.Type) {
					t.Fatalf("%s: column %d is %s %s in table_schema but %s %s in a query", name, j, f.Name, f.Type, sf.Name, sf.Type)
				}
				md := f.Metadata
				cm := flightsql.ColumnMetadata{Data: &md}
				checks := []struct {
					key, want string
					get       func() (string, bool)
				}{
					{flightsql.CatalogNameKey, "tsflight", cm.CatalogName},
					{flightsql.SchemaNameKey, "main", cm.SchemaName},
					{flightsql.TableNameKey, name, cm.TableName},
					{flightsql.TypeNameKey, w.types[j], cm.TypeName},
				}
				for _, c := range checks {
					if v, ok := c.get(); !ok || v != c.want {
						t.Fatalf("%s.%s: %s = %q (present %v), want %q", name, f.Name, c.key, v, ok, c.want)
					}
				}
				if ro, ok := cm.IsReadOnly(); !ok || !ro {
					t.Fatalf("%s.%s: IS_READ_ONLY = %v (present %v), want true", name, f.Name, ro, ok)
				}
				if ai, ok := cm.IsAutoIncrement(); !ok || ai {
					t.Fatalf("%s.%s: IS_AUTO_INCREMENT = %v (present %v), want false", name, f.Name, ai, ok)
				}
			}
		}
	}
	if fmt.Sprint(names) != "[cpu cpu2 disk]" {
		t.Fatalf("tables %v, want [cpu cpu2 disk]", names)
	}

	// include_schema with a filter.
	info, err = s.client.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true, TableNameFilterPattern: strp("disk")})
	r = s.metaFetch(ctx, "GetTables(include_schema, disk)", info, err, schema_ref.TablesWithIncludedSchema)
	if r.rows != 1 {
		t.Fatalf("%d rows, want 1", r.rows)
	}
	info, err = s.client.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true, TableTypes: []string{"VIEW"}})
	r = s.metaFetch(ctx, "GetTables(include_schema, VIEW)", info, err, schema_ref.TablesWithIncludedSchema)
	if r.rows != 0 {
		t.Fatalf("%d rows, want 0", r.rows)
	}
}

func TestMetadataTableTypes(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	info, err := s.client.GetTableTypes(ctx)
	r := s.metaFetch(ctx, "GetTableTypes", info, err, schema_ref.TableTypes)
	if got := fmt.Sprint(r.rowsOf()); got != "[TABLE]" {
		t.Fatalf("table types %s, want [TABLE]", got)
	}
}

// sqlInfoValue is one decoded SqlInfo row: the union type code and the
// value rendered as text.
type sqlInfoValue struct {
	code arrow.UnionTypeCode
	val  string
}

func (s *sqlServer) sqlInfo(ctx context.Context, ids []flightsql.SqlInfo) ([]uint32, []sqlInfoValue) {
	s.t.Helper()
	info, err := s.client.GetSqlInfo(ctx, ids)
	r := s.metaFetch(ctx, fmt.Sprintf("GetSqlInfo(%v)", ids), info, err, schema_ref.SqlInfo)
	var names []uint32
	var vals []sqlInfoValue
	for _, rec := range r.recs {
		nm := rec.Column(0).(*array.Uint32)
		un := rec.Column(1).(*array.DenseUnion)
		for i := 0; i < int(rec.NumRows()); i++ {
			names = append(names, nm.Value(i))
			code := un.TypeCode(i)
			child := un.Field(un.ChildID(i))
			vals = append(vals, sqlInfoValue{code, child.ValueStr(int(un.ValueOffset(i)))})
		}
	}
	return names, vals
}

func TestMetadataSqlInfo(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	const (
		str, boolean, i32 = arrow.UnionTypeCode(0), arrow.UnionTypeCode(1), arrow.UnionTypeCode(3)
	)
	want := []sqlInfoValue{
		0:  {str, "tsflight"},
		1:  {str, "dev"},
		2:  {str, arrow.PkgVersion},
		3:  {boolean, "false"},
		4:  {boolean, "true"},
		5:  {boolean, "false"},
		6:  {str, ""},
		7:  {str, ""},
		8:  {i32, "0"}, // SQL_SUPPORTED_TRANSACTION_NONE
		9:  {boolean, "true"},
		10: {boolean, "true"},
		11: {boolean, "false"},
	}
	var ids []flightsql.SqlInfo
	for i := range want {
		ids = append(ids, flightsql.SqlInfo(i))
	}
	names, vals := s.sqlInfo(ctx, ids)
	if len(names) != len(want) {
		t.Fatalf("%d rows, want %d", len(names), len(want))
	}
	for i := range want {
		if names[i] != uint32(i) {
			t.Fatalf("row %d is info %d, want %d (the requested order)", i, names[i], i)
		}
		if vals[i] != want[i] {
			t.Fatalf("info %d (%s) = type code %d value %q, want type code %d value %q", i, pb.SqlInfo(i), vals[i].code, vals[i].val, want[i].code, want[i].val)
		}
	}
	// A reordered subset answers in the requested order.
	names, vals = s.sqlInfo(ctx, []flightsql.SqlInfo{10, 0, 8})
	if fmt.Sprint(names) != "[10 0 8]" || vals[0] != want[10] || vals[1] != want[0] || vals[2] != want[8] {
		t.Fatalf("GetSqlInfo(10, 0, 8) = %v %v", names, vals)
	}
	// The timeouts (100, 101) are int32 zero: none.
	names, vals = s.sqlInfo(ctx, []flightsql.SqlInfo{100, 101})
	if fmt.Sprint(names) != "[100 101]" || vals[0] != (sqlInfoValue{i32, "0"}) || vals[1] != (sqlInfoValue{i32, "0"}) {
		t.Fatalf("GetSqlInfo(100, 101) = %v %v", names, vals)
	}

	// No ids: every registered id, each once, each a standard id (the JDBC
	// driver keys them by enum), with the values a targeted request gives.
	names, vals = s.sqlInfo(ctx, nil)
	seen := map[uint32]sqlInfoValue{}
	for i, n := range names {
		if _, dup := seen[n]; dup {
			t.Fatalf("info %d listed twice", n)
		}
		if _, std := pb.SqlInfo_name[int32(n)]; !std {
			t.Fatalf("info %d is not a standard SqlInfo id", n)
		}
		seen[n] = vals[i]
	}
	for i := range want {
		if seen[uint32(i)] != want[i] {
			t.Fatalf("all-ids answer: info %d = %v, want %v", i, seen[uint32(i)], want[i])
		}
	}
	for _, id := range []uint32{100, 101, 504, 507, 513} {
		if _, ok := seen[id]; !ok {
			t.Fatalf("all-ids answer lacks info %d (%s)", id, pb.SqlInfo(id))
		}
	}
	var all []flightsql.SqlInfo
	for n := range seen {
		all = append(all, flightsql.SqlInfo(n))
	}
	slices.Sort(all)
	names2, vals2 := s.sqlInfo(ctx, all)
	for i, n := range names2 {
		if vals2[i] != seen[n] {
			t.Fatalf("info %d: %v when requested, %v in the all-ids answer", n, vals2[i], seen[n])
		}
	}

	// An id the server does not know.
	info, err := s.client.GetSqlInfo(ctx, []flightsql.SqlInfo{0, 99999})
	if err == nil {
		var r *result
		if r, err = s.fetch(ctx, info); err == nil {
			r.release()
		}
	}
	wantCode(t, "GetSqlInfo(0, 99999)", err, codes.NotFound, "99999")
}

func TestMetadataKeysAreEmpty(t *testing.T) {
	s, ctx := startCPU(t, 1)
	ref := flightsql.TableRef{Catalog: strp("tsflight"), DBSchema: strp("main"), Table: "cpu"}
	info, err := s.client.GetPrimaryKeys(ctx, ref)
	if r := s.metaFetch(ctx, "GetPrimaryKeys", info, err, schema_ref.PrimaryKeys); r.rows != 0 {
		t.Fatalf("primary keys: %v", r.rowsOf())
	}
	info, err = s.client.GetImportedKeys(ctx, ref)
	if r := s.metaFetch(ctx, "GetImportedKeys", info, err, schema_ref.ImportedKeys); r.rows != 0 {
		t.Fatalf("imported keys: %v", r.rowsOf())
	}
	info, err = s.client.GetExportedKeys(ctx, ref)
	if r := s.metaFetch(ctx, "GetExportedKeys", info, err, schema_ref.ExportedKeys); r.rows != 0 {
		t.Fatalf("exported keys: %v", r.rowsOf())
	}
	info, err = s.client.GetCrossReference(ctx, ref, flightsql.TableRef{Table: "cpu"})
	if r := s.metaFetch(ctx, "GetCrossReference", info, err, schema_ref.CrossReference); r.rows != 0 {
		t.Fatalf("cross reference: %v", r.rowsOf())
	}
}

func TestMetadataXdbcTypeInfo(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	info, err := s.client.GetXdbcTypeInfo(ctx, nil)
	r := s.metaFetch(ctx, "GetXdbcTypeInfo", info, err, schema_ref.XdbcTypeInfo)
	if r.rows == 0 {
		t.Fatal("GetXdbcTypeInfo: no rows")
	}
	type row struct {
		name string
		code int32
		text string
	}
	var rows []row
	for _, rec := range r.recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			one := rec.NewSlice(int64(i), int64(i+1))
			rows = append(rows, row{rec.Column(0).(*array.String).Value(i), rec.Column(1).(*array.Int32).Value(i), recRows(one)[0]})
			one.Release()
		}
	}
	byName := map[string]int32{}
	for _, rw := range rows {
		byName[rw.name] = rw.code
	}
	// The types a tsflight table holds, with their java.sql.Types codes.
	for name, code := range map[string]int32{"BIGINT": -5, "DOUBLE": 8, "VARCHAR": 12, "BOOLEAN": 16, "TIMESTAMPTZ": 2014, "TIMESTAMP": 93} {
		if got, ok := byName[name]; !ok || got != code {
			t.Fatalf("type %s: code %d (present %v), want %d", name, got, ok, code)
		}
	}
	// Filtering by data type returns exactly the rows of that type.
	for _, code := range []int32{93, 12, -5, 2014, 12345} {
		c := code
		info, err := s.client.GetXdbcTypeInfo(ctx, &c)
		fr := s.metaFetch(ctx, fmt.Sprintf("GetXdbcTypeInfo(%d)", code), info, err, schema_ref.XdbcTypeInfo)
		var want []string
		for _, rw := range rows {
			if rw.code == code {
				want = append(want, rw.text)
			}
		}
		if got := fr.rowsOf(); !slices.Equal(got, want) {
			t.Fatalf("GetXdbcTypeInfo(%d) = %v, want %v", code, got, want)
		}
		if code == 93 && (len(want) != 1 || !strings.HasPrefix(want[0], "TIMESTAMP|93|")) {
			t.Fatalf("GetXdbcTypeInfo(93) = %v, want the one TIMESTAMP row", want)
		}
		if code == 12345 && len(want) != 0 {
			t.Fatalf("GetXdbcTypeInfo(12345) = %v, want none", want)
		}
	}
}
