#!/usr/bin/env python3
"""Add a column to a table that already holds data.

  python3 add_columns.py grpc://127.0.0.1:8815

The add-columns action appends nullable columns to the schema in one
metadata-only commit: no data file is rewritten, and rows written before
read null in the new column. Later puts may carry the column or leave it
out (it reads null then).

Needs the cpu table of create_and_put.py.
"""

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from common import ExampleFailure, action, at, command, connect, cpu_rows, dumps, fetch_all, iso, main, put


def run(url):
    client = connect(url)
    before = action(client, "describe-table", {"table": "cpu"})
    print("cpu before: version %d, %d rows, columns %s" % (
        before["version"], before["rows"], ", ".join(f["name"] for f in before["schema"])))

    res = action(client, "add-columns", {"table": "cpu", "columns": [{"name": "temp_c", "type": "float64", "nullable": True}]})
    print("add-columns temp_c float64:", dumps(res))

    # 02:00-02:10 for web1, without the new column ...
    without = cpu_rows(120, 130, hosts=["web1"])
    res = put(client, flight.FlightDescriptor.for_path("cpu"), without)
    print("put without temp_c, %d rows: version %d" % (without.num_rows, res["version"]))

    # ... and 02:10-02:20 for web1, with it.
    with_col = cpu_rows(130, 140, hosts=["web1"])
    with_col = with_col.append_column("temp_c", pa.array([40.0 + (i % 8) * 0.25 for i in range(with_col.num_rows)], pa.float64()))
    res = put(client, flight.FlightDescriptor.for_path("cpu"), with_col)
    print("put with temp_c, %d rows: version %d" % (with_col.num_rows, res["version"]))

    after = action(client, "describe-table", {"table": "cpu"})
    print("cpu after: version %d, %d rows, columns %s, reader features %s" % (
        after["version"], after["rows"], ", ".join(f["name"] for f in after["schema"]), after["reader_features"]))

    info = client.get_flight_info(command({"table": "cpu", "columns": ["ts", "temp_c"]}))
    table = fetch_all(client, info)
    old = table.filter(pc.less(table["ts"], pa.scalar(at(120), table.schema.field("ts").type)))
    new = table.filter(pc.greater_equal(table["ts"], pa.scalar(at(120), table.schema.field("ts").type)))
    old_nulls = old["temp_c"].null_count
    print("old rows (before %s): %d, temp_c null in %d" % (iso(at(120)), old.num_rows, old_nulls))
    print("new rows: %d, temp_c null in %d, sum(temp_c) = %.2f" % (new.num_rows, new["temp_c"].null_count, pc.sum(new["temp_c"]).as_py()))
    if old_nulls != old.num_rows or old.num_rows != before["rows"]:
        raise ExampleFailure("rows written before add-columns should read null in temp_c")


if __name__ == "__main__":
    main(run)
