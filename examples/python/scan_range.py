#!/usr/bin/env python3
"""Scan a time range of a table, reading its endpoints in parallel.

  python3 scan_range.py grpc://127.0.0.1:8815

GetFlightInfo takes a CMD descriptor whose body is a JSON scan request:
{"table", "start", "end", "columns", "entity"}; start is inclusive, end
exclusive. The server prunes segments, row groups and pages to the range
and splits the plan into endpoints; each endpoint's ticket is pinned to the
table version the plan was made on, so the parts add up to one consistent
snapshot even while others append. Endpoints carry no location: DoGet them
on the same server, here all at once with a thread pool.

Needs the cpu table of create_and_put.py.
"""

import pyarrow.compute as pc

from common import at, command, connect, dumps, fetch_all, iso, main


def run(url):
    client = connect(url)
    request = {
        "table": "cpu",
        "start": iso(at(15)),
        "end": iso(at(75)),
        "columns": ["ts", "host", "usage"],
    }
    print("scan request:", dumps(request))
    info = client.get_flight_info(command(request))
    print("endpoints: %d (schema: %s)" % (len(info.endpoints), ", ".join(info.schema.names)))

    table = fetch_all(client, info)
    print("rows: %d" % table.num_rows)
    print("first ts: %s, last ts: %s" % (iso(pc.min(table["ts"]).as_py()), iso(pc.max(table["ts"]).as_py())))
    print("sum(usage): %.1f" % pc.sum(table["usage"]).as_py())
    counts = {c["values"]: c["counts"] for c in pc.value_counts(table["host"]).to_pylist()}
    print("rows per host:", ", ".join("%s=%d" % (h, counts[h]) for h in sorted(counts)))

    # The same request restricted to one entity.
    request["entity"] = {"host": "db1"}
    db1 = fetch_all(client, client.get_flight_info(command(request)))
    print("rows for host db1: %d" % db1.num_rows)


if __name__ == "__main__":
    main(run)
