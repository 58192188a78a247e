#!/usr/bin/env bash
# Runs test_auth.py (tokens, TLS and mutual TLS through pyarrow.flight and
# ADBC) with pytest against running servers, as CI (.ci/test) does.
#
#   run_auth.sh
#
# Every setting comes from the environment variables test_auth.py describes
# (TSFLIGHT_AUTH_URI, TSFLIGHT_AUTH_CA, TSFLIGHT_READ_TOKEN, ...); all of
# them must be set, since a skipped test would prove nothing. pytest's
# output is printed with every token masked as ***, then one line
# "N passed, M failed": tests that failed, errored or were skipped count as
# failed. Exits 0 only if nothing failed, 1 otherwise, 2 on bad usage.
# TSFLIGHT_PYTHON names the interpreter (default python3).
set -uo pipefail

vars=(TSFLIGHT_AUTH_URI TSFLIGHT_AUTH_CA TSFLIGHT_AUTH_ROOT TSFLIGHT_READ_TOKEN
  TSFLIGHT_WRITE_TOKEN TSFLIGHT_EXPIRED_TOKEN TSFLIGHT_TOKENS_FILE
  TSFLIGHT_SIGHUP_URI TSFLIGHT_SIGHUP_PID TSFLIGHT_SIGHUP_TOKENS_FILE
  TSFLIGHT_MTLS_URI TSFLIGHT_CLIENT_CERT TSFLIGHT_CLIENT_KEY)
if [ $# -ne 0 ]; then
  echo "usage: $0   (settings from the environment: ${vars[*]}; TSFLIGHT_AUTH_TABLE optional)" >&2
  exit 2
fi
missing=()
for v in "${vars[@]}"; do
  if [ -z "${!v:-}" ]; then missing+=("$v"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "$0: not set: ${missing[*]}" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
py="${TSFLIGHT_PYTHON:-python3}"

# mask: copies its input, every token replaced by ***.
mask() {
  local line t
  while IFS= read -r line || [ -n "$line" ]; do
    for t in "$TSFLIGHT_READ_TOKEN" "$TSFLIGHT_WRITE_TOKEN" "$TSFLIGHT_EXPIRED_TOKEN"; do
      line="${line//"$t"/***}"
    done
    printf '%s\n' "$line"
  done
}

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# -p no:cacheprovider: nothing written beside the tests.
(cd "$here" && "$py" -m pytest -v -p no:cacheprovider --tb=short -rfEs test_auth.py 2>&1) | mask | tee "$out"
rc=${PIPESTATUS[0]}

# pytest's last line: "=== 25 passed, 1 failed, 1 skipped in 3.10s ===".
summary="$(tail -n 1 "$out")"
# count WORD: the number before WORD in that line, 0 if none.
count() {
  local n
  n="$(sed -n "s/.*[^0-9]\([0-9][0-9]*\) $1.*/\1/p" <<<" $summary" | head -n 1)"
  echo "${n:-0}"
}
passed="$(count passed)"
failed=$(( $(count failed) + $(count error) + $(count skipped) ))
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "FAIL: pytest exited $rc"
  failed=1
fi
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
  echo "FAIL: pytest ran no test"
  failed=1
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
