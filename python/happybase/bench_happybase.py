"""happybase throughput and latency against one Thrift server (Cellar's gateway or HBase's).

    bench_happybase.py --port 9090 --phase load|put|get|scan --records N --ops N
        [--clients N] [--server-pids PID,PID] [--table usertable]

Rows are YCSB-shaped: key user<zero-padded number>, 10 columns cf:field0..9 of 100 bytes.
`load` writes rows 0..records-1; `put` overwrites random rows; `get` reads random whole rows;
`scan` reads 50 rows from a random start. Each client is a process with its own connection
(Python's GIL would make threads the bottleneck). Prints one JSON line: ops/s, p50/p99 (µs)
and, with --server-pids, the servers' CPU seconds per operation (from /proc/PID/stat).
Run by scripts/bench-thrift.sh.
"""

import argparse
import json
import multiprocessing as mp
import os
import random
import time

import happybase

FIELDS = [b"cf:field%d" % i for i in range(10)]
SCAN_ROWS = 50


def key(i):
    return b"user%010d" % i


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            # Fields after the command name (which may hold spaces): utime is 14, stime 15.
            rest = f.read().rsplit(")", 1)[1].split()
        total += int(rest[11]) + int(rest[12])
    return total / os.sysconf("SC_CLK_TCK")


def client(args, n, start_evt, out):
    conn = happybase.Connection(args.host, args.port, timeout=60000)
    table = conn.table(args.table)
    rnd = random.Random(n)
    value = bytes(rnd.getrandbits(8) for _ in range(100))
    row = {f: value for f in FIELDS}
    share = args.ops // args.clients + (1 if n < args.ops % args.clients else 0)
    lat = []
    start_evt.wait()
    for i in range(share):
        if args.phase == "load":
            k = key(n + i * args.clients)
        else:
            k = key(rnd.randrange(args.records))
        t0 = time.perf_counter_ns()
        if args.phase in ("load", "put"):
            table.put(k, row)
        elif args.phase == "get":
            got = table.row(k)
            if len(got) != len(FIELDS):
                raise SystemExit("row %r has %d columns" % (k, len(got)))
        else:
            got = sum(1 for _ in table.scan(row_start=k, limit=SCAN_ROWS, batch_size=SCAN_ROWS))
            if got == 0:
                raise SystemExit("scan from %r returned nothing" % k)
        lat.append(time.perf_counter_ns() - t0)
    conn.close()
    out.put(lat)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--table", default="usertable")
    p.add_argument("--phase", choices=["load", "put", "get", "scan"], required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--ops", type=int, required=True)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--server-pids", default="")
    p.add_argument("--create", action="store_true", help="(re)create the table first")
    args = p.parse_args()
    if args.phase == "load":
        args.ops = args.records
    pids = [int(x) for x in args.server_pids.split(",") if x]
    if args.create:
        conn = happybase.Connection(args.host, args.port, timeout=60000)
        if args.table.encode() in conn.tables():
            conn.delete_table(args.table, disable=True)
        conn.create_table(args.table, {"cf": dict(max_versions=1)})
        conn.close()
    start_evt = mp.Event()
    out = mp.Queue()
    procs = [mp.Process(target=client, args=(args, n, start_evt, out)) for n in range(args.clients)]
    for pr in procs:
        pr.start()
    time.sleep(0.5)  # every client connected
    cpu0 = cpu_seconds(pids) if pids else 0.0
    t0 = time.perf_counter()
    start_evt.set()
    lat = []
    for _ in procs:
        lat.extend(out.get(timeout=3600))
    wall = time.perf_counter() - t0
    cpu1 = cpu_seconds(pids) if pids else 0.0
    for pr in procs:
        pr.join(timeout=60)
        if pr.exitcode != 0:
            raise SystemExit("a client failed (exit %s)" % pr.exitcode)
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000.0
    print(json.dumps({
        "phase": args.phase,
        "ops": len(lat),
        "clients": args.clients,
        "seconds": round(wall, 3),
        "ops_per_sec": round(len(lat) / wall, 1),
        "p50_us": round(pct(0.50), 1),
        "p99_us": round(pct(0.99), 1),
        "server_cpu_us_per_op": round((cpu1 - cpu0) * 1e6 / max(1, len(lat)), 1) if pids else None,
    }))


if __name__ == "__main__":
    main()
