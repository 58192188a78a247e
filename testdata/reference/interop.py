#!/usr/bin/env python3
"""Drive timeseries-table-format 0.9.0 for tsflight's interoperability tests.

Subcommands (each prints one JSON document on stdout):

  append SPEC_JSON TABLE_ROOT IPC_FILE...
      Create TABLE_ROOT with the index spec SPEC_JSON ({"index_column",
      "index_type", "index_granularity", "entity_columns", "timezone"}) unless
      it already exists, then append each Arrow IPC stream file as one
      append. Prints {"appends": [{"version", "segment_path"}...]}.
  query TABLE_ROOT SQL
      Register the table as "t", run SQL, print {"columns": [...], "rows": [[...]]}.
  add-columns TABLE_ROOT NAME:TYPE...
      Add nullable columns (TYPE is float64, int64 or utf8). Prints {"version"}.
"""
import json
import os
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import timeseries_table_format as ttf

TYPES = {"float64": pa.float64(), "int64": pa.int64(), "utf8": pa.string()}


def jsonable(v):
    if isinstance(v, (int, float, str)) or v is None:
        return v
    return str(v)


def cmd_append(spec_json, root, files):
    spec = json.loads(spec_json)
    if os.path.isdir(os.path.join(root, "_timeseries_log")):
        table = ttf.TimeSeriesTable.open(root)
    else:
        table = ttf.TimeSeriesTable.create(
            table_root=root,
            index_column=spec["index_column"],
            index_type=spec["index_type"],
            index_granularity=spec["index_granularity"],
            entity_columns=spec.get("entity_columns") or None,
            timezone=spec.get("timezone"),
        )
    out = []
    for f in files:
        with pa.OSFile(f, "rb") as src:
            data = ipc.open_stream(src).read_all()
        report = table.append(data)
        out.append({"version": report.committed_version, "segment_path": report.segment_path})
    print(json.dumps({"appends": out}))


def cmd_query(root, sql):
    s = ttf.Session()
    s.register_tstable("t", root)
    result = s.sql(sql)
    rows = [[jsonable(v) for v in r.values()] for r in result.to_pylist()]
    print(json.dumps({"columns": result.column_names, "rows": rows}))


def cmd_add_columns(root, specs):
    table = ttf.TimeSeriesTable.open(root)
    fields = []
    for s in specs:
        name, typ = s.split(":", 1)
        fields.append(pa.field(name, TYPES[typ], nullable=True))
    print(json.dumps({"version": table.add_columns(pa.schema(fields))}))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "append" and len(args) >= 3:
        cmd_append(args[0], args[1], args[2:])
    elif cmd == "query" and len(args) == 2:
        cmd_query(args[0], args[1])
    elif cmd == "add-columns" and len(args) >= 2:
        cmd_add_columns(args[0], args[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
