package flightserver

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
)

// A plain Flight server (no Flight SQL compiled in) answers Flight SQL
// commands with UNIMPLEMENTED and why, for queries and for bulk ingest,
// and writes nothing.
func TestFlightSQLCommandsRefusedWithReason(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	sql := &flightsql.Client{Client: ts.client, Alloc: ts.cliMem}

	_, err := sql.Execute(ctx, "SELECT 1")
	wantCode(t, "Execute", err, codes.Unimplemented, "Flight SQL is not served", "duckdb_arrow", "CommandStatementQuery")

	_, err = sql.GetTables(ctx, &flightsql.GetTablesOpts{})
	wantCode(t, "GetTables", err, codes.Unimplemented, "Flight SQL is not served", "CommandGetTables")

	schema := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms}}, nil)
	b := array.NewRecordBuilder(ts.cliMem, schema)
	b.Field(0).(*array.TimestampBuilder).Append(0)
	rec := b.NewRecordBatch()
	b.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	_, err = sql.ExecuteIngest(ctx, rdr, &flightsql.ExecuteIngestOpts{
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionCreate, IfExists: flightsql.TableDefinitionOptionsTableExistsOptionAppend},
		Table:                  "ingested",
	})
	wantCode(t, "ExecuteIngest", err, codes.Unimplemented, "Flight SQL is not served", "CommandStatementIngest")
	names, err := ts.svc.TableNames()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Fatalf("tables after a refused ingest: %v", names)
	}

	// A JSON command still gets the JSON error.
	_, err = ts.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("{")})
	wantCode(t, "bad JSON", err, codes.InvalidArgument, "malformed JSON")
}
