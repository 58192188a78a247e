# Sourced by run.sh and run_auth.sh: builds the checks with Maven when the
# classes or the driver jar are missing or older than the sources, offline
# (-o) first, which works once .ci/install fetched the dependencies, then
# online. Expects $here (this directory) and $main_class (the class file the
# caller runs); exits 2 if the build fails.
needs_build=0
if [ ! -f "$main_class" ] || ! ls "$here"/target/lib/flight-sql-jdbc-driver-*.jar >/dev/null 2>&1; then
  needs_build=1
elif [ -n "$(find "$here/src" "$here/pom.xml" -newer "$main_class" -print -quit)" ]; then
  needs_build=1
fi
if [ "$needs_build" -eq 1 ]; then
  log="$(mktemp)"
  build() { mvn -q -B "$@" -f "$here/pom.xml" -DskipTests package >"$log" 2>&1; }
  if ! build -o && ! build; then
    cat "$log" >&2
    rm -f "$log"
    echo "FAIL build: mvn package failed in $here (.ci/install fetches its dependencies)" >&2
    exit 2
  fi
  rm -f "$log"
fi
