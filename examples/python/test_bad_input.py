"""The Python rows of the bad-input catalogue (docs/reliability-catalogue.md):
requests a client can get wrong, sent with pyarrow.flight and with ADBC
(adbc_driver_flightsql.dbapi) to a live tsflight server. Each test checks
the exception pyarrow or ADBC raises (which carries the gRPC status), and
that the message names the fault.

    python3 test_bad_input.py SERVER_URL     # as run_all.sh runs it
    TSFLIGHT_URL=grpc://... pytest test_bad_input.py

The tests write to a scratch table they create (bad_input_<random>), so
they can run again on the same server. With TSFLIGHT_ROOT set to the
server's root directory every test also proves that it wrote nothing: the
path, size and SHA-256 of every file under the root are the same before and
after.
"""

import hashlib
import json
import os
import sys
import uuid

import pyarrow as pa
import pyarrow.flight as flight
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

URL = os.environ.get("TSFLIGHT_URL", "")
ROOT = os.environ.get("TSFLIGHT_ROOT", "")
TABLE = "bad_input_" + uuid.uuid4().hex[:12]

pytestmark = pytest.mark.skipif(not URL, reason="TSFLIGHT_URL is not set")


def snapshot(root):
    """Relative path -> (size, sha256) of every file under root, but the
    last-value index files: background maintenance rewrites those for the
    tables the other examples appended to, whatever request runs meanwhile
    (a CI run saw four tables' _timeseries_log/_last files change during
    one of these tests)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        if os.path.basename(dirpath) == "_last":
            continue
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                data = f.read()
            out[os.path.relpath(path, root)] = (len(data), hashlib.sha256(data).hexdigest())
    return out


@pytest.fixture(scope="module")
def client():
    c = common.connect(URL)
    # The scratch table: three hosts for the first hour, as the examples.
    common.action(c, "create-table", dict(common.CPU_SPEC, table=TABLE))
    common.put(c, flight.FlightDescriptor.for_path(TABLE), common.cpu_rows(0, 60))
    yield c
    c.close()


@pytest.fixture(scope="module")
def conn(client):
    c = common.adbc_connect(URL)
    yield c
    c.close()


@pytest.fixture(autouse=True)
def writes_nothing(client):
    """Every test leaves the root as it found it (with TSFLIGHT_ROOT) and
    the scratch table at its 1080 rows."""
    before = snapshot(ROOT) if ROOT else None
    yield
    if before is not None:
        after = snapshot(ROOT)
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
        assert not changed, "the request wrote to the root: %s" % changed
    desc = common.action(client, "describe-table", {"table": TABLE})
    assert desc["rows"] == 1080 and desc["version"] == 2, desc


def put(client, table, descriptor=None):
    return common.put(client, descriptor or flight.FlightDescriptor.for_path(TABLE), table)


def expect(exc, fn, *fragments):
    """fn() raises exc (exactly that class or a subclass) whose message
    holds every fragment; returns the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, "%r does not mention %r" % (msg, f)
    return msg


# ---- pyarrow.flight ----
# pyarrow raises ArrowInvalid for INVALID_ARGUMENT and FAILED_PRECONDITION,
# ArrowKeyError for NOT_FOUND, a plain ArrowException for ALREADY_EXISTS;
# the message starts with
# the gRPC status in words ("Flight returned invalid argument error").


def test_put_wrong_column_type(client):
    t = common.cpu_rows(120, 121)
    t = t.set_column(2, "usage", pa.array([str(v) for v in t.column("usage").to_pylist()]))
    expect(pa.ArrowInvalid, lambda: put(client, t), "invalid argument", '"usage"', "utf8")


def test_put_missing_entity_column(client):
    expect(pa.ArrowInvalid, lambda: put(client, common.cpu_rows(120, 121).drop_columns(["host"])),
           "invalid argument", '"host"')


def test_put_null_in_entity_column(client):
    t = common.cpu_rows(120, 121)
    t = t.set_column(1, "host", pa.array([None] + t.column("host").to_pylist()[1:], pa.string()))
    expect(pa.ArrowInvalid, lambda: put(client, t), "invalid argument", '"host"', "null")


def test_put_overlap(client):
    expect(pa.ArrowInvalid, lambda: put(client, common.cpu_rows(30, 90)),
           "precondition failed", "overlaps data already in the table", "nothing was committed")


def test_put_duplicate_in_stream(client):
    t = common.cpu_rows(120, 121)
    expect(pa.ArrowInvalid, lambda: put(client, pa.concat_tables([t, t])),
           "precondition failed", "more than one row")


def test_put_unknown_table(client):
    expect(pa.ArrowKeyError, lambda: put(client, common.cpu_rows(120, 121), flight.FlightDescriptor.for_path("nosuch_table")),
           "not found", '"nosuch_table"')


def test_put_empty_stream(client):
    expect(pa.ArrowInvalid, lambda: put(client, common.cpu_rows(120, 120)), "invalid argument", "no rows")


def test_create_table_hostile_name(client):
    expect(pa.ArrowInvalid, lambda: common.action(client, "create-table", dict(common.CPU_SPEC, table="../escape")),
           "invalid argument", '"../escape"', "is not allowed")


def test_create_existing_table(client):
    expect(pa.ArrowException, lambda: common.action(client, "create-table", dict(common.CPU_SPEC, table=TABLE)),
           "already exists error", TABLE)


def test_action_body_not_json(client):
    expect(pa.ArrowInvalid, lambda: list(client.do_action(flight.Action("gaps", b"{not json"))),
           "invalid argument", "gaps: malformed JSON")


def test_forged_ticket(client):
    expect(pa.ArrowInvalid, lambda: client.do_get(flight.Ticket(b"tsf1:{\"table\":\"%s\"}" % TABLE.encode())).read_all(),
           "invalid argument", "ticket: no version")


def test_ticket_for_missing_version(client):
    tkt = b"tsf1:" + json.dumps({"table": TABLE, "version": 999, "part": 0, "parts": 1}).encode()
    expect(pa.ArrowKeyError, lambda: client.do_get(flight.Ticket(tkt)).read_all(), "not found", "version 999")


def test_scan_unknown_column(client):
    expect(pa.ArrowInvalid, lambda: client.get_flight_info(common.command({"table": TABLE, "columns": ["ts", "nope"]})),
           "invalid argument", '"nope"')


def test_gaps_negative_limit(client):
    body = {"table": TABLE, "start": common.iso(common.at(0)), "end": common.iso(common.at(60)), "limit": -1}
    expect(pa.ArrowInvalid, lambda: common.action(client, "gaps", body), "invalid argument", "gaps: limit -1 is negative")


def test_gaps_limit_above_maximum(client):
    body = {"table": TABLE, "start": common.iso(common.at(0)), "end": common.iso(common.at(60)), "limit": 500001}
    expect(pa.ArrowInvalid, lambda: common.action(client, "gaps", body),
           "invalid argument", "gaps: limit 500001 is above the maximum of 500000")


def test_check_unknown_table(client):
    expect(pa.ArrowKeyError, lambda: common.action(client, "check", {"table": "nosuch_table"}),
           "not found", '"nosuch_table"')


def test_check_table_and_tables(client):
    expect(pa.ArrowInvalid, lambda: common.action(client, "check", {"table": TABLE, "tables": [TABLE]}),
           "invalid argument", 'give "table" or "tables", not both')


# ---- ADBC (Flight SQL) ----
# ADBC errors carry the ADBC status (status_code) and the gRPC code as
# vendor_code.


def adbc_expect(status, fn, *fragments):
    import adbc_driver_manager

    with pytest.raises(adbc_driver_manager.Error) as info:
        fn()
    err = info.value
    assert err.status_code == getattr(adbc_driver_manager.AdbcStatusCode, status), (err.status_code, str(err))
    msg = str(err)
    for f in fragments:
        assert f in msg, "%r does not mention %r" % (msg, f)


def sql(conn, q):
    with conn.cursor() as cur:
        cur.execute(q)
        return cur.fetchall()


def test_adbc_ingest_unknown_table(conn):
    def ingest():
        with conn.cursor() as cur:
            cur.adbc_ingest("nosuch_table", common.cpu_rows(120, 121), mode="append")
    adbc_expect("NOT_FOUND", ingest, "nosuch_table", "does not exist")


def test_adbc_ingest_overlap(conn):
    def ingest():
        with conn.cursor() as cur:
            cur.adbc_ingest(TABLE, common.cpu_rows(0, 1), mode="append")
    adbc_expect("UNKNOWN", ingest, "overlaps data already in the table")


def test_adbc_ingest_create_existing(conn):
    def ingest():
        with conn.cursor() as cur:
            cur.adbc_ingest(TABLE, common.cpu_rows(120, 121), mode="create")
    adbc_expect("ALREADY_EXISTS", ingest, "table %s already exists (mode create)" % TABLE, "use mode append or create_append")


def test_adbc_syntax_error(conn):
    adbc_expect("INVALID_ARGUMENT", lambda: sql(conn, "SELEKT 1"), "syntax error")


def test_adbc_unknown_table(conn):
    adbc_expect("NOT_FOUND", lambda: sql(conn, "SELECT * FROM nosuch_table"), "nosuch_table")


def test_adbc_insert_refused(conn):
    adbc_expect("INVALID_ARGUMENT", lambda: sql(conn, "INSERT INTO %s VALUES (now(), 'x', 1)" % TABLE), "read-only", "INSERT")


def test_adbc_read_file_refused(conn):
    adbc_expect("INVALID_ARGUMENT", lambda: sql(conn, "SELECT * FROM read_csv('/etc/passwd')"), "table function read_csv is not available")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: %s SERVER_URL" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    os.environ["TSFLIGHT_URL"] = sys.argv[1]
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
