#!/usr/bin/env python3
"""Prepared statements through ADBC (Flight SQL): parameters, results typed
by their parameters, and one statement executed again.

  python3 prepared_adbc.py grpc://127.0.0.1:8815

It needs no table. One PASS/FAIL line per check:

* cursor.execute("SELECT ? + 1", parameters=(41,)) fetches 42: the result's
  type and name depend on the parameter, and the stream's schema must be
  the FlightInfo's (the driver refuses the stream as an "inconsistent
  schema" otherwise);
* the same with a string parameter beside a constant column, and with two
  parameter-typed columns named alike;
* one cursor executes one text 20 times with different parameters (the
  driver prepares it once and binds new values each time): every answer is
  right;
* SELECT 1 on a new cursor each time.
"""

from common import Checks, ExampleFailure, adbc_connect, main


def fetch(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, parameters=params)
        table = cur.fetch_arrow_table()
    return table


def run(url):
    checks = Checks()
    with adbc_connect(url) as conn:
        t = checks.run("SELECT ? + 1 with 41", fetch, conn, "SELECT ? + 1", (41,))
        if t is not None:
            checks.equal("SELECT ? + 1 with 41", t.to_pylist(), [{"($1 + 1)": 42}])

        t = checks.run("SELECT ? AS a, ? + 1, 'x' AS b", fetch, conn, "SELECT ? AS a, ? + 1, 'x' AS b", ("s", 1))
        if t is not None:
            checks.equal("SELECT ? AS a, ? + 1, 'x' AS b with ('s', 1)", t.to_pydict(), {"a": ["s"], "($2 + 1)": [2], "b": ["x"]})

        t = checks.run("SELECT ? AS v, ? AS v", fetch, conn, "SELECT ? AS v, ? AS v", (1, 2))
        if t is not None:
            checks.equal("SELECT ? AS v, ? AS v with (1, 2)", [t.column_names, [c.to_pylist() for c in t.columns]], [["v", "v"], [[1], [2]]])

        def again():
            got = []
            with conn.cursor() as cur:
                for i in range(20):
                    cur.execute("SELECT ? * 2 AS twice", parameters=(i,))
                    got.append(cur.fetchall()[0][0])
            return got

        got = checks.run("one prepared statement executed 20 times", again)
        if got is not None:
            checks.equal("one prepared statement executed 20 times", got, [2 * i for i in range(20)])

        def fresh():
            out = []
            for _ in range(5):
                with conn.cursor() as cur:
                    cur.execute("SELECT 1")
                    out.append(cur.fetchall())
            return out

        got = checks.run("SELECT 1 on new cursors", fresh)
        if got is not None:
            checks.equal("SELECT 1 on new cursors", got, [[(1,)]] * 5)

    print("%d checks passed, %d failed" % (checks.passed, checks.failed))
    if checks.failed:
        raise ExampleFailure("%d checks failed" % checks.failed)


if __name__ == "__main__":
    main(run)
