#!/usr/bin/env python3
"""Create a table and append to it over Arrow Flight.

  python3 create_and_put.py grpc://127.0.0.1:8815

1. The create-table action makes "cpu": timestamp index "ts" with 10 s
   intervals, entity column "host".
2. A DoPut with a PATH descriptor ["cpu"] appends the first hour (db1 is
   silent from 00:20 to 00:30). One DoPut stream is one append: one segment
   and one commit, answered by one PutResult whose app_metadata is JSON.
3. A DoPut with a CMD descriptor {"table": "cpu", "create": {...}} appends
   the second hour. The create spec is used only if the table is missing,
   so a loader can always send it.
4. The same CMD form creates table "mem" and fills it in one call.

Run it against a server whose root has no "cpu" or "mem" table yet.
"""

import pyarrow as pa
import pyarrow.flight as flight

from common import CPU_SPEC, HOSTS, TS_TYPE, action, at, command, connect, cpu_rows, dumps, main, put


def run(url):
    client = connect(url)

    try:
        created = action(client, "create-table", dict(CPU_SPEC, table="cpu"))
    except (flight.FlightError, pa.ArrowException) as e:
        if "already exists" in str(e):
            raise SystemExit("error: table cpu already exists: run this example on an empty server root")
        raise
    print("create-table cpu:", dumps(created))

    hour1 = cpu_rows(0, 60, skip=("db1", 20, 30))
    res = put(client, flight.FlightDescriptor.for_path("cpu"), hour1)
    print("put PATH [cpu] %d rows: %s" % (hour1.num_rows, dumps(res)))

    hour2 = cpu_rows(60, 120)
    res = put(client, command({"table": "cpu", "create": CPU_SPEC}), hour2)
    print("put CMD {table: cpu, create} %d rows: %s" % (hour2.num_rows, dumps(res)))

    # A new table, created by its first DoPut: memory use per host, 1 minute intervals.
    mem = pa.table(
        {
            "ts": pa.array([at(m) for m in range(60) for _ in HOSTS], TS_TYPE),
            "host": pa.array([h for _ in range(60) for h in HOSTS], pa.string()),
            "used_mb": pa.array([1024 * (i + 1) + m for m in range(60) for i in range(len(HOSTS))], pa.int64()),
        }
    )
    spec = {"index_column": "ts", "index_type": "timestamp", "granularity": "1m", "entity_columns": ["host"]}
    res = put(client, command({"table": "mem", "create": spec}), mem)
    print("put CMD {table: mem, create} %d rows: %s" % (mem.num_rows, dumps(res)))

    names = sorted(info.descriptor.path[0].decode() for info in client.list_flights())
    print("tables:", ", ".join(names))


if __name__ == "__main__":
    main(run)
