// Package guard is the security and limits layer of a tsflight server, in
// front of its Flight service and knowing no table:
//
//   - [Auth] authenticates calls by token (Bearer or Basic, from a
//     [TokenSet] read from a token file and reloaded) or by verified
//     client certificate, and judges scopes: a read token is refused any
//     call the service's [Classifier] says writes.
//   - [ServerTLS] serves TLS from certificate files, reloaded when they
//     change, for the gRPC and the HTTP listener alike.
//   - [Gate] enforces [Limits]: message and header sizes, calls at once,
//     streams per connection, keepalive, connection age and the per-call
//     deadline, and knows each call's connection (so a stalled stream can
//     be cut).
//
// Refusals are errors with a category of flightserver/reqerr (the guard
// knows no table, so it cannot use the table's): ErrUnauthenticated,
// ErrPermissionDenied, ErrResourceExhausted, ErrInvalidArgument. The
// guard's edges (its interceptors, Tap, Handshake, CheckHTTP, Hold,
// Limits.Validate) turn them into gRPC statuses with reqerr.Status, the
// mapping flightserver.Status extends. Their messages never hold a secret.
package guard
