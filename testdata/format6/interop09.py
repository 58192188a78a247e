#!/usr/bin/env python3
"""Check an upgraded format-6 table with timeseries-table-format 0.9.0.

Subcommands (each prints one JSON document on stdout):

  rows TABLE_ROOT
      Open the table, read every row with SQL. Prints {"version", "rows"}:
      rows as objects, timestamps as integer milliseconds since the epoch.
  append TABLE_ROOT ROW_JSON
      Append one row (an object in the same shape as "rows" prints) with
      the table's own schema. Prints {"version"}.
"""
import json
import sys

import pyarrow as pa
import timeseries_table_format as ttf


def read(root):
    s = ttf.Session()
    s.register_tstable("t", root)
    return s.sql("SELECT * FROM t")


def as_plain(result):
    cols = {}
    for name, col in zip(result.column_names, result.columns):
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms")).cast(pa.int64())
        cols[name] = col.to_pylist()
    n = result.num_rows
    return [{k: v[i] for k, v in cols.items()} for i in range(n)]


def cmd_rows(root):
    table = ttf.TimeSeriesTable.open(root)
    print(json.dumps({"version": table.version(), "rows": as_plain(read(root))}))


def cmd_append(root, row_json):
    table = ttf.TimeSeriesTable.open(root)
    row = json.loads(row_json)
    schema = read(root).schema
    arrays = []
    for f in schema:
        v = row[f.name]
        if pa.types.is_timestamp(f.type):
            arrays.append(pa.array([v], pa.timestamp("ms")).cast(f.type))
        else:
            arrays.append(pa.array([v], f.type))
    report = table.append(pa.Table.from_arrays(arrays, schema=schema))
    print(json.dumps({"version": report.committed_version}))


def main(argv):
    if len(argv) == 3 and argv[1] == "rows":
        cmd_rows(argv[2])
    elif len(argv) == 4 and argv[1] == "append":
        cmd_append(argv[2], argv[3])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
