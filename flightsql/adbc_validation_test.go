//go:build duckdb_arrow

package flightsql

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-adbc/go/adbc/validation"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/suite"
)

// tsflightQuirks runs arrow-adbc's validation suites (DatabaseTests,
// ConnectionTests, StatementTests) with the ADBC Go Flight SQL driver
// against a live tsflight server: a fresh server over a fresh root for
// every test. What a quirk turns off is said next to it.
type tsflightQuirks struct {
	mem    *memory.CheckedAllocator
	server *sqlServer
}

func (q *tsflightQuirks) SetupDriver(t *testing.T) adbc.Driver {
	q.server = startSQL(t)
	q.mem = memory.NewCheckedAllocator(memory.DefaultAllocator)
	return adbcflightsql.NewDriver(q.mem)
}

func (q *tsflightQuirks) TearDownDriver(t *testing.T, _ adbc.Driver) {
	q.mem.AssertSize(t, 0)
}

func (q *tsflightQuirks) DatabaseOptions() map[string]string {
	return map[string]string{adbc.OptionKeyURI: "grpc://" + q.server.srv.Addr().String()}
}

func (q *tsflightQuirks) BindParameter(int) string { return "?" }

// Bulk ingest works (see ingest_test.go and examples/python/ingest_adbc.py)
// but the suite's ingest tests cannot apply to a time-series table: they
// ingest a lone nullable int64 column holding a null (every row of a
// tsflight table needs an index value), and append the very same row twice
// (a table refuses rows that cover already covered index intervals, which
// is how it keeps rows from being duplicated), and mode replace is refused
// until the format can replace a table atomically.
func (q *tsflightQuirks) SupportsBulkIngest(string) bool { return false }

func (q *tsflightQuirks) SupportsConcurrentStatements() bool { return true }

// tsflight has one catalog and one schema and no session options, so the
// driver cannot report a current catalog or schema.
func (q *tsflightQuirks) SupportsCurrentCatalogSchema() bool { return false }

func (q *tsflightQuirks) SupportsGetSetOptions() bool   { return true }
func (q *tsflightQuirks) SupportsExecuteSchema() bool   { return true }
func (q *tsflightQuirks) SupportsPartitionedData() bool { return true }

// GetStatistics is not part of Flight SQL; the driver answers it.
func (q *tsflightQuirks) SupportsStatistics() bool { return false }

// Transactions: SQL is read-only and an ingest is one atomic commit, so
// the server advertises none (FLIGHT_SQL_SERVER_TRANSACTION = NONE).
func (q *tsflightQuirks) SupportsTransactions() bool { return false }

func (q *tsflightQuirks) SupportsGetParameterSchema() bool            { return true }
func (q *tsflightQuirks) SupportsDynamicParameterBinding() bool       { return true }
func (q *tsflightQuirks) SupportsErrorIngestIncompatibleSchema() bool { return true }

func (q *tsflightQuirks) GetMetadata(code adbc.InfoCode) interface{} {
	switch code {
	case adbc.InfoDriverName:
		return "ADBC Flight SQL Driver - Go"
	case adbc.InfoDriverVersion, adbc.InfoDriverArrowVersion:
		// The driver reads these from the build info, which a test
		// binary does not carry (golang/go#33976).
		return "(unknown or development build)"
	case adbc.InfoDriverADBCVersion:
		return adbc.AdbcVersion1_1_0
	case adbc.InfoVendorName:
		return "tsflight"
	case adbc.InfoVendorVersion:
		return "dev"
	case adbc.InfoVendorArrowVersion:
		return arrow.PkgVersion
	}
	return nil
}

// CreateSampleTable bulk-ingests r as a table indexed by its first int64
// column (granularity 1). Rows whose index is null are left out: a
// time-series row without an index value cannot be stored. The metadata
// tests that use the table only look at its schema.
func (q *tsflightQuirks) CreateSampleTable(name string, r arrow.RecordBatch) error {
	idx := -1
	for i, f := range r.Schema().Fields() {
		if f.Type.ID() == arrow.INT64 {
			idx = i
			break
		}
	}
	var rows []arrow.RecordBatch
	for i := 0; i < int(r.NumRows()); i++ {
		if r.Column(idx).IsValid(i) {
			rows = append(rows, r.NewSlice(int64(i), int64(i+1)))
		}
	}
	defer func() {
		for _, row := range rows {
			row.Release()
		}
	}()
	cols := make([]arrow.Array, r.NumCols())
	for c := range cols {
		parts := make([]arrow.Array, len(rows))
		for i, row := range rows {
			parts[i] = row.Column(c)
		}
		col, err := array.Concatenate(parts, q.mem)
		if err != nil {
			return err
		}
		defer col.Release()
		cols[c] = col
	}
	rec := array.NewRecordBatch(r.Schema(), cols, int64(len(rows)))
	defer rec.Release()
	opts := map[string]string{"tsflight.index_column": r.Schema().Field(idx).Name, "tsflight.granularity": "1"}
	_, err := q.server.ingest(context.Background(), name, "create", opts, rec)
	return err
}

func (q *tsflightQuirks) SampleTableSchemaMetadata(table string, dt arrow.DataType) arrow.Metadata {
	typeName := map[arrow.Type]string{arrow.INT64: "BIGINT", arrow.STRING: "VARCHAR"}[dt.ID()]
	return arrow.MetadataFrom(map[string]string{
		flightsql.CatalogNameKey: "tsflight", flightsql.SchemaNameKey: "main", flightsql.TableNameKey: table,
		flightsql.TypeNameKey: typeName, flightsql.IsAutoIncrementKey: "0", flightsql.IsCaseSensitiveKey: "0",
		flightsql.IsReadOnlyKey: "1", flightsql.IsSearchableKey: "1",
	})
}

// DropTable: tsflight has no DROP (SQL is read-only and tables are
// append-only). Each test runs on a fresh root, so a table to drop exists
// only if the test created it, which the suites do not do before dropping.
func (q *tsflightQuirks) DropTable(_ adbc.Connection, name string) error {
	if _, err := os.Stat(filepath.Join(q.server.root, name)); err == nil {
		return os.ErrExist
	}
	return nil
}

func (q *tsflightQuirks) Catalog() string         { return "tsflight" }
func (q *tsflightQuirks) DBSchema() string        { return "main" }
func (q *tsflightQuirks) Alloc() memory.Allocator { return q.mem }

func TestADBCValidation(t *testing.T) {
	q := &tsflightQuirks{}
	suite.Run(t, &validation.DatabaseTests{Quirks: q})
	suite.Run(t, &validation.ConnectionTests{Quirks: q})
	suite.Run(t, &validation.StatementTests{Quirks: q})
}
