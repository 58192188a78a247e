#!/usr/bin/env python3
"""Time TSBS queries through timeseries-table-format's Session.sql.

Usage: tsbs_session_sql.py ROOT TABLE QUERIES_JSON ITERATIONS

ROOT is a tsflight root, TABLE a table directory under it (registered under
the same name with Session.register_tstable). QUERIES_JSON is a file (or,
if it starts with "[", the text) holding a list of {"name": ..., "sql": ...}.
Each query runs once untimed (warm), then ITERATIONS timed times; a timed
run is Session.sql(query), which returns the whole result as a
pyarrow.Table.

Prints one JSON object on stdout:

    {"package": "timeseries-table-format", "version": "0.9.0",
     "queries": {NAME: {"median_s": float, "times_s": [float, ...],
                        "rows": int, "columns": [str, ...],
                        "result": [[value, ...], ...]}}}

result is the warm run's rows with values made comparable across
systems: timestamps as microseconds since the epoch, other numbers as
floats, strings as strings, NULL as null.

Exit status 3 means the package is not installed.
"""

import datetime
import json
import os
import statistics
import sys
import time


def canonical(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        d = v - epoch
        return float((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def rows_of(table):
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [[canonical(c[r]) for c in cols] for r in range(table.num_rows)]


def main(argv):
    if len(argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    root, table, queries_arg, iterations = argv[1], argv[2], argv[3], int(argv[4])
    try:
        import timeseries_table_format as ttf
    except ImportError as e:
        sys.stderr.write("timeseries_table_format is not installed: %s\n" % e)
        return 3
    if queries_arg.lstrip().startswith("["):
        queries = json.loads(queries_arg)
    else:
        with open(queries_arg) as f:
            queries = json.load(f)

    sess = ttf.Session()
    sess.register_tstable(table, os.path.join(root, table))
    out = {"package": "timeseries-table-format", "version": getattr(ttf, "__version__", "?"), "queries": {}}
    for q in queries:
        name, sql = q["name"], q["sql"]
        warm = sess.sql(sql)  # untimed: plans, opens files, fills caches
        times = []
        for _ in range(iterations):
            start = time.perf_counter()
            res = sess.sql(sql)
            times.append(time.perf_counter() - start)
            if res.num_rows != warm.num_rows:
                raise SystemExit("%s: %d rows, then %d" % (name, warm.num_rows, res.num_rows))
            del res
        out["queries"][name] = {
            "median_s": statistics.median(times) if times else None,
            "times_s": times,
            "rows": warm.num_rows,
            "columns": warm.column_names,
            "result": rows_of(warm),
        }
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
