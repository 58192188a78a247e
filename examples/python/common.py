"""Helpers shared by the tsflight pyarrow.flight and ADBC examples.

Each example takes the server URL as its first argument, for example
grpc://127.0.0.1:8815, prints a few lines and exits non-zero on failure.
The ADBC examples (*_adbc.py) also use Checks, adbc_connect and sql_scalar;
the driver is imported only by them.
"""

import datetime
import json
import sys
import warnings
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


class Checks:
    """PASS/FAIL lines for the ADBC examples, which run many independent
    checks: each prints one line, "PASS label: detail" or "FAIL label:
    detail", and a failed check does not stop the ones after it. done()
    raises ExampleFailure if any failed, so the script exits 1."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, label, good, detail=""):
        """One check: good is true or false; returns good."""
        good = bool(good)
        if good:
            self.passed += 1
        else:
            self.failed += 1
        print("%s %s%s" % ("PASS" if good else "FAIL", label, ": " + detail if detail else ""))
        return good

    def equal(self, label, got, want, detail=""):
        """got == want; the line shows both when they differ."""
        if got == want:
            return self.ok(label, True, detail or str(got))
        return self.ok(label, False, "got %r, want %r%s" % (got, want, "; " + detail if detail else ""))

    def run(self, label, fn, *args):
        """Call fn(*args); an exception fails the check labelled `label`
        (and returns None), otherwise fn's result is returned and nothing is
        printed: fn makes its own checks."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - report any failure as a FAIL line
            self.ok(label, False, "%s: %s" % (type(e).__name__, first_line(e)))
            return None

    def fails(self, label, fn, *words):
        """fn() must raise; with words, the error message must contain each
        of them (case-insensitive; a word may be a tuple of alternatives).
        Returns the message, or None if fn did not fail."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - any error is what we want here
            msg = first_line(e)
            missing = [w for w in words if not any(x.lower() in msg.lower() for x in _alternatives(w))]
            if missing:
                self.ok(label, False, "error does not mention %s: %s" % (
                    " and ".join("/".join(_alternatives(w)) for w in missing), msg))
            else:
                self.ok(label, True, msg)
            return msg
        self.ok(label, False, "succeeded, but it should have failed")
        return None

    def done(self):
        print("%d checks passed, %d failed" % (self.passed, self.failed))
        if self.failed:
            raise ExampleFailure("%d of %d checks failed" % (self.failed, self.passed + self.failed))


def _alternatives(word):
    return word if isinstance(word, tuple) else (word,)


def first_line(e):
    """The first line of an exception's message (ADBC errors append
    details on further lines)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def adbc_connect(url, **kwargs):
    """adbc_driver_flightsql.dbapi.connect(url, **kwargs). The driver's
    warning that autocommit cannot be turned off (the server offers no
    transactions, so the connection stays in autocommit) is printed as a
    note instead of going to stderr as a Python warning."""
    try:
        import adbc_driver_flightsql.dbapi as dbapi
    except ImportError as e:
        raise ExampleFailure("%s (pip install -r .ci/requirements.txt)" % e)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conn = dbapi.connect(url, **kwargs)
    for w in caught:
        print("note: ADBC warning: %s" % w.message)
    return conn


def sql_scalar(conn, sql, params=None):
    """Run a query that returns one row of one column; return the value."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    if len(rows) != 1 or len(rows[0]) != 1:
        raise ExampleFailure("%s: %d rows, expected one row of one column" % (sql, len(rows)))
    return rows[0][0]


def quote_ident(name):
    """A SQL identifier in double quotes (tsflight table names need none, but
    column names may)."""
    return '"%s"' % name.replace('"', '""')


def _expected_errors():
    """The errors main reports in one line: Flight, Arrow, ExampleFailure,
    OS errors and, once an ADBC example has loaded the driver manager, ADBC
    errors."""
    errors = (flight.FlightError, pa.ArrowException, ExampleFailure, OSError)
    adbc = sys.modules.get("adbc_driver_manager")
    if adbc is not None:
        errors += (adbc.Error,)
    return errors


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
    except Exception as e:
        if not isinstance(e, _expected_errors()):
            raise
        print("error: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
