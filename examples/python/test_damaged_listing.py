"""Listings over a root that holds damaged tables and phantom directories,
through real clients: pyarrow.flight (ListFlights, GetFlightInfo) and ADBC
(adbc_driver_flightsql.dbapi: adbc_get_objects and SQL). It is the Python
side of flightserver/damaged_list_test.go and flightsql/damaged_list_test.go.

    python3 test_damaged_listing.py SERVER_URL    # as run_all.sh runs it
    TSFLIGHT_URL=grpc://... TSFLIGHT_ROOT=DIR pytest test_damaged_listing.py

TSFLIGHT_ROOT must be the server's root directory, on this machine: the
module lays out its fixtures there the way the Go tests do. Through the
server it creates two healthy tables (NAME_alpha with 180 rows, NAME_beta
without data); then, behind the server's back, it damages copies of alpha
(NAME_garbled: CURRENT holds garbage; NAME_nocommit: commit 1 deleted;
NAME_future: commit 1 needs a reader feature no build knows) and makes two
phantoms (NAME_ghost: an empty _timeseries_log/ as a create refused for
lack of space leaves; NAME_ghost2: the same with a stray temporary file).
NAME is dl_ and a random suffix, and every directory the module made is
removed at the end, so that it can share a server with other tests. Given
a server of its own (run_all.sh starts one with TSFLIGHT_BIN), the module
checks that the listings hold nothing but its tables.

A listing never fails for a damaged table: ListFlights lists it with an
empty schema, no endpoint, unknown totals and its problem as app_metadata
(JSON: state, code, error naming the table and the file at fault, never the
root); ADBC get_objects succeeds at every depth; phantoms are no tables.
Naming a damaged table still fails, with its code.
"""

import json
import os
import shutil
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
# TSFLIGHT_OWN_ROOT=1: the server serves nothing but what this module makes.
OWN_ROOT = os.environ.get("TSFLIGHT_OWN_ROOT", "") == "1"
PREFIX = "dl_" + uuid.uuid4().hex[:10] + "_"

pytestmark = pytest.mark.skipif(not (URL and ROOT), reason="TSFLIGHT_URL and TSFLIGHT_ROOT must both be set")

LOG = "_timeseries_log"
COMMIT1 = LOG + "/0000000001.json"


def name(short):
    return PREFIX + short


HEALTHY = [name("alpha"), name("beta")]
# table -> (state, code, a fragment its error must hold), as
# damaged_list_test.go's makeDamagedRoot.
BROKEN = {
    name("garbled"): ("damaged", "DATA_LOSS", '_timeseries_log/CURRENT: CURRENT holds "garbage", not a version number'),
    name("nocommit"): ("damaged", "DATA_LOSS", "commit 1 is missing but CURRENT says 2"),
    name("future"): ("unreadable", "FAILED_PRECONDITION", "time_travel"),
}
PHANTOMS = [name("ghost"), name("ghost2")]
LISTED = sorted(HEALTHY + list(BROKEN))
ALPHA_ROWS = 180  # common.cpu_rows(0, 10): 60 steps of three hosts


def path_of(table, rel=""):
    return os.path.join(ROOT, table, *rel.split("/")) if rel else os.path.join(ROOT, table)


def write(path, data):
    with open(path, "w") as f:
        f.write(data)


@pytest.fixture(scope="module")
def client():
    c = common.connect(URL)
    made = []
    try:
        alpha, beta = HEALTHY
        common.action(c, "create-table", dict(common.CPU_SPEC, table=alpha))
        made.append(alpha)
        common.put(c, flight.FlightDescriptor.for_path(alpha), common.cpu_rows(0, 10))
        common.action(c, "create-table", dict(common.CPU_SPEC, table=beta))
        made.append(beta)
        for table in BROKEN:
            shutil.copytree(path_of(alpha), path_of(table))
            made.append(table)
        write(path_of(name("garbled"), LOG + "/CURRENT"), "garbage\n")
        os.remove(path_of(name("nocommit"), COMMIT1))
        commit = path_of(name("future"), COMMIT1)
        with open(commit) as f:
            text = f.read()
        patched = text.replace('"required_reader_features":[]', '"required_reader_features":["time_travel"]', 1)
        assert patched != text, "commit 1 has no empty required_reader_features: %s" % text
        write(commit, patched)
        for ghost in PHANTOMS:
            os.makedirs(path_of(ghost, LOG))
            made.append(ghost)
        write(path_of(name("ghost2"), LOG + "/0000000001.json.tmp-0123abcd"), '{"version":1')
        yield c
    finally:
        c.close()
        for table in made:
            shutil.rmtree(path_of(table), ignore_errors=True)


@pytest.fixture(scope="module")
def conn(client):
    c = common.adbc_connect(URL)
    yield c
    c.close()


def listing(client):
    """name -> FlightInfo of every table ListFlights lists; fails on a
    descriptor that is not PATH [table]."""
    out = {}
    for info in client.list_flights():
        d = info.descriptor
        assert d.descriptor_type == flight.DescriptorType.PATH and len(d.path) == 1, d
        out[d.path[0].decode()] = info
    return out


def ours(names):
    """The names among names that this module made."""
    return sorted(n for n in names if n.startswith(PREFIX))


def test_list_flights_lists_damaged_tables_and_omits_phantoms(client):
    # Twice: a damaged table is reported on every call, not only the first.
    for _ in range(2):
        infos = listing(client)
        assert ours(infos) == LISTED
        if OWN_ROOT:
            assert sorted(infos) == LISTED
        for ghost in PHANTOMS:
            assert ghost not in infos


def test_list_flights_healthy_tables(client):
    """Healthy tables are listed as ever: no app_metadata, no problem in the
    schema's metadata, endpoints and known totals. (beta, created without
    data, has an empty schema until its first put.)"""
    infos = listing(client)
    for table in HEALTHY:
        info = infos[table]
        assert info.app_metadata in (b"", None), (table, info.app_metadata)
        assert not info.schema.metadata, (table, info.schema.metadata)
        assert len(info.endpoints) > 0 and info.total_records >= 0 and info.total_bytes >= 0, (table, info)
    alpha = infos[name("alpha")]
    assert alpha.schema.names == ["ts", "host", "usage"] and alpha.total_records == ALPHA_ROWS, alpha
    assert infos[name("beta")].total_records == 0


def test_list_flights_damaged_problem(client):
    infos = listing(client)
    for table, (state, code, fragment) in BROKEN.items():
        info = infos[table]
        problem = json.loads(info.app_metadata)
        assert sorted(problem) == ["code", "error", "state"], problem
        assert problem["state"] == state and problem["code"] == code, (table, problem)
        assert problem["error"].startswith('table "%s": ' % table), problem
        assert fragment in problem["error"], (table, problem)
        assert ROOT not in problem["error"], (table, problem)
        # An empty schema whose metadata repeats the problem; no endpoint,
        # unknown totals.
        assert len(info.schema) == 0, (table, info.schema)
        md = {k.decode(): v.decode() for k, v in (info.schema.metadata or {}).items()}
        assert md == {"tsflight.state": state, "tsflight.code": code, "tsflight.error": problem["error"]}, md
        assert len(info.endpoints) == 0 and info.total_records == -1 and info.total_bytes == -1, (table, info)


def test_damaged_table_by_name_fails(client):
    """GetFlightInfo of a damaged table keeps failing with its code (pyarrow:
    FlightInternalError for DATA_LOSS, ArrowInvalid for FAILED_PRECONDITION),
    naming the table and the file at fault; a phantom is NOT_FOUND
    (ArrowKeyError)."""
    raised = {"DATA_LOSS": (flight.FlightInternalError, "gRPC returned data loss error"),
              "FAILED_PRECONDITION": (pa.ArrowInvalid, "gRPC returned precondition failed error")}
    for table, (_, code, fragment) in BROKEN.items():
        exc, words = raised[code]
        with pytest.raises(exc) as info:
            client.get_flight_info(flight.FlightDescriptor.for_path(table))
        msg = str(info.value)
        assert words in msg, msg
        assert 'table "%s": ' % table in msg and fragment in msg and ROOT not in msg, msg
    for ghost in PHANTOMS:
        with pytest.raises(pa.ArrowKeyError) as info:
            client.get_flight_info(flight.FlightDescriptor.for_path(ghost))
        assert 'table "%s"' % ghost in str(info.value), str(info.value)


def objects(conn, depth):
    """{table name: [column names]} of adbc_get_objects at depth."""
    found = {}
    for cat in conn.adbc_get_objects(depth=depth).read_all().to_pylist():
        for sch in cat["catalog_db_schemas"] or []:
            for tab in sch["db_schema_tables"] or []:
                cols = sorted(tab["table_columns"] or [], key=lambda c: c["ordinal_position"] or 0)
                found[tab["table_name"]] = [c["column_name"] for c in cols]
    return found


@pytest.mark.parametrize("depth", ["all", "tables", "columns"])
def test_adbc_get_objects(conn, depth):
    found = objects(conn, depth)
    assert ours(found) == LISTED
    if OWN_ROOT:
        assert sorted(found) == LISTED
    for ghost in PHANTOMS:
        assert ghost not in found
    # Columns at depth all and columns: alpha's are its Flight schema's; a
    # damaged table has none (its schema is empty), and neither has any at
    # depth tables.
    alpha = found[name("alpha")]
    assert alpha == ([] if depth == "tables" else ["ts", "host", "usage"]), alpha
    for table in BROKEN:
        assert found[table] == [], (table, found[table])


def test_adbc_sql_on_damaged_and_phantom(conn):
    """SQL naming a damaged table fails with its code, naming the table; a
    phantom is an unknown table; the healthy one still answers."""
    import adbc_driver_manager

    def sql(q):
        with conn.cursor() as cur:
            cur.execute(q)
            return cur.fetchall()

    assert sql("SELECT count(*) FROM %s" % name("alpha")) == [(ALPHA_ROWS,)]
    with pytest.raises(adbc_driver_manager.Error) as info:
        sql("SELECT count(*) FROM %s" % name("garbled"))
    assert info.value.status_code == adbc_driver_manager.AdbcStatusCode.IO, (info.value.status_code, str(info.value))
    assert 'table "%s"' % name("garbled") in str(info.value) and ROOT not in str(info.value), str(info.value)
    with pytest.raises(adbc_driver_manager.Error) as info:
        sql("SELECT count(*) FROM %s" % name("ghost"))
    assert info.value.status_code == adbc_driver_manager.AdbcStatusCode.NOT_FOUND, (info.value.status_code, str(info.value))
    assert name("ghost") in str(info.value)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: %s SERVER_URL   (TSFLIGHT_ROOT: the server's root)" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    os.environ["TSFLIGHT_URL"] = sys.argv[1]
    sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", __file__]))
