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
//   - [Auth] is the authentication middleware: bearer tokens (or Basic with
//     the token as password, and the Flight Handshake that trades it for a
//     bearer in a response header), client certificates, and read or write
//     [Scope] per call, judged before a handler reads anything (scope.go
//     lists which calls write; anything unlisted does). [TokenSet] and
//     [TokenFile] hold the tokens as SHA-256 hashes; [ServerTLS] serves TLS
//     from PEM files, reloadable. docs/security.md is the contract.
//   - [Limits] and [Gate] bound messages, calls and time.
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
//   - All DoGet streams together hold at most Options.StreamBudget (1 GiB
//     by default): decoded batches and what gRPC holds for clients that
//     have not read it. Past it scans wait their turn, first come first;
//     a client that reads nothing for Options.StallTimeout (15 s) while
//     others wait has its connection closed, when the server listens
//     through Gate.Listener. The gaps action lists at most 10,000
//     gaps unless asked for more (at most 500,000) and says truncated.
//   - A table directory replaced under the server (a restore, a re-create)
//     is noticed by its handle, which reloads it; a table that cannot be
//     opened is listed with its problem (ListFlights app_metadata, see
//     TableProblem) and never fails a listing. The check action (and
//     tsflight check) verifies a table file by file and repairs what is
//     safe to repair.
//   - Without the Auth middleware every caller may do everything; Service
//     itself checks no credentials. Tickets are not tied to a caller: a
//     ticket is as good as the scan it names, for anyone with read scope.
package flightserver
