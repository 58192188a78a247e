// Package flightsql serves tsflight tables over Arrow Flight SQL, with
// queries run by an embedded DuckDB. It needs cgo and the build tag
// duckdb_arrow (go build -tags duckdb_arrow); without the tag the package
// is empty and cmd/tsflight serves plain Flight only.
//
// # Core types
//
//   - [Server] implements arrow-go's flightsql.Server over the tables of a
//     flightserver.Service. [Server.Service] is the one flight.FlightServer
//     to register: it routes Flight SQL commands to the Server and path
//     descriptors, tsflight's JSON commands, tickets and actions and
//     ListFlights to the plain Flight service, so one listener speaks both.
//   - [Options] tune result batches, DuckDB's threads and memory, and the
//     prepared-statement store.
//
// # How a query runs
//
// DuckDB parses the statement (json_serialize_sql); anything but a query
// is refused. tsflight finds the tables it names (bare, main.t or
// tsflight.main.t), takes one snapshot per table, and prunes each table's
// segments with the WHERE conjuncts that compare its index column with
// constants or parameters (=, <, <=, >, >=, BETWEEN, IN) and its entity
// columns with constants (=, IN). On a fresh DuckDB connection each reference
// is replaced, in the statement's text, by a subquery reading exactly the
// table's planned Parquet files with read_parquet (a temporary view when a
// reference cannot be located), and the statement runs otherwise
// unchanged. Predicates the planner does not understand only
// mean less pruning. Each execution logs its plan at debug level: "sql
// plan" with table, version, segments, planned and pruned.
//
// A reference written as the quoted name "cpu@v12" reads table cpu as of
// version 12 (asof.go): the snapshot comes from tableformat's StateAt, so
// only versions inside the table's keep window are readable, and is
// pruned like any other.
//
// The table functions ts_coverage(table, start, end [, entity]) and
// ts_gaps(table, start, end [, entity]) answer like the Flight actions
// coverage and gaps, on the same snapshot.
//
// Results stream as Arrow batches of about 64 Ki rows (at most 8 MiB),
// fetched from a streaming DuckDB result as the client reads (DuckDB's C
// API through duckdb-go-bindings: duckdb-go's driver materialises whole
// results); a cancelled stream interrupts the DuckDB query.
//
// # Caveats
//
//   - SQL is read-only: data arrives by bulk ingest (CommandStatementIngest)
//     or DoPut; schema changes by the Flight actions.
//   - No transactions (SqlInfo 8 says NONE): every ingest is one atomic
//     commit, and a request carrying a transaction id is refused.
//   - Tickets are stateless: a statement ticket carries the text, the
//     table versions and the bound parameters, and any server over the same
//     root can serve it while those versions' segments exist.
//   - One DuckDB serves every client, so a query may name only the root's
//     tables, CTEs and a few pure table functions (sqlguard.go): nothing
//     that reads files, shows or changes the engine's settings, logs or
//     profiling. Under that, DuckDB may read any file under the root and
//     nothing else; settings are locked.
//   - Authentication and scopes are flightserver.Auth's, on the same
//     listener: a read token may query, a write token may also ingest.
package flightsql
