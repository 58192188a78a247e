#!/usr/bin/env python3
"""Query a table with SQL through ADBC (Flight SQL) and check the answers
against the plain Flight side.

  python3 sql_adbc.py grpc://127.0.0.1:8815 TABLE TABLE.expected.json

TABLE has a timestamp index; TABLE.expected.json is the file that
testdata/reference/make_tables.py writes beside it (its row count, index
column, entity columns, granularity and index bounds are used). Flight SQL
is served on the same port as plain Flight, so the same URL works for
adbc_driver_flightsql.dbapi.connect and for pyarrow.flight.

What it does, one PASS/FAIL line per check:

* SELECT count(*) with the bare table name (and main.T, tsflight.main.T)
  against the row count of the expected file;
* a time range counted four ways: a plain Flight scan, SQL with TIMESTAMP
  literals, and cursor.execute("... WHERE ts >= ? AND ts < ?", (a, b)) with
  UTC datetimes and with naive ones (the SQL session runs in UTC);
* fetch_arrow_table of SELECT * against a full plain Flight scan, value by
  value;
* the table functions ts_coverage and ts_gaps against the coverage and gaps
  actions, for the whole table and for each entity (a table with one entity
  column: the entity is given by its value);
* an INSERT (cursor.execute) and a DELETE (executescript, which sends a
  Flight SQL update) must be refused: SQL is read-only, data goes in by bulk
  ingest (ingest_adbc.py) or DoPut.
"""

import datetime
import json
import re

import pyarrow as pa
import pyarrow.flight as flight

from common import (
    Checks,
    ExampleFailure,
    action,
    adbc_connect,
    command,
    connect,
    fetch_all,
    iso,
    main,
    quote_ident,
    sql_scalar,
)

UTC = datetime.timezone.utc
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_time(text):
    """An RFC 3339 string as an aware UTC datetime (fractions beyond
    microseconds are dropped: only whole intervals are used here)."""
    m = RFC3339.match(text)
    if not m:
        raise ExampleFailure("not an RFC 3339 time: %r" % text)
    base, frac, zone = m.groups()
    t = datetime.datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    if frac:
        t += datetime.timedelta(microseconds=int(frac[:6].ljust(6, "0")))
    return t.astimezone(UTC)


class Expected:
    """What TABLE.expected.json says about the table."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            e = json.load(f)
        spec = e["index_spec"]
        if spec["index_type"] != "timestamp":
            raise ExampleFailure("%s: index type %s; this example needs a timestamp index" % (path, spec["index_type"]))
        m = re.fullmatch(r"(\d+)([smhd])", spec["index_granularity"])
        if not m:
            raise ExampleFailure("%s: unexpected granularity %r" % (path, spec["index_granularity"]))
        self.step = datetime.timedelta(seconds=int(m.group(1)) * SECONDS[m.group(2)])
        self.rows = sum(s["row_count"] for s in e["segments"])
        self.index = spec["index_column"]
        self.entities = spec["entity_columns"] or []
        self.columns = e["columns"]
        epoch = datetime.datetime(1970, 1, 1, tzinfo=UTC)
        lo = min(parse_time(s["index_min"]) for s in e["segments"])
        hi = max(parse_time(s["index_max"]) for s in e["segments"])
        # The whole intervals holding the data, aligned to the UTC epoch.
        self.start = epoch + (lo - epoch) // self.step * self.step
        self.end = epoch + ((hi - epoch) // self.step + 1) * self.step


def sql_time(t, aware):
    """A DuckDB literal for the aware datetime t: TIMESTAMPTZ with an explicit
    offset for a column with a time zone, TIMESTAMP (UTC wall time) for one
    without."""
    t = t.astimezone(UTC)
    text = t.strftime("%Y-%m-%d %H:%M:%S") + (".%06d" % t.microsecond if t.microsecond else "")
    return "TIMESTAMPTZ '%s+00:00'" % text if aware else "TIMESTAMP '%s'" % text


def comparable(table, keys):
    """Rows of a table as Python values, sorted by keys, with timestamps as
    UTC nanoseconds (a column without a time zone is UTC), so the SQL and the
    Flight answers compare whatever timestamp unit each side uses."""
    cols = {}
    for name in table.column_names:
        col = table[name]
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ns", tz=col.type.tz)).cast(pa.int64())
        cols[name] = col
    return pa.table(cols).sort_by([(k, "ascending") for k in keys]).to_pylist()


def check_counts(checks, conn, client, name, exp, ts_aware):
    t = quote_ident(exp.index)
    n = sql_scalar(conn, "SELECT count(*) FROM %s" % name)
    checks.equal("count(*) FROM %s = expected.json rows" % name, n, exp.rows)
    qualified = [sql_scalar(conn, "SELECT count(*) FROM %s.%s" % (p, name)) for p in ("main", "tsflight.main")]
    checks.equal("count(*) FROM main.%s, tsflight.main.%s" % (name, name), qualified, [exp.rows, exp.rows])

    # A range inside the data: 5 intervals after the first one, 12 long.
    a, b = exp.start + 5 * exp.step, exp.start + 17 * exp.step
    label = "[%s, %s)" % (iso(a), iso(b))
    scan = fetch_all(client, client.get_flight_info(command(
        {"table": name, "start": iso(a), "end": iso(b), "columns": [exp.index]})))
    want = scan.num_rows
    print("range %s: plain Flight scan: %d rows" % (label, want))

    literal = "SELECT count(*) FROM %s WHERE %s >= %s AND %s < %s" % (
        name, t, sql_time(a, ts_aware), t, sql_time(b, ts_aware))
    print("  sql:", literal)
    checks.equal("time range with literals = Flight scan", sql_scalar(conn, literal), want, "%d rows in %s" % (want, label))

    param = "SELECT count(*) FROM %s WHERE %s >= ? AND %s < ?" % (name, t, t)
    print("  sql:", param)
    checks.equal("time range with ? parameters (UTC datetimes) = Flight scan",
                 sql_scalar(conn, param, (a, b)), want, "%d rows" % want)
    naive = (a.replace(tzinfo=None), b.replace(tzinfo=None))
    checks.equal("time range with ? parameters (naive datetimes) = Flight scan",
                 sql_scalar(conn, param, naive), want, "%d rows" % want)
    checks.equal("? parameters over the whole index range = expected.json rows",
                 sql_scalar(conn, param, (exp.start, exp.end)), exp.rows,
                 "%d rows in [%s, %s)" % (exp.rows, iso(exp.start), iso(exp.end)))


def check_fetch(checks, conn, name, exp, flight_all):
    keys = [exp.index] + exp.entities
    sql = "SELECT * FROM %s ORDER BY %s" % (name, ", ".join(map(quote_ident, keys)))
    with conn.cursor() as cur:
        cur.execute(sql)
        got = cur.fetch_arrow_table()
    print("fetch_arrow_table %s: %d rows; %s" % (
        sql, got.num_rows, ", ".join("%s %s" % (f.name, f.type) for f in got.schema)))
    checks.equal("fetch_arrow_table columns = expected.json columns", got.column_names, exp.columns)
    checks.equal("fetch_arrow_table rows = expected.json rows", got.num_rows, exp.rows)
    if got.column_names == flight_all.column_names:
        same = comparable(got, keys) == comparable(flight_all, keys)
        checks.ok("fetch_arrow_table values = plain Flight scan", same,
                  "%d rows equal" % got.num_rows if same else "the rows differ")


def entity_arg(entity):
    """The optional entity argument of ts_coverage/ts_gaps, as SQL: for a
    table with one entity column, the entity's value."""
    (value,) = entity.values()
    return "'%s'" % str(value).replace("'", "''")


def check_coverage(checks, conn, client, name, exp, entity=None):
    body = {"table": name, "start": iso(exp.start), "end": iso(exp.end)}
    # Bounds as TIMESTAMP literals for the whole table, as ISO strings for
    # an entity: the functions take both.
    args = "'%s', %s, %s" % (name, sql_time(exp.start, False), sql_time(exp.end, False))
    label = ""
    if entity:
        body["entity"] = entity
        args = "'%s', '%s', '%s', %s" % (name, iso(exp.start), iso(exp.end), entity_arg(entity))
        label = " " + ", ".join("%s=%s" % kv for kv in entity.items())

    cov = action(client, "coverage", body)
    sql = "SELECT * FROM ts_coverage(%s)" % args
    with conn.cursor() as cur:
        cur.execute(sql)
        rows = cur.fetch_arrow_table().to_pylist()
    print("%s: %s" % (sql, rows))
    if not checks.equal("ts_coverage%s: one row" % label, len(rows), 1):
        return
    row = rows[0]
    keys = [k for k in ("expected", "covered", "intervals", "identities") if k in row]
    got = {k: row[k] for k in keys}
    want = {k: cov[k] for k in keys}
    ratio_ok = row.get("ratio") is not None and abs(row["ratio"] - cov["ratio"]) < 1e-9
    checks.ok("ts_coverage%s = coverage action" % label, got == want and ratio_ok,
              "%s ratio=%s (action: %s ratio=%s)" % (
                  " ".join("%s=%s" % kv for kv in got.items()), row.get("ratio"),
                  " ".join("%s=%s" % kv for kv in want.items()), cov["ratio"]))

    gaps = action(client, "gaps", body)
    sql = "SELECT gap_start, gap_end, intervals FROM ts_gaps(%s) ORDER BY gap_start" % args
    with conn.cursor() as cur:
        cur.execute(sql)
        got = [(iso(s), iso(e), n) for s, e, n in cur.fetchall()]
    print("%s: %d rows" % (sql, len(got)))
    want = [(g["start"], g["end"], g["intervals"]) for g in gaps["gaps"]]
    if gaps["truncated"]:  # the action lists only the first gaps
        got = got[: len(want)]
    runs = ", ".join("%s..%s (%d)" % g for g in got) or "none"
    checks.equal("ts_gaps%s = gaps action" % label, got, want, "%d gaps: %s" % (len(got), runs))


def check_writes_refused(checks, conn, name, rows):
    def insert():
        with conn.cursor() as cur:
            cur.execute("INSERT INTO %s SELECT * FROM %s LIMIT 1" % (name, name))
            cur.fetchall()

    def delete():
        with conn.cursor() as cur:
            cur.executescript("DELETE FROM %s WHERE 1 = 0" % name)

    words = (("read-only", "read only"), ("ingest", "DoPut"))
    checks.fails("INSERT (cursor.execute) refused", insert, *words)
    checks.fails("DELETE (executescript) refused", delete, *words)
    checks.equal("count(*) unchanged after the refused writes", sql_scalar(conn, "SELECT count(*) FROM %s" % name), rows)


def run(url, name, expected_path):
    exp = Expected(expected_path)
    client = connect(url)
    schema = client.get_schema(flight.FlightDescriptor.for_path(name)).schema
    ts_aware = schema.field(exp.index).type.tz is not None
    flight_all = fetch_all(client, client.get_flight_info(flight.FlightDescriptor.for_path(name)))
    print("plain Flight: %s has %d rows; %s" % (
        name, flight_all.num_rows, ", ".join("%s %s" % (f.name, f.type) for f in schema)))

    conn = adbc_connect(url)
    try:
        # The first query doubles as the connection check: if it fails, the
        # script stops here with one error.
        sql_scalar(conn, "SELECT 1")
        checks = Checks()
        checks.run("counts", check_counts, checks, conn, client, name, exp, ts_aware)
        checks.run("fetch_arrow_table", check_fetch, checks, conn, name, exp, flight_all)
        checks.run("ts_coverage/ts_gaps", check_coverage, checks, conn, client, name, exp)
        if len(exp.entities) == 1:
            (col,) = exp.entities
            for value in sorted(set(flight_all[col].to_pylist()), key=repr):
                checks.run("ts_coverage/ts_gaps %s=%s" % (col, value),
                           check_coverage, checks, conn, client, name, exp, {col: value})
        elif exp.entities:
            print("note: %d entity columns: ts_coverage/ts_gaps checked for the whole table only" % len(exp.entities))
        checks.run("refused writes", check_writes_refused, checks, conn, name, exp.rows)
    finally:
        conn.close()
    checks.done()


if __name__ == "__main__":
    main(run, "SERVER_URL TABLE EXPECTED_JSON")
