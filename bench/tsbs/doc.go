// Package tsbs generates the benchmark's data and queries: TSBS's
// cpu-only data set (github.com/timescale/tsbs, use case cpu-only),
// deterministically from a seed, and TSBS's query types over it in SQL.
//
// # Data
//
// One table, one row per host every Step (10 s by default) from Start
// for Duration, in the Schema: time (timestamp[us, UTC]); hostname
// host_<i> and TSBS's nine host tags with their value sets — region
// (nine AWS regions), datacenter (from the region's list), rack (0–99),
// os, arch, team, service (0–19), service_version (0–1) and
// service_environment — fixed per host; and ten int64 fields
// usage_user … usage_guest_nice, each a random walk in [0, 100] with
// N(0, 1) steps, as TSBS generates them (reflected at the bounds where
// TSBS clamps; see generate.go). Every value is a
// pure function of (Params.Seed, host, step), computed in integer
// arithmetic with the package's own SplitMix64 generator, so the same
// Params give byte-identical data on every platform, whatever part is
// generated and in whatever order. Generation builds Arrow arrays
// directly and runs at several million rows a second on one core (see
// BenchmarkGenerate).
//
// # Deliveries
//
// A loader appends the data hour by hour, as a collector would: see
// Params.Deliveries and Params.Batches. Like TSBS's IoT use case, the
// data may be imperfect: Params.DropFraction drops rows at random
// (Params.Missing tells which), and Params.LateFraction holds back part
// of some hours' hosts and delivers it after later hours, so that a
// system's coverage and gaps have something to find. Params.Rows is the
// number of rows that arrive in all.
//
// # Files
//
// Params.WriteParquet writes one Parquet file per delivery and a
// manifest (ReadManifest) beside them, so that every runner — the Go
// ones and the Python peer — loads the very same files in the same
// order.
//
// # Queries
//
// Params.Queries and Params.QueryInstances give the seven TSBS query
// types of the benchmark (single-groupby-1-1-1, single-groupby-5-8-1,
// cpu-max-all-8, double-groupby-1, high-cpu-1, lastpoint,
// groupby-orderby-limit) as SQL with hosts and windows drawn from the
// seed. Every system is given the identical SQL text.
package tsbs
