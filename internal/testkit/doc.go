// Package testkit holds what the module's tests and benchmarks share, so
// that each is written once: today the comparison of query results
// across systems (Rows). Only this module can import it (it is internal);
// the servers' non-test code must not.
//
// TSBS data and queries come from bench/tsbs, which tests import
// directly.
package testkit
