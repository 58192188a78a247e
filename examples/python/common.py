"""Helpers shared by the tsflight pyarrow.flight examples.

Each example takes the server URL as its only argument, for example
grpc://127.0.0.1:8815, prints a few lines and exits non-zero on failure.
"""

import datetime
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.flight as flight

# Every example works on the same fixed data, so the numbers they print are
# the same on every run: three hosts reporting every 10 seconds from
# 2024-06-01T00:00:00Z, db1 silent from 00:20 to 00:30.
BASE = datetime.datetime(2024, 6, 1, tzinfo=datetime.timezone.utc)
STEP = datetime.timedelta(seconds=10)
HOSTS = ["web1", "web2", "db1"]
TS_TYPE = pa.timestamp("ms", tz="UTC")
CPU_SPEC = {
    "index_column": "ts",
    "index_type": "timestamp",
    "granularity": "10s",
    "entity_columns": ["host"],
}


class ExampleFailure(Exception):
    """A check in an example did not hold."""


def iso(t):
    """RFC 3339 text of a datetime, as the server expects and prints it. A
    naive datetime (from a timestamp column without a time zone) is UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    text = t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        text += (".%06d" % t.microsecond).rstrip("0")
    return text + "Z"


def at(minutes):
    """BASE plus a number of minutes."""
    return BASE + datetime.timedelta(minutes=minutes)


def usage_value(host, step):
    """The cpu usage of host at 10 s step number `step` (exact in binary)."""
    return HOSTS.index(host) * 10 + (step % 60) * 0.5


def cpu_rows(start_min, end_min, hosts=HOSTS, skip=None):
    """A pyarrow Table of cpu rows for [start_min, end_min) minutes after
    BASE, one row per host and 10 s; skip=(host, from_min, to_min) leaves
    that host silent for that stretch."""
    ts, host_col, usage = [], [], []
    first, last = start_min * 6, end_min * 6
    for step in range(first, last):
        t = BASE + step * STEP
        for h in hosts:
            if skip and h == skip[0] and at(skip[1]) <= t < at(skip[2]):
                continue
            ts.append(t)
            host_col.append(h)
            usage.append(usage_value(h, step))
    return pa.table(
        {
            "ts": pa.array(ts, TS_TYPE),
            "host": pa.array(host_col, pa.string()),
            "usage": pa.array(usage, pa.float64()),
        }
    )


def connect(url):
    client = flight.connect(url)
    client.wait_for_available(timeout=10)
    return client


def action(client, name, body):
    """Run a DoAction with a JSON body and return its one JSON result."""
    results = list(client.do_action(flight.Action(name, json.dumps(body).encode())))
    if len(results) != 1:
        raise ExampleFailure("%s returned %d results, expected 1" % (name, len(results)))
    return json.loads(results[0].body.to_pybytes())


def put(client, descriptor, table):
    """DoPut one table as one stream (one append, one commit); return the
    PutResult's JSON app_metadata: {"version", "rows", "segment"}."""
    writer, reader = client.do_put(descriptor, table.schema)
    try:
        writer.write_table(table)
        writer.done_writing()
        meta = reader.read()
    finally:
        writer.close()
    if meta is None:
        raise ExampleFailure("DoPut answered without a PutResult")
    return json.loads(meta.to_pybytes())


def command(body):
    """A CMD descriptor with a JSON body."""
    return flight.FlightDescriptor.for_command(json.dumps(body))


def fetch_all(client, info, workers=None):
    """DoGet every endpoint of a FlightInfo in parallel (endpoints carry no
    location: they are read from the same server) and concatenate them in
    endpoint order. Every batch is validated in full (offsets, bitmaps,
    UTF-8): the server merges short batches into one record batch without
    copying them, and pyarrow must find it well formed."""
    def fetch(endpoint):
        part = client.do_get(endpoint.ticket).read_all()
        part.validate(full=True)
        return part

    with ThreadPoolExecutor(max_workers=workers or max(1, len(info.endpoints))) as pool:
        parts = list(pool.map(fetch, info.endpoints))
    if not parts:
        return info.schema.empty_table()
    return pa.concat_tables(parts)


def dumps(obj):
    """Compact, key-ordered JSON for printing."""
    return json.dumps(obj, separators=(",", ":"))


def main(run, usage="SERVER_URL"):
    """Run run(*args) with the command-line arguments (as many as usage
    names), turning errors into a message on stderr and exit code 1; bad
    usage exits 2."""
    args = sys.argv[1:]
    if args[:1] in (["-h"], ["--help"]):
        print("usage: %s %s" % (sys.argv[0], usage))
        sys.exit(0)
    if len(args) != len(usage.split()):
        print("usage: %s %s" % (sys.argv[0], usage), file=sys.stderr)
        sys.exit(2)
    try:
        run(*args)
    except (flight.FlightError, pa.ArrowException, ExampleFailure, OSError) as e:
        print("error: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
