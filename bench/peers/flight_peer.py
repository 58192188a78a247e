#!/usr/bin/env python3
"""Benchmark peer: tsflight seen from Python, beside the fastest references.

Usage: flight_peer.py MODE ARGS_JSON

tsbench (bench/tsbench) runs this script against a `tsflight serve` it
started; every mode alternates tsflight and its peer run by run (A B B A
...) in this one process, so that both see the same machine. MODE is
ingest, scan, latency or serve. ARGS_JSON is a path to a JSON file holding
one object, or the object itself as text (anything starting with "{").

ingest  {"uri": "grpc://HOST:PORT", "files": [PARQUET, ...], "rows": N,
         "ttf_root": DIR, "runs": 3, "keep": "cpu", "server_pid": PID}
    Reads the files (in order) into one pyarrow Table, the first N rows of
    them (N 0: all), and cuts it into batches of 65,536 rows, all before
    any clock starts. Then, alternating run by run:
    A: tsflight: the create-table action (index time, entity hostname,
       granularity 10s; untimed), then ONE DoPut of every batch, timed
       until the server's answer (its app metadata must say N rows);
    B: the package: TimeSeriesTable.create in a fresh directory under
       ttf_root (untimed), then ONE TimeSeriesTable.append of the Table.
    A warm-up of each (one batch, into scratch tables) comes first. The
    last tsflight run's table is named `keep`, the others py_put_<i>.

scan    {"uri": ..., "table": "cpu", "table_root": DIR, "work": DIR,
         "runs": 3, "server_pid": PID, "cold_uri": ..., "cold_pid": PID}
    Reads the whole table from tsflight once (untimed), every endpoint of
    its FlightInfo, and stores each endpoint's batches as they came (an
    Arrow IPC stream file per endpoint in `work`). A child process of this
    script (mode serve) loads them into memory and serves them from
    pyarrow's C++ Flight server: the same schema, batches and number of
    endpoints. Then, alternating run by run (A B C, C B A, ...):
    A: tsflight, B: the C++ server, both read by the same client code
       (GetFlightInfo, then every endpoint at once, one thread each,
       every batch read);
    C: the package's Session.sql_reader of SELECT * over the table's
       directory (in this process), every batch consumed.
    D (with cold_uri): a second tsflight server over the same root that
       keeps no decoded batches (--scan-cache-bytes 0), read like A, so
       that A's repeated fetches (served from its scan cache after the
       first) stand beside a read that decodes every time.
    One warm-up of each comes first.

latency {"uri": ..., "runs": 200, "warmup": 20, "server_pid": PID}
    Over the ADBC Flight SQL driver (adbc_driver_flightsql.dbapi), one
    connection: "select1", SELECT 1 on a new cursor each time (execute,
    fetch, close); "prepared", one cursor prepared once (adbc_prepare)
    whose SELECT 1 is executed and fetched again each run; and "floor", a
    pyarrow.flight list_actions round trip to the same server. The three
    are interleaved run by run after the warm-up runs.

serve   {"files": [ARROWS, ...], "listen": "127.0.0.1:0"}
    The C++ in-memory Flight server: loads each IPC stream file into
    memory (endpoint i serves file i's batches, as they are), prints
    "cpp-flight listening on HOST:PORT" and serves until its standard
    input closes or it gets SIGTERM.

Prints one JSON object on stdout (the serve mode prints only its address
line). Every timed system gives "times_s" (one per timed run) and, where
the work happens in another process, "server_cpu_s" (that process's user +
system CPU during each run, from /proc, in 10 ms ticks). Exit status: 0
success, 1 failure (message on stderr), 2 bad usage, 3 a module is missing.
"""

import concurrent.futures
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time

MODES = ("ingest", "scan", "latency", "serve")
BATCH_ROWS = 65536
TABLE_SPEC = {"index_column": "time", "index_type": "timestamp", "granularity": "10s", "entity_columns": ["hostname"]}


class UsageError(Exception):
    """Bad invocation or arguments: exit 2."""


class Failure(Exception):
    """The run failed: exit 1."""


def load_args(text):
    if not text.lstrip().startswith("{"):
        try:
            with open(text) as f:
                text = f.read()
        except OSError as e:
            raise UsageError("cannot read %s: %s" % (text, e))
    try:
        args = json.loads(text)
    except ValueError as e:
        raise UsageError("arguments are not JSON: %s" % e)
    if not isinstance(args, dict):
        raise UsageError("arguments must be a JSON object")
    return args


def arg(args, key, kind, default=None):
    if key not in args:
        if default is None:
            raise UsageError("argument %r is required" % key)
        return default
    v = args[key]
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        raise UsageError("argument %r must be %s, not %r" % (key, getattr(kind, "__name__", kind), v))
    return v


def cpu_seconds(pid):
    """User + system CPU of process pid so far, in seconds (0 if unknown)."""
    if not pid:
        return 0.0
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss(pid="self"):
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def timed(fn, pid=None):
    """Runs fn; returns (its result, wall seconds, pid's CPU seconds)."""
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    res = fn()
    t1 = time.perf_counter()
    return res, t1 - t0, cpu_seconds(pid) - c0


def abba(i, systems):
    """The order of run i: as given for even runs, reversed for odd ones."""
    return list(systems) if i % 2 == 0 else list(reversed(systems))


# ---------------------------------------------------------------------------
# ingest


def do_action(flight, client, name, body):
    return [r.body.to_pybytes() for r in client.do_action(flight.Action(name, json.dumps(body).encode()))]


def put(flight, client, name, schema, batches):
    """One DoPut of batches to table name; returns the rows the server committed."""
    writer, reader = client.do_put(flight.FlightDescriptor.for_path(name), schema)
    for b in batches:
        writer.write_batch(b)
    writer.done_writing()
    meta = reader.read()
    writer.close()
    if meta is None:
        raise Failure("DoPut %s: the server sent no answer" % name)
    return json.loads(meta.to_pybytes())["rows"]


def run_ingest(mods, args, out):
    pa, pq, flight, ttf = mods
    uri = arg(args, "uri", str)
    files = arg(args, "files", list)
    want = arg(args, "rows", int, 0)
    ttf_root = arg(args, "ttf_root", str)
    runs = arg(args, "runs", int, 3)
    keep = arg(args, "keep", str, "cpu")
    pid = arg(args, "server_pid", int, 0)
    if not files or runs < 1:
        raise UsageError("need files and runs >= 1")
    table = pa.concat_tables([pq.read_table(f) for f in files])
    if want > 0:
        if table.num_rows < want:
            raise Failure("the files hold %d rows, %d asked" % (table.num_rows, want))
        table = table.slice(0, want)
    table = table.combine_chunks()
    batches = table.to_batches(max_chunksize=BATCH_ROWS)
    rows = table.num_rows
    out.update({"rows": rows, "batches": len(batches), "arrow_bytes": table.nbytes})
    client = flight.connect(uri)
    create = dict(index_column="time", index_type="timestamp", index_granularity="10s", entity_columns=["hostname"])

    def tsflight(name, bs):
        def go():
            return put(flight, client, name, table.schema, bs)

        do_action(flight, client, "create-table", dict(TABLE_SPEC, table=name))
        n, secs, cpu = timed(go, pid)
        if n != sum(b.num_rows for b in bs):
            raise Failure("DoPut %s: the server committed %d rows" % (name, n))
        return secs, cpu

    def package(root, t):
        tb = ttf.TimeSeriesTable.create(table_root=root, **create)
        c0 = time.process_time()
        rep, secs, _ = timed(lambda: tb.append(t))
        cpu = time.process_time() - c0
        if rep.row_count != t.num_rows:
            raise Failure("append reported %d rows, want %d" % (rep.row_count, t.num_rows))
        return secs, cpu

    tsflight("py_put_warmup", batches[:1])
    package(os.path.join(ttf_root, "warmup"), pa.Table.from_batches(batches[:1]))
    res = {"tsflight": {"times_s": [], "server_cpu_s": []}, "package": {"times_s": [], "cpu_s": []}}
    order = ""
    for i in range(runs):
        for s in abba(i, ("A", "B")):
            order += s
            if s == "A":
                name = keep if i == runs - 1 else "py_put_%d" % i
                secs, cpu = tsflight(name, batches)
                res["tsflight"]["times_s"].append(secs)
                res["tsflight"]["server_cpu_s"].append(cpu)
            else:
                root = os.path.join(ttf_root, "run%d" % i)
                secs, cpu = package(root, table)
                shutil.rmtree(root, ignore_errors=True)
                res["package"]["times_s"].append(secs)
                res["package"]["cpu_s"].append(cpu)
    shutil.rmtree(os.path.join(ttf_root, "warmup"), ignore_errors=True)
    out.update(res)
    out["order"] = order
    out["package_version"] = getattr(ttf, "__version__", None)


# ---------------------------------------------------------------------------
# scan


def read_endpoints(flight, client, pool, desc, keep=False):
    """Plans desc and reads every endpoint at once, one thread each.

    Returns (rows, bytes of the batches read, the batches per endpoint if
    keep)."""
    info = client.get_flight_info(desc)

    def one(ep):
        rdr = client.do_get(ep.ticket)
        rows = nbytes = 0
        kept = [] if keep else None
        while True:
            try:
                chunk = rdr.read_chunk()
            except StopIteration:
                break
            b = chunk.data
            rows += b.num_rows
            nbytes += b.nbytes
            if keep:
                kept.append(b)
        return rows, nbytes, kept, rdr.schema

    results = list(pool.map(one, info.endpoints))
    rows = sum(r[0] for r in results)
    nbytes = sum(r[1] for r in results)
    return rows, nbytes, [(r[3], r[2]) for r in results] if keep else None


class CppServer:
    """The serve mode of this script as a child process."""

    def __init__(self, files):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "serve", json.dumps({"files": files})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        prefix = "cpp-flight listening on "
        if not line.startswith(prefix):
            self.proc.kill()
            raise Failure("the C++ Flight server did not start: %r" % line)
        self.addr = line[len(prefix) :].strip()
        self.pid = self.proc.pid

    def stop(self):
        rss = peak_rss(self.pid)
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failure("the C++ Flight server did not stop")
        if self.proc.returncode != 0:
            raise Failure("the C++ Flight server exited %d" % self.proc.returncode)
        return rss


def run_scan(mods, args, out):
    pa, _, flight, ttf = mods
    uri = arg(args, "uri", str)
    name = arg(args, "table", str)
    root = arg(args, "table_root", str)
    work = arg(args, "work", str)
    runs = arg(args, "runs", int, 3)
    pid = arg(args, "server_pid", int, 0)
    cold_uri = arg(args, "cold_uri", str, "")
    cold_pid = arg(args, "cold_pid", int, 0)
    ts = flight.connect(uri)
    desc = flight.FlightDescriptor.for_path(name)
    nep = len(ts.get_flight_info(desc).endpoints)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(nep, 1))
    rows, nbytes, eps = read_endpoints(flight, ts, pool, desc, keep=True)
    os.makedirs(work, exist_ok=True)
    files = []
    sizes = []
    for i, (schema, batches) in enumerate(eps):
        path = os.path.join(work, "endpoint-%d.arrows" % i)
        with pa.OSFile(path, "wb") as f, pa.ipc.new_stream(f, schema) as w:
            for b in batches:
                w.write_batch(b)
        files.append(path)
        sizes.append([b.num_rows for b in batches])
    del eps
    out.update({"rows": rows, "bytes": nbytes, "endpoints": nep, "batch_rows": sizes})

    cpp = CppServer(files)
    try:
        cc = flight.connect("grpc://" + cpp.addr)
        sess = ttf.Session()
        sess.register_tstable(name, root)
        sql = 'SELECT * FROM "%s"' % name.replace('"', '""')

        def pkg():
            n = nb = 0
            for b in sess.sql_reader(sql):
                n += b.num_rows
                nb += b.nbytes
            return n, nb, None

        systems = {
            "tsflight": (lambda: read_endpoints(flight, ts, pool, desc), pid),
            "cpp": (lambda: read_endpoints(flight, cc, pool, desc), cpp.pid),
            "package": (pkg, None),
        }
        order = ("tsflight", "cpp", "package")
        if cold_uri:
            cold = flight.connect(cold_uri)
            systems["tsflight_cold"] = (lambda: read_endpoints(flight, cold, pool, desc), cold_pid)
            order = ("tsflight", "cpp", "tsflight_cold", "package")
        res = {k: {"times_s": [], "server_cpu_s": [], "rows": 0, "bytes": 0} for k in systems}
        for i in range(runs + 1):  # run 0 is the warm-up
            for k in abba(i, order):
                fn, p = systems[k]
                (n, nb, _), secs, cpu = timed(fn, p)
                if n != rows:
                    raise Failure("%s read %d rows, tsflight's first read %d" % (k, n, rows))
                if k == "cpp" and nb != nbytes:
                    raise Failure("the C++ server sent %d bytes of batches, tsflight %d" % (nb, nbytes))
                res[k]["rows"], res[k]["bytes"] = n, nb
                if i > 0:
                    res[k]["times_s"].append(secs)
                    res[k]["server_cpu_s"].append(cpu)
        cc.close()
    finally:
        res_rss = cpp.stop()
    del res["package"]["server_cpu_s"]
    res["cpp"]["peak_rss_bytes"] = res_rss
    out.update(res)
    out["package_version"] = getattr(ttf, "__version__", None)
    pool.shutdown()


def make_server(pa, flight, tables, location):
    class Server(flight.FlightServerBase):
        def get_flight_info(self, context, descriptor):
            schema = tables[0].schema
            eps = [flight.FlightEndpoint(str(i).encode(), []) for i in range(len(tables))]
            rows = sum(t.num_rows for t in tables)
            return flight.FlightInfo(schema, descriptor, eps, rows, -1)

        def do_get(self, context, ticket):
            i = int(ticket.ticket.decode())
            # A Table streams its chunks as they are: the batch sizes
            # tsflight sent, encoded and written by C++.
            return flight.RecordBatchStream(tables[i])

    return Server(location)


def run_serve(mods, args, out):
    pa, _, flight, _ = mods
    files = arg(args, "files", list)
    listen = arg(args, "listen", str, "127.0.0.1:0")
    tables = []
    for path in files:
        with pa.OSFile(path, "rb") as f:  # read into memory, not mapped
            tables.append(pa.ipc.open_stream(f).read_all())
    if not tables:
        raise UsageError("no files")
    host, port = listen.rsplit(":", 1)
    srv = make_server(pa, flight, tables, "grpc://%s:%s" % (host, port))
    real = sys.__stdout__
    real.write("cpp-flight listening on %s:%d\n" % (host, srv.port))
    real.flush()
    threading.Thread(target=lambda: (sys.stdin.read(), srv.shutdown()), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    srv.serve()
    return "served"


# ---------------------------------------------------------------------------
# latency


def percentile(xs, q):
    s = sorted(xs)
    if not s:
        return None
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def run_latency(mods, args, out):
    _, _, flight, _ = mods
    try:
        import adbc_driver_flightsql.dbapi as dbapi
    except ImportError as e:
        raise ImportError("adbc_driver_flightsql: %s" % e)
    uri = arg(args, "uri", str)
    runs = arg(args, "runs", int, 200)
    warmup = arg(args, "warmup", int, 20)
    pid = arg(args, "server_pid", int, 0)
    conn = dbapi.connect(uri)
    fc = flight.connect(uri)
    prep = conn.cursor()
    prep.adbc_prepare("SELECT 1")

    def select1():
        cur = conn.cursor()
        cur.execute("SELECT 1")
        v = cur.fetchall()
        cur.close()
        return v

    def prepared():
        prep.execute("SELECT 1")
        return prep.fetchall()

    def floor():
        return list(fc.list_actions())

    ops = {"select1": select1, "prepared": prepared, "floor": floor}
    res = {k: {"times_s": [], "server_cpu_s": []} for k in ops}
    for k in ("select1", "prepared"):
        v = ops[k]()
        if v != [(1,)]:
            raise Failure("%s answered %r, want [(1,)]" % (k, v))
    for i in range(warmup + runs):
        for k in abba(i, ("select1", "prepared", "floor")):
            _, secs, cpu = timed(ops[k], pid)
            if i >= warmup:
                res[k]["times_s"].append(secs)
                res[k]["server_cpu_s"].append(cpu)
    for k in res:
        res[k]["p50_s"] = percentile(res[k]["times_s"], 0.5)
        res[k]["p90_s"] = percentile(res[k]["times_s"], 0.9)
    prep.close()
    conn.close()
    fc.close()
    out.update(res)
    out["adbc_driver_flightsql_version"] = getattr(dbapi, "__version__", None) or module_version("adbc-driver-flightsql")


def module_version(dist):
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001
        return None


RUNNERS = {"ingest": run_ingest, "scan": run_scan, "latency": run_latency, "serve": run_serve}


def main(argv):
    if len(argv) != 3 or argv[1] not in MODES:
        sys.stderr.write(__doc__)
        return 2
    mode = argv[1]
    try:
        args = load_args(argv[2])
    except UsageError as e:
        sys.stderr.write("flight_peer %s: %s\n" % (mode, e))
        return 2
    try:
        import pyarrow as pa
        import pyarrow.flight as flight
        import pyarrow.parquet as pq

        ttf = None
        if mode in ("ingest", "scan"):
            import timeseries_table_format as ttf
    except ImportError as e:
        sys.stderr.write("flight_peer: a module is missing: %s\n" % e)
        return 3
    # Only the JSON object goes to the real stdout.
    sys.stdout.flush()
    json_fd = os.dup(1)
    os.dup2(2, 1)
    out = {"mode": mode, "pyarrow_version": pa.__version__, "python_version": platform.python_version()}
    try:
        if mode == "serve":
            os.dup2(json_fd, 1)
        RUNNERS[mode]((pa, pq, flight, ttf), args, out)
    except UsageError as e:
        sys.stderr.write("flight_peer %s: %s\n" % (mode, e))
        return 2
    except ImportError as e:
        sys.stderr.write("flight_peer: a module is missing: %s\n" % e)
        return 3
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        sys.stderr.write("flight_peer %s: %s: %s\n" % (mode, type(e).__name__, e))
        return 1
    finally:
        sys.stdout.flush()
        os.dup2(json_fd, 1)
        os.close(json_fd)
    if mode == "serve":
        return 0
    out["peak_rss_bytes"] = peak_rss()
    sys.stdout.write(json.dumps(out, allow_nan=False) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
