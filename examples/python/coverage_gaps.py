#!/usr/bin/env python3
"""Ask how complete a table is, and where its holes are.

  python3 coverage_gaps.py grpc://127.0.0.1:8815

The coverage action counts the index intervals (here 10 s) of [start, end)
that hold data: for one entity, or for the whole table as the mean over its
entities. The gaps action lists the missing runs; for the whole table an
interval counts as covered only when every entity has it. Both answer from
the coverage bitmaps the table keeps, without reading the data.

Needs the cpu table of create_and_put.py.
"""

from common import action, at, connect, dumps, iso, main


def show_gaps(result):
    for g in result["gaps"]:
        print("  gap %s .. %s (%d intervals)" % (g["start"], g["end"], g["intervals"]))
    print("  missing_intervals=%d truncated=%s" % (result["missing_intervals"], result["truncated"]))


def run(url):
    client = connect(url)
    window = {"table": "cpu", "start": iso(at(0)), "end": iso(at(120))}

    cov = action(client, "coverage", window)
    print("coverage cpu [%s, %s): ratio=%.4f covered=%d expected=%d identities=%d" % (
        cov["start"], cov["end"], cov["ratio"], cov["covered"], cov["expected"], cov["identities"]))
    print("  result:", dumps(cov))

    db1 = dict(window, entity={"host": "db1"})
    cov = action(client, "coverage", db1)
    print("coverage cpu host=db1: ratio=%.4f covered=%d expected=%d" % (cov["ratio"], cov["covered"], cov["expected"]))

    gaps = action(client, "gaps", db1)
    print("gaps cpu host=db1: %d" % len(gaps["gaps"]))
    show_gaps(gaps)

    # Past the end of the data: the table as a whole, up to 02:30.
    wide = dict(window, end=iso(at(150)))
    gaps = action(client, "gaps", wide)
    print("gaps cpu (all hosts) until %s: %d" % (wide["end"], len(gaps["gaps"])))
    show_gaps(gaps)
    longest, last = gaps["longest"], gaps["last_covered"]
    print("  longest: %s .. %s; last covered: %s .. %s" % (longest["start"], longest["end"], last["start"], last["end"]))
    print("  result:", dumps(gaps))


if __name__ == "__main__":
    main(run)
