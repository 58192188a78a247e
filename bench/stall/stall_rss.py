#!/usr/bin/env python3
"""Stalled DoGet streams against a running tsflight server: the server's
memory (VmRSS) and how long a fresh client then takes to read the table.

    tsflight serve --root DIR --demo --listen 127.0.0.1:8815 &
    python3 bench/stall/stall_rss.py grpc://127.0.0.1:8815 $(pgrep -f 'tsflight serve') 200

N pyarrow clients, each on its own connection, open a DoGet of the demo
table's scan, read one batch (in threads: past the stream budget a first
batch waits) and stop reading. The script prints the RSS, then times a
fresh client reading every endpoint, then the RSS 5 s after the stalled
clients went away. It runs on the server's machine (it reads
/proc/PID/status). The figures in docs/reliability.md ("Many stalled
streams") come from it.
"""
import json, sys, time, threading, pyarrow.flight as fl
addr, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
print("before", rss(), "MiB", flush=True)
c0 = fl.connect(addr)
info = c0.get_flight_info(fl.FlightDescriptor.for_command(json.dumps({"table": "cpu"})))
keep, peak = [], [0]
stop = threading.Event()
def watch():
    while not stop.is_set():
        peak[0] = max(peak[0], rss()); time.sleep(0.2)
threading.Thread(target=watch, daemon=True).start()
t0 = time.time()
for i in range(n):
    c = fl.connect(addr)
    r = c.do_get(info.endpoints[i % len(info.endpoints)].ticket)
    keep.append((c, r))
# Each reads its first batch (in threads: past the budget a first batch waits)
ths = [threading.Thread(target=r.read_chunk) for _, r in keep]
for t in ths: t.start()
time.sleep(3)
print(f"{n} streams opened in {time.time()-t0:.1f}s; RSS {rss()} MiB", flush=True)
t1 = time.time()
c = fl.connect(addr)
rows = sum(c.do_get(e.ticket).read_all().num_rows for e in info.endpoints)
print(f"fresh client read {rows} rows in {time.time()-t1:.1f}s; RSS {rss()} MiB, peak {peak[0]} MiB", flush=True)
for t in ths: t.join(timeout=30)
stop.set()
for c, r in keep:
    try: r.cancel()
    except Exception: pass
    c.close()
keep.clear()
time.sleep(5)
print("5 s after they went away", rss(), "MiB", flush=True)
