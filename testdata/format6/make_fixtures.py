#!/usr/bin/env python3
"""Write small format-6 tables with timeseries-table-format 0.4.0.

Usage: make_fixtures.py OUT_DIR

Run it through make_fixtures.sh, which builds a virtual environment holding
exactly 0.4.0 (the last release that writes "format_version": 6 metadata).

For every table NAME this writes OUT_DIR/NAME/ (the table as 0.4.0 left it)
and OUT_DIR/NAME.expected.json: the rows appended, in (index, entities)
order, as JSON values (timestamps as integer milliseconds since the epoch),
plus the version and index spec the package reports after reopening.  The
rows come from the script's own inputs, not from reading the table back.
"""

import json
import os
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import timeseries_table_format as ttf
from timeseries_table_format import TimeSeriesTable

EXPECTED_PACKAGE_VERSION = "0.4.0"
H_MS = 3_600_000
BASE_MS = 1_717_200_000_000  # 2024-06-01T00:00:00Z


def write_parquet(tmp, name, table):
    path = os.path.join(tmp, name + ".parquet")
    pq.write_table(table, path)
    return path


def ts_batch(symbols_hours_close):
    ts, sym, close = [], [], []
    for s, h, c in symbols_hours_close:
        ts.append(BASE_MS + h * H_MS)
        sym.append(s)
        close.append(c)
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("ms")),
            "symbol": pa.array(sym, pa.string()),
            "close": pa.array(close, pa.float64()),
        }
    ), [{"ts": t, "symbol": s, "close": c} for t, s, c in zip(ts, sym, close)]


def make_ts_entity(out, tmp):
    root = os.path.join(out, "ts_entity")
    tb = TimeSeriesTable.create(
        table_root=root,
        index_column="ts",
        index_type="timestamp",
        entity_columns=["symbol"],
        bucket="1h",
    )
    rows = []
    # 1: one entity, 6 hours.
    t, r = ts_batch([("NVDA", h, 100.0 + h) for h in range(6)])
    tb.append_parquet(write_parquet(tmp, "a1", t))
    rows += r
    # 2: mixed entities for the same hours (a mixed segment).
    t, r = ts_batch([(s, h, (200.0 if s == "AAPL" else 300.0) + h) for h in range(4) for s in ("AAPL", "MSFT")])
    tb.append_parquet(write_parquet(tmp, "a2", t))
    rows += r
    # 3: NVDA again, later hours.
    t, r = ts_batch([("NVDA", h, 100.5 + h) for h in range(6, 9)])
    tb.append_parquet(write_parquet(tmp, "a3", t))
    rows += r
    rep = tb.optimize()
    if rep.no_op:
        raise SystemExit("optimize was a no-op; expected it to split the mixed segment")
    rows.sort(key=lambda x: (x["ts"], x["symbol"]))
    return root, tb, rows


def make_int(out, tmp, name, typ, width, keys_batches):
    root = os.path.join(out, name)
    tb = TimeSeriesTable.create(table_root=root, index_column="k", index_type=typ, bucket_width=width)
    arrow_type = pa.int64() if typ == "int64" else pa.uint64()
    rows = []
    for i, keys in enumerate(keys_batches):
        t = pa.table({"k": pa.array(keys, arrow_type), "v": pa.array([float(k % 97) for k in keys], pa.float64())})
        tb.append_parquet(write_parquet(tmp, "%s%d" % (name, i), t))
        rows += [{"k": k, "v": float(k % 97)} for k in keys]
    rows.sort(key=lambda x: x["k"])
    return root, tb, rows


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    version = getattr(ttf, "__version__", None)
    if version is not None and version != EXPECTED_PACKAGE_VERSION:
        raise SystemExit("timeseries-table-format %s, want %s" % (version, EXPECTED_PACKAGE_VERSION))
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        made = [
            ("ts_entity",) + make_ts_entity(out, tmp),
            ("int64",) + make_int(out, tmp, "int64", "int64", 10, [[-100, -5, 0, 15], [1000, 2**62]]),
            ("uint64",) + make_int(out, tmp, "uint64", "uint64", 7, [[0, 6, 7], [2**64 - 1]]),
        ]
    for name, root, tb, rows in made:
        reopened = TimeSeriesTable.open(root)
        with open(os.path.join(root, "_timeseries_log", "0000000001.json")) as f:
            first = json.load(f)
        meta = first["actions"][0]["UpdateTableMeta"]
        if meta.get("format_version") != 6:
            raise SystemExit("%s: commit 1 is not format 6: %r" % (name, meta))
        expected = {
            "name": name,
            "package_version": EXPECTED_PACKAGE_VERSION,
            "version": reopened.version(),
            "index_spec": reopened.index_spec(),
            "rows": rows,
        }
        with open(os.path.join(out, name + ".expected.json"), "w") as f:
            json.dump(expected, f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
