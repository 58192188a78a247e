#!/usr/bin/env python3
"""Self-check of flight_peer.py: python3 bench/peers/test_flight_peer.py

Checks the C++ in-memory Flight server (the serve mode, as the scan mode
starts it) against the client code the scan mode times: every endpoint's
batches come back as they were stored, same sizes and values; then the
run order (abba), the percentiles, and the exit status of bad usage. The
ingest, scan and latency modes against a real tsflight run in
`bash bench/run --mode quick`. Exit 0 on success. Needs pyarrow; no
network beyond 127.0.0.1.
"""

import concurrent.futures
import importlib.util
import os
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.flight as flight

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "flight_peer.py")
spec = importlib.util.spec_from_file_location("flight_peer", PEER)
fp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fp)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        sys.stderr.write("FAIL: %s\n" % what)


def batch(start, n):
    return pa.record_batch(
        [pa.array(range(start, start + n), pa.int64()), pa.array(["h%d" % i for i in range(start, start + n)])],
        names=["v", "host"],
    )


def test_cpp_server(tmp):
    endpoints = [[batch(0, 3), batch(3, 5)], [batch(8, 7)], [batch(15, 1), batch(16, 2), batch(18, 4)]]
    files = []
    for i, bs in enumerate(endpoints):
        path = os.path.join(tmp, "ep%d.arrows" % i)
        with pa.OSFile(path, "wb") as f, pa.ipc.new_stream(f, bs[0].schema) as w:
            for b in bs:
                w.write_batch(b)
        files.append(path)
    srv = fp.CppServer(files)
    try:
        client = flight.connect("grpc://" + srv.addr)
        desc = flight.FlightDescriptor.for_path("cpu")
        info = client.get_flight_info(desc)
        check(len(info.endpoints) == 3, "3 endpoints, got %d" % len(info.endpoints))
        check(info.total_records == 22, "total_records %d, want 22" % info.total_records)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=3)
        rows, nbytes, got = fp.read_endpoints(flight, client, pool, desc, keep=True)
        check(rows == 22, "read %d rows, want 22" % rows)
        check(nbytes == sum(b.nbytes for bs in endpoints for b in bs), "read %d bytes" % nbytes)
        for i, (schema, bs) in enumerate(got):
            check(schema.equals(endpoints[i][0].schema), "endpoint %d schema %s" % (i, schema))
            check([b.num_rows for b in bs] == [b.num_rows for b in endpoints[i]], "endpoint %d batch sizes %s" % (i, [b.num_rows for b in bs]))
            check(all(a.equals(b) for a, b in zip(bs, endpoints[i])), "endpoint %d values differ" % i)
        # Without keep, the same counts and nothing kept.
        rows2, nbytes2, kept = fp.read_endpoints(flight, client, pool, desc)
        check((rows2, nbytes2, kept) == (rows, nbytes, None), "second read %s" % ((rows2, nbytes2, kept),))
        try:
            client.do_get(flight.Ticket(b"7")).read_all()
            check(False, "an unknown ticket was served")
        except flight.FlightError:
            pass
        except Exception as e:  # noqa: BLE001
            check("7" in str(e) or "index" in str(e).lower(), "an unknown ticket: %s" % e)
        client.close()
        pool.shutdown()
    finally:
        rss = srv.stop()
    check(rss > 0, "the server's peak RSS %d" % rss)
    check(srv.proc.returncode == 0, "the server exited %s" % srv.proc.returncode)


def test_helpers():
    check([fp.abba(i, ("A", "B")) for i in range(3)] == [["A", "B"], ["B", "A"], ["A", "B"]], "abba")
    check(fp.percentile([4, 1, 3, 2, 5], 0.5) == 3, "median")
    check(abs(fp.percentile(list(range(11)), 0.9) - 9) < 1e-12, "p90 of 0..10")
    check(fp.percentile([], 0.5) is None, "percentile of nothing")
    check(fp.cpu_seconds(os.getpid()) >= 0 and fp.cpu_seconds(0) == 0, "cpu_seconds")


def test_usage():
    for argv, want in (
        (["nope", "{}"], 2),
        (["ingest", "{}"], 2),  # no uri
        (["scan", "not json and not a file"], 2),
        (["serve", '{"files": []}'], 2),
    ):
        p = subprocess.run([sys.executable, PEER] + argv, capture_output=True, text=True)
        check(p.returncode == want, "%s: exit %d, want %d (%s)" % (argv, p.returncode, want, p.stderr.strip()[-200:]))
        check(p.stdout == "", "%s printed %r on stdout" % (argv, p.stdout[:200]))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_cpp_server(tmp)
    test_helpers()
    test_usage()
    if failures:
        print("%d failed" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
