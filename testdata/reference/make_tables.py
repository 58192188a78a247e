#!/usr/bin/env python3
"""Generate reference tables with the Python package timeseries-table-format.

Usage: make_tables.py OUT_DIR

For every table NAME this writes OUT_DIR/NAME/ (the table itself) and
OUT_DIR/NAME.expected.json (what the Go implementation should read back).

The inputs are fixed, so two runs differ only in the random parts of file
names (segment UUIDs, coverage ids) and in the commit timestamps.

The index_min / index_max values in the expected files are computed here from
the data that was appended, independently of what the package wrote to its
log.  The reader/writer feature lists are what this script expects the
package to declare for the operations it performed; they are checked against
the last UpdateTableMeta action in the log and the script exits non-zero if
they disagree.
"""

import decimal
import json
import os
import sys

import pyarrow as pa
import timeseries_table_format as ttf
from timeseries_table_format import TimeSeriesTable

EXPECTED_PACKAGE_VERSION = "0.9.0"

NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}

H_MS = 3_600_000
DAY_MS = 24 * H_MS
# 2024-06-01T00:00:00Z
BASE_S = 1_717_200_000
BASE_MS = BASE_S * 1000
BASE_NS = BASE_S * 1_000_000_000


class Failure(Exception):
    pass


# ---------------------------------------------------------------------------
# helpers


def rfc3339_from_ns(ns):
    """UTC RFC 3339 with 'Z'; fraction of 3/6/9 digits only if non-zero."""
    secs, frac = divmod(ns, 1_000_000_000)
    days, rem = divmod(secs, 86_400)
    hh, rem = divmod(rem, 3600)
    mi, ss = divmod(rem, 60)
    y, mo, d = civil_from_days(days)
    text = "%04d-%02d-%02dT%02d:%02d:%02d" % (y, mo, d, hh, mi, ss)
    if frac:
        if frac % 1_000_000 == 0:
            text += ".%03d" % (frac // 1_000_000)
        elif frac % 1_000 == 0:
            text += ".%06d" % (frac // 1_000)
        else:
            text += ".%09d" % frac
    return text + "Z"


def civil_from_days(z):
    """Proleptic Gregorian date for a count of days since 1970-01-01."""
    z += 719_468
    era = (z if z >= 0 else z - 146_096) // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def index_bounds(batch, index_column):
    """Min/max of the index column of an appended batch, in expected-file form."""
    col = batch.column(batch.schema.get_field_index(index_column))
    typ = col.type
    if pa.types.is_timestamp(typ):
        # Cast to the raw integer storage so no Python datetime rounding occurs.
        raw = [v for v in col.cast(pa.int64()).to_pylist() if v is not None]
        scale = NS_PER_UNIT[typ.unit]
        return rfc3339_from_ns(min(raw) * scale), rfc3339_from_ns(max(raw) * scale)
    raw = [v for v in col.to_pylist() if v is not None]
    return min(raw), max(raw)


def table_relative(root, path):
    """Normalise a segment path reported by the package to a table-relative one."""
    if os.path.isabs(path):
        path = os.path.relpath(path, os.path.abspath(root))
    path = path.replace(os.sep, "/")
    if path.startswith("./"):
        path = path[2:]
    if path.startswith("../") or path.startswith("/"):
        raise Failure("segment path %r is not inside table root %r" % (path, root))
    return path


def read_commits(root):
    log_dir = os.path.join(root, "_timeseries_log")
    with open(os.path.join(log_dir, "CURRENT"), encoding="utf-8") as f:
        current = int(f.read().strip())
    commits = []
    for v in range(1, current + 1):
        with open(os.path.join(log_dir, "%010d.json" % v), encoding="utf-8") as f:
            commits.append(json.load(f))
    return current, commits


def last_table_meta(commits):
    for commit in reversed(commits):
        for action in reversed(commit["actions"]):
            if "UpdateTableMeta" in action:
                return action["UpdateTableMeta"]
    raise Failure("no UpdateTableMeta in log")


class Builder:
    """Creates one table and records what is expected of it."""

    def __init__(self, out_dir, name, **create_args):
        self.name = name
        self.root = os.path.join(out_dir, name)
        self.out_dir = out_dir
        if os.path.exists(self.root):
            raise Failure("%s already exists; delete it first" % self.root)
        self.index_column = create_args["index_column"]
        self.tb = TimeSeriesTable.create(table_root=self.root, **create_args)
        self.segments = []
        self.reader_features = set()
        self.writer_features = set()

    def append(self, batch):
        before = self.tb.version()
        rep = self.tb.append(batch)
        if rep.starting_version != before or rep.committed_version != before + 1:
            raise Failure(
                "%s: append versions %d->%d, table was at %d"
                % (self.name, rep.starting_version, rep.committed_version, before)
            )
        if rep.row_count != batch.num_rows:
            raise Failure(
                "%s: report row_count %d != %d appended"
                % (self.name, rep.row_count, batch.num_rows)
            )
        path = table_relative(self.root, rep.segment_path)
        size = os.path.getsize(os.path.join(self.root, path))
        if size != rep.file_size_bytes:
            raise Failure(
                "%s: file_size_bytes %d but %s is %d bytes"
                % (self.name, rep.file_size_bytes, path, size)
            )
        lo, hi = index_bounds(batch, self.index_column)
        self.segments.append(
            {
                "path": path,
                "row_count": rep.row_count,
                "file_size": rep.file_size_bytes,
                "index_min": lo,
                "index_max": hi,
            }
        )
        if any(f.metadata for f in batch.schema) or batch.schema.metadata:
            self.reader_features.add("schema_metadata")
            self.writer_features.add("schema_metadata")
        return rep

    def add_columns(self, schema):
        before = self.tb.version()
        v = self.tb.add_columns(schema)
        if v != before + 1:
            raise Failure("%s: add_columns returned %d, was at %d" % (self.name, v, before))
        # 0.9.0 requires this feature of readers only: writers that do not know
        # it still produce valid appends (they must supply every column).
        self.reader_features.add("schema_add_columns")
        return v

    def finish(self):
        # Re-open from disk so the expectation reflects the persisted state.
        tb = TimeSeriesTable.open(self.root)
        current, commits = read_commits(self.root)
        if tb.version() != current or tb.version() != self.tb.version():
            raise Failure(
                "%s: version mismatch open=%d CURRENT=%d handle=%d"
                % (self.name, tb.version(), current, self.tb.version())
            )
        meta = last_table_meta(commits)
        want_r = sorted(self.reader_features)
        want_w = sorted(self.writer_features)
        got_r = sorted(meta.get("required_reader_features") or [])
        got_w = sorted(meta.get("required_writer_features") or [])
        if (want_r, want_w) != (got_r, got_w):
            raise Failure(
                "%s: feature mismatch: expected reader=%s writer=%s, log has reader=%s writer=%s"
                % (self.name, want_r, want_w, got_r, got_w)
            )
        schema = meta.get("logical_schema") or {}
        columns = [c["name"] for c in schema.get("columns", [])]
        # Cross-check the log's live segments against the reports (paths only;
        # the index bounds are deliberately not taken from the log).
        logged = []
        for commit in commits:
            for action in commit["actions"]:
                if "AddSegment" in action:
                    logged.append(action["AddSegment"]["path"])
        if logged != [s["path"] for s in self.segments]:
            raise Failure("%s: log segments %s != reported %s" % (self.name, logged, self.segments))
        expected = {
            "name": self.name,
            "version": tb.version(),
            "index_spec": tb.index_spec(),
            "columns": columns,
            "segments": self.segments,
            "reader_features": want_r,
            "writer_features": want_w,
        }
        with open(
            os.path.join(self.out_dir, self.name + ".expected.json"), "w", encoding="utf-8"
        ) as f:
            json.dump(expected, f, indent=2, ensure_ascii=True)
            f.write("\n")
        total = sum(s["file_size"] for s in self.segments)
        print(
            "%-16s version=%d segments=%d rows=%d bytes=%d columns=%d reader=%s writer=%s"
            % (
                self.name,
                expected["version"],
                len(self.segments),
                sum(s["row_count"] for s in self.segments),
                total,
                len(columns),
                want_r,
                want_w,
            )
        )


def ts_ms(values):
    return pa.array(values, pa.timestamp("ms"))


# ---------------------------------------------------------------------------
# tables


def make_ts_entity(out):
    b = Builder(
        out,
        "ts_entity",
        index_column="ts",
        index_type="timestamp",
        index_granularity="1h",
        entity_columns=["symbol"],
        timezone="America/New_York",
    )
    n = 240
    b.append(
        pa.record_batch(
            {
                "ts": ts_ms([BASE_MS + i * H_MS for i in range(n)]),
                "symbol": pa.array(["NVDA"] * n, pa.utf8()),
                "close": pa.array([100.0 + i * 0.25 for i in range(n)], pa.float64()),
            }
        )
    )
    ts, sym, close = [], [], []
    for i in range(24):
        for s, base in (("AAPL", 190.0), ("MSFT", 410.0)):
            ts.append(BASE_MS + i * H_MS)
            sym.append(s)
            close.append(base + i * 0.5)
    b.append(
        pa.record_batch(
            {
                "ts": ts_ms(ts),
                "symbol": pa.array(sym, pa.utf8()),
                "close": pa.array(close, pa.float64()),
            }
        )
    )
    b.finish()


def make_ts_plain(out):
    b = Builder(
        out,
        "ts_plain",
        index_column="ts",
        index_type="timestamp",
        index_granularity="10s",
    )
    s = 1_000_000_000
    # One row per 10 s interval.  The minimum has a nanosecond fraction and the
    # maximum a millisecond one, so both formatting paths show up in the bounds.
    values = [
        BASE_NS + 123_456_789,  # 00:00:00.123456789
        BASE_NS + 10 * s,  # 00:00:10
        BASE_NS + 20 * s + 100_000_000,  # 00:00:20.100
    ]
    labels = [
        '<>&"\\ \u2028 ctl\x01 tab\t',
        None,
        "caf\u00e9 \U0001f600",
    ]
    b.append(
        pa.record_batch(
            {
                "ts": pa.array(values, pa.timestamp("ns", tz="UTC")),
                "label": pa.array(labels, pa.utf8()),
            }
        )
    )
    b.finish()


def make_int64(out):
    b = Builder(out, "int64", index_column="k", index_type="int64", index_granularity=10)
    b.append(
        pa.record_batch(
            {
                "k": pa.array([-100, -5, 0, 15], pa.int64()),
                "v": pa.array([1.5, -2.5, 0.0, 15.0], pa.float64()),
            }
        )
    )
    b.append(
        pa.record_batch(
            {
                "k": pa.array([1000, 2**62], pa.int64()),
                "v": pa.array([10.0, None], pa.float64()),
            }
        )
    )
    b.finish()


def make_uint64(out):
    b = Builder(out, "uint64", index_column="k", index_type="uint64", index_granularity=7)
    b.append(
        pa.record_batch(
            {
                "k": pa.array([0, 2**64 - 1], pa.uint64()),
                "v": pa.array(["zero", "max"], pa.utf8()),
            }
        )
    )
    b.finish()


def make_add_columns(out):
    b = Builder(
        out,
        "add_columns",
        index_column="ts",
        index_type="timestamp",
        index_granularity="1d",
        entity_columns=["host"],
    )
    b.append(
        pa.record_batch(
            {
                "ts": ts_ms([BASE_MS, BASE_MS, BASE_MS + DAY_MS]),
                "host": pa.array(["a", "b", "a"], pa.utf8()),
                "cpu": pa.array([0.5, 0.25, 0.75], pa.float64()),
            }
        )
    )
    b.add_columns(pa.schema([pa.field("score", pa.float64(), nullable=True)]))
    # Omits the new nullable column.
    b.append(
        pa.record_batch(
            {
                "ts": ts_ms([BASE_MS + 2 * DAY_MS, BASE_MS + 2 * DAY_MS]),
                "host": pa.array(["a", "b"], pa.utf8()),
                "cpu": pa.array([0.125, 0.875], pa.float64()),
            }
        )
    )
    # Supplies it, including a null.
    b.append(
        pa.record_batch(
            {
                "ts": ts_ms([BASE_MS + 3 * DAY_MS, BASE_MS + 3 * DAY_MS]),
                "host": pa.array(["a", "b"], pa.utf8()),
                "cpu": pa.array([0.0625, 1.0], pa.float64()),
                "score": pa.array([9.5, None], pa.float64()),
            }
        )
    )
    b.finish()


def make_schema_metadata(out):
    b = Builder(
        out,
        "schema_metadata",
        index_column="ts",
        index_type="timestamp",
        index_granularity="1h",
        entity_columns=["site"],
    )
    schema = pa.schema(
        [
            pa.field("ts", pa.timestamp("ms"), metadata={"role": "index"}),
            pa.field("site", pa.utf8(), metadata={"role": "entity", "note": "caf\u00e9"}),
            pa.field("temp", pa.float64(), metadata={"unit": "degC"}),
        ],
        metadata={"origin": "tsflight-reference", "schema_rev": "3"},
    )
    batch = pa.record_batch(
        [
            ts_ms([BASE_MS, BASE_MS + H_MS, BASE_MS]),
            pa.array(["x", "x", "y"], pa.utf8()),
            pa.array([20.5, 21.0, None], pa.float64()),
        ],
        schema=schema,
    )
    b.append(batch)
    b.finish()


def make_all_types(out):
    b = Builder(
        out,
        "all_types",
        index_column="ts",
        index_type="timestamp",
        index_granularity="1d",
        entity_columns=["e_str", "e_i32", "e_u64"],
    )
    dec = decimal.Decimal
    point = pa.struct(
        [
            pa.field("x", pa.int32(), nullable=False),
            pa.field("label", pa.utf8(), nullable=True),
        ]
    )
    fields = [
        # Microsecond index: the bounds get a 6-digit fraction.
        pa.field("ts", pa.timestamp("us"), nullable=False),
        pa.field("e_str", pa.utf8(), nullable=False),
        pa.field("e_i32", pa.int32(), nullable=False),
        pa.field("e_u64", pa.uint64(), nullable=False),
        pa.field("c_bool", pa.bool_(), nullable=True),
        pa.field("c_i32", pa.int32(), nullable=False),
        pa.field("c_i64", pa.int64(), nullable=True),
        pa.field("c_u64", pa.uint64(), nullable=True),
        pa.field("c_f32", pa.float32(), nullable=True),
        pa.field("c_f64", pa.float64(), nullable=False),
        pa.field("c_bin", pa.binary(), nullable=True),
        pa.field("c_fsb", pa.binary(2), nullable=True),
        pa.field("c_str", pa.utf8(), nullable=True),
        pa.field("c_dec128", pa.decimal128(10, 2), nullable=True),
        pa.field("c_dec256", pa.decimal256(40, 2), nullable=True),
        pa.field("c_struct", point, nullable=True),
        pa.field("c_list", pa.list_(pa.int64()), nullable=True),
        pa.field("c_map", pa.map_(pa.utf8(), pa.int64()), nullable=True),
        pa.field("c_ts_us", pa.timestamp("us"), nullable=True),
        pa.field("c_ts_ns_tz", pa.timestamp("ns", tz="+05:00"), nullable=True),
    ]
    schema = pa.schema(fields)
    rows = 3
    data = {
        "ts": [
            BASE_MS * 1000 + 250,  # 2024-06-01T00:00:00.000250
            (BASE_MS + DAY_MS) * 1000 + 500,  # 2024-06-02T00:00:00.000500
            BASE_MS * 1000,  # 2024-06-01T00:00:00
        ],
        "e_str": ["alpha", "alpha", "beta"],
        "e_i32": [-7, -7, 2**31 - 1],
        "e_u64": [2**64 - 1, 2**64 - 1, 0],
        "c_bool": [True, None, False],
        "c_i32": [-(2**31), 0, 2**31 - 1],
        "c_i64": [-(2**63), None, 2**63 - 1],
        "c_u64": [0, 2**64 - 1, None],
        "c_f32": [1.5, None, -0.25],
        "c_f64": [3.141592653589793, -0.0, 1e300],
        "c_bin": [b"\x00\xff", None, b""],
        "c_fsb": [b"ab", b"\x00\x01", None],
        "c_str": ["plain", None, "\u00fcn\u00efc\u00f8de"],
        "c_dec128": [dec("12345678.90"), dec("-0.01"), None],
        "c_dec256": [dec("12345678901234567890123456789012345678.99"), None, dec("0.00")],
        "c_struct": [{"x": 1, "label": "one"}, None, {"x": -2, "label": None}],
        "c_list": [[1, 2, 3], [], None],
        "c_map": [[("a", 1), ("b", 2)], None, []],
        "c_ts_us": [BASE_S * 1_000_000 + 1, None, BASE_S * 1_000_000],
        "c_ts_ns_tz": [BASE_NS + 5, BASE_NS, None],
    }
    arrays = [pa.array(data[f.name], f.type) for f in fields]
    batch = pa.record_batch(arrays, schema=schema)
    assert batch.num_rows == rows
    b.append(batch)
    b.finish()


TABLES = [
    make_ts_entity,
    make_ts_plain,
    make_int64,
    make_uint64,
    make_add_columns,
    make_schema_metadata,
    make_all_types,
]


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print("usage: %s OUT_DIR" % os.path.basename(argv[0]), file=sys.stderr)
        return 2
    if ttf.__version__ != EXPECTED_PACKAGE_VERSION:
        print(
            "error: timeseries-table-format %s installed, fixtures are defined for %s"
            % (ttf.__version__, EXPECTED_PACKAGE_VERSION),
            file=sys.stderr,
        )
        return 1
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    try:
        for make in TABLES:
            make(out)
    except Failure as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
