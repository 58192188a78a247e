#!/usr/bin/env python3
"""Browse the server's catalog through ADBC (Flight SQL metadata calls) and
check it against the plain Flight side.

  python3 metadata_adbc.py grpc://127.0.0.1:8815 TABLE

Flight SQL sees one catalog, tsflight, with one schema, main, holding every
table of the root as a TABLE. One PASS/FAIL line per check:

* conn.adbc_get_objects(depth="all"): catalog tsflight, schema main, TABLE
  with type TABLE and its columns in order; every table of ListFlights is
  there; the same with catalog/schema/table filters;
* conn.adbc_get_table_schema(TABLE) has the field names and types of the
  plain Flight GetSchema of TABLE (a PATH descriptor);
* cursor.adbc_execute_schema("SELECT * FROM TABLE") has its field names;
* conn.adbc_get_info() has vendor_name and vendor_version;
* conn.adbc_get_table_types() contains TABLE.
"""

import pyarrow.flight as flight

from common import Checks, adbc_connect, connect, main, sql_scalar

CATALOG, SCHEMA = "tsflight", "main"


def describe(schema):
    return ", ".join("%s %s" % (f.name, f.type) for f in schema)


def tables_of(objects):
    """{(catalog, schema, table): (table_type, [column names by ordinal position])}."""
    found = {}
    for cat in objects:
        for sch in cat["catalog_db_schemas"] or []:
            for tab in sch["db_schema_tables"] or []:
                cols = sorted(tab["table_columns"] or [], key=lambda c: c["ordinal_position"] or 0)
                found[(cat["catalog_name"], sch["db_schema_name"], tab["table_name"])] = (
                    tab["table_type"], [c["column_name"] for c in cols])
    return found


def check_objects(checks, conn, name, schema, listed):
    objects = conn.adbc_get_objects(depth="all").read_all().to_pylist()
    found = tables_of(objects)
    catalogs = ["%s: schemas %s" % (c["catalog_name"], ", ".join(
        s["db_schema_name"] for s in c["catalog_db_schemas"] or []) or "none") for c in objects]
    print("adbc_get_objects: %s; %d tables" % ("; ".join(catalogs), len(found)))
    schemas = {(c["catalog_name"], s["db_schema_name"]) for c in objects for s in c["catalog_db_schemas"] or []}
    checks.ok("get_objects has catalog %s, schema %s" % (CATALOG, SCHEMA), (CATALOG, SCHEMA) in schemas,
              ", ".join("%s.%s" % cs for cs in sorted(schemas, key=repr)))

    key = (CATALOG, SCHEMA, name)
    if checks.ok("get_objects lists %s.%s.%s" % key, key in found):
        table_type, columns = found[key]
        checks.equal("get_objects %s table_type" % name, table_type, "TABLE")
        checks.equal("get_objects %s columns = Flight schema" % name, columns, schema.names)
    missing = sorted(t for t in listed if (CATALOG, SCHEMA, t) not in found)
    checks.ok("get_objects lists every ListFlights table", not missing,
              "%d tables" % len(listed) if not missing else "missing: " + ", ".join(missing))

    filtered = conn.adbc_get_objects(depth="tables", catalog_filter=CATALOG, db_schema_filter=SCHEMA,
                                     table_name_filter=name).read_all().to_pylist()
    names = sorted(t for (_, _, t) in tables_of(filtered))
    # Filters are LIKE patterns: "_" matches any character, so similar
    # names may come too.
    checks.ok("get_objects with catalog/schema/table filters", name in names, ", ".join(names) or "no tables")


def check_table_schema(checks, conn, name, schema):
    for label, kwargs in (("", {}), (" (catalog/schema given)", {"catalog_filter": CATALOG, "db_schema_filter": SCHEMA})):
        got = conn.adbc_get_table_schema(name, **kwargs)
        print("adbc_get_table_schema(%r%s): %s" % (name, "".join(", %s=%r" % kv for kv in kwargs.items()), describe(got)))
        same = [(f.name, f.type) for f in got] == [(f.name, f.type) for f in schema]
        checks.ok("get_table_schema%s = Flight GetSchema names and types" % label, same,
                  describe(got) if same else "got %s; Flight: %s" % (describe(got), describe(schema)))
        if same and not got.equals(schema, check_metadata=True):
            print("  note: nullability or field metadata differ from Flight's: %s" % ", ".join(
                "%s nullable=%s" % (f.name, f.nullable) for f in got))


def check_execute_schema(checks, conn, name, schema):
    with conn.cursor() as cur:
        got = cur.adbc_execute_schema("SELECT * FROM %s" % name)
    print("adbc_execute_schema(SELECT * FROM %s): %s" % (name, describe(got)))
    checks.equal("execute_schema SELECT * field names = Flight schema", got.names, schema.names)


def check_info(checks, conn):
    info = conn.adbc_get_info()
    print("adbc_get_info: %s" % ", ".join("%s=%r" % (k, info[k]) for k in sorted(info, key=str)))
    for key in ("vendor_name", "vendor_version"):
        value = info.get(key)
        checks.ok("get_info %s" % key, isinstance(value, str) and value != "", repr(value))


def check_table_types(checks, conn):
    types = conn.adbc_get_table_types()
    checks.ok("get_table_types contains TABLE", "TABLE" in types, ", ".join(types))


def run(url, name):
    client = connect(url)
    schema = client.get_schema(flight.FlightDescriptor.for_path(name)).schema
    listed = sorted(i.descriptor.path[0].decode() for i in client.list_flights())
    print("plain Flight: GetSchema %s: %s; ListFlights: %d tables" % (name, describe(schema), len(listed)))

    conn = adbc_connect(url)
    try:
        sql_scalar(conn, "SELECT 1")  # the connection check: stop here if it fails
        checks = Checks()
        checks.run("get_objects", check_objects, checks, conn, name, schema, listed)
        checks.run("get_table_schema", check_table_schema, checks, conn, name, schema)
        checks.run("execute_schema", check_execute_schema, checks, conn, name, schema)
        checks.run("get_info", check_info, checks, conn)
        checks.run("get_table_types", check_table_types, checks, conn)
    finally:
        conn.close()
    checks.done()


if __name__ == "__main__":
    main(run, "SERVER_URL TABLE")
