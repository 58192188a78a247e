// Package flightserver serves tsflight tables over Arrow Flight: DoPut
// appends, DoGet streams pruned time-range scans, DoAction creates tables,
// describes them, reports coverage and gaps and adds columns. The public
// contract (descriptor and ticket forms, action bodies, error codes) is in
// docs/flight.md.
//
// # Core types
//
//   - [Service] implements flight.FlightServer over a root directory that
//     holds one table per subdirectory. Register it on a flight.Server (or
//     wrap it, as package flightsql does, so that one listener speaks Flight
//     and Flight SQL).
//   - [ScanRequest] is the JSON body of a CMD descriptor; tickets carry it
//     pinned to the snapshot version GetFlightInfo planned on.
//   - [Status] is the single mapping from the table's error categories to
//     gRPC status codes.
//
// # Operating notes
//
//   - Table names match [A-Za-z_][A-Za-z0-9_]* (at most 128 characters); no
//     request can reach outside the root.
//   - One DoPut stream is one append: one Parquet segment and one commit.
//     Its size is bounded only by disk; rows are encoded as they arrive
//     (row groups of up to 1 Mi rows or 128 MiB are buffered), so memory
//     does not grow with the stream. A stream that fails or is cancelled
//     commits nothing and its files are removed.
//   - Concurrent DoPuts to one table encode in parallel and commit in turn;
//     a DoPut that loses the commit race re-checks overlap and retries.
//   - DoGet sends batches of 64 Ki to 128 Ki rows (Options.BatchRows to
//     twice that; only the last batch of a stream may be shorter): short
//     batches of the scan are merged. Go gRPC clients limit received
//     messages to 4 MiB by default, which such batches exceed at about 32
//     bytes a row; raise the client's limit (grpc.MaxCallRecvMsgSize), and
//     the server's receive limit (cmd/tsflight sets 64 MiB) for large DoPut
//     batches.
//   - Endpoints carry no location: fetch them on the same connection, in
//     parallel if you like.
package flightserver
