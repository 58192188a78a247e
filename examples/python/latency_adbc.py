#!/usr/bin/env python3
"""Per-query fixed cost of Flight SQL through the Python ADBC driver.

  python3 latency_adbc.py grpc://127.0.0.1:8815 [N [SERVER_PID]]

Measures, after a warm-up, the median (p50) and p90 of N runs (default
200) of:

* select1_new_cursor: a new cursor each time, cursor.execute("SELECT 1"),
  fetchall(), close (the DB-API prepares on the first execute of a cursor:
  CreatePreparedStatement, GetFlightInfo, DoGet, ClosePreparedStatement);
* select1_reexec: one cursor executing "SELECT 1" again and again (the
  driver prepared it once: GetFlightInfo and DoGet per run);
* param_reexec: one cursor executing "SELECT ? + 1" with a new value each
  time (DoPut of the value, GetFlightInfo, DoGet per run);
* list_actions: pyarrow.flight list_actions, the round trip of one RPC.

With SERVER_PID (a process on this machine) it also prints the server's
CPU time per run of each loop, from /proc. Timings, not checks: it prints
numbers and exits 0 unless a query fails or answers wrongly.
"""

import os
import statistics
import sys
import time

import pyarrow.flight as flight

from common import ExampleFailure, adbc_connect


def cpu_seconds(pid):
    if pid is None:
        return 0.0
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick  # utime, stime


def measure(label, fn, n, pid, warmup=50):
    try:
        for _ in range(warmup):
            fn(0)
    except Exception as e:  # noqa: BLE001 - a server that fails the loop: say so, go on
        print("%-20s failed: %s" % (label, str(e).splitlines()[0]))
        return None
    times = []
    cpu0 = cpu_seconds(pid)
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    cpu = cpu_seconds(pid) - cpu0
    times.sort()
    p50 = statistics.median(times) * 1e3
    p90 = times[int(len(times) * 0.9)] * 1e3
    extra = "  server CPU %.3f ms/run" % (cpu / n * 1e3) if pid is not None else ""
    print("%-20s p50 %.3f ms  p90 %.3f ms  min %.3f ms%s" % (label, p50, p90, times[0] * 1e3, extra))
    return p50


def select1(cur):
    cur.execute("SELECT 1")
    if cur.fetchall() != [(1,)]:
        raise ExampleFailure("SELECT 1 answered wrongly")


def run(url, n=200, pid=None):
    with adbc_connect(url) as conn:

        def new_cursor(_):
            with conn.cursor() as cur:
                select1(cur)

        measure("select1_new_cursor", new_cursor, n, pid)

        with conn.cursor() as cur:
            measure("select1_reexec", lambda _: select1(cur), n, pid)

        with conn.cursor() as cur:

            def param(i):
                cur.execute("SELECT ? + 1", parameters=(i,))
                if cur.fetchall() != [(i + 1,)]:
                    raise ExampleFailure("SELECT ? + 1 answered wrongly")

            measure("param_reexec", param, n, pid)

    client = flight.FlightClient(url)
    try:
        measure("list_actions", lambda _: list(client.list_actions()), n, pid)
    finally:
        client.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    if not 1 <= len(args) <= 3:
        print("usage: %s SERVER_URL [N [SERVER_PID]]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    run(args[0], int(args[1]) if len(args) > 1 else 200, int(args[2]) if len(args) > 2 else None)
