#!/usr/bin/env python3
"""The newest row of every host, as a dashboard's first panel wants it.

  python3 last_values.py grpc://127.0.0.1:8815

The action last answers from the table's last-value index (the newest row
per entity, kept beside the log) without reading the data: its result is an
Arrow IPC stream, read with pa.ipc.open_stream. "entity" keeps some
entities, "columns" projects. Flight SQL's

  SELECT DISTINCT ON (host) * FROM cpu ORDER BY host, ts DESC

gets the same rows from the same index (see sql_adbc.py for ADBC).

Needs the cpu table of create_and_put.py and add_columns.py.
"""

import json

import pyarrow as pa
import pyarrow.flight as flight

from common import connect, main


def last(client, request):
    results = list(client.do_action(flight.Action("last", json.dumps(request).encode())))
    return pa.ipc.open_stream(results[0].body.to_pybytes()).read_all()


def run(url):
    client = connect(url)
    t = last(client, {"table": "cpu"})
    print("last cpu: %d hosts, columns %s" % (t.num_rows, ", ".join(t.column_names)))
    for row in t.to_pylist():
        print("  %s: ts=%s usage=%s temp_c=%s" % (row["host"], row["ts"].isoformat(), row["usage"], row["temp_c"]))
    one = last(client, {"table": "cpu", "entity": {"host": "db1"}, "columns": ["ts", "usage"]})
    row = one.to_pylist()[0]
    print("last cpu host=db1 [%s]: ts=%s usage=%s (%d row)" % (", ".join(one.column_names), row["ts"].isoformat(), row["usage"], one.num_rows))


if __name__ == "__main__":
    main(run)
