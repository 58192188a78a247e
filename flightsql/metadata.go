//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/tableformat"
)

// Metadata: one catalog (tsflight) holding one schema (main) holding every
// table under the root (TableNames: damaged tables too, not phantom
// directories), all of type TABLE. With schemas, a table that cannot be
// read has an empty one whose metadata says why
// (flightserver.UnreadableSchema). Keys and cross references are
// empty: the tables have none. Metadata FlightInfos reuse the command as
// the ticket, so DoGet recomputes the answer.

const tableType = "TABLE"

// metaInfo is the FlightInfo of a metadata command.
func (s *Server) metaInfo(desc *flight.FlightDescriptor, sc *arrow.Schema) *flight.FlightInfo {
	return &flight.FlightInfo{
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		Schema:           flight.SerializeSchema(sc, s.alloc),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
}

// rowsStream sends one batch of schema sc built from rows.
func (s *Server) rowsStream(sc *arrow.Schema, rows [][]any) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.alloc, sc)
	defer b.Release()
	for _, r := range rows {
		for i, v := range r {
			if err := appendValue(b.Field(i), v); err != nil {
				return nil, nil, internalf("building %s: %v", sc.Field(i).Name, err)
			}
		}
	}
	rec := b.NewRecordBatch()
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: rec}
	close(ch)
	return sc, ch, nil
}

func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.BinaryBuilder:
		b.Append(v.([]byte))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.Uint8Builder:
		b.Append(v.(uint8))
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.ListBuilder:
		b.Append(true)
		for _, x := range v.([]string) {
			b.ValueBuilder().(*array.StringBuilder).Append(x)
		}
	default:
		return fmt.Errorf("unexpected builder %T", b)
	}
	return nil
}

// maxPattern bounds a LIKE filter pattern: names are at most 128
// characters, and each name is matched in len(pattern) × len(name) steps.
const maxPattern = 1024

// checkPatterns refuses filter patterns longer than maxPattern bytes.
func checkPatterns(patterns ...*string) error {
	for _, p := range patterns {
		if p != nil && len(*p) > maxPattern {
			return invalidf("a filter pattern of %d bytes: at most %d", len(*p), maxPattern)
		}
	}
	return nil
}

// like reports whether s matches an SQL LIKE pattern (% any run, _ one
// character, \ escapes). A nil pattern matches everything.
func like(pattern *string, s string) bool {
	if pattern == nil {
		return true
	}
	return likeMatch([]rune(*pattern), []rune(s))
}

// likeMatch matches greedily with one backtrack point, the last %: each %
// commits the text matched before it, so the work is at most
// len(p) × len(s) (a recursive matcher took exponential time on
// %_%_%_…! against a long table name: the fifth review held a core for
// minutes with one GetTables call).
func likeMatch(p, s []rune) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; {
			case c == '%':
				starP, starS = pi, si
				pi++
				continue
			case c == '_':
				pi++
				si++
				continue
			default:
				lit := c
				step := 1
				if c == '\\' && pi+1 < len(p) {
					lit, step = p[pi+1], 2
				}
				if lit == s[si] {
					pi += step
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '%' {
		pi++
	}
	return pi == len(p)
}

// catalogMatches reports whether a catalog filter admits tsflight.
func catalogMatches(c *string) bool { return c == nil || *c == catalogName }

func (s *Server) GetFlightInfoCatalogs(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metaInfo(desc, schema_ref.Catalogs), nil
}

func (s *Server) DoGetCatalogs(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.rowsStream(schema_ref.Catalogs, [][]any{{catalogName}})
}

func (s *Server) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metaInfo(desc, schema_ref.DBSchemas), nil
}

func (s *Server) DoGetDBSchemas(_ context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	if err := checkPatterns(cmd.GetDBSchemaFilterPattern()); err != nil {
		return nil, nil, err
	}
	var rows [][]any
	if catalogMatches(cmd.GetCatalog()) && like(cmd.GetDBSchemaFilterPattern(), schemaName) {
		rows = append(rows, []any{catalogName, schemaName})
	}
	return s.rowsStream(schema_ref.DBSchemas, rows)
}

func (s *Server) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return s.metaInfo(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return s.metaInfo(desc, schema_ref.Tables), nil
}

func (s *Server) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	sc := schema_ref.Tables
	if cmd.GetIncludeSchema() {
		sc = schema_ref.TablesWithIncludedSchema
	}
	if err := checkPatterns(cmd.GetDBSchemaFilterPattern(), cmd.GetTableNameFilterPattern()); err != nil {
		return nil, nil, err
	}
	var rows [][]any
	types := cmd.GetTableTypes()
	if !catalogMatches(cmd.GetCatalog()) || !like(cmd.GetDBSchemaFilterPattern(), schemaName) ||
		(len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return strings.EqualFold(t, tableType) })) {
		return s.rowsStream(sc, nil)
	}
	names, err := s.tableNames()
	if err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		if !like(cmd.GetTableNameFilterPattern(), n) {
			continue
		}
		row := []any{catalogName, schemaName, n, tableType}
		if cmd.GetIncludeSchema() {
			ts, err := s.tableSchema(ctx, n)
			if err != nil {
				// One table that cannot be read (a damaged log, a newer
				// protocol) must not fail the listing of the others
				// (ADBC get_objects lists the whole catalog this way): it
				// is listed with an empty schema saying what is wrong.
				if ctx.Err() != nil {
					return nil, nil, flightserver.Status(ctx.Err())
				}
				if status.Code(err) == codes.NotFound {
					continue // removed since it was listed
				}
				p := flightserver.ProblemOf(err)
				s.log.Warn("GetTables: listing a table that cannot be read with an empty schema", "table", n, "state", p.State, "code", p.Code, "error", p.Error)
				ts = flightserver.UnreadableSchema(p)
			}
			row = append(row, flight.SerializeSchema(ts, s.alloc))
		}
		rows = append(rows, row)
	}
	return s.rowsStream(sc, rows)
}

// tableSchema is a table's Arrow schema as SQL sees it, each column
// annotated with the Flight SQL column metadata JDBC's getColumns reads.
func (s *Server) tableSchema(ctx context.Context, name string) (*arrow.Schema, error) {
	tb, err := s.table(ctx, name)
	if err != nil {
		return nil, err
	}
	st := tb.State()
	var fields []arrow.Field
	if st.Schema() == nil {
		f := arrow.Field{Name: st.Index().Column, Nullable: true, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}}
		switch st.Index().Kind.Type {
		case tableformat.IndexInt64:
			f.Type = arrow.PrimitiveTypes.Int64
		case tableformat.IndexUInt64:
			f.Type = arrow.PrimitiveTypes.Uint64
		}
		fields = []arrow.Field{f}
	} else {
		as, err := tableformat.ArrowSchema(st.Schema())
		if err != nil {
			return nil, internalf("table %s: %v", name, err)
		}
		fields = slices.Clone(as.Fields())
	}
	for i, f := range fields {
		typ, err := duckType(f.Type)
		if err != nil {
			typ = f.Type.String()
		}
		mb := flightsql.NewColumnMetadataBuilder().CatalogName(catalogName).SchemaName(schemaName).TableName(name).
			TypeName(typ).IsAutoIncrement(false).IsCaseSensitive(false).IsReadOnly(true).IsSearchable(true)
		if d, ok := f.Type.(*arrow.Decimal128Type); ok {
			mb.Precision(d.Precision).Scale(d.Scale)
		}
		fields[i].Metadata = mb.Metadata()
	}
	return arrow.NewSchema(fields, nil), nil
}

func (s *Server) GetFlightInfoTableTypes(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metaInfo(desc, schema_ref.TableTypes), nil
}

func (s *Server) DoGetTableTypes(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.rowsStream(schema_ref.TableTypes, [][]any{{tableType}})
}

func (s *Server) GetFlightInfoPrimaryKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metaInfo(desc, schema_ref.PrimaryKeys), nil
}

func (s *Server) DoGetPrimaryKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.rowsStream(schema_ref.PrimaryKeys, nil)
}

func (s *Server) GetFlightInfoImportedKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metaInfo(desc, schema_ref.ImportedKeys), nil
}

func (s *Server) DoGetImportedKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.rowsStream(schema_ref.ImportedKeys, nil)
}

func (s *Server) GetFlightInfoExportedKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metaInfo(desc, schema_ref.ExportedKeys), nil
}

func (s *Server) DoGetExportedKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.rowsStream(schema_ref.ExportedKeys, nil)
}

func (s *Server) GetFlightInfoCrossReference(_ context.Context, _ flightsql.CrossTableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metaInfo(desc, schema_ref.CrossReference), nil
}

func (s *Server) DoGetCrossReference(context.Context, flightsql.CrossTableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.rowsStream(schema_ref.CrossReference, nil)
}

func (s *Server) GetFlightInfoXdbcTypeInfo(_ context.Context, _ flightsql.GetXdbcTypeInfo, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metaInfo(desc, schema_ref.XdbcTypeInfo), nil
}

// xdbcType is one row of GetXdbcTypeInfo: a DuckDB type and its JDBC/ODBC
// type code (java.sql.Types numbering).
type xdbcType struct {
	name     string
	code     int32
	size     int32
	quote    bool
	unsigned bool
	params   []string
}

var xdbcTypes = []xdbcType{
	{"BOOLEAN", 16, 1, false, false, nil},
	{"TINYINT", -6, 3, false, false, nil},
	{"SMALLINT", 5, 5, false, false, nil},
	{"INTEGER", 4, 10, false, false, nil},
	{"BIGINT", -5, 19, false, false, nil},
	{"UBIGINT", -5, 20, false, true, nil},
	{"FLOAT", 6, 7, false, false, nil},
	{"DOUBLE", 8, 15, false, false, nil},
	{"DECIMAL", 3, 38, false, false, []string{"precision", "scale"}},
	{"VARCHAR", 12, 1 << 30, true, false, nil},
	{"BLOB", -3, 1 << 30, true, false, nil},
	{"DATE", 91, 10, true, false, nil},
	{"TIME", 92, 15, true, false, nil},
	{"TIMESTAMP", 93, 26, true, false, nil},
	{"TIMESTAMPTZ", 2014, 32, true, false, nil},
}

func (s *Server) DoGetXdbcTypeInfo(_ context.Context, cmd flightsql.GetXdbcTypeInfo) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	var rows [][]any
	for _, t := range xdbcTypes {
		if dt := cmd.GetDataType(); dt != nil && *dt != t.code {
			continue
		}
		var prefix, suffix any
		if t.quote {
			prefix, suffix = "'", "'"
		}
		params := t.params
		if params == nil {
			params = []string{}
		}
		rows = append(rows, []any{t.name, t.code, t.size, prefix, suffix, params,
			int32(1) /* nullable */, false, int32(3) /* searchable */, t.unsigned, false, false,
			t.name, nil, nil, t.code, nil, nil, nil})
	}
	return s.rowsStream(schema_ref.XdbcTypeInfo, rows)
}
