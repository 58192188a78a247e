#!/usr/bin/env python3
"""Ingest ratio: a pyarrow client's DoPut against the package's append.

Usage: put_ratio.py ARGS_JSON

ARGS_JSON (text) holds:
    {"addr": "127.0.0.1:PORT", "server_pid": PID, "server_root": DIR,
     "files": [PARQUET, ...], "work_dir": DIR, "rounds": N,
     "chunk_rows": 0, "compression": null, "floor": true}

The files are read into one pyarrow Table (untimed). Each round times one
DoPut of the whole table to the tsflight server at addr (a CMD descriptor
creating a new table per round, from do_put until the server's PutResult
is read) and one TimeSeriesTable.append of the same table to a new table
in work_dir (from the append call until it returns), alternating which
goes first (A B B A ...). The server's CPU time per put is read from
/proc/PID/stat. chunk_rows > 0 sends batches of at most that many rows
(0: the table's chunks as read); compression ("lz4" or "zstd") compresses
the IPC bodies the client sends. With floor, each round also times
pyarrow.parquet.write_table of the same table (zstd, dictionaries,
statistics, page index; C++'s Parquet writer, no fsync) as a floor for
encoding the rows.

Prints one JSON object: {"rows", "arrow_bytes", "puts": [{"wall_s",
"server_cpu_s", "client_cpu_s", "segment_bytes"}], "appends": [{"wall_s", "cpu_s",
"segment_bytes"}], "floor": [{"wall_s", "cpu_s", "bytes"}]} (cpu_s: this
process's CPU time, all threads).
"""

import json
import os
import shutil
import sys
import time

import pyarrow as pa
import pyarrow.flight as fl
import pyarrow.parquet as pq
import timeseries_table_format as ttf

CREATE = {"index_column": "time", "index_type": "timestamp", "granularity": "10s", "entity_columns": ["hostname"]}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime and stime are fields 14, 15.
    return (int(fields[11]) + int(fields[12])) / TICK


def put(client, table, name, args):
    cmd = json.dumps({"table": name, "create": CREATE}).encode()
    opts = fl.FlightCallOptions()
    if args.get("compression"):
        opts = fl.FlightCallOptions(write_options=pa.ipc.IpcWriteOptions(compression=args["compression"]))
    cpu0 = cpu_seconds(args["server_pid"])
    c, t = time.process_time(), time.perf_counter()
    writer, reader = client.do_put(fl.FlightDescriptor.for_command(cmd), table.schema, options=opts)
    chunk = args.get("chunk_rows") or None
    writer.write_table(table, max_chunksize=chunk)
    writer.done_writing()
    meta = reader.read()
    writer.close()
    wall, client_cpu = time.perf_counter() - t, time.process_time() - c
    cpu = cpu_seconds(args["server_pid"]) - cpu0
    res = json.loads(meta.to_pybytes())
    if res["rows"] != table.num_rows:
        raise SystemExit("put committed %d rows, sent %d" % (res["rows"], table.num_rows))
    size = os.path.getsize(os.path.join(args["server_root"], name, res["segment"]))
    return {"wall_s": wall, "server_cpu_s": cpu, "client_cpu_s": client_cpu, "segment_bytes": size}


def append(table, root):
    tb = ttf.TimeSeriesTable.create(table_root=root, index_granularity=CREATE["granularity"],
                                    index_column=CREATE["index_column"], index_type=CREATE["index_type"],
                                    entity_columns=CREATE["entity_columns"])
    c, t = time.process_time(), time.perf_counter()
    rep = tb.append(table)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    if rep.row_count != table.num_rows:
        raise SystemExit("append reported %d rows, sent %d" % (rep.row_count, table.num_rows))
    out = {"wall_s": wall, "cpu_s": cpu, "segment_bytes": rep.file_size_bytes}
    del tb
    shutil.rmtree(root)
    return out


def floor(table, path):
    c, t = time.process_time(), time.perf_counter()
    pq.write_table(table, path, compression="zstd", use_dictionary=True, write_statistics=True,
                   write_page_index=True, row_group_size=1 << 20)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    size = os.path.getsize(path)
    os.remove(path)
    return {"wall_s": wall, "cpu_s": cpu, "bytes": size}


def main():
    args = json.loads(sys.argv[1])
    table = pa.concat_tables([pq.read_table(f) for f in args["files"]])
    client = fl.connect("grpc://" + args["addr"])
    out = {"rows": table.num_rows, "arrow_bytes": table.nbytes, "batches": table.column(0).num_chunks,
           "puts": [], "appends": [], "floor": []}
    # One untimed put and append first: imports, connections, page cache.
    put(client, table, "warm", args)
    append(table, os.path.join(args["work_dir"], "warm"))
    for i in range(args["rounds"]):
        steps = [lambda: out["puts"].append(put(client, table, "cpu%d" % i, args)),
                 lambda: out["appends"].append(append(table, os.path.join(args["work_dir"], "t%d" % i)))]
        if i % 2:
            steps.reverse()
        for s in steps:
            s()
        if args.get("floor"):
            out["floor"].append(floor(table, os.path.join(args["work_dir"], "floor.parquet")))
    client.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
