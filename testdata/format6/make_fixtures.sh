#!/bin/sh
# Regenerate the format-6 fixtures with timeseries-table-format 0.4.0.
#
# Usage: testdata/format6/make_fixtures.sh [WHEEL_OR_REQUIREMENT [OUT_DIR]]
#
# WHEEL_OR_REQUIREMENT defaults to timeseries-table-format==0.4.0 (from the
# package index); pass a path to a downloaded 0.4.0 wheel to work offline.
# The venv reuses the system pyarrow (--system-site-packages). The tables are
# written to a temporary directory and then replace tables/ here; PROVENANCE
# is rewritten with the checksums of every file. With OUT_DIR, the tables are
# written there instead and nothing here changes (CI's fresh set).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
req=${1:-timeseries-table-format==0.4.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --quiet --no-deps "$req"
if [ $# -ge 2 ]; then
	"$work/venv/bin/python" "$here/make_fixtures.py" "$2"
	exit 0
fi
"$work/venv/bin/python" "$here/make_fixtures.py" "$work/tables"
rm -rf "$here/tables"
mv "$work/tables" "$here/tables"
{
	echo "timeseries-table-format 0.4.0 format-6 fixtures"
	echo "generated: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "command: testdata/format6/make_fixtures.sh $req"
	echo "python: $("$work/venv/bin/python" --version 2>&1), pyarrow $("$work/venv/bin/python" -c 'import pyarrow; print(pyarrow.__version__)')"
	echo "package: $("$work/venv/bin/pip" show timeseries-table-format | sed -n 's/^Version: //p')"
	echo
	echo "sha256 of every file under tables/:"
	(cd "$here/tables" && find . -type f | LC_ALL=C sort | xargs sha256sum)
} >"$here/PROVENANCE"
