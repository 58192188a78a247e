#!/usr/bin/env python3
"""Read, over Flight, a table written by the reference Python package.

  python3 check_reference_table.py grpc://127.0.0.1:8815 TABLE

TABLE is a directory under the server's root written by
timeseries-table-format 0.9.0 (for example one made by
testdata/reference/make_tables.py). The script lists the server's tables
(ListFlights), describes TABLE (describe-table), scans all of it
(GetFlightInfo with a PATH descriptor, endpoints fetched in parallel) and
asks for its gaps over the span of its data, for the whole table and for
each entity.
"""

import datetime
import re

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from common import ExampleFailure, action, connect, dumps, fetch_all, main

SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
NS_PER = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def step_of(index):
    """One interval of the index: in nanoseconds for timestamp indexes, the
    integer width otherwise."""
    g = index["granularity"]
    if index["type"] != "timestamp":
        return int(g)
    m = re.fullmatch(r"(\d+)([smhd])", g)
    if not m:
        raise ExampleFailure("unexpected granularity %r" % g)
    return int(m.group(1)) * SECONDS[m.group(2)] * 10**9


def rfc3339(ns):
    """RFC 3339 (UTC) text of nanoseconds since the epoch, keeping every digit."""
    secs, frac = divmod(ns, 10**9)
    text = (EPOCH + datetime.timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += (".%09d" % frac).rstrip("0")
    return text + "Z"


def index_range(column, index):
    """Min and max of the index column: nanoseconds for timestamps (exact,
    whatever the unit), plain integers otherwise."""
    if index["type"] != "timestamp":
        return pc.min(column).as_py(), pc.max(column).as_py()
    scale = NS_PER[column.type.unit]
    raw = column.cast(pa.int64())
    return pc.min(raw).as_py() * scale, pc.max(raw).as_py() * scale


DOMAIN = {"int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1)}


def window(lo, hi, index):
    """The whole intervals holding [lo, hi] as JSON bounds [start, end) for
    coverage and gaps. Intervals are aligned to multiples of the granularity
    (from the UTC epoch for timestamps). An end at the top of an integer
    domain is taken as inclusive by the server, so it is clamped there."""
    step = step_of(index)
    start, end = lo // step * step, (hi // step + 1) * step
    if index["type"] == "timestamp":
        return rfc3339(start), rfc3339(end)
    low, high = DOMAIN[index["type"]]
    return max(start, low), min(end, high)


def run(url, name):
    client = connect(url)

    listed = {info.descriptor.path[0].decode(): info for info in client.list_flights()}
    print("ListFlights: %s" % ", ".join("%s (%d rows)" % (n, listed[n].total_records) for n in sorted(listed)))
    if name not in listed:
        raise ExampleFailure("table %s is not listed" % name)

    desc = action(client, "describe-table", {"table": name})
    index = desc["index"]
    print("describe %s: version %d, protocol %d, %d segments, %d rows" % (
        name, desc["version"], desc["protocol_version"], desc["segments"], desc["rows"]))
    print("  index:", dumps(index))
    print("  schema:", ", ".join("%s %s" % (f["name"], f["type"]) for f in desc["schema"]))

    info = client.get_flight_info(flight.FlightDescriptor.for_path(name))
    table = fetch_all(client, info)
    print("scan %s: %d rows from %d endpoints (FlightInfo total_records %d)" % (
        name, table.num_rows, len(info.endpoints), info.total_records))
    if table.num_rows != desc["rows"]:
        raise ExampleFailure("scan returned %d rows, describe-table says %d" % (table.num_rows, desc["rows"]))
    if table.num_rows == 0:
        return

    col = index["column"]
    lo, hi = index_range(table[col], index)
    start, end = window(lo, hi, index)
    if index["type"] == "timestamp":
        lo, hi = rfc3339(lo), rfc3339(hi)
    print("  %s from %s to %s" % (col, lo, hi))

    entities = index["entity_columns"]
    groups = [None]
    if entities:
        keys = table.select(entities).to_pylist()
        groups += sorted({tuple(k[c] for c in entities) for k in keys}, key=repr)
        counts = {}
        for k in keys:
            t = tuple(k[c] for c in entities)
            counts[t] = counts.get(t, 0) + 1
        print("  rows per entity: %s" % ", ".join("%s=%d" % ("/".join(map(str, k)), counts[k]) for k in groups[1:]))

    for g in groups:
        body = {"table": name, "start": start, "end": end}
        label = "whole table"
        if g is not None:
            body["entity"] = dict(zip(entities, g))
            label = ", ".join("%s=%s" % kv for kv in body["entity"].items())
        gaps = action(client, "gaps", body)
        runs = ", ".join("%s..%s (%d)" % (x["start"], x["end"], x["intervals"]) for x in gaps["gaps"]) or "none"
        print("gaps %s [%s, %s) %s: %d missing intervals: %s" % (name, start, end, label, gaps["missing_intervals"], runs))


if __name__ == "__main__":
    main(run, "SERVER_URL TABLE")
