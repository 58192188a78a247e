#!/usr/bin/env python3
"""Write golden coverage sidecars with timeseries-table-format 0.9.0.

Usage: make_golden.py OUT_DIR   (normally coverage/testdata/golden)

Builds a few small tables in a temporary directory, copies their coverage
sidecars to OUT_DIR/<table>/{segments,table}/ under the names the package
gave them, and writes OUT_DIR/spec.json: the index spec of every table and
the exact rows appended (as arithmetic runs, see expand), plus which sidecar belongs to
which append. The Go tests rebuild the coverage from spec.json and compare
bytes and content ids with the package's files.

The inputs are fixed (seeded); reruns differ only in the random UUID part of
the file names.
"""

import json
import os
import random
import shutil
import sys
import tempfile

import pyarrow as pa
import timeseries_table_format as ttf
from timeseries_table_format import TimeSeriesTable

BASE_S = 1_717_200_000  # 2024-06-01T00:00:00Z
NS = 1_000_000_000


def random_runs(rng, start_id, n_ids, min_run, max_run, max_gap):
    """Consecutive-id runs [(first_id, count)] with random gaps."""
    runs, cur, left = [], start_id, n_ids
    while left > 0:
        cur += rng.randint(1, max_gap)
        k = min(left, rng.randint(min_run, max_run))
        runs.append((cur, k))
        cur += k
        left -= k
    return runs


def expand(run):
    """Values of a run [start, step, count] or [start, step, count, repeat,
    stride]: start + j*stride + i*step for j < repeat, i < count."""
    start, step, count = run[:3]
    repeat, stride = (run[3], run[4]) if len(run) == 5 else (1, 0)
    for j in range(repeat):
        for i in range(count):
            yield start + j * stride + i * step


def dump(obj, f):
    """JSON with one run per line, to keep the file small and diffable."""
    text = json.dumps(obj, indent=1)
    # Collapse the innermost number lists onto one line.
    import re

    text = re.sub(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]", text)
    f.write(text + "\n")


def entity_hosts(rng):
    width = 10
    idents = [["web-1", 0], ["web-1", 1], ["web-2", 0], ["db", -1], ["\u00e9dge", 7]]
    appends = [[], []]
    for i, ident in enumerate(idents):
        runs = random_runs(rng, BASE_S // width, 600, 1, 60, 9)
        half = len(runs) // 2
        for a, part in ((0, runs[:half]), (1, runs[half:])):
            rows = []
            for first, k in part:
                frac = rng.randrange(0, width * NS)  # anywhere inside the interval
                rows.append([first * width * NS + frac, width * NS, k])
            appends[a].append({"entity": ident, "runs": rows})
    # An identity that only exists before the epoch, in the second append.
    runs = random_runs(rng, -20_000, 300, 1, 40, 5)
    appends[1].append(
        {"entity": ["old", 2], "runs": [[f * width * NS + 999_999_999, width * NS, k] for f, k in runs]}
    )
    return {
        "name": "entity_hosts",
        "create": {
            "index_column": "ts",
            "index_type": "timestamp",
            "index_granularity": "10s",
            "entity_columns": ["host", "core"],
            "timezone": "Europe/Berlin",
        },
        "index": {
            "column": "ts",
            "entity_columns": ["host", "core"],
            "kind": "timestamp",
            "unit": "Seconds",
            "count": 10,
            "timezone": "Europe/Berlin",
        },
        "arrow_index": "timestamp_ns",
        "entity_types": ["utf8", "int32"],
        "appends": appends,
    }


def global_int(rng):
    width = 5
    app1, app2 = [], []
    # Sparse negative keys.
    for first, k in random_runs(rng, -3_000, 400, 1, 20, 30):
        app1.append([first * width + rng.randrange(width), width, k])
    # 2,500 ids in one container, in long runs; the second append adds 1,700
    # more ids to the same container, so the table snapshot holds a 4,200-id
    # container (a bitmap, although run containers would be far smaller).
    base = 1 << 20
    runs = random_runs(rng, base, 4_200, 50, 400, 3)
    for first, k in runs:
        row = [first * width + rng.randrange(width), width, k]
        (app1 if rng.random() < 2_500 / 4_200 else app2).append(row)
    # Far away ids in other partitions, including the top of the key space.
    app2.append([2**62, 1, 1])
    app2.append([2**63 - 1, 1, 1])
    return {
        "name": "global_int",
        "create": {"index_column": "k", "index_type": "int64", "index_granularity": width},
        "index": {"column": "k", "entity_columns": [], "kind": "int64", "width": width},
        "arrow_index": "int64",
        "entity_types": [],
        "appends": [[{"entity": [], "runs": app1}], [{"entity": [], "runs": app2}]],
    }


def entity_ties(rng):
    """Containers on both sides of the reference's container-type rules."""

    def ids(*ranges):
        return [[a, 1, b - a + 1] for a, b in ranges]

    groups = [
        # 5 values, 2 runs: run size 10 == array size 10.
        ([1], ids((1, 2), (10, 12))),  # first run of 2: stays an array
        ([2], ids((1, 3), (10, 11))),  # first run of 3: stays a run
        ([3], ids((5, 7))),  # 3 values: run (6 bytes) ties array
        ([4], ids((5, 6))),  # 2 values: array
        # Runs crossing a container boundary: the second container starts
        # with a run of 2 and ties.
        ([5], ids((0xFFFE, 0x10001), (0x10005, 0x10007))),
        # 4,500 values in pairs: 2,250 runs, bitmap.
        ([6], [[0x40000, 1, 2, 2_250, 3]]),
        # A full container: one run.
        ([7], ids((0x20000, 0x2FFFF))),
        # First run of 1, then 5,118 values: starts as array, becomes a
        # bitmap, then a run container.
        ([8], ids((0x30000, 0x30000), (0x30002, 0x313FF))),
        # The top of the uint64 domain and zero.
        ([9], ids((0, 0), (2**64 - 3, 2**64 - 1))),
        # 100 runs, 201 values (run 402 == array 402), first run 3 / 2.
        ([10], ids((0, 2)) + [[10, 1, 2, 99, 3]]),
        ([11], ids((0, 1)) + [[10, 1, 2, 98, 3]] + ids((400, 402))),
        # Negative entity values sort first.
        ([-5], ids((100, 100))),
    ]
    return {
        "name": "entity_ties",
        "create": {
            "index_column": "k",
            "index_type": "uint64",
            "index_granularity": 1,
            "entity_columns": ["e"],
        },
        "index": {"column": "k", "entity_columns": ["e"], "kind": "uint64", "width": 1},
        "arrow_index": "uint64",
        "entity_types": ["int64"],
        "appends": [[{"entity": e, "runs": r} for e, r in groups]],
    }


ARROW_INDEX = {
    "timestamp_ns": pa.timestamp("ns"),
    "int64": pa.int64(),
    "uint64": pa.uint64(),
}
ARROW_ENTITY = {"utf8": pa.utf8(), "int32": pa.int32(), "int64": pa.int64(), "uint64": pa.uint64()}


def build(spec, rng, work, out_dir):
    root = os.path.join(work, spec["name"])
    tb = TimeSeriesTable.create(table_root=root, **spec["create"])
    ents = spec["create"].get("entity_columns", [])
    sidecars = []
    for batch_groups in spec["appends"]:
        rows = []
        for g in batch_groups:
            for run in g["runs"]:
                for v in expand(run):
                    rows.append((v, g["entity"]))
        rng.shuffle(rows)  # row order must not matter
        cols = {spec["create"]["index_column"]: pa.array([r[0] for r in rows], ARROW_INDEX[spec["arrow_index"]])}
        for j, name in enumerate(ents):
            cols[name] = pa.array([r[1][j] for r in rows], ARROW_ENTITY[spec["entity_types"][j]])
        cols["v"] = pa.array([float(i) for i in range(len(rows))], pa.float64())
        before = tb.version()
        tb.append(pa.record_batch(cols))
        with open(os.path.join(root, "_timeseries_log", "%010d.json" % (before + 1))) as f:
            commit = json.load(f)
        seg = tbl = None
        for a in commit["actions"]:
            if "AddSegment" in a:
                seg = a["AddSegment"]["coverage_path"]
            if "UpdateTableCoverage" in a:
                tbl = a["UpdateTableCoverage"]["coverage_path"]
        sidecars.append({"segment": seg, "table": tbl, "rows": len(rows)})
    dest = os.path.join(out_dir, spec["name"])
    shutil.rmtree(dest, ignore_errors=True)
    for sc in sidecars:
        for key in ("segment", "table"):
            rel = sc[key]
            assert rel.startswith("_coverage/"), rel
            sc[key] = rel[len("_coverage/"):]
        with open(os.path.join(root, "_coverage", sc["segment"]), "rb") as f:
            seg_bytes = f.read()
        with open(os.path.join(root, "_coverage", sc["table"]), "rb") as f:
            tbl_bytes = f.read()
        # After a table's first append the snapshot has the segment's bytes;
        # keep one copy (the tests check that the snapshot name matches them).
        sc["table_same_as_segment"] = seg_bytes == tbl_bytes
        keep = [("segment", seg_bytes)]
        if not sc["table_same_as_segment"]:
            keep.append(("table", tbl_bytes))
        for key, data in keep:
            path = os.path.join(dest, sc[key])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    spec["sidecars"] = sidecars
    return spec


def main(argv):
    if len(argv) != 2:
        print("usage: make_golden.py OUT_DIR", file=sys.stderr)
        return 2
    if ttf.__version__ != "0.9.0":
        print("need timeseries-table-format 0.9.0, have %s" % ttf.__version__, file=sys.stderr)
        return 1
    out_dir = argv[1]
    rng = random.Random(20261130)
    specs = [entity_hosts(rng), global_int(rng), entity_ties(rng)]
    with tempfile.TemporaryDirectory() as work:
        specs = [build(s, rng, work, out_dir) for s in specs]
    with open(os.path.join(out_dir, "spec.json"), "w") as f:
        dump({"package": "timeseries-table-format " + ttf.__version__, "tables": specs}, f)
    for s in specs:
        print(s["name"], [sc["rows"] for sc in s["sidecars"]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
