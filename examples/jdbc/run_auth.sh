#!/usr/bin/env bash
# Runs the Flight SQL JDBC check of tokens and TLS
# (src/main/java/tsflight/JdbcAuthCheck.java) against running tsflight servers.
#
#   run_auth.sh HOST:PORT CA_PEM TABLE EXPECTED_COUNT [MTLS_HOST:PORT CLIENT_CERT CLIENT_KEY]
#
# HOST:PORT serves TLS with a certificate signed by CA_PEM and --auth-tokens;
# TABLE holds EXPECTED_COUNT rows. The tokens come from the environment
# (never the command line): TSFLIGHT_READ_TOKEN, TSFLIGHT_WRITE_TOKEN and
# TSFLIGHT_EXPIRED_TOKEN. With the last three arguments it also checks a
# mutual-TLS server (--tls-client-ca) with the client certificate CLIENT_CERT
# and its key CLIENT_KEY (PKCS#8 PEM), where the read token is valid too.
#
# Builds like run.sh (Maven, offline first). Prints a PASS/FAIL line per check
# and finally "N passed, M failed", with every token masked as ***; exits 0
# only if nothing failed, 1 if a check failed, 2 on bad usage or a failed build.
set -uo pipefail

if { [ $# -ne 4 ] && [ $# -ne 7 ]; } || [[ "$1" == -* ]]; then
  echo "usage: $0 HOST:PORT CA_PEM TABLE EXPECTED_COUNT [MTLS_HOST:PORT CLIENT_CERT CLIENT_KEY]" >&2
  echo "  (tokens from TSFLIGHT_READ_TOKEN, TSFLIGHT_WRITE_TOKEN, TSFLIGHT_EXPIRED_TOKEN)" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
main_class="$here/target/classes/tsflight/JdbcAuthCheck.class"

# shellcheck source=build.sh
. "$here/build.sh"

# mask: copies its input, every token replaced by ***.
mask() {
  local line t
  while IFS= read -r line || [ -n "$line" ]; do
    for t in "${TSFLIGHT_READ_TOKEN:-}" "${TSFLIGHT_WRITE_TOKEN:-}" "${TSFLIGHT_EXPIRED_TOKEN:-}"; do
      if [ -n "$t" ]; then line="${line//"$t"/***}"; fi
    done
    printf '%s\n' "$line"
  done
}

# --add-opens: see run.sh.
java --add-opens=java.base/java.nio=ALL-UNNAMED \
  -cp "$here/target/classes:$here/target/lib/*" \
  tsflight.JdbcAuthCheck "$@" 2>&1 | mask
exit "${PIPESTATUS[0]}"
