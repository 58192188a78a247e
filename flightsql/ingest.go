//go:build duckdb_arrow

package flightsql

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// Bulk ingest (CommandStatementIngest) appends the stream through the same
// path as a DoPut: one segment, one commit, all or nothing.
//
// Creating a table needs what a time-series table is made of. It comes
// from the command's options or, because the ADBC driver does not forward
// ingest options, from gRPC request headers (ADBC option
// adbc.flight.sql.rpc.call_header.<header>):
//
//	option                   header                        meaning
//	tsflight.index_column    x-tsflight-index-column       the index column (default: the only timestamp column)
//	tsflight.granularity     x-tsflight-granularity        coverage interval, e.g. 1s, 1m, 1h, 1d, or an integer width (required to create)
//	tsflight.entity_columns  x-tsflight-entity-columns     comma-separated entity columns (default none)
//	tsflight.timezone        x-tsflight-timezone           time zone carried as metadata (default none)
//
// The index type follows the index column's Arrow type (timestamp, int64
// or uint64). Mode create is exclusive: of concurrent creates on one name
// exactly one creates the table and appends; the others are ALREADY_EXISTS
// and write nothing (flightserver.Service.Create). Mode replace is refused: the format has no atomic way to
// replace a table's contents yet.

var ingestKeys = []string{"index_column", "granularity", "entity_columns", "timezone"}

// ingestOption returns an ingest setting from the command's options or the
// request's headers.
func ingestOption(ctx context.Context, opts map[string]string, key string) string {
	if v, ok := opts["tsflight."+key]; ok {
		return strings.TrimSpace(v)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if vs := md.Get("x-tsflight-" + strings.ReplaceAll(key, "_", "-")); len(vs) > 0 {
		// The ADBC driver appends a header each time the option is set
		// again on a statement: the last setting wins.
		return strings.TrimSpace(vs[len(vs)-1])
	}
	return ""
}

// DoPutCommandStatementIngest appends the stream to the named table,
// creating it first when the mode allows.
func (s *Server) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr flight.MessageReader) (int64, error) {
	name := cmd.GetTable()
	switch {
	case len(cmd.GetTransactionId()) > 0:
		return 0, errNoTransactions()
	case cmd.GetTemporary():
		return 0, invalidf("ingest: temporary tables are not supported (every tsflight table is durable)")
	case cmd.GetCatalog() != "" && cmd.GetCatalog() != catalogName:
		return 0, reqerr.Errorf(tableformat.ErrNotFound, "ingest: catalog %q does not exist (the only catalog is %q)", cmd.GetCatalog(), catalogName)
	case cmd.GetSchema() != "" && cmd.GetSchema() != schemaName:
		return 0, reqerr.Errorf(tableformat.ErrNotFound, "ingest: schema %q does not exist (the only schema is %q)", cmd.GetSchema(), schemaName)
	}
	for k := range cmd.GetOptions() {
		if key, ok := strings.CutPrefix(k, "tsflight."); ok && !slices.Contains(ingestKeys, key) {
			return 0, invalidf("ingest: unknown option %q (known: tsflight.%s)", k, strings.Join(ingestKeys, ", tsflight."))
		}
	}
	if err := flightserver.ValidateTableName(name); err != nil {
		return 0, err
	}
	ifNotExist, ifExists := flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionFail
	if td := cmd.GetTableDefinitionOptions(); td != nil {
		if td.IfNotExist != flightsql.TableDefinitionOptionsTableNotExistOptionUnspecified {
			ifNotExist = td.IfNotExist
		}
		if td.IfExists != flightsql.TableDefinitionOptionsTableExistsOptionUnspecified {
			ifExists = td.IfExists
		}
	}
	if ifExists == flightsql.TableDefinitionOptionsTableExistsOptionReplace {
		return 0, reqerr.Errorf(reqerr.ErrUnimplemented, "ingest: mode replace is not supported: tsflight tables are append-only and the table format has no atomic replace yet; use create, append or create_append")
	}
	tb, err := s.table(ctx, name)
	switch {
	case err == nil && ifExists == flightsql.TableDefinitionOptionsTableExistsOptionFail:
		return 0, reqerr.Errorf(tableformat.ErrAlreadyExists, "ingest: table %s already exists (mode create); use mode append or create_append to add rows", name)
	case err != nil && status.Code(err) != codes.NotFound:
		return 0, err
	case err != nil && ifNotExist == flightsql.TableDefinitionOptionsTableNotExistOptionFail:
		return 0, reqerr.Errorf(tableformat.ErrNotFound, "ingest: table %s does not exist (mode append); use mode create or create_append", name)
	case err != nil:
		spec, err := ingestSpec(ctx, cmd.GetOptions(), rdr.Schema())
		if err != nil {
			return 0, err
		}
		if ifExists == flightsql.TableDefinitionOptionsTableExistsOptionFail {
			// Mode create is exclusive: of concurrent creates on one name
			// exactly one creates the table; the others must not append to
			// it.
			tb, err = s.svc.Create(ctx, name, spec, rdr.Schema())
			if status.Code(err) == codes.AlreadyExists {
				return 0, reqerr.Errorf(tableformat.ErrAlreadyExists, "ingest: table %s already exists (mode create; another ingest created it first); use mode append or create_append to add rows", name)
			}
		} else {
			tb, _, err = s.svc.OpenOrCreate(ctx, name, spec, rdr.Schema())
		}
		if err != nil {
			return 0, err
		}
	}
	res, err := s.svc.Append(ctx, tb, rdr)
	if err != nil {
		return 0, err
	}
	s.svc.CountRows(flightserver.ViaSQLIngest, int64(res.Rows))
	s.log.Debug("ingest", "table", name, "version", res.Version, "rows", res.Rows)
	return int64(res.Rows), nil
}

// ingestSpec builds the create-table spec of an ingest from its options
// and the stream's schema.
func ingestSpec(ctx context.Context, opts map[string]string, sc *arrow.Schema) (*flightserver.TableSpec, error) {
	spec := &flightserver.TableSpec{IndexColumn: ingestOption(ctx, opts, "index_column")}
	if spec.IndexColumn == "" {
		var ts []string
		for _, f := range sc.Fields() {
			if f.Type.ID() == arrow.TIMESTAMP {
				ts = append(ts, f.Name)
			}
		}
		if len(ts) != 1 {
			return nil, invalidf(
				"ingest: creating a table needs its index column: set option tsflight.index_column or header x-tsflight-index-column (the data has %d timestamp columns: %s)", len(ts), strings.Join(ts, ", "))
		}
		spec.IndexColumn = ts[0]
	}
	idx, ok := sc.FieldsByName(spec.IndexColumn)
	if !ok {
		return nil, invalidf("ingest: index column %q is not in the data (columns: %s)", spec.IndexColumn, fieldList(sc))
	}
	switch idx[0].Type.ID() {
	case arrow.TIMESTAMP:
		spec.IndexType = "timestamp"
	case arrow.INT64:
		spec.IndexType = "int64"
	case arrow.UINT64:
		spec.IndexType = "uint64"
	default:
		return nil, invalidf("ingest: index column %q has type %s; it must be a timestamp, int64 or uint64", spec.IndexColumn, idx[0].Type)
	}
	g := ingestOption(ctx, opts, "granularity")
	if g == "" {
		return nil, invalidf(
			"ingest: creating a table needs its coverage granularity: set option tsflight.granularity or header x-tsflight-granularity (e.g. 1s, 1m, 1h, 1d; an integer width for integer indexes)")
	}
	raw, _ := json.Marshal(g)
	spec.Granularity = raw
	if e := ingestOption(ctx, opts, "entity_columns"); e != "" {
		for _, c := range strings.Split(e, ",") {
			if c = strings.TrimSpace(c); c != "" {
				spec.EntityColumns = append(spec.EntityColumns, c)
			}
		}
	}
	if tz := ingestOption(ctx, opts, "timezone"); tz != "" {
		spec.Timezone = &tz
	}
	return spec, nil
}

func fieldList(sc *arrow.Schema) string {
	names := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
