/*
Package coverage implements the coverage bitmaps of the timeseries table
format: which (entity, index interval) pairs of a table hold a row, how they
are stored in sidecar files, and the gap and completeness questions they
answer. Its output is byte-compatible with timeseries-table-format 0.9.0.

The package works on values and bytes only. It knows nothing of files, JSON
or the table log; the table package reads and writes the sidecars and passes
their bytes and the table's index spec in.

# Basics

A Domain maps ordered-index values to 64-bit interval ids. A table index
with granularity "1h" is the timestamp Domain of width 3600; an int64 index
with granularity 10 is the int64 Domain of width 10. Every value falls in one
interval, and a half-open range [start, end) becomes the inclusive id Range
[id(start), id(end - 1 unit)]. Ids are ordered like the values, so ranges
of values are ranges of ids.

A Set holds the coverage of a segment or a table. A table without entity
columns has a global Set: one bitmap of interval ids, queried with a nil
Identity. A table with entity columns has an entity Set: one bitmap per
complete Identity, a list of typed Components in entity-column order.
Coverage enforces the table's uniqueness rule: at most one row per
(identity, interval). Set.Add reports a repeated pair within one append and
Set.Overlap finds pairs an append shares with committed coverage; a table's
coverage is the Union of its segments'.

Encode and Decode convert a Set to and from sidecar bytes: the portable
RoaringTreemap serialization for global coverage, and the TSTECOV2 framing
around one treemap per identity for entity coverage. Encoding is canonical:
equal sets give equal bytes, and they are the bytes the reference writes.
SegmentContentID and TableContentID name the files; SegmentKey and TableKey
build their table-relative keys.

A View is the coverage of one identity (Set.View) or of the whole table
(Set.ViewAll) and answers range queries: Stats (covered and expected counts,
ratio), Gaps and EachGap (missing runs; EachGap stops when its caller
says so), LongestGap and LastWindow (the last fully covered window of n
intervals). Set.Stats and Set.StatsByIdentity aggregate over identities.
Queries work on runs of ids, never on every id of a range.

# Caveats

Interval math is UTC and aligned to the Unix epoch: "1d" runs from UTC
midnight to UTC midnight whatever the index's timezone, which is metadata
that only enters content ids. Timestamps are truncated to whole seconds
before they are divided, so granularities are whole seconds.

Ranges of values are half-open, [start, end); ranges of ids are inclusive,
[First, Last], because the last id of the domain has no successor. The
interval that reaches the top of a domain is reported end-inclusive by
Domain.SignedInterval and Domain.UnsignedInterval.

Interval ids are opaque outside this package. Their numbering (a sign flip
for signed ordinals, a plain quotient for uint64) is fixed by the file
format, but callers should only compare them, take differences and map
them back through the Domain they came from.

Counts of ids can reach 2^64 and expected (identity, interval) pairs can
exceed it; such counts are of type Count.

A Set is not safe for concurrent modification. Bitmaps and identities
returned by a Set are shared with it and must not be modified.
*/
package coverage
