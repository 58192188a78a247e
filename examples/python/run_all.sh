#!/usr/bin/env bash
# Runs the pyarrow.flight examples in order against a running server and
# checks their output, then the ADBC (Flight SQL) ones: ingest_adbc.py and
# prepared_adbc.py always, metadata_adbc.py with REF_TABLE, sql_adbc.py with REF_TABLE and
# REF_EXPECTED_JSON (the ADBC packages of .ci/requirements.txt must be
# installed).
#
#   run_all.sh SERVER_URL [REF_TABLE [REF_EXPECTED_JSON]]
#
# The server's root must not hold tables named cpu or mem yet (start it on
# an empty root): the examples create them, and every number they print is
# fixed. With REF_TABLE (a table written by timeseries-table-format 0.9.0
# under the server's root) check_reference_table.py runs on it too; with
# REF_EXPECTED_JSON (the NAME.expected.json that
# testdata/reference/make_tables.py writes beside the table) its version,
# segment count and row count are checked against that file.
#
# The pytest files come last: test_bad_input.py (with TSFLIGHT_ROOT, the
# server's root, it also proves each case wrote nothing) and
# test_damaged_listing.py, which lays out damaged tables and phantom
# directories in a root itself. With TSFLIGHT_BIN (a tsflight binary) it
# gets a server of its own on a fresh root, started and stopped here (one
# more check: the server stops cleanly); without, it runs on SERVER_URL
# under names of its own that it removes at the end, and TSFLIGHT_ROOT must
# name that server's root. With TSFLIGHT_BIN, test_stall.py runs last:
# stalled DoGet streams against the stream budget, on servers it starts
# itself from that binary (--demo, a 64 MiB budget, a 2 s stall timeout);
# without TSFLIGHT_BIN it is skipped (a line says so; no check counted).
#
# Prints each script's output, a line per failed check and finally
# "N passed, N failed"; exits 1 if any check failed, 2 on bad usage.
# TSFLIGHT_PYTHON names the interpreter (default python3).
set -uo pipefail

if [ $# -lt 1 ] || [ $# -gt 3 ] || [[ "$1" == -* ]]; then
  echo "usage: $0 SERVER_URL [REF_TABLE [REF_EXPECTED_JSON]]" >&2
  exit 2
fi
url="$1"
ref_table="${2:-}"
ref_expected="${3:-}"
here="$(cd "$(dirname "$0")" && pwd)"
py="${TSFLIGHT_PYTHON:-python3}"

passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# check SCRIPT ARGS... -- EXPECTED_SUBSTRING...
# Runs SCRIPT; one check for its exit code, one per expected substring
# (matched literally with grep -F against stdout and stderr).
check() {
  local script="$1"; shift
  local args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  local out rc
  echo "== $script ${args[*]}"
  out="$("$py" "$here/$script" "${args[@]}" 2>&1)"
  rc=$?
  printf '%s\n' "$out" | sed 's/^/   /'
  if [ "$rc" -eq 0 ]; then pass; else fail "$script exited $rc"; fi
  local want
  for want in "$@"; do
    if grep -qF -- "$want" <<<"$out"; then
      pass
    else
      fail "$script: expected output not found: $want"
    fi
  done
}

check create_and_put.py "$url" -- \
  'create-table cpu: {"table":"cpu","version":1}' \
  'put PATH [cpu] 1020 rows: {"version":2,"rows":1020,"segment":"data/_managed/append/' \
  'put CMD {table: cpu, create} 1080 rows: {"version":3,"rows":1080,"segment":' \
  'put CMD {table: mem, create} 180 rows: {"version":2,"rows":180,"segment":' \
  'tables: cpu, mem'

check scan_range.py "$url" -- \
  'scan request: {"table":"cpu","start":"2024-06-01T00:15:00Z","end":"2024-06-01T01:15:00Z","columns":["ts","host","usage"]}' \
  '(schema: ts, host, usage)' \
  'rows: 1020' \
  'first ts: 2024-06-01T00:15:00Z, last ts: 2024-06-01T01:14:50Z' \
  'sum(usage): 24645.0' \
  'rows per host: db1=300, web1=360, web2=360' \
  'rows for host db1: 300'

check coverage_gaps.py "$url" -- \
  'coverage cpu [2024-06-01T00:00:00Z, 2024-06-01T02:00:00Z): ratio=0.9722 covered=2100 expected=2160 identities=3' \
  'coverage cpu host=db1: ratio=0.9167 covered=660 expected=720' \
  'gaps cpu host=db1: 1' \
  'gap 2024-06-01T00:20:00Z .. 2024-06-01T00:30:00Z (60 intervals)' \
  'gaps cpu (all hosts) until 2024-06-01T02:30:00Z: 2' \
  'gap 2024-06-01T02:00:00Z .. 2024-06-01T02:30:00Z (180 intervals)' \
  'missing_intervals=240 truncated=False' \
  'longest: 2024-06-01T02:00:00Z .. 2024-06-01T02:30:00Z; last covered: 2024-06-01T00:30:00Z .. 2024-06-01T02:00:00Z'

check add_columns.py "$url" -- \
  'cpu before: version 3, 2100 rows, columns ts, host, usage' \
  'add-columns temp_c float64: {"table":"cpu","version":4}' \
  'put without temp_c, 60 rows: version 5' \
  'put with temp_c, 60 rows: version 6' \
  "cpu after: version 6, 2220 rows, columns ts, host, usage, temp_c, reader features ['schema_add_columns']" \
  'old rows (before 2024-06-01T02:00:00Z): 2100, temp_c null in 2100' \
  'new rows: 120, temp_c null in 60, sum(temp_c) = 2450.50'

check last_values.py "$url" -- \
  'last cpu: 3 hosts, columns ts, host, usage, temp_c' \
  'db1: ts=2024-06-01T01:59:50+00:00 usage=49.5 temp_c=None' \
  'web1: ts=2024-06-01T02:19:50+00:00 usage=29.5 temp_c=40.75' \
  'web2: ts=2024-06-01T01:59:50+00:00 usage=39.5 temp_c=None' \
  'last cpu host=db1 [ts, usage]: ts=2024-06-01T01:59:50+00:00 usage=49.5 (1 row)'

# The ADBC (Flight SQL) examples: bulk ingest into fresh uniquely named
# tables, so they can run on any root.
check ingest_adbc.py "$url" -- \
  'PASS ingest A mode="create" (headers on the statement)' \
  'PASS A rows: count(*) = 120 (want 120), max(ts) = 2024-06-01T00:00:59Z' \
  "PASS A index spec from the headers: ('ts', 'timestamp', '1s', ['host'])" \
  'PASS ingest A mode="append"' \
  'PASS A rows: count(*) = 240 (want 240), max(ts) = 2024-06-01T00:01:59Z' \
  'PASS ingest A mode="create_append" (table exists)' \
  'PASS A rows: count(*) = 360 (want 360), max(ts) = 2024-06-01T00:02:59Z' \
  'PASS ingest A mode="create" (table exists) refused' \
  'PASS ingest A mode="replace" refused' \
  'PASS ingest C mode="create" without the headers refused' \
  'PASS C not created' \
  'PASS ingest B mode="create_append" (new table, headers on the connection)' \
  'PASS B rows: count(*) = 120 (want 120), max(ts) = 2024-06-01T00:00:59Z' \
  '14 checks passed, 0 failed'

# Prepared statements (no table needed): results typed by their
# parameters, one statement executed again.
check prepared_adbc.py "$url" -- \
  "PASS SELECT ? + 1 with 41: [{'(\$1 + 1)': 42}]" \
  "PASS SELECT ? AS a, ? + 1, 'x' AS b with ('s', 1)" \
  'PASS SELECT ? AS v, ? AS v with (1, 2)' \
  'PASS one prepared statement executed 20 times' \
  'PASS SELECT 1 on new cursors' \
  '5 checks passed, 0 failed'

if [ -n "$ref_table" ]; then
  want=()
  if [ -n "$ref_expected" ]; then
    # version, segments and rows as the reference package wrote them.
    if facts="$("$py" -c '
import json, sys
e = json.load(open(sys.argv[1]))
print(e["version"], len(e["segments"]), sum(s["row_count"] for s in e["segments"]))
' "$ref_expected")"; then
      read -r version segments rows <<<"$facts"
      want+=("$ref_table ($rows rows)"
        "describe $ref_table: version $version, protocol 7, $segments segments, $rows rows"
        "scan $ref_table: $rows rows from")
    else
      fail "cannot read $ref_expected"
    fi
  fi
  case "$ref_table" in
  ts_entity) # the fixture of testdata/reference/make_tables.py
    want+=('rows per entity: AAPL=24, MSFT=24, NVDA=240'
      'gaps ts_entity [2024-06-01T00:00:00Z, 2024-06-11T00:00:00Z) symbol=AAPL: 216 missing intervals: 2024-06-02T00:00:00Z..2024-06-11T00:00:00Z (216)'
      'gaps ts_entity [2024-06-01T00:00:00Z, 2024-06-11T00:00:00Z) symbol=NVDA: 0 missing intervals: none') ;;
  esac
  check check_reference_table.py "$url" "$ref_table" -- "${want[@]}"

  check metadata_adbc.py "$url" "$ref_table" -- \
    'PASS get_objects has catalog tsflight, schema main' \
    "PASS get_objects lists tsflight.main.$ref_table" \
    "PASS get_objects $ref_table table_type: TABLE" \
    "PASS get_objects $ref_table columns = Flight schema" \
    'PASS get_objects lists every ListFlights table' \
    'PASS get_objects with catalog/schema/table filters' \
    'PASS get_table_schema = Flight GetSchema names and types' \
    'PASS get_table_schema (catalog/schema given) = Flight GetSchema names and types' \
    'PASS execute_schema SELECT * field names = Flight schema' \
    'PASS get_info vendor_name' \
    'PASS get_info vendor_version' \
    'PASS get_table_types contains TABLE'

  if [ -n "$ref_expected" ]; then
    want=("PASS count(*) FROM $ref_table = expected.json rows"
      "PASS count(*) FROM main.$ref_table, tsflight.main.$ref_table"
      'PASS time range with literals = Flight scan'
      'PASS time range with ? parameters (UTC datetimes) = Flight scan'
      'PASS time range with ? parameters (naive datetimes) = Flight scan'
      'PASS ? parameters over the whole index range = expected.json rows'
      'PASS fetch_arrow_table columns = expected.json columns'
      'PASS fetch_arrow_table rows = expected.json rows'
      'PASS fetch_arrow_table values = plain Flight scan'
      'PASS ts_coverage = coverage action'
      'PASS ts_gaps = gaps action'
      'PASS INSERT (cursor.execute) refused'
      'PASS DELETE (executescript) refused'
      'PASS count(*) unchanged after the refused writes')
    case "$ref_table" in
    ts_entity) # the fixture of testdata/reference/make_tables.py
      want+=('PASS count(*) FROM ts_entity = expected.json rows: 288'
        'PASS time range with literals = Flight scan: 36 rows in [2024-06-01T05:00:00Z, 2024-06-01T17:00:00Z)'
        'PASS ts_coverage = coverage action: expected=720 covered=288'
        'PASS ts_gaps = gaps action: 1 gaps: 2024-06-02T00:00:00Z..2024-06-11T00:00:00Z (216)'
        'PASS ts_coverage symbol=AAPL = coverage action: expected=240 covered=24'
        'PASS ts_gaps symbol=AAPL = gaps action: 1 gaps: 2024-06-02T00:00:00Z..2024-06-11T00:00:00Z (216)'
        'PASS ts_coverage symbol=NVDA = coverage action: expected=240 covered=240'
        'PASS ts_gaps symbol=NVDA = gaps action: 0 gaps: none') ;;
    esac
    check sql_adbc.py "$url" "$ref_table" "$ref_expected" -- "${want[@]}"
  fi
fi

# The Python rows of docs/reliability-catalogue.md (pytest): bad input
# through pyarrow.flight and ADBC, on a scratch table of their own; with
# TSFLIGHT_ROOT (the server's root) each proves it wrote nothing.
check test_bad_input.py "$url" -- '24 passed'

# Listings over damaged tables and phantom directories (pyarrow.flight
# ListFlights, ADBC get_objects), on a server of its own when TSFLIGHT_BIN
# names a binary.
damaged_listing() {
  local want='8 passed'
  if [ -z "${TSFLIGHT_BIN:-}" ]; then
    if [ -z "${TSFLIGHT_ROOT:-}" ]; then
      fail "test_damaged_listing.py did not run: set TSFLIGHT_BIN (a tsflight binary) or TSFLIGHT_ROOT (the root of $url)"
      return
    fi
    check test_damaged_listing.py "$url" -- "$want"
    return
  fi
  local dir pid addr="" rc=0
  dir="$(mktemp -d)"
  mkdir "$dir/root"
  "$TSFLIGHT_BIN" serve --root "$dir/root" --listen 127.0.0.1:0 >"$dir/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 150); do # 15 s
    addr="$(sed -n 's/.*tsflight listening on \([^ "]*\).*/\1/p' "$dir/serve.log" | head -n 1)"
    if [ -n "$addr" ] || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if [ -n "$addr" ]; then
    echo "(test_damaged_listing.py: a server of its own on grpc://$addr)"
    TSFLIGHT_ROOT="$dir/root" TSFLIGHT_OWN_ROOT=1 check test_damaged_listing.py "grpc://$addr" -- "$want"
  else
    fail "the server for test_damaged_listing.py did not log its address within 15 s"
  fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" || rc=$?
  if [ -n "$addr" ] && [ "$rc" -eq 0 ]; then
    pass
  else
    fail "the server for test_damaged_listing.py exited $rc after SIGTERM, want 0"
    sed 's/^/   /' "$dir/serve.log"
  fi
  rm -rf "$dir"
}
damaged_listing

# Stalled DoGet streams and the stream budget (pyarrow.flight): the
# server's RSS bounded, a fresh client served, the stalled clients closed
# with UNAVAILABLE, none closed without budget pressure. It starts (and
# stops, checking for exit code 0) servers of its own, so it needs
# TSFLIGHT_BIN; SERVER_URL is not used.
if [ -n "${TSFLIGHT_BIN:-}" ]; then
  check test_stall.py -- '5 passed'
else
  echo "== test_stall.py skipped: it starts servers of its own from TSFLIGHT_BIN (a tsflight binary), which is not set"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
