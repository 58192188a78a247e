#!/usr/bin/env bash
# Runs the Flight SQL JDBC check (src/main/java/tsflight/JdbcCheck.java)
# against a running tsflight server.
#
#   run.sh HOST:PORT TABLE [INDEX_COLUMN]
#
# Builds with Maven first when the classes or the driver jar are missing or
# older than the sources: offline (-o) first, which works once .ci/install
# fetched the dependencies, then online. Prints a PASS/FAIL line per check and
# finally "N passed, M failed"; the exit code is the check's: 0 only if
# nothing failed, 1 if a check failed, 2 on bad usage or a failed build.
set -uo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ] || [[ "$1" == -* ]]; then
  echo "usage: $0 HOST:PORT TABLE [INDEX_COLUMN]" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
main_class="$here/target/classes/tsflight/JdbcCheck.class"

# shellcheck source=build.sh
. "$here/build.sh"

# Arrow's memory code reads java.nio.Buffer internals, which JDK 16+ keeps
# closed. The driver's docs ask for
#   --add-opens=java.base/java.nio=org.apache.arrow.memory.core,ALL-UNNAMED
# The driver jar is on the class path, so Arrow sits in the unnamed module and
# ALL-UNNAMED is enough (naming the absent module would only print a warning).
exec java --add-opens=java.base/java.nio=ALL-UNNAMED \
  -cp "$here/target/classes:$here/target/lib/*" \
  tsflight.JdbcCheck "$@"
