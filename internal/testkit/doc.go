// Package testkit holds what the module's tests and benchmarks share, so
// that each is written once:
//
//   - Rows, the comparison of query results across systems (tsflight,
//     DuckDB, the Python package): canonical values, compared as
//     multisets with floats to 1e-9 relative;
//   - TSBSSteps, TSBS cpu-only rows of bench/tsbs by step range, for tests
//     that append ranges of steps rather than bench/tsbs's hourly
//     deliveries;
//   - what the servers' tests share (flightserver's, flightsql's, and any
//     other package's): Context, WantCode and CheckCode for gRPC answers;
//     Put, DoGet, ReadBatches, Drain, Collect, ListActions and Schema for
//     Flight calls; Snapshot, ChangedFiles, SnapshotDiff, SameSnapshot,
//     CopyDir and CopyFormat6Table for what is on disk;
//     SettledGoroutines and WaitGoroutines for cancellations; StartChild
//     and StopProcess for servers in child processes; Buffer, PackAny,
//     Median and Alternate.
//
// TSBS data and queries come from bench/tsbs only.
//
// It is internal to the module, and the servers' non-test code must not
// import it. It imports no package of the module but bench/tsbs (which
// imports none), so that every package's own tests can use it:
// tableformat's internal tests could not import a kit that imported
// tableformat.
package testkit
