"""Queries the demo table of `tsflight serve --demo` with pyarrow.flight
(and, when the ADBC driver is installed and the server speaks Flight SQL,
with ADBC) and checks what the demo's deliberate holes imply.

    python3 demo_query.py grpc://127.0.0.1:8815

The demo table cpu has 200 hosts reporting every 10 s over 2016-01-01 UTC,
minus: every host 13:00-13:20, host_7 04:00-06:30, host_42 before 09:00,
host_100..host_109 18:00-19:00, one sample in three of host_150 10:00-10:10
(those with (step + 150) % 3 == 0), host_199 from 20:00.
"""

import json
import sys
import warnings

import pyarrow.flight as flight

DAY = ("2016-01-01T00:00:00Z", "2016-01-02T00:00:00Z")
INTERVALS = 8640
HOSTS = 200


def expected_rows():
    missing = 200 * 120  # the ingest outage, every host
    missing += 900  # host_7, 2.5 h
    missing += 3240  # host_42, 9 h
    missing += 10 * 360  # the rack, 1 h
    missing += sum(1 for n in range(3600, 3660) if (n + 150) % 3 == 0)  # host_150
    missing += 1440  # host_199, 4 h
    return HOSTS * INTERVALS - missing


def action(client, name, body):
    results = list(client.do_action(flight.Action(name, json.dumps(body).encode())))
    return json.loads(results[0].body.to_pybytes())


def scan_rows(client, body):
    info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(body)))
    return sum(client.do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)


def main():
    if len(sys.argv) != 2:
        print("usage: demo_query.py SERVER_URL", file=sys.stderr)
        return 2
    url = sys.argv[1]
    client = flight.connect(url)
    failures = []

    def check(what, got, want):
        ok = got == want
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {got}" + ("" if ok else f" (want {want})"))
        if not ok:
            failures.append(what)

    tables = {fi.descriptor.path[0].decode(): fi for fi in client.list_flights()}
    check("tables", sorted(tables), ["cpu"])
    check("cpu rows (ListFlights total_records)", tables["cpu"].total_records, expected_rows())

    host7 = {"table": "cpu", "entity": {"hostname": "host_7"}}
    check("host_7 rows 04:00-06:30", scan_rows(client, {**host7, "start": "2016-01-01T04:00:00Z", "end": "2016-01-01T06:30:00Z"}), 0)
    check("host_7 rows 07:00-08:00", scan_rows(client, {**host7, "start": "2016-01-01T07:00:00Z", "end": "2016-01-01T08:00:00Z"}), 360)

    gaps = action(client, "gaps", {"table": "cpu", "start": DAY[0], "end": DAY[1], "entity": {"hostname": "host_7"}})
    check("host_7 gaps", [(g["start"], g["end"]) for g in gaps["gaps"]],
          [("2016-01-01T04:00:00Z", "2016-01-01T06:30:00Z"), ("2016-01-01T13:00:00Z", "2016-01-01T13:20:00Z")])
    cov = action(client, "coverage", {"table": "cpu", "start": DAY[0], "end": DAY[1]})
    check("day coverage covered/expected", (cov["covered"], cov["expected"]), (expected_rows(), HOSTS * INTERVALS))

    try:
        import adbc_driver_flightsql.dbapi as dbapi

        # The driver warns that Flight SQL has no transactions to turn off.
        warnings.filterwarnings("ignore", message="Cannot disable autocommit")
    except ImportError:
        print("skip ADBC: adbc-driver-flightsql is not installed")
    else:
        with dbapi.connect(url) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM cpu WHERE hostname = 'host_42' AND time < TIMESTAMPTZ '2016-01-01 09:00:00+00'")
            check("SQL: host_42 rows before 09:00", cur.fetchone()[0], 0)
            cur.execute("SELECT count(DISTINCT hostname) FROM cpu WHERE time >= TIMESTAMPTZ '2016-01-01 18:30:00+00' AND time < TIMESTAMPTZ '2016-01-01 18:31:00+00'")
            check("SQL: hosts reporting at 18:30 (the rack is down)", cur.fetchone()[0], HOSTS - 10)

    print(f"{'FAILED: ' + ', '.join(failures) if failures else 'all demo checks passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
