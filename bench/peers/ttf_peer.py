#!/usr/bin/env python3
"""Benchmark peer: the Python package timeseries-table-format (0.9.0).

Usage: ttf_peer.py MODE ARGS_JSON

MODE is ingest, scan or sql. ARGS_JSON is a path to a JSON file holding one
object, or the object itself as text (anything starting with "{"). Keys not
listed below are ignored with a warning on stderr.

ingest  {"files": [PARQUET, ...], "table_root": DIR, "index_column": "time",
         "granularity": "10s", "entity_columns": ["hostname"],
         "index_type": "timestamp", "timezone": null, "warmup": false}
    Creates a table in DIR (missing or empty) with TimeSeriesTable.create,
    then for each file, in order: reads it whole with pyarrow.parquet
    (untimed) and appends it with TimeSeriesTable.append (timed): one append,
    one commit per file. index_type (default "timestamp") and timezone
    (default null) are optional, as is entity_columns (default []). With
    warmup true the first file is first appended, untimed, to a scratch
    table in a temporary directory that is then deleted.

scan    {"table_root": DIR, "table": NAME, "ranges": [{"name": N,
         "start": RFC3339 | null, "end": RFC3339 | null}, ...],
         "runs": 5, "warmup": 1, "index_column": null}
    Registers the table with Session.register_tstable and, per range, runs
    SELECT * FROM NAME [WHERE idx >= TIMESTAMP 'start' AND idx < TIMESTAMP
    'end'] through Session.sql_reader, consuming every batch. A run (the
    timed unit) is the sql_reader call plus the full consumption. The
    index column defaults to the table's own (index_spec). Bounds are
    rounded up to the column's unit, so [start, end) is exact even for
    sub-unit bounds (the package would truncate them). For an int64/uint64
    index the bounds are JSON integers.

sql     {"table_root": DIR, "table": NAME, "queries": [{"name": N,
         "sql": Q}, ...], "runs": 5, "warmup": 1}
    A run is Session.sql(Q), which returns the whole result as a
    pyarrow.Table. result is the rows of the last warm-up run (of the first
    timed run if warmup is 0) made comparable across systems: timestamps and
    dates as microseconds since the epoch (float), durations as
    microseconds (float), other numbers and booleans as floats (NaN and
    infinities as the strings "NaN", "Infinity", "-Infinity"), strings as
    strings, binary as UTF-8 text, NULL as null.

Prints one JSON object on stdout (anything else written to stdout while
running, e.g. by native code, is sent to stderr). Common keys:

    {"peer": "timeseries-table-format", "mode": MODE,
     "package": "timeseries-table-format", "package_version": "0.9.0",
     "pyarrow_version": str, "python_version": str,
     "import_s": float,        # importing pyarrow and the package
     "wall_s": float,          # script start to output, imports included
     "peak_rss_bytes": int,    # peak RSS of this process (VmHWM on Linux)
     ...}

ingest adds:
    "table_root": str, "create_s": float, "warmup_s": float | null,
    "files": [{"file": str, "rows": int, "read_s": float, "append_s": float,
               "committed_version": int, "segment_path": str,
               "segment_bytes": int, "row_groups": int, "compression": str}],
    "rows": int, "read_s": float (sum, untimed part),
    "total_s": float (sum of append_s), "rows_per_s": float | null,
    "version": int, "segments": int, "segment_bytes": int (live segments)

scan adds:
    "table_root", "table", "index_column", "version", "segments",
    "register_s": float, "runs": int, "warmup": int,
    "ranges": {NAME: {"start", "end", "sql": str, "times_s": [float],
                      "median_s", "min_s", "max_s": float | null,
                      "rows": int, "bytes": int, "batches": int}}

sql adds:
    "table_root", "table", "version", "segments", "register_s", "runs",
    "warmup",
    "queries": {NAME: {"sql": str, "times_s": [float], "median_s", "min_s",
                       "max_s": float | null, "rows": int,
                       "columns": [str], "types": [str],
                       "result": [[value, ...], ...]}}

Exit status: 0 success, 1 failure (message on stderr), 2 bad usage, 3 the
package (or pyarrow) is not installed.
"""

import time

_T0 = time.perf_counter()

import datetime  # noqa: E402
import decimal  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

PACKAGE = "timeseries-table-format"
MODES = ("ingest", "scan", "sql")
NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


class UsageError(Exception):
    """Bad invocation or arguments: exit 2."""


class Failure(Exception):
    """The run failed: exit 1."""


# ---------------------------------------------------------------------------
# arguments


def load_args(text):
    if text.lstrip().startswith("{"):
        src = "inline JSON"
        raw = text
    else:
        src = text
        try:
            with open(text, encoding="utf-8") as f:
                raw = f.read()
        except OSError as e:
            raise UsageError("cannot read ARGS_JSON %s: %s" % (text, e))
    try:
        args = json.loads(raw)
    except ValueError as e:
        raise UsageError("%s is not valid JSON: %s" % (src, e))
    if not isinstance(args, dict):
        raise UsageError("%s must hold a JSON object" % src)
    return args


def warn_unknown(mode, args, known):
    extra = sorted(set(args) - set(known))
    if extra:
        sys.stderr.write("ttf_peer %s: ignoring unknown argument(s): %s\n" % (mode, ", ".join(extra)))


def req(args, key, kind, what):
    if key not in args:
        raise UsageError("missing argument %r (%s)" % (key, what))
    return typed(args, key, args[key], kind, what)


def opt(args, key, kind, what, default):
    if key not in args or args[key] is None:
        return default
    return typed(args, key, args[key], kind, what)


def typed(args, key, v, kind, what):
    # bool is an int in Python: only accept it where bool is asked for
    ok = isinstance(v, kind) and not (isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)))
    if not ok:
        raise UsageError("argument %r must be %s, got %r" % (key, what, v))
    return v


def str_list(args, key, required):
    v = args.get(key)
    if v is None and not required:
        return []
    if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v):
        raise UsageError("argument %r must be a list of non-empty strings" % key)
    return v


def count_arg(args, key, default, minimum):
    v = opt(args, key, int, "an integer", default)
    if v < minimum:
        raise UsageError("argument %r must be >= %d, got %d" % (key, minimum, v))
    return v


def named_list(args, key, fields):
    items = args.get(key)
    if not isinstance(items, list) or not items:
        raise UsageError("argument %r must be a non-empty list" % key)
    seen = set()
    for it in items:
        if not isinstance(it, dict) or not isinstance(it.get("name"), str) or not it["name"]:
            raise UsageError("every entry of %r needs a non-empty string \"name\"" % key)
        if it["name"] in seen:
            raise UsageError("duplicate name %r in %r" % (it["name"], key))
        seen.add(it["name"])
        for f in fields:
            if f not in it:
                raise UsageError("%r entry %r has no %r" % (key, it["name"], f))
    return items


# ---------------------------------------------------------------------------
# time


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()


def parse_rfc3339_ns(text):
    """Nanoseconds since the epoch of an RFC 3339 timestamp (offset required)."""
    m = _RFC3339.match(text)
    if not m:
        raise UsageError("not an RFC 3339 timestamp with offset: %r" % text)
    y, mo, d, hh, mi, ss = (int(g) for g in m.groups()[:6])
    frac, off = m.group(7), m.group(8)
    try:
        days = datetime.date(y, mo, d).toordinal() - _EPOCH_ORDINAL
    except ValueError as e:
        raise UsageError("bad date in %r: %s" % (text, e))
    if hh > 23 or mi > 59 or ss > 59:
        raise UsageError("bad time of day in %r" % text)
    secs = days * 86_400 + hh * 3600 + mi * 60 + ss
    if off not in ("Z", "z"):
        sign = 1 if off[0] == "+" else -1
        oh, om = int(off[1:3]), int(off[4:6])
        if oh > 23 or om > 59:
            raise UsageError("bad offset in %r" % text)
        secs -= sign * (oh * 3600 + om * 60)
    ns = int((frac or "").ljust(9, "0")) if frac else 0
    return secs * 1_000_000_000 + ns


def rfc3339_from_ns(ns):
    """UTC RFC 3339 with 'Z'; a fraction of 3, 6 or 9 digits only if non-zero."""
    secs, frac = divmod(ns, 1_000_000_000)
    days, rem = divmod(secs, 86_400)
    hh, rem = divmod(rem, 3600)
    mi, ss = divmod(rem, 60)
    day = datetime.date.fromordinal(days + _EPOCH_ORDINAL)
    text = "%04d-%02d-%02dT%02d:%02d:%02d" % (day.year, day.month, day.day, hh, mi, ss)
    if frac:
        if frac % 1_000_000 == 0:
            text += ".%03d" % (frac // 1_000_000)
        elif frac % 1_000 == 0:
            text += ".%06d" % (frac // 1_000)
        else:
            text += ".%09d" % frac
    return text + "Z"


# ---------------------------------------------------------------------------
# results


def stats(times):
    if not times:
        return {"median_s": None, "min_s": None, "max_s": None}
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def canonical_float(f):
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def canonical(v):
    """One Python value made comparable across systems (see the docstring)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float, decimal.Decimal)):
        return canonical_float(float(v))
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        d = v - epoch
        return float((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds)
    if isinstance(v, datetime.date):
        return float((v.toordinal() - _EPOCH_ORDINAL) * 86_400_000_000)
    if isinstance(v, datetime.timedelta):
        return float((v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [canonical(x) for x in v]
    if isinstance(v, dict):
        return {str(k): canonical(x) for k, x in v.items()}
    return str(v)


def canonical_column(pa, col):
    """A column's values as canonical Python values.

    Timestamps, dates and durations are converted from their integer
    storage, so nanoseconds and time zones never go through datetime.
    """
    typ = col.type
    if pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
        typ = col.type
    if pa.types.is_timestamp(typ) or pa.types.is_duration(typ):
        per_us = NS_PER_UNIT[typ.unit] / 1_000
        raw = col.cast(pa.int64()).to_pylist()
        return [None if x is None else float(x * per_us) for x in raw]
    if pa.types.is_date32(typ):
        raw = col.cast(pa.int32()).to_pylist()
        return [None if x is None else float(x * 86_400_000_000) for x in raw]
    if pa.types.is_date64(typ):
        raw = col.cast(pa.int64()).to_pylist()
        return [None if x is None else float(x * 1_000) for x in raw]
    return [canonical(x) for x in col.to_pylist()]


def rows_of(pa, table):
    cols = [canonical_column(pa, table.column(i)) for i in range(table.num_columns)]
    return [[c[r] for c in cols] for r in range(table.num_rows)]


# ---------------------------------------------------------------------------
# the table log (segment count)


def live_segments(root, version):
    """Live segments at version, replaying the commit files 1..version."""
    live = {}
    log_dir = os.path.join(root, "_timeseries_log")
    for v in range(1, version + 1):
        path = os.path.join(log_dir, "%010d.json" % v)
        try:
            with open(path, encoding="utf-8") as f:
                commit = json.load(f)
        except (OSError, ValueError) as e:
            raise Failure("reading commit %s: %s" % (path, e))
        for action in commit.get("actions", []):
            if "AddSegment" in action:
                seg = action["AddSegment"]
                live[seg["path"]] = seg
            elif "RemoveSegment" in action:
                live.pop(action["RemoveSegment"]["path"], None)
    return live


def ident(name):
    return '"' + name.replace('"', '""') + '"'


# ---------------------------------------------------------------------------
# modes


def run_ingest(mods, args, out):
    pa, pq, ttf = mods
    warn_unknown(
        "ingest",
        args,
        ("files", "table_root", "index_column", "granularity", "entity_columns", "index_type", "timezone", "warmup"),
    )
    files = str_list(args, "files", True)
    if not files:
        raise UsageError("argument 'files' must not be empty")
    root = req(args, "table_root", str, "a directory")
    create_args = {
        "index_column": req(args, "index_column", str, "a column name"),
        "index_type": opt(args, "index_type", str, "timestamp, int64 or uint64", "timestamp"),
        "index_granularity": req(args, "granularity", (str, int), "a granularity such as \"10s\""),
        "entity_columns": str_list(args, "entity_columns", False),
        "timezone": opt(args, "timezone", str, "an IANA zone name", None),
    }
    warmup = bool(opt(args, "warmup", (bool, int), "true or false", False))
    for f in files:
        if not os.path.isfile(f):
            raise Failure("no such file: %s" % f)
    if os.path.exists(root):
        if not os.path.isdir(root):
            raise Failure("table_root %s exists and is not a directory" % root)
        if os.listdir(root):
            raise Failure("table_root %s is not empty" % root)

    out.update({"table_root": root, "warmup_s": None})
    if warmup:
        scratch = tempfile.mkdtemp(prefix="ttf_peer_warmup_")
        try:
            t = time.perf_counter()
            tb = ttf.TimeSeriesTable.create(table_root=os.path.join(scratch, "t"), **create_args)
            tb.append(pq.read_table(files[0]))
            out["warmup_s"] = time.perf_counter() - t
            del tb
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    t = time.perf_counter()
    tb = ttf.TimeSeriesTable.create(table_root=root, **create_args)
    out["create_s"] = time.perf_counter() - t

    per_file = []
    for path in files:
        t = time.perf_counter()
        table = pq.read_table(path)
        read_s = time.perf_counter() - t
        before = tb.version()
        t = time.perf_counter()
        rep = tb.append(table)
        append_s = time.perf_counter() - t
        if rep.row_count != table.num_rows:
            raise Failure("%s: append reported %d rows, the file has %d" % (path, rep.row_count, table.num_rows))
        if rep.starting_version != before or rep.committed_version != before + 1:
            raise Failure(
                "%s: append committed %d -> %d, table was at %d"
                % (path, rep.starting_version, rep.committed_version, before)
            )
        per_file.append(
            {
                "file": path,
                "rows": table.num_rows,
                "read_s": read_s,
                "append_s": append_s,
                "committed_version": rep.committed_version,
                "segment_path": rep.segment_path,
                "segment_bytes": rep.file_size_bytes,
                "row_groups": rep.row_group_count,
                "compression": rep.compression,
            }
        )
        del table, rep

    version = ttf.TimeSeriesTable.open(root).version()
    live = live_segments(root, version)
    rows = sum(f["rows"] for f in per_file)
    total = sum(f["append_s"] for f in per_file)
    out.update(
        {
            "files": per_file,
            "rows": rows,
            "read_s": sum(f["read_s"] for f in per_file),
            "total_s": total,
            "rows_per_s": rows / total if total > 0 else None,
            "version": version,
            "segments": len(live),
            "segment_bytes": sum(int(s.get("file_size") or 0) for s in live.values()),
        }
    )


def open_session(ttf, args, out):
    root = req(args, "table_root", str, "a table directory")
    name = req(args, "table", str, "a table name")
    if not name:
        raise UsageError("argument 'table' must not be empty")
    if not os.path.isdir(os.path.join(root, "_timeseries_log")):
        raise Failure("%s is not a table (no _timeseries_log)" % root)
    tb = ttf.TimeSeriesTable.open(root)
    version = tb.version()
    sess = ttf.Session()
    t = time.perf_counter()
    sess.register_tstable(name, root)
    out.update(
        {
            "table_root": root,
            "table": name,
            "version": version,
            "segments": len(live_segments(root, version)),
            "register_s": time.perf_counter() - t,
        }
    )
    return tb, sess, name


def range_bound(pa, typ, value, key, rname):
    """SQL literal for a range bound, rounded up to the column's unit."""
    if pa.types.is_timestamp(typ):
        if not isinstance(value, str):
            raise UsageError("range %r: %s must be an RFC 3339 string or null" % (rname, key))
        unit = NS_PER_UNIT[typ.unit]
        ns = parse_rfc3339_ns(value)
        ns = -(-ns // unit) * unit  # ceil: t >= x and t < x both hold iff they do for ceil(x)
        return "TIMESTAMP '%s'" % rfc3339_from_ns(ns)
    if pa.types.is_integer(typ):
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError("range %r: %s must be an integer or null for a %s index" % (rname, key, typ))
        return str(value)
    raise Failure("index column type %s is not supported" % typ)


def run_scan(mods, args, out):
    pa, _, ttf = mods
    warn_unknown("scan", args, ("table_root", "table", "ranges", "runs", "warmup", "index_column"))
    ranges = named_list(args, "ranges", ())
    runs = count_arg(args, "runs", 5, 1)
    warmup = count_arg(args, "warmup", 1, 0)
    tb, sess, name = open_session(ttf, args, out)
    index_column = opt(args, "index_column", str, "a column name", None) or tb.index_spec()["index_column"]
    schema = sess.sql("SELECT * FROM %s LIMIT 0" % ident(name)).schema
    if index_column not in schema.names:
        raise Failure("table %s has no column %r" % (name, index_column))
    typ = schema.field(index_column).type
    out.update({"index_column": index_column, "runs": runs, "warmup": warmup, "ranges": {}})

    for r in ranges:
        rname = r["name"]
        conds = []
        if r.get("start") is not None:
            conds.append("%s >= %s" % (ident(index_column), range_bound(pa, typ, r["start"], "start", rname)))
        if r.get("end") is not None:
            conds.append("%s < %s" % (ident(index_column), range_bound(pa, typ, r["end"], "end", rname)))
        sql = "SELECT * FROM %s" % ident(name)
        if conds:
            sql += " WHERE " + " AND ".join(conds)

        times = []
        first = None
        for i in range(warmup + runs):
            t = time.perf_counter()
            reader = sess.sql_reader(sql)
            rows = nbytes = batches = 0
            for batch in reader:
                rows += batch.num_rows
                nbytes += batch.nbytes
                batches += 1
            dt = time.perf_counter() - t
            del reader
            if first is None:
                first = (rows, nbytes)
            elif rows != first[0]:
                raise Failure("range %s: %d rows, then %d" % (rname, first[0], rows))
            if i >= warmup:
                times.append(dt)
        entry = {"start": r.get("start"), "end": r.get("end"), "sql": sql, "times_s": times}
        entry.update(stats(times))
        entry.update({"rows": rows, "bytes": nbytes, "batches": batches})
        out["ranges"][rname] = entry


def run_sql(mods, args, out):
    pa, _, ttf = mods
    warn_unknown("sql", args, ("table_root", "table", "queries", "runs", "warmup"))
    queries = named_list(args, "queries", ("sql",))
    for q in queries:
        if not isinstance(q["sql"], str) or not q["sql"].strip():
            raise UsageError("query %r: \"sql\" must be a non-empty string" % q["name"])
    runs = count_arg(args, "runs", 5, 1)
    warmup = count_arg(args, "warmup", 1, 0)
    _, sess, _ = open_session(ttf, args, out)
    out.update({"runs": runs, "warmup": warmup, "queries": {}})

    for q in queries:
        qname, sql = q["name"], q["sql"]
        times = []
        kept = None
        for i in range(warmup + runs):
            t = time.perf_counter()
            res = sess.sql(sql)
            dt = time.perf_counter() - t
            if kept is not None and res.num_rows != kept.num_rows:
                raise Failure("query %s: %d rows, then %d" % (qname, kept.num_rows, res.num_rows))
            if i >= warmup:
                times.append(dt)
            if i < warmup or kept is None:
                kept = res  # the last warm-up run, or the first timed one
            del res
        entry = {"sql": sql, "times_s": times}
        entry.update(stats(times))
        entry.update(
            {
                "rows": kept.num_rows,
                "columns": kept.column_names,
                "types": [str(f.type) for f in kept.schema],
                "result": rows_of(pa, kept),
            }
        )
        out["queries"][qname] = entry


RUNNERS = {"ingest": run_ingest, "scan": run_scan, "sql": run_sql}


# ---------------------------------------------------------------------------


def peak_rss_bytes():
    """This process's peak RSS since it started running Python.

    On Linux it is VmHWM from /proc/self/status: ru_maxrss would also count
    the parent's resident memory, which the kernel carries over at exec
    when the parent spawned us with vfork (as Go does)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def main(argv):
    if len(argv) != 3 or argv[1] not in MODES:
        sys.stderr.write(__doc__)
        if len(argv) == 3:
            sys.stderr.write("\nttf_peer: unknown mode %r\n" % argv[1])
        return 2
    mode = argv[1]
    try:
        args = load_args(argv[2])
    except UsageError as e:
        sys.stderr.write("ttf_peer %s: %s\n" % (mode, e))
        return 2

    t = time.perf_counter()
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
        import timeseries_table_format as ttf
    except ImportError as e:
        sys.stderr.write("ttf_peer: %s (or pyarrow) is not installed: %s\n" % (PACKAGE, e))
        return 3
    import_s = time.perf_counter() - t

    # Only the JSON object goes to the real stdout: anything else printed
    # while running (by Python or native code) goes to stderr.
    sys.stdout.flush()
    json_fd = os.dup(1)
    os.dup2(2, 1)

    out = {
        "peer": PACKAGE,
        "mode": mode,
        "package": PACKAGE,
        "package_version": getattr(ttf, "__version__", None),
        "pyarrow_version": pa.__version__,
        "python_version": platform.python_version(),
        "import_s": import_s,
    }
    try:
        RUNNERS[mode]((pa, pq, ttf), args, out)
    except UsageError as e:
        sys.stderr.write("ttf_peer %s: %s\n" % (mode, e))
        return 2
    except Failure as e:
        sys.stderr.write("ttf_peer %s: %s\n" % (mode, e))
        return 1
    except Exception as e:  # noqa: BLE001 - every other failure is reported the same way
        sys.stderr.write("ttf_peer %s: %s: %s\n" % (mode, type(e).__name__, e))
        return 1
    finally:
        sys.stdout.flush()
        os.dup2(json_fd, 1)
        os.close(json_fd)

    out["peak_rss_bytes"] = peak_rss_bytes()
    out["wall_s"] = time.perf_counter() - _T0
    sys.stdout.write(json.dumps(out, allow_nan=False) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
