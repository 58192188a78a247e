#!/usr/bin/env python3
"""Open table directories with timeseries-table-format and report on them.

Usage: inspect_tables.py [--append-probe] DIR...

Prints one JSON object per directory, one per line:

  {"dir": DIR, "ok": true, "version": N, "index_spec": {...}}
  {"dir": DIR, "ok": false, "error": "<exception type>: <message>"}

With --append-probe the script then appends a one-row batch built to fit the
table, reopens it and adds "version_after_probe" (or "probe_skipped" with a
reason, or "probe_error" if the package rejected the batch).  The probe WRITES
to the table: point it at a copy, never at the committed fixtures.

The exit status is 0 whenever the arguments are valid, also when some table
fails to open; callers compare the printed results.  Usage errors exit 2.
"""

import datetime
import decimal
import json
import os
import sys

import pyarrow as pa
from timeseries_table_format import TimeSeriesTable

# Far away from every reference fixture.
PROBE_TIME = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
PROBE_SECONDS = int(PROBE_TIME.timestamp())
PROBE_INT = 10**15

UNIT = {"Seconds": "s", "Millis": "ms", "Micros": "us", "Nanos": "ns"}
PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}

SIMPLE_TYPES = {
    "Bool": pa.bool_(),
    "Int32": pa.int32(),
    "Int64": pa.int64(),
    "UInt64": pa.uint64(),
    "Float32": pa.float32(),
    "Float64": pa.float64(),
    "Binary": pa.binary(),
    "Utf8": pa.utf8(),
}


class Skip(Exception):
    """The probe cannot be built for this table."""


def describe(exc):
    return "%s: %s" % (type(exc).__name__, exc)


# ---------------------------------------------------------------------------
# log reading


def last_logical_schema(root):
    """logical_schema of the newest UpdateTableMeta, or None if not yet set."""
    log_dir = os.path.join(root, "_timeseries_log")
    with open(os.path.join(log_dir, "CURRENT"), encoding="utf-8") as f:
        current = int(f.read().strip())
    for v in range(current, 0, -1):
        with open(os.path.join(log_dir, "%010d.json" % v), encoding="utf-8") as f:
            commit = json.load(f)
        for action in reversed(commit.get("actions", [])):
            meta = action.get("UpdateTableMeta")
            if meta is not None:
                return meta.get("logical_schema")
    raise Skip("no UpdateTableMeta found in the log")


# ---------------------------------------------------------------------------
# logical schema -> pyarrow


def arrow_field(col):
    return pa.field(
        col["name"],
        arrow_type(col["data_type"]),
        nullable=bool(col.get("nullable", True)),
        metadata=col.get("metadata") or None,
    )


def arrow_type(dt):
    if isinstance(dt, str):
        if dt in SIMPLE_TYPES:
            return SIMPLE_TYPES[dt]
        raise Skip("unsupported logical type %r" % dt)
    if not isinstance(dt, dict) or len(dt) != 1:
        raise Skip("unrecognised logical type %s" % json.dumps(dt))
    (tag, body), = dt.items()
    if tag == "Timestamp":
        if body.get("unit") not in UNIT:
            raise Skip("unsupported timestamp unit %r" % body.get("unit"))
        return pa.timestamp(UNIT[body["unit"]], tz=body.get("timezone"))
    if tag == "FixedBinary":
        return pa.binary(int(body["byte_width"]))
    if tag == "Decimal":
        p, s = int(body["precision"]), int(body["scale"])
        return pa.decimal128(p, s) if p <= 38 else pa.decimal256(p, s)
    if tag == "Struct":
        return pa.struct([arrow_field(c) for c in body["fields"]])
    if tag == "List":
        return pa.list_(arrow_field(body["elements"]))
    if tag == "Map":
        return pa.map_(
            arrow_field(body["key"]),
            arrow_field(body["value"]),
            keys_sorted=bool(body.get("keys_sorted", False)),
        )
    raise Skip("unsupported logical type %s" % json.dumps(dt))


def filler(typ):
    """A valid non-null Python value of an Arrow type."""
    if pa.types.is_boolean(typ):
        return False
    if pa.types.is_integer(typ) or pa.types.is_floating(typ):
        return 0
    if pa.types.is_timestamp(typ):
        return 0
    if pa.types.is_fixed_size_binary(typ):
        return b"\x00" * typ.byte_width
    if pa.types.is_binary(typ):
        return b""
    if pa.types.is_string(typ):
        return ""
    if pa.types.is_decimal(typ):
        return decimal.Decimal(0)
    if pa.types.is_struct(typ):
        return {
            typ.field(i).name: (None if typ.field(i).nullable else filler(typ.field(i).type))
            for i in range(typ.num_fields)
        }
    if pa.types.is_list(typ) or pa.types.is_map(typ):
        return []
    raise Skip("no filler value for %s" % typ)


# ---------------------------------------------------------------------------
# probe batch


def index_value(spec, typ):
    kind = spec["index_type"]
    if kind == "timestamp":
        if not pa.types.is_timestamp(typ):
            raise Skip("index column has type %s, spec says timestamp" % typ)
        return PROBE_SECONDS * PER_SECOND[typ.unit]
    if kind in ("int64", "uint64"):
        return PROBE_INT
    raise Skip("unknown index_type %r" % kind)


def entity_value(typ):
    if pa.types.is_string(typ):
        return "probe"
    if pa.types.is_integer(typ):
        return 4242
    raise Skip("no probe value for entity type %s" % typ)


def probe_batch(root, spec):
    index_col = spec["index_column"]
    entities = list(spec.get("entity_columns") or [])
    logical = last_logical_schema(root)

    if logical is None:
        # No canonical schema yet: the first append defines it.
        idx_type = {
            "timestamp": pa.timestamp("ms"),
            "int64": pa.int64(),
            "uint64": pa.uint64(),
        }.get(spec["index_type"])
        if idx_type is None:
            raise Skip("unknown index_type %r" % spec["index_type"])
        fields = [pa.field(index_col, idx_type)] + [pa.field(e, pa.utf8()) for e in entities]
        values = [index_value(spec, idx_type)] + ["probe"] * len(entities)
        schema = pa.schema(fields)
    else:
        fields = [arrow_field(c) for c in logical.get("columns", [])]
        names = [f.name for f in fields]
        missing = [n for n in [index_col] + entities if n not in names]
        if missing:
            raise Skip("logical_schema lacks key columns %s" % missing)
        values = []
        for f in fields:
            if f.name == index_col:
                values.append(index_value(spec, f.type))
            elif f.name in entities:
                values.append(entity_value(f.type))
            elif f.nullable:
                values.append(None)
            else:
                values.append(filler(f.type))
        schema = pa.schema(fields, metadata=logical.get("metadata") or None)

    arrays = []
    for f, v in zip(fields, values):
        try:
            arrays.append(pa.array([v], type=f.type))
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise Skip("cannot build column %r of type %s: %s" % (f.name, f.type, e))
    return pa.record_batch(arrays, schema=schema)


# ---------------------------------------------------------------------------


def inspect(path, probe):
    out = {"dir": path}
    try:
        tb = TimeSeriesTable.open(path)
        out["ok"] = True
        out["version"] = tb.version()
        out["index_spec"] = tb.index_spec()
    except Exception as e:  # report every failure, the caller compares
        out["ok"] = False
        out["error"] = describe(e)
        return out
    if not probe:
        return out
    try:
        batch = probe_batch(path, out["index_spec"])
    except Skip as e:
        out["probe_skipped"] = str(e)
        return out
    except (OSError, ValueError, KeyError, TypeError) as e:
        out["probe_skipped"] = "cannot read log: " + describe(e)
        return out
    try:
        tb.append(batch)
        out["version_after_probe"] = TimeSeriesTable.open(path).version()
    except Exception as e:
        out["probe_error"] = describe(e)
    return out


def main(argv):
    args = argv[1:]
    probe = False
    dirs = []
    for a in args:
        if a == "--append-probe":
            probe = True
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        elif a.startswith("-"):
            print("unknown option %s" % a, file=sys.stderr)
            dirs = []
            break
        else:
            dirs.append(a)
    if not dirs:
        print("usage: %s [--append-probe] DIR..." % os.path.basename(argv[0]), file=sys.stderr)
        return 2
    for d in dirs:
        print(json.dumps(inspect(d, probe), ensure_ascii=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
