"""The 0.9.0 package's Session.sql on the layout tables of
tableformat's BenchmarkTSBSLayouts: the same queries as layoutquery
(its -queries file, one "name<TAB>sql" a line, over a table named cpu),
median wall time (and process CPU time, all threads) of RUNS runs after
one warm-up, per query and table.

    python3 bench/layoutquery/sessionsql.py QUERIES RUNS TABLE_DIR...
"""

import statistics
import sys
import time

import timeseries_table_format as ttf


def main():
    qfile, runs, roots = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    queries = []
    with open(qfile) as f:
        for line in f:
            name, sql = line.rstrip("\n").split("\t", 1)
            queries.append((name, sql))
    sessions = []
    for root in roots:
        s = ttf.Session()
        s.register_tstable("cpu", root)
        sessions.append(s)
    print("Session.sql (timeseries-table-format 0.9.0), median of %d runs, wall ms (process CPU ms)" % runs)
    print("%-22s %s" % ("query", " ".join("%18s" % r.rstrip("/").split("/")[-1] for r in roots)))
    for name, sql in queries:
        cells = []
        for s in sessions:
            rows = s.sql(sql).num_rows  # warm-up
            times, cpus = [], []
            for _ in range(runs):
                t, c = time.perf_counter(), time.process_time()
                n = s.sql(sql).num_rows
                times.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
                if n != rows:
                    raise SystemExit("%s: %d rows, then %d" % (name, rows, n))
            cells.append("%9.2f (%6.2f)" % (1000 * statistics.median(times), 1000 * statistics.median(cpus)))
        print("%-22s %s" % (name, " ".join(cells)))


if __name__ == "__main__":
    main()
