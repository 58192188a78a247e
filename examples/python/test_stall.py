"""Stalled DoGet streams and the stream budget, through pyarrow.flight (the
client that found the problem) against servers this module starts itself.
It is the Python side of flightserver/stall_budget_test.go; the rules are
in docs/reliability.md ("Many stalled streams").

    TSFLIGHT_BIN=/path/to/tsflight python3 test_stall.py        # as run_all.sh runs it
    TSFLIGHT_BIN=/path/to/tsflight python3 -m pytest -q -s test_stall.py

TSFLIGHT_BIN names a tsflight binary (plain Flight is enough; -tags
duckdb_arrow is not needed). Each group of tests gets a server of its own,
on a fresh temporary root filled by --demo (the table cpu: 1,694,800 rows,
21 columns, batches of about 13 MiB), listening on 127.0.0.1:0; the
module reads the server's VmRSS from /proc, so it runs on Linux only.

With --stream-budget 64MiB, --stream-stall-timeout 2s and --scan-cache-bytes
32MiB:
  1. 24 clients, each on its own connection, open a DoGet, read one chunk
     (in threads: past the budget a first chunk waits) and stop reading.
     The server's RSS stays under its RSS before them + 6 x the budget
     + 2 x the scan cache (its entries and its fills).
  2. With them stalled, a fresh client reads the whole table within 60 s,
     because the server closes stalled connections (its log says so).
  3. The stalled clients reading on: those whose connection was closed get
     FlightUnavailableError, as many as the log has closings; the others
     read their stream to its end.
With a budget nothing here reaches (--stream-budget 64GiB, the same
stall timeout), the same 24 stalled clients:
  - take the server's RSS well past that bound: the bound of 1 is one that
    only the budget makes hold (the control);
  4. after stalling for more than twice the stall timeout, with nobody
     waiting for budget, every one of them reads its stream to the end
     with the rows of its endpoint; no connection is closed.

The servers run background maintenance (--maintenance-interval 1s, the
other maintenance flags at their defaults): a second after the start it
compacts the demo's 24 hourly segments into one, while the first streams
stall. Its memory is bounded by --maintenance-memory (64 MiB by default),
not by the stream budget; test 2 waits for it to finish and checks the
RSS bound of test 1 over all of it. Every read names the table version
the server started with, so that the compaction's commit changes no
plan under the tests.

The figures (RSS, times, closings) are printed; pytest shows them with -s,
which running the file directly passes. At the end each server is stopped
with SIGTERM and must exit 0.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pyarrow.flight as flight
import pytest

BIN = os.environ.get("TSFLIGHT_BIN", "")

pytestmark = [
    pytest.mark.skipif(not BIN, reason="TSFLIGHT_BIN (a tsflight binary) is not set"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the server's /proc/PID/status"),
]

MIB = 1 << 20
TABLE = "cpu"
DEMO_ROWS = 1_694_800  # what --demo writes: 200 hosts, one day at 10 s, less its holes
BUDGET = 64 * MIB  # --stream-budget of the servers under pressure
CACHE = 32 * MIB  # --scan-cache-bytes: the cache holds at most twice it
STALL = 2.0  # --stream-stall-timeout, seconds
STREAMS = 24  # stalled clients
FRESH_BOUND = 60.0  # seconds a fresh client may take to read the table past them
COMPACTION_BOUND = 120.0  # seconds background maintenance may take to compact the demo table
# The RSS bound of test 1: the server's RSS before the streams plus
# RSS_BUDGETS budgets. The budget bounds what the streams' accounts hold
# (plus one stream's next message, about two 13 MiB batches); on top of
# that the process carries what its accounts no longer count but the Go
# runtime has not given back: the Go heap grows to 1.5 x its live part
# before it collects (--gc-percent 50), what gRPC held for a closed
# connection is garbage the collector frees later, and freed pages go back
# to the system only lazily. Together that stays within about three
# budgets (measured peaks: 2.4 to 3.2 budgets above the base); six leaves
# room for a slower machine and is still under half of what the same 24
# stalled clients take without a budget (the control: 13 to 14 budgets,
# about 35 MiB a stream).
RSS_BUDGETS = 6
# A stalled client's call deadline: long past anything the tests wait,
# short enough that a broken server cannot hang them for the server's
# one-hour request timeout.
STALLED_DEADLINE = 180.0
EVICTION = "closing a connection whose client stopped reading"
LISTENING = re.compile(r'tsflight listening on ([^\s"]+)')


def figure(text):
    print("figures: " + text, flush=True)


class Server:
    """A tsflight serve process on a fresh root filled by --demo."""

    def __init__(self, budget):
        self.dir = tempfile.mkdtemp(prefix="tsflight-stall-")
        self.log_path = os.path.join(self.dir, "serve.log")
        self._log = open(self.log_path, "wb")
        # Background maintenance looks a second after the start and
        # compacts the demo's 24 hourly segments while the streams below
        # stall. A compaction's memory is not on the stream budget, but it
        # is bounded too (--maintenance-memory, 64 MiB by default: the rows
        # beyond it are sorted in runs spilled to $TMPDIR and merged), so
        # the RSS bounds below hold with it.
        args = [BIN, "serve", "--root", os.path.join(self.dir, "root"), "--demo", "--listen", "127.0.0.1:0",
                "--stream-budget", budget, "--stream-stall-timeout", "%gs" % STALL, "--maintenance-interval", "1s",
                "--scan-cache-bytes", "%dMiB" % (CACHE // MIB)]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self.url = "grpc://" + self._wait_address(90.0)
            self.base_rss = self.rss()
            self.version = self._version()
        except BaseException:
            self.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _wait_address(self, within):
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            m = LISTENING.search(self.log())
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                raise AssertionError("the server exited %s before listening:\n%s" % (self.proc.returncode, self.log()))
            time.sleep(0.1)
        raise AssertionError("the server logged no address within %.0f s:\n%s" % (within, self.log()))

    def _version(self):
        """The table's version now: every read of the tests names it."""
        client = flight.connect(self.url)
        try:
            results = list(client.do_action(flight.Action("describe-table", json.dumps({"table": TABLE}).encode())))
        finally:
            client.close()
        return json.loads(results[0].body.to_pybytes())["version"]

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def evictions(self):
        """The connections the server has closed for stalling, by its log."""
        return self.log().count(EVICTION)

    def rss(self):
        """The server's VmRSS in bytes."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc/%d/status" % self.proc.pid)

    def stop(self):
        """SIGTERM, then the exit code (None if it had to be killed)."""
        rc = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        return rc


@pytest.fixture(scope="class")
def server(request):
    """The class's server (its budget is the class's BUDGET_FLAG); it must
    stop cleanly."""
    srv = Server(request.cls.BUDGET_FLAG)
    yield srv
    rc = srv.stop()
    log = srv.log()
    shutil.rmtree(srv.dir, ignore_errors=True)
    assert rc == 0, "the server exited %s after SIGTERM, want 0; its log:\n%s" % (rc, log[-6000:])


class RssWatch:
    """Samples a server's RSS every 0.1 s in the background; peak is the
    largest seen."""

    def __init__(self, srv):
        self.srv = srv
        self.peak = srv.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.1):
            try:
                self.peak = max(self.peak, self.srv.rss())
            except (OSError, AssertionError):
                return  # the server is gone

    def stop(self):
        self._stop.set()
        self._thread.join()


def table_info(client, version, options=None):
    """The plan of the whole table at version."""
    descriptor = flight.FlightDescriptor.for_command(json.dumps({"table": TABLE, "version": version}).encode())
    info = client.get_flight_info(descriptor, options)
    assert len(info.endpoints) >= 1, info
    return info


def read_table(url, version, timeout):
    """A fresh client reads every endpoint of the table at version; returns
    its FlightInfo and the rows of each endpoint."""
    client = flight.connect(url)
    try:
        options = flight.FlightCallOptions(timeout=timeout)
        info = table_info(client, version, options)
        rows = [client.do_get(e.ticket, options).read_all().num_rows for e in info.endpoints]
    finally:
        client.close()
    return info, rows


class Stalled:
    """n clients, each on its own connection, each with a DoGet of endpoint
    i % len(endpoints); each reads its first chunk in a thread of its own
    and then nothing."""

    def __init__(self, url, endpoints, n):
        options = flight.FlightCallOptions(timeout=STALLED_DEADLINE)
        self.endpoint = [i % len(endpoints) for i in range(n)]
        self.clients, self.readers = [], []
        try:
            for i in range(n):
                client = flight.connect(url)
                self.clients.append(client)
                self.readers.append(client.do_get(endpoints[self.endpoint[i]].ticket, options))
        except BaseException:
            self.close()
            raise
        self.first = [None] * n  # rows of the first chunk, or the exception
        self.waited = [None] * n  # seconds until it came
        self.came_at = [None] * n  # time.monotonic() when it came
        self.threads = [threading.Thread(target=self._first, args=(i,), daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _first(self, i):
        start = time.monotonic()
        try:
            self.first[i] = self.readers[i].read_chunk().data.num_rows
        except Exception as e:  # kept for check_first_chunks
            self.first[i] = e
        self.came_at[i] = time.monotonic()
        self.waited[i] = self.came_at[i] - start

    def wait_first(self, within):
        """Waits for the first chunks; returns False if some did not come."""
        deadline = time.monotonic() + within
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self.threads)

    def check_first_chunks(self):
        failed = {i: f for i, f in enumerate(self.first) if not isinstance(f, int) or f <= 0}
        assert not failed, "first chunks that did not come: %r" % failed

    def read_on(self, i):
        """Reads stream i to its end: ("eof", rows of the whole stream) or
        ("error", the exception)."""
        rows = self.first[i]
        try:
            while True:
                rows += self.readers[i].read_chunk().data.num_rows
        except StopIteration:
            return "eof", rows
        except Exception as e:
            return "error", e

    def close(self):
        for reader in self.readers:
            try:
                reader.cancel()
            except Exception:
                pass
        for client in self.clients:
            try:
                client.close()
            except Exception:
                pass


def stall(srv):
    """Starts watching srv's RSS (the state's "watch"; stopped here if this
    fails), opens STREAMS stalled clients on srv, waits until each has its
    first chunk and the server has had a second to settle; returns their
    state (the fixtures add to it)."""
    watch = RssWatch(srv)
    try:
        client = flight.connect(srv.url)
        try:
            info = table_info(client, srv.version)
        finally:
            client.close()
        start = time.monotonic()
        stalled = Stalled(srv.url, info.endpoints, STREAMS)
        # Past the budget a first chunk waits for stalled connections to be
        # closed: a stall timeout (or a few) after the first clients stopped.
        came = stalled.wait_first(10 * STALL + 30)
        opened = time.monotonic() - start
        time.sleep(1.0)
        return {"stalled": stalled, "came": came, "opened": opened, "watch": watch, "settled_rss": srv.rss()}
    except BaseException:
        watch.stop()
        raise


def check_came(state):
    stalled = state["stalled"]
    assert state["came"], "first chunks still missing after %.0f s: %r" % (state["opened"], stalled.first)
    stalled.check_first_chunks()


COMPACTED = re.compile(r"maintenance: compacted: .*?segments=(\d+) into=(\d+).*?memory_peak=(\d+).*?took=(\S+)")


def wait_compacted(srv, within):
    """Waits until the server's log says maintenance compacted something."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if COMPACTED.search(srv.log()):
            return True
        time.sleep(0.2)
    return False


def maintenance_figure(srv):
    """What the server's log says background maintenance did so far."""
    done = COMPACTED.findall(srv.log())
    if not done:
        return "no compaction yet"
    return "; ".join("compacted %s segments into %s holding at most %s, in %s" % (s, o, mib(int(p)), t) for s, o, p, t in done)


def rss_bound(srv):
    # The scan cache is memory the budget does not bound: at most its
    # entries and its fills, each up to CACHE.
    return srv.base_rss + RSS_BUDGETS * BUDGET + 2 * CACHE


def mib(n):
    return "%.0f MiB" % (n / MIB)


@pytest.fixture(scope="class")
def pressured(server):
    """TestUnderPressure's stalled clients, with the server's RSS watched
    from before they came."""
    state = stall(server)
    watch = state["watch"]
    state["evictions_before_fresh"] = server.evictions()
    try:
        yield state
    finally:
        state["stalled"].close()
        watch.stop()


@pytest.fixture(scope="class")
def fresh(server, pressured):
    """A fresh client reading the whole table past the stalled ones."""
    before = server.evictions()
    start = time.monotonic()
    info, rows = read_table(server.url, server.version, FRESH_BOUND + 30)
    took = time.monotonic() - start
    return {"info": info, "rows": rows, "took": took, "evicted_meanwhile": server.evictions() - before,
            "peak": pressured["watch"].peak}


@pytest.fixture(scope="class")
def roomy(server):
    """TestWithoutPressure's stalled clients, and each endpoint's rows,
    read before anyone stalled. They stay stalled for twice the stall
    timeout and more while the server's RSS is watched (without a budget
    it grows for a few seconds after the first chunks: each scan decodes
    ahead until gRPC holds a message it cannot write)."""
    info, rows = read_table(server.url, server.version, 60)
    assert info.total_records == DEMO_ROWS and sum(rows) == DEMO_ROWS, (info.total_records, rows)
    base = server.rss()  # after that read, so it is not counted below
    state = stall(server)
    watch = state["watch"]
    try:
        if state["came"]:
            time.sleep(2 * STALL)
        state.update(rows=rows, base=base, peak=watch.peak)
        yield state
    finally:
        state["stalled"].close()
        watch.stop()


class TestUnderPressure:
    """Stalled clients past a small budget: bounded memory, their
    connections closed for a client that wants to read."""

    BUDGET_FLAG = "%dMiB" % (BUDGET // MIB)

    def test_stalled_streams_rss_bounded(self, server, pressured):
        stalled = pressured["stalled"]
        check_came(pressured)
        bound = rss_bound(server)
        figure("%d stalled streams, budget %s: RSS %s before them, %s a second after the last first chunk "
               "(peak %s), bound %s; first chunks came within %.1f s (the longest wait %.1f s); %d connections closed so far"
               % (STREAMS, mib(BUDGET), mib(server.base_rss), mib(pressured["settled_rss"]), mib(pressured["watch"].peak),
                  mib(bound), pressured["opened"], max(stalled.waited), pressured["evictions_before_fresh"]))
        assert pressured["settled_rss"] < bound, (mib(pressured["settled_rss"]), mib(bound))
        assert pressured["watch"].peak < bound, (mib(pressured["watch"].peak), mib(bound))

    def test_fresh_client_reads_whole_table(self, server, pressured, fresh):
        info, rows = fresh["info"], fresh["rows"]
        figure("a fresh client past %d stalled streams read %d rows from %d endpoints in %.1f s "
               "(%d connections closed meanwhile, %d in all); peak RSS %s, bound %s"
               % (STREAMS, sum(rows), len(rows), fresh["took"], fresh["evicted_meanwhile"], server.evictions(),
                  mib(fresh["peak"]), mib(rss_bound(server))))
        # The background compaction started a second after the server;
        # the RSS watch of test 1 runs on until the class ends.
        compacted = wait_compacted(server, COMPACTION_BOUND)
        peak = pressured["watch"].peak
        figure("maintenance: %s; peak RSS over the stalled streams, the fresh client and the compaction %s, bound %s"
               % (maintenance_figure(server), mib(peak), mib(rss_bound(server))))
        assert compacted, "no background compaction within %.0f s; the log ends:\n%s" % (COMPACTION_BOUND, server.log()[-3000:])
        assert peak < rss_bound(server), (mib(peak), mib(rss_bound(server)))
        assert info.total_records == DEMO_ROWS, info.total_records
        assert sum(rows) == info.total_records, (rows, info.total_records)
        assert fresh["took"] <= FRESH_BOUND, "the fresh client took %.1f s" % fresh["took"]
        assert EVICTION in server.log()
        # It got through because stalled connections were closed for it,
        # not because nothing held the budget.
        assert fresh["evicted_meanwhile"] >= 1, fresh
        assert fresh["peak"] < rss_bound(server), (mib(fresh["peak"]), mib(rss_bound(server)))

    def test_stalled_clients_reading_on(self, server, pressured, fresh):
        stalled = pressured["stalled"]
        stalled.check_first_chunks()
        per_endpoint = fresh["rows"]
        unavailable, ended, other = [], [], []
        for i in range(STREAMS):
            how, what = stalled.read_on(i)
            if how == "error" and isinstance(what, flight.FlightUnavailableError):
                unavailable.append(i)
            elif how == "eof" and what == per_endpoint[stalled.endpoint[i]]:
                ended.append(i)
            else:
                other.append((i, how, what))
        closed = server.evictions()
        figure("the %d stalled clients reading on: %d FlightUnavailableError, %d read to the end; %d connections closed by the log"
               % (STREAMS, len(unavailable), len(ended), closed))
        assert not other, "neither UNAVAILABLE nor the whole stream: %r" % other
        # One connection, one stream per client: every closing the server
        # logged is one client that learns it as UNAVAILABLE, and no other.
        assert len(unavailable) == closed, (unavailable, closed)
        assert len(unavailable) >= 1


class TestWithoutPressure:
    """Stalled clients with a budget they never reach: left alone.

    (Two stalled streams on the 64 MiB budget would not do: each holds
    about 35 MiB, so together they pass the budget, their own scans wait
    for it, and they close each other's connections.)"""

    BUDGET_FLAG = "64GiB"

    def test_without_budget_rss_passes_bound(self, server, roomy):
        check_came(roomy)
        bound = roomy["base"] + RSS_BUDGETS * BUDGET
        figure("%d stalled streams, budget 64GiB: RSS %s before them, %s a second after the last first chunk, "
               "peak %s over %.0f s stalled; the bound of the 64 MiB budget would be %s; first chunks came within %.1f s"
               % (STREAMS, mib(roomy["base"]), mib(roomy["settled_rss"]), mib(roomy["peak"]), 2 * STALL + 1,
                  mib(bound), roomy["opened"]))
        # The bound of test_stalled_streams_rss_bounded is one that the
        # same clients break without the budget.
        assert roomy["peak"] > bound, (mib(roomy["peak"]), mib(bound))

    def test_stalled_clients_keep_their_streams(self, server, roomy):
        stalled = roomy["stalled"]
        check_came(roomy)
        quiet = time.monotonic() - max(stalled.came_at)
        assert quiet > 2 * STALL, quiet  # the roomy fixture saw to it
        assert server.evictions() == 0, "connections closed without budget pressure"
        start = time.monotonic()
        got = [stalled.read_on(i) for i in range(STREAMS)]
        took = time.monotonic() - start
        want = [("eof", roomy["rows"][e]) for e in stalled.endpoint]
        figure("%d clients stalled %.1f s and more (stall timeout %.0f s) read on to the end in %.1f s; %d connections closed"
               % (STREAMS, quiet, STALL, took, server.evictions()))
        assert got == want
        assert server.evictions() == 0


if __name__ == "__main__":
    if len(sys.argv) != 1:
        print("usage: TSFLIGHT_BIN=BINARY %s" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(pytest.main(["-q", "-s", "-rs", "-p", "no:cacheprovider", __file__]))
