"""Authentication and TLS of `tsflight serve`, through pyarrow.flight and
ADBC (adbc_driver_flightsql.dbapi): tokens by Basic handshake and by Bearer
header, refusals (no token, wrong, expired, revoked), read versus write
scope, reloading the tokens file on change and on SIGHUP, and mutual TLS.

    bash run_auth.sh            # as CI runs it: the variables below, pytest -v
    TSFLIGHT_AUTH_URI=grpc+tls://127.0.0.1:PORT ... pytest test_auth.py

It needs servers started with TLS (certificates of .ci/testca) and tokens
files of `tsflight token new`; every setting comes from the environment:

  TSFLIGHT_AUTH_URI        grpc+tls://HOST:PORT of the main server: --tls-cert,
                           --tls-key, --auth-tokens TSFLIGHT_TOKENS_FILE and a
                           short --reload-interval (CI: 200ms)
  TSFLIGHT_AUTH_CA         PEM file of the CA that signed the servers' certificate
  TSFLIGHT_AUTH_ROOT       the main server's --root (proves refused calls wrote nothing)
  TSFLIGHT_AUTH_TABLE      a table under that root with data (default ts_entity)
  TSFLIGHT_READ_TOKEN      a token of scope read in TSFLIGHT_TOKENS_FILE
  TSFLIGHT_WRITE_TOKEN     a token of scope write in TSFLIGHT_TOKENS_FILE
  TSFLIGHT_EXPIRED_TOKEN   a token whose line there has an expires= in the past
  TSFLIGHT_TOKENS_FILE     the main server's tokens file; the revocation test
                           adds a line and removes it again (the file is
                           restored as it was)
  TSFLIGHT_SIGHUP_URI      a second server with --reload-interval 0 (reloads on
                           SIGHUP only), tokens file TSFLIGHT_SIGHUP_TOKENS_FILE
                           holding the read token too; same CA
  TSFLIGHT_SIGHUP_PID      its process id (the test sends it SIGHUP)
  TSFLIGHT_SIGHUP_TOKENS_FILE
  TSFLIGHT_MTLS_URI        a third server with --tls-client-ca (mutual TLS) and
                           tokens as well (the read token valid there)
  TSFLIGHT_CLIENT_CERT     PEM client certificate signed by a CA the mTLS server trusts
  TSFLIGHT_CLIENT_KEY      its private key

A test whose variables are missing is skipped (run_auth.sh counts a skip
as a failure). No test prints a secret; run_auth.sh masks them anyway.
"""

import contextlib
import datetime
import hashlib
import json
import os
import secrets
import signal
import sys
import time
import uuid
import warnings

import adbc_driver_manager
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pyarrow.flight as flight
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

ENV = os.environ.get
URI = ENV("TSFLIGHT_AUTH_URI", "")
TABLE = ENV("TSFLIGHT_AUTH_TABLE", "ts_entity")
# Tables this run creates with the write token get a fresh suffix, so the
# tests can run again against the same server.
RUN = uuid.uuid4().hex[:10]
H = "adbc.flight.sql.rpc.call_header."
TLS_ROOT_CERTS = "adbc.flight.sql.client_option.tls_root_certs"
# How long a change of the tokens file may take to show (the servers of CI
# poll every 200 ms).
RELOAD_WAIT = 5.0

pytestmark = pytest.mark.skipif(not URI, reason="TSFLIGHT_AUTH_URI is not set")


def need(*names):
    """The values of environment variables; skips the test if one is unset."""
    missing = [n for n in names if not ENV(n)]
    if missing:
        pytest.skip("not set: " + ", ".join(missing))
    return [ENV(n) for n in names]


def read_file(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def ca_bytes():
    (ca,) = need("TSFLIGHT_AUTH_CA")
    return read_file(ca)


def tls_client(uri=None, **kwargs):
    """A pyarrow Flight client trusting the test CA."""
    return flight.connect(uri or URI, tls_root_certs=ca_bytes(), **kwargs)


def bearer(token):
    """Call options carrying `authorization: Bearer TOKEN`."""
    return flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token.encode())])


def token(kind):
    """TSFLIGHT_READ_TOKEN, TSFLIGHT_WRITE_TOKEN or TSFLIGHT_EXPIRED_TOKEN."""
    (t,) = need("TSFLIGHT_%s_TOKEN" % kind.upper())
    return t


def action(client, name, body, options=None):
    results = list(client.do_action(flight.Action(name, json.dumps(body).encode()), options=options))
    assert len(results) == 1, "%s returned %d results" % (name, len(results))
    return json.loads(results[0].body.to_pybytes())


def table_names(client, options):
    return sorted(f.descriptor.path[0].decode() for f in client.list_flights(options=options))


def snapshot(root):
    """Relative path -> (size, sha256) of every file under root."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            data = read_file(path)
            out[os.path.relpath(path, root)] = (len(data), hashlib.sha256(data).hexdigest())
    return out


@contextlib.contextmanager
def writes_nothing(client):
    """The block must leave TABLE at its version and row count and every
    file under TSFLIGHT_AUTH_ROOT as it was."""
    (root,) = need("TSFLIGHT_AUTH_ROOT")
    opts = bearer(token("read"))
    before = action(client, "describe-table", {"table": TABLE}, opts)
    files = snapshot(root)
    yield
    after = action(client, "describe-table", {"table": TABLE}, opts)
    assert (after["version"], after["rows"]) == (before["version"], before["rows"])
    now = snapshot(root)
    changed = sorted(p for p in set(files) | set(now) if files.get(p) != now.get(p))
    assert not changed, "the refused call wrote to the root: %s" % changed


def one_new_row(schema, client, opts):
    """One row of TABLE's schema at 2030-01-01 (a time the table holds no
    data at): the first timestamp column gets that time, every other column
    the value of the table's first row."""
    info = client.get_flight_info(flight.FlightDescriptor.for_path(TABLE), opts)
    first = client.do_get(info.endpoints[0].ticket, opts).read_all().slice(0, 1)
    cols, done = {}, False
    for field in schema:
        if pa.types.is_timestamp(field.type) and not done:
            when = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
            cols[field.name] = pa.array([when], field.type)
            done = True
        else:
            cols[field.name] = first.column(field.name).cast(field.type)
    return pa.table(cols, schema=schema)


# --- pyarrow.flight over TLS: the two ways to present a token ------------


def test_tls_without_the_ca_fails():
    """The server speaks TLS with a certificate of the test CA: a client
    trusting only the system roots cannot connect."""
    client = flight.connect(URI)
    with pytest.raises(flight.FlightUnavailableError):
        list(client.list_flights(options=bearer(token("read"))))
    # The same call with the CA works: the server was there.
    assert TABLE in table_names(tls_client(), bearer(token("read")))


def test_basic_handshake_answers_a_bearer_header():
    client = tls_client()
    key, value = client.authenticate_basic_token("any-user", token("read"))
    ok = key.lower() == b"authorization" and value == b"Bearer " + token("read").encode()
    assert ok, "the handshake did not answer authorization: Bearer <the token>"
    assert TABLE in table_names(client, flight.FlightCallOptions(headers=[(key, value)]))


@pytest.mark.parametrize("kind", ["read", "write"])
def test_bearer_header(kind):
    assert TABLE in table_names(tls_client(), bearer(token(kind)))


# --- refusals: UNAUTHENTICATED ---------------------------------------------


def refused_calls(client, options):
    """Calls of every kind, each of which must be refused. (GetSchema is
    left out: pyarrow 26 raises a plain OSError for its errors, not the
    Flight error class of the status.)"""
    return {
        "ListFlights": lambda: list(client.list_flights(options=options)),
        "GetFlightInfo": lambda: client.get_flight_info(flight.FlightDescriptor.for_path(TABLE), options),
        "ListActions": lambda: list(client.list_actions(options=options)),
        "describe-table": lambda: action(client, "describe-table", {"table": TABLE}, options),
    }


def assert_refused(calls, match):
    """Every call must fail with FlightUnauthenticatedError whose message
    contains match; the failure names the call."""
    for name, call in calls.items():
        try:
            call()
        except flight.FlightUnauthenticatedError as e:
            assert match in str(e), "%s: refused, but the message lacks %r: %s" % (name, match, e)
        else:
            pytest.fail("%s: succeeded, but it should be refused" % name)


def test_refused_without_a_token():
    assert_refused(refused_calls(tls_client(), None), "authentication required")


def test_refused_with_a_wrong_token():
    client = tls_client()
    wrong = "tsf_" + secrets.token_urlsafe(32)
    with pytest.raises(flight.FlightUnauthenticatedError, match="unknown token"):
        client.authenticate_basic_token("any-user", wrong)
    assert_refused(refused_calls(client, bearer(wrong)), "unknown token")
    # A malformed header is no token at all.
    bad = flight.FlightCallOptions(headers=[(b"authorization", b"Basic bm90OmJlYXJlcg==")])
    with pytest.raises(flight.FlightUnauthenticatedError):
        list(client.list_flights(options=bad))


def test_refused_with_an_expired_token():
    client = tls_client()
    with pytest.raises(flight.FlightUnauthenticatedError, match="expired"):
        client.authenticate_basic_token("any-user", token("expired"))
    assert_refused(refused_calls(client, bearer(token("expired"))), "expired")


# --- the read scope: everything that reads -----------------------------------


def test_read_token_lists_and_scans():
    client = tls_client()
    opts = bearer(token("read"))
    assert TABLE in table_names(client, opts)
    desc = action(client, "describe-table", {"table": TABLE}, opts)
    assert desc["rows"] > 0
    schema = client.get_schema(flight.FlightDescriptor.for_path(TABLE), opts).schema
    info = client.get_flight_info(flight.FlightDescriptor.for_path(TABLE), opts)
    assert info.schema.names == schema.names
    got = pa.concat_tables([client.do_get(e.ticket, opts).read_all() for e in info.endpoints])
    assert got.num_rows == desc["rows"]
    assert len(list(client.list_actions(options=opts))) > 0


def test_read_token_runs_the_reading_actions():
    client = tls_client()
    opts = bearer(token("read"))
    desc = action(client, "describe-table", {"table": TABLE}, opts)
    # The range of the table's index values, from a scan.
    info = client.get_flight_info(flight.FlightDescriptor.for_path(TABLE), opts)
    ts = pa.concat_tables([client.do_get(e.ticket, opts).read_all() for e in info.endpoints]).column(desc["index"]["column"])
    lo, hi = pa.compute.min(ts).as_py(), pa.compute.max(ts).as_py()
    span = {"table": TABLE, "start": common.iso(lo), "end": common.iso(hi + datetime.timedelta(days=1))}
    cov = action(client, "coverage", span, opts)
    assert 0 < cov["covered"] <= cov["expected"], cov
    gaps = action(client, "gaps", span, opts)
    assert isinstance(gaps["gaps"], list)
    grid = action(client, "coverage-grid", {"table": TABLE}, opts)
    assert grid["covered"], grid
    dry = action(client, "vacuum", {"table": TABLE}, opts)
    assert dry["applied"] is False


# --- the read scope: every write is PERMISSION_DENIED, and writes nothing ----


def test_read_token_cannot_do_put():
    client = tls_client()
    opts = bearer(token("read"))
    schema = client.get_schema(flight.FlightDescriptor.for_path(TABLE), opts).schema
    row = one_new_row(schema, client, opts)
    with writes_nothing(client):
        with pytest.raises(flight.FlightUnauthorizedError, match="write scope"):
            writer, reader = client.do_put(flight.FlightDescriptor.for_path(TABLE), schema, opts)
            try:
                writer.write_table(row)
                writer.done_writing()
                reader.read()
            finally:
                writer.close()


def test_read_token_cannot_create_by_do_put():
    client = tls_client()
    opts = bearer(token("read"))
    name = "auth_%s_put" % RUN
    rows = common.cpu_rows(0, 10)
    desc = common.command({"table": name, "create": common.CPU_SPEC})
    with writes_nothing(client):
        with pytest.raises(flight.FlightUnauthorizedError, match="write scope"):
            writer, reader = client.do_put(desc, rows.schema, opts)
            try:
                writer.write_table(rows)
                writer.done_writing()
                reader.read()
            finally:
                writer.close()
    assert name not in table_names(client, opts)


def test_read_token_cannot_create_table():
    client = tls_client()
    opts = bearer(token("read"))
    name = "auth_%s_create" % RUN
    with writes_nothing(client):
        with pytest.raises(flight.FlightUnauthorizedError, match="write scope"):
            action(client, "create-table", dict(common.CPU_SPEC, table=name), opts)
    assert name not in table_names(client, opts)


def test_read_token_cannot_add_columns():
    client = tls_client()
    opts = bearer(token("read"))
    body = {"table": TABLE, "columns": [{"name": "auth_extra", "type": "float64"}]}
    with writes_nothing(client):
        with pytest.raises(flight.FlightUnauthorizedError, match="write scope"):
            action(client, "add-columns", body, opts)
    schema = client.get_schema(flight.FlightDescriptor.for_path(TABLE), opts).schema
    assert "auth_extra" not in schema.names


def test_vacuum_apply_needs_the_write_token():
    """An orphan segment (an uncommitted file, as a killed append leaves)
    is planted in the table: the read token sees it in a dry run but cannot
    delete it; the write token can."""
    (root,) = need("TSFLIGHT_AUTH_ROOT")
    client = tls_client()
    read, write = bearer(token("read")), bearer(token("write"))
    orphan_dir = os.path.join(root, TABLE, "data", "_managed", "append")
    os.makedirs(orphan_dir, exist_ok=True)
    orphan = os.path.join(orphan_dir, "%s.parquet" % uuid.uuid4())
    with open(orphan, "wb") as f:
        f.write(b"not a real segment")
    old = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
    os.utime(orphan, (old, old))
    rel = os.path.relpath(orphan, os.path.join(root, TABLE))
    body = {"table": TABLE, "older_than": "2021-01-01T00:00:00Z"}
    try:
        dry = action(client, "vacuum", body, read)
        listed = {a["path"]: a["disposition"] for a in dry["artifacts"]}
        assert listed.get(rel) == "removable", listed
        with writes_nothing(client):
            with pytest.raises(flight.FlightUnauthorizedError, match="write scope"):
                action(client, "vacuum", dict(body, apply=True), read)
        assert os.path.exists(orphan)
        done = action(client, "vacuum", dict(body, apply=True), write)
        assert done["applied"] is True and done["totals"]["deleted"] >= 1, done["totals"]
        assert not os.path.exists(orphan)
    finally:
        if os.path.exists(orphan):
            os.remove(orphan)


# --- the write scope --------------------------------------------------------


def test_write_token_creates_puts_and_adds_columns():
    client = tls_client()
    opts = bearer(token("write"))
    name = "auth_%s_flight" % RUN
    created = action(client, "create-table", dict(common.CPU_SPEC, table=name), opts)
    assert created == {"table": name, "version": 1}
    writer, reader = client.do_put(flight.FlightDescriptor.for_path(name), common.cpu_rows(0, 10).schema, opts)
    try:
        writer.write_table(common.cpu_rows(0, 10))
        writer.done_writing()
        meta = json.loads(reader.read().to_pybytes())
    finally:
        writer.close()
    assert (meta["version"], meta["rows"]) == (2, 180)
    added = action(client, "add-columns", {"table": name, "columns": [{"name": "temp_c", "type": "float64"}]}, opts)
    assert added == {"table": name, "version": 3}
    # What the write token wrote, the read token reads.
    desc = action(client, "describe-table", {"table": name}, bearer(token("read")))
    assert (desc["version"], desc["rows"]) == (3, 180)


# --- ADBC (Flight SQL) over TLS ---------------------------------------------


def adbc(db_kwargs, uri=None, **kwargs):
    """An ADBC connection trusting the test CA."""
    import adbc_driver_flightsql.dbapi as dbapi

    kw = {TLS_ROOT_CERTS: ca_bytes().decode()}
    kw.update(db_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Cannot disable autocommit"
        return dbapi.connect(uri or URI, db_kwargs=kw, **kwargs)


def adbc_status(name):
    return getattr(adbc_driver_manager.AdbcStatusCode, name)


def flight_rows(table):
    return action(tls_client(), "describe-table", {"table": table}, bearer(token("read")))["rows"]


@pytest.mark.parametrize("how", ["username/password", "authorization_header"])
def test_adbc_connects_with_a_token(how):
    if how == "username/password":
        kw = {"username": "any-user", "password": token("read")}
    else:
        kw = {"adbc.flight.sql.authorization_header": "Bearer " + token("read")}
    with adbc(kw) as conn:
        assert common.sql_scalar(conn, "SELECT count(*) FROM %s" % TABLE) == flight_rows(TABLE)
        objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        names = [t["table_name"] for c in objects for s in c["catalog_db_schemas"] for t in s["db_schema_tables"]]
        assert TABLE in names


@pytest.mark.parametrize("kind", ["none", "wrong", "expired"])
def test_adbc_refused(kind):
    if kind == "none":
        kw = {}
    elif kind == "wrong":
        kw = {"username": "any-user", "password": "tsf_" + secrets.token_urlsafe(32)}
    else:
        kw = {"adbc.flight.sql.authorization_header": "Bearer " + token("expired")}
    with pytest.raises(adbc_driver_manager.Error) as err:
        with adbc(kw) as conn:
            common.sql_scalar(conn, "SELECT 1")
    assert err.value.status_code == adbc_status("UNAUTHENTICATED"), common.first_line(err.value)


def test_adbc_read_token_cannot_ingest():
    client = tls_client()
    opts = bearer(token("read"))
    schema = client.get_schema(flight.FlightDescriptor.for_path(TABLE), opts).schema
    row = one_new_row(schema, client, opts)
    name = "auth_%s_adbc_read" % RUN
    spec = {H + "x-tsflight-index-column": "ts", H + "x-tsflight-granularity": "10s",
            H + "x-tsflight-entity-columns": "host"}
    with adbc({"username": "any-user", "password": token("read")}) as conn:
        with writes_nothing(client):
            for table, data, mode, opt in ((TABLE, row, "append", {}),
                                           (name, common.cpu_rows(0, 10), "create", spec)):
                with conn.cursor() as cur:
                    if opt:
                        cur.adbc_statement.set_options(**opt)
                    with pytest.raises(adbc_driver_manager.Error) as err:
                        cur.adbc_ingest(table, data, mode=mode)
                assert err.value.status_code == adbc_status("UNAUTHORIZED"), common.first_line(err.value)
                assert "write scope" in str(err.value)
    assert name not in table_names(client, opts)


def test_adbc_write_token_ingests():
    name = "auth_%s_adbc" % RUN
    spec = {H + "x-tsflight-index-column": "ts", H + "x-tsflight-granularity": "10s",
            H + "x-tsflight-entity-columns": "host"}
    with adbc({"username": "any-user", "password": token("write")}) as conn:
        with conn.cursor() as cur:
            cur.adbc_statement.set_options(**spec)
            assert cur.adbc_ingest(name, common.cpu_rows(0, 10), mode="create") == 180
        with conn.cursor() as cur:
            assert cur.adbc_ingest(name, common.cpu_rows(10, 20), mode="append") == 180
        assert common.sql_scalar(conn, "SELECT count(*) FROM %s" % name) == 360
    assert flight_rows(name) == 360


# --- revocation: the tokens file is read again -------------------------------


def write_atomically(path, text):
    """Replace a tokens file in one step (the server never reads half of it)."""
    tmp = "%s.tmp-%s" % (path, RUN)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def accepted(client, secret):
    """True if the server takes the token, False if it refuses it as
    UNAUTHENTICATED (any other error fails the test)."""
    try:
        list(client.list_flights(options=bearer(secret)))
        return True
    except flight.FlightUnauthenticatedError:
        return False


def wait_for(client, secret, want):
    """Poll until accepted(client, secret) == want, for RELOAD_WAIT seconds;
    return the seconds it took."""
    start = time.monotonic()
    while True:
        if accepted(client, secret) == want:
            return time.monotonic() - start
        if time.monotonic() - start > RELOAD_WAIT:
            pytest.fail("token still %s after %.0f s" % ("refused" if want else "accepted", RELOAD_WAIT))
        time.sleep(0.05)


def fresh_token_line(name):
    secret = "tsf_" + secrets.token_urlsafe(32)
    line = "sha256:%s read name=%s\n" % (hashlib.sha256(secret.encode()).hexdigest(), name)
    return secret, line


def test_token_added_and_revoked_by_editing_the_file():
    (path,) = need("TSFLIGHT_TOKENS_FILE")
    client = tls_client()
    original = read_file(path, "r")
    secret, line = fresh_token_line("auth-test-file-%s" % RUN)
    assert not accepted(client, secret)
    try:
        write_atomically(path, original + ("" if original.endswith("\n") else "\n") + line)
        wait_for(client, secret, True)
        write_atomically(path, original)
        wait_for(client, secret, False)
    finally:
        write_atomically(path, original)
    # The tokens that stayed in the file still work.
    assert accepted(client, token("read"))


def test_sighup_reloads_the_tokens_file():
    """A server with --reload-interval 0 reads its tokens file again on
    SIGHUP and only then."""
    uri, pid, path = need("TSFLIGHT_SIGHUP_URI", "TSFLIGHT_SIGHUP_PID", "TSFLIGHT_SIGHUP_TOKENS_FILE")
    pid = int(pid)
    client = tls_client(uri)
    assert accepted(client, token("read"))
    original = read_file(path, "r")
    secret, line = fresh_token_line("auth-test-hup-%s" % RUN)
    try:
        write_atomically(path, original + ("" if original.endswith("\n") else "\n") + line)
        time.sleep(1.0)
        assert not accepted(client, secret), "the server read its tokens file without SIGHUP"
        os.kill(pid, signal.SIGHUP)
        wait_for(client, secret, True)
        write_atomically(path, original)
        time.sleep(1.0)
        assert accepted(client, secret), "the server read its tokens file without SIGHUP"
        os.kill(pid, signal.SIGHUP)
        wait_for(client, secret, False)
    finally:
        write_atomically(path, original)
        os.kill(pid, signal.SIGHUP)
    assert accepted(client, token("read"))


# --- mutual TLS -----------------------------------------------------------------


def mtls_settings():
    uri, cert, key = need("TSFLIGHT_MTLS_URI", "TSFLIGHT_CLIENT_CERT", "TSFLIGHT_CLIENT_KEY")
    return uri, read_file(cert), read_file(key)


def test_mtls_with_a_client_certificate():
    uri, cert, key = mtls_settings()
    client = tls_client(uri, cert_chain=cert, private_key=key)
    header = client.authenticate_basic_token("any-user", token("read"))
    assert isinstance(table_names(client, flight.FlightCallOptions(headers=[header])), list)
    # The certificate admits the connection; the server asks for a token too.
    with pytest.raises(flight.FlightUnauthenticatedError):
        list(client.list_flights())


def test_mtls_without_a_client_certificate_fails():
    uri, cert, key = mtls_settings()
    client = tls_client(uri)
    # Even a valid token is not enough: the TLS handshake fails first.
    with pytest.raises(flight.FlightUnavailableError):
        list(client.list_flights(options=bearer(token("read"))))
    # The same call with the certificate works: the server was there.
    with_cert = tls_client(uri, cert_chain=cert, private_key=key)
    assert isinstance(table_names(with_cert, bearer(token("read"))), list)


def test_mtls_adbc():
    uri, cert, key = mtls_settings()
    base = {"username": "any-user", "password": token("read")}
    with adbc(dict(base, **{"adbc.flight.sql.client_option.mtls_cert_chain": cert.decode(),
                            "adbc.flight.sql.client_option.mtls_private_key": key.decode()}), uri) as conn:
        assert common.sql_scalar(conn, "SELECT 1") == 1
    with pytest.raises(adbc_driver_manager.Error):
        with adbc(base, uri) as conn:
            common.sql_scalar(conn, "SELECT 1")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"] + sys.argv[1:]))
