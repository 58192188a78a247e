#!/usr/bin/env bash
# Runs the pyarrow.flight examples in order against a running server and
# checks their output.
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
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
