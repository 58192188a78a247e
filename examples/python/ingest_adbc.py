#!/usr/bin/env python3
"""Write tables with ADBC bulk ingest (Flight SQL CommandStatementIngest).

  python3 ingest_adbc.py grpc://127.0.0.1:8815

SQL on tsflight is read-only; data goes in with cursor.adbc_ingest (or a
plain Flight DoPut). A new table needs its index column and granularity,
and optionally entity columns, which the Flight SQL ingest command has no
field for: the driver passes them as gRPC call headers, set as ADBC options

  adbc.flight.sql.rpc.call_header.x-tsflight-index-column    ts
  adbc.flight.sql.rpc.call_header.x-tsflight-granularity     1s
  adbc.flight.sql.rpc.call_header.x-tsflight-entity-columns  host

on the statement (cursor.adbc_statement.set_options) or on the connection
(connect(..., conn_kwargs={...}), which every later cursor copies). The
driver appends a header value on each set_options call, so each ingest
here uses a fresh cursor.

Steps, each followed by a row count over SQL (one PASS/FAIL line each), on
two fresh tables named adbc_<random>_a and _b:

  mode="create"          _a, headers on the statement: 120 rows (two hosts, 1 s apart)
  mode="append"          _a, the next minute, no headers: 240 rows
  mode="create_append"   _a exists, the minute after: 360 rows
  mode="create"          _a exists: refused, still 360 rows
  mode="replace"         _a: refused with a clear error, still 360 rows
  mode="create"          a third name without the headers: refused
  mode="create_append"   _b is new, headers on the connection: 120 rows

Appends must bring new (host, interval) pairs: a row whose interval the
same host already has is refused, so every step uses a new time range.
"""

import datetime
import uuid

import pyarrow as pa

from common import BASE, Checks, action, adbc_connect, connect, dumps, iso, main, sql_scalar

HEADER = "adbc.flight.sql.rpc.call_header."
SPEC = {
    HEADER + "x-tsflight-index-column": "ts",
    HEADER + "x-tsflight-granularity": "1s",
    HEADER + "x-tsflight-entity-columns": "host",
}
HOSTS = ["h1", "h2"]
TS_TYPE = pa.timestamp("us", tz="UTC")


def minute(m):
    """One row per host and second for minute m after BASE (120 rows)."""
    ts, host, value = [], [], []
    for s in range(60):
        t = BASE + datetime.timedelta(minutes=m, seconds=s)
        for i, h in enumerate(HOSTS):
            ts.append(t)
            host.append(h)
            value.append(m * 100 + s + i * 0.5)
    return pa.table({
        "ts": pa.array(ts, TS_TYPE),
        "host": pa.array(host, pa.utf8()),
        "value": pa.array(value, pa.float64()),
    })


def ingest(conn, table, data, mode, headers=None):
    """adbc_ingest on a fresh cursor, with headers as statement options."""
    with conn.cursor() as cur:
        if headers:
            cur.adbc_statement.set_options(**headers)
        return cur.adbc_ingest(table, data, mode=mode)


def check_rows(checks, conn, label, table, rows, last_minute):
    got = sql_scalar(conn, "SELECT count(*) FROM %s" % table)
    last = sql_scalar(conn, "SELECT max(ts) FROM %s" % table)
    want_last = BASE + datetime.timedelta(minutes=last_minute, seconds=59)
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=datetime.timezone.utc)
    checks.ok("%s rows" % label, got == rows and last == want_last,
              "count(*) = %s (want %d), max(ts) = %s (want %s)" % (
                  got, rows, iso(last) if last else None, iso(want_last)))


def step(checks, label, conn, table, data, mode, headers=None):
    """One ingest that must succeed; adbc_ingest returns the rows written
    (or -1 if the server does not say)."""
    n = ingest(conn, table, data, mode, headers)
    checks.ok(label, n in (data.num_rows, -1), "adbc_ingest returned %s for %d rows" % (n, data.num_rows))


def run(url):
    base = "adbc_" + uuid.uuid4().hex[:12]
    a, b, c = base + "_a", base + "_b", base + "_c"
    print("tables: A=%s, B=%s (and C=%s, which must not be created)" % (a, b, c))

    conn = adbc_connect(url)
    try:
        sql_scalar(conn, "SELECT 1")  # the connection check: stop here if it fails
        checks = Checks()

        def create_a():
            step(checks, 'ingest A mode="create" (headers on the statement)',
                 conn, a, minute(0), "create", SPEC)
            check_rows(checks, conn, "A", a, 120, 0)
            desc = action(connect(url), "describe-table", {"table": a})
            print("  describe-table %s index: %s" % (a, dumps(desc["index"])))
            idx = desc["index"]
            checks.equal("A index spec from the headers",
                         (idx["column"], idx["type"], idx["granularity"], idx["entity_columns"]),
                         ("ts", "timestamp", "1s", ["host"]))

        def append_a():
            step(checks, 'ingest A mode="append"', conn, a, minute(1), "append")
            check_rows(checks, conn, "A", a, 240, 1)

        def create_append_a():
            step(checks, 'ingest A mode="create_append" (table exists)',
                 conn, a, minute(2), "create_append", SPEC)
            check_rows(checks, conn, "A", a, 360, 2)

        def refused_a():
            checks.fails('ingest A mode="create" (table exists) refused',
                         lambda: ingest(conn, a, minute(3), "create", SPEC))
            checks.fails('ingest A mode="replace" refused',
                         lambda: ingest(conn, a, minute(3), "replace", SPEC), "replace")
            check_rows(checks, conn, "A", a, 360, 2)

        def no_headers_c():
            checks.fails('ingest C mode="create" without the headers refused',
                         lambda: ingest(conn, c, minute(0), "create"))
            names = [i.descriptor.path[0].decode() for i in connect(url).list_flights()]
            checks.ok("C not created", c not in names)

        def create_append_b():
            # The headers as connection options this time.
            other = adbc_connect(url, conn_kwargs=SPEC)
            try:
                step(checks, 'ingest B mode="create_append" (new table, headers on the connection)',
                     other, b, minute(0), "create_append")
            finally:
                other.close()
            check_rows(checks, conn, "B", b, 120, 0)

        checks.run('create A', create_a)
        checks.run('append A', append_a)
        checks.run('create_append A', create_append_a)
        checks.run('refused ingests into A', refused_a)
        checks.run('create C without headers', no_headers_c)
        checks.run('create_append B', create_append_b)
    finally:
        conn.close()
    checks.done()


if __name__ == "__main__":
    main(run)
