// Package testkit holds what the module's tests and benchmarks share, so
// that each is written once:
//
//   - Rows, the comparison of query results across systems (tsflight,
//     DuckDB, the Python package): canonical values, compared as
//     multisets with floats to 1e-9 relative;
//   - TSBSSteps, TSBS cpu-only rows of bench/tsbs by step range, for tests
//     that append ranges of steps rather than bench/tsbs's hourly
//     deliveries.
//
// TSBS data and queries come from bench/tsbs only.
//
// It is internal to the module, and the servers' non-test code must not
// import it. It imports no package of the module but bench/tsbs (which
// imports none), so that every package's own tests can use it:
// tableformat's internal tests could not import a kit that imported
// tableformat.
package testkit
