#!/usr/bin/env python3
"""Self-check of ttf_peer.py: python3 bench/peers/test_ttf_peer.py

Writes small TSBS-shaped cpu data (20 hosts x 2 hours at 10 s, one Parquet
file per hour) to a temporary directory, runs the peer's ingest into an
empty table root, then scan and sql on that table, and checks the answers
against values computed here from the generated data. Also checks the exit
statuses (2 bad usage, 1 failure, 3 package missing). Exit 0 on success.
Needs pyarrow and timeseries-table-format; no network.
"""

import json
import os
import random
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "ttf_peer.py")

BASE_US = 1_717_200_000 * 1_000_000  # 2024-06-01T00:00:00Z
STEP_US = 10 * 1_000_000
HOSTS = 20
HOURS = 2
PER_HOUR = 360

TAGS = {
    "region": ["us-east-1", "us-west-1", "eu-central-1", "ap-northeast-1"],
    "datacenter": ["us-east-1a", "us-west-1b", "eu-central-1a", "ap-northeast-1c"],
    "rack": [str(i) for i in range(100)],
    "os": ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"],
    "arch": ["x64", "x86"],
    "team": ["SF", "NYC", "LON", "CHI"],
    "service": [str(i) for i in range(20)],
    "service_version": ["0", "1"],
    "service_environment": ["production", "staging", "test"],
}
FIELDS = [
    "usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
    "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice",
]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        sys.stderr.write("FAIL: %s\n" % what)


def generate(dirpath):
    """Writes one Parquet file per hour; returns (paths, rows as dicts)."""
    rng = random.Random(7)
    host_tags = [{k: rng.choice(v) for k, v in TAGS.items()} for _ in range(HOSTS)]
    walk = [[rng.randrange(101) for _ in FIELDS] for _ in range(HOSTS)]
    schema = pa.schema(
        [pa.field("time", pa.timestamp("us", tz="UTC"), nullable=False),
         pa.field("hostname", pa.string(), nullable=False)]
        + [pa.field(k, pa.string()) for k in TAGS]
        + [pa.field(f, pa.int64()) for f in FIELDS]
    )
    paths, all_rows = [], []
    for hour in range(HOURS):
        rows = []
        for step in range(PER_HOUR):
            t = BASE_US + (hour * PER_HOUR + step) * STEP_US
            for h in range(HOSTS):
                vals = walk[h]
                for i in range(len(FIELDS)):
                    vals[i] = min(100, max(0, vals[i] + rng.randint(-5, 5)))
                row = {"time": t, "hostname": "host_%d" % h}
                row.update(host_tags[h])
                row.update(zip(FIELDS, vals))
                rows.append(row)
        cols = {n: [r[n] for r in rows] for n in schema.names}
        table = pa.table(
            [pa.array(cols[f.name], f.type) for f in schema], schema=schema
        )
        path = os.path.join(dirpath, "cpu-h%d.parquet" % hour)
        pq.write_table(table, path)
        paths.append(path)
        all_rows.extend(rows)
    return paths, all_rows


def run(mode, args, env=None, args_file=None):
    """Runs the peer; returns (exit status, parsed stdout or None, stderr)."""
    if args_file is not None:
        with open(args_file, "w") as f:
            json.dump(args, f)
        arg = args_file
    else:
        arg = args if isinstance(args, str) else json.dumps(args)
    p = subprocess.run(
        [sys.executable, PEER, mode, arg], capture_output=True, text=True, env=env, timeout=300
    )
    out = None
    if p.returncode == 0:
        try:
            out = json.loads(p.stdout)
        except ValueError:
            check(False, "%s: stdout is not one JSON object: %r" % (mode, p.stdout[:500]))
    return p.returncode, out, p.stderr


def check_common(mode, out):
    check(out["mode"] == mode, "%s: mode %r" % (mode, out["mode"]))
    check(out["package"] == "timeseries-table-format", "%s: package" % mode)
    check(out["package_version"] == "0.9.0", "%s: package_version %r" % (mode, out["package_version"]))
    check(out["pyarrow_version"] == pa.__version__, "%s: pyarrow_version" % mode)
    check(out["python_version"] == "%d.%d.%d" % sys.version_info[:3], "%s: python_version" % mode)
    check(isinstance(out["peak_rss_bytes"], int) and out["peak_rss_bytes"] > 10 << 20, "%s: peak_rss_bytes" % mode)
    check(out["wall_s"] > 0 and out["import_s"] > 0 and out["wall_s"] >= out["import_s"], "%s: wall_s/import_s" % mode)


def check_times(what, entry, runs):
    t = entry["times_s"]
    check(len(t) == runs and all(x > 0 for x in t), "%s: times_s %r" % (what, t))
    if t:
        check(entry["min_s"] <= entry["median_s"] <= entry["max_s"], "%s: min/median/max" % what)


def minute_us(t):
    return t - t % 60_000_000


def main():
    with tempfile.TemporaryDirectory(prefix="test_ttf_peer_") as tmp:
        files, rows = generate(tmp)
        root = os.path.join(tmp, "cpu")
        n = len(rows)

        # ---- ingest (args from a file)
        rc, out, err = run(
            "ingest",
            {"files": files, "table_root": root, "index_column": "time", "granularity": "10s",
             "entity_columns": ["hostname"], "warmup": True},
            args_file=os.path.join(tmp, "ingest.json"),
        )
        check(rc == 0, "ingest exit %d: %s" % (rc, err))
        if rc != 0:
            return 1
        check_common("ingest", out)
        check(out["rows"] == n, "ingest rows %d != %d" % (out["rows"], n))
        check([f["rows"] for f in out["files"]] == [PER_HOUR * HOSTS] * HOURS, "ingest per-file rows")
        check([f["file"] for f in out["files"]] == files, "ingest file order")
        check([f["committed_version"] for f in out["files"]] == [2, 3], "ingest committed versions")
        check(out["version"] == 1 + HOURS and out["segments"] == HOURS, "ingest version/segments")
        check(abs(out["total_s"] - sum(f["append_s"] for f in out["files"])) < 1e-9, "ingest total_s")
        check(abs(out["rows_per_s"] - n / out["total_s"]) < 1e-6 * out["rows_per_s"], "ingest rows_per_s")
        check(out["warmup_s"] is not None and out["segment_bytes"] > 0, "ingest warmup_s/segment_bytes")
        ingest = out

        # ingest into a table root that is not empty: failure
        rc, _, err = run("ingest", {"files": files, "table_root": root, "index_column": "time",
                                    "granularity": "10s"})
        check(rc == 1 and "not empty" in err, "ingest into non-empty root: exit %d %r" % (rc, err))

        # ---- scan (inline args)
        def count(lo, hi):
            return sum(1 for r in rows if (lo is None or r["time"] >= lo) and (hi is None or r["time"] < hi))

        h = 3_600_000_000
        ranges = [
            ("all", None, None, n),
            ("hour0", "2024-06-01T00:00:00Z", "2024-06-01T01:00:00Z", count(BASE_US, BASE_US + h)),
            ("mid", "2024-06-01T00:30:00Z", "2024-06-01T01:30:00Z", count(BASE_US + h // 2, BASE_US + 3 * h // 2)),
            # +02:00 offsets: [00:30, 01:00) UTC
            ("offset", "2024-06-01T02:30:00+02:00", "2024-06-01T03:00:00+02:00",
             count(BASE_US + h // 2, BASE_US + h)),
            # a sub-microsecond start excludes the row at 00:30:00 exactly
            ("sub_us", "2024-06-01T00:30:00.0000001Z", "2024-06-01T00:30:10Z", 0),
            ("open_end", "2024-06-01T01:59:50Z", None, HOSTS),
            ("after", "2024-06-01T03:00:00Z", "2024-06-01T04:00:00Z", 0),
        ]
        runs = 3
        rc, out, err = run("scan", {
            "table_root": root, "table": "cpu", "runs": runs, "warmup": 1,
            "ranges": [{"name": a, "start": b, "end": c} for a, b, c, _ in ranges],
        })
        check(rc == 0, "scan exit %d: %s" % (rc, err))
        if rc != 0:
            return 1
        check_common("scan", out)
        check(out["index_column"] == "time" and out["version"] == 3 and out["segments"] == 2, "scan table info")
        check(list(out["ranges"]) == [r[0] for r in ranges], "scan range order")
        for name, _, _, want in ranges:
            e = out["ranges"][name]
            check(e["rows"] == want, "scan %s: %d rows, want %d" % (name, e["rows"], want))
            check((e["bytes"] > 0) == (want > 0), "scan %s: bytes %d" % (name, e["bytes"]))
            check_times("scan " + name, e, runs)
        scan = out

        # ---- sql
        by_minute = {}
        for r in rows:
            m = by_minute.setdefault(minute_us(r["time"]), [0, -1, 101])
            m[0] += 1
            m[1] = max(m[1], r["usage_user"])
            m[2] = min(m[2], r["usage_idle"])
        want_minute = [[float(k), float(c), float(mx), float(mn)] for k, (c, mx, mn) in sorted(by_minute.items())]
        last = {}
        for r in rows:
            if r["time"] >= BASE_US + h:
                cur = last.setdefault(r["hostname"], [0, -1])
                cur[0] = max(cur[0], r["time"])
                cur[1] = max(cur[1], r["usage_system"])
        want_host = [[k, float(v[0]), float(v[1])] for k, v in sorted(last.items())]
        queries = [
            ("count", "SELECT count(*) AS n FROM cpu", [[float(n)]]),
            ("by_minute",
             "SELECT date_trunc('minute', time) AS minute, count(*) AS n, max(usage_user) AS mx, "
             "min(usage_idle) AS mn FROM cpu GROUP BY 1 ORDER BY 1", want_minute),
            ("by_host",
             "SELECT hostname, max(time) AS t, max(usage_system) AS mx FROM cpu "
             "WHERE time >= '2024-06-01T01:00:00Z' GROUP BY hostname ORDER BY hostname", want_host),
            ("values",
             "SELECT NULL AS z, CAST('NaN' AS DOUBLE) AS nan, 'abc' AS s, true AS b, "
             "CAST(2.5 AS DECIMAL(10, 2)) AS d, TIMESTAMP '2024-06-01T00:00:00.000001Z' AS ts",
             [[None, "NaN", "abc", 1.0, 2.5, float(BASE_US + 1)]]),
        ]
        rc, out, err = run("sql", {
            "table_root": root, "table": "cpu", "runs": runs, "warmup": 1,
            "queries": [{"name": a, "sql": b} for a, b, _ in queries],
        })
        check(rc == 0, "sql exit %d: %s" % (rc, err))
        if rc != 0:
            return 1
        check_common("sql", out)
        for name, _, want in queries:
            e = out["queries"][name]
            check(e["rows"] == len(want), "sql %s: %d rows, want %d" % (name, e["rows"], len(want)))
            check(e["result"] == want, "sql %s: result %r..., want %r..." % (name, e["result"][:3], want[:3]))
            check_times("sql " + name, e, runs)
        check(out["queries"]["by_minute"]["columns"] == ["minute", "n", "mx", "mn"], "sql by_minute columns")
        sql = out

        # ---- exit statuses
        rc, _, _ = run("nope", "{}")
        check(rc == 2, "unknown mode: exit %d" % rc)
        p = subprocess.run([sys.executable, PEER], capture_output=True, text=True)
        check(p.returncode == 2 and p.stdout == "", "no arguments: exit %d" % p.returncode)
        rc, _, _ = run("scan", "{not json")
        check(rc == 2, "malformed JSON: exit %d" % rc)
        rc, _, _ = run("scan", {"table": "cpu", "ranges": [{"name": "a"}]})
        check(rc == 2, "missing table_root: exit %d" % rc)
        rc, _, _ = run("scan", {"table_root": root, "table": "cpu", "ranges": [{"name": "a", "start": "yesterday"}]})
        check(rc == 2, "bad timestamp: exit %d" % rc)
        rc, _, err = run("sql", {"table_root": root, "table": "cpu", "queries": [{"name": "x", "sql": "SELECT nope FROM cpu"}]})
        check(rc == 1 and err.strip(), "failing query: exit %d" % rc)
        rc, _, _ = run("scan", {"table_root": os.path.join(tmp, "missing"), "table": "cpu", "ranges": [{"name": "a"}]})
        check(rc == 1, "missing table: exit %d" % rc)
        fake = os.path.join(tmp, "fake")
        os.makedirs(os.path.join(fake, "timeseries_table_format"))
        with open(os.path.join(fake, "timeseries_table_format", "__init__.py"), "w") as f:
            f.write("raise ImportError('simulated: not installed')\n")
        env = dict(os.environ, PYTHONPATH=fake)
        rc, _, err = run("sql", {"table_root": root, "table": "cpu", "queries": [{"name": "x", "sql": "SELECT 1"}]}, env=env)
        check(rc == 3 and "not installed" in err, "package missing: exit %d %r" % (rc, err))

    print("ingest: %d rows in %d files, appends %.4f s (%s), %.0f rows/s, version %d, %d segments, peak RSS %.0f MiB"
          % (ingest["rows"], len(ingest["files"]), ingest["total_s"],
             ", ".join("%.4f" % f["append_s"] for f in ingest["files"]), ingest["rows_per_s"],
             ingest["version"], ingest["segments"], ingest["peak_rss_bytes"] / 2**20))
    for name, e in scan["ranges"].items():
        print("scan %-8s %6d rows %8d bytes median %.4f s" % (name, e["rows"], e["bytes"], e["median_s"]))
    for name, e in sql["queries"].items():
        print("sql  %-9s %4d rows median %.4f s" % (name, e["rows"], e["median_s"]))
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
