#!/usr/bin/env python3
"""Summarizes scripts/bench-vs-hbase.sh phases: parses YCSB's text output of every phase,
adds server CPU per operation, prints medians over passes with Cellar/HBase ratios, and
writes everything (per phase and medians) as JSON.

Percentiles come twice. Over the whole phase, as YCSB prints them; and in steady state, from
YCSB's raw measurements (`<phase output>.raw`, one line per operation) without each phase's
first WARMUP_FRACTION of operations. Every Java phase is a new JVM whose first seconds are
JIT compilation: in a 100 000-operation phase with one thread, more than half of the
operations above the whole-phase p99 come from its first tenth, so that p99 measures the
client's warm-up more than either server. A phase without raw measurements (`cellar bench`,
native code with nothing to warm) keeps its whole-phase figures as its steady ones, which can
only make them larger."""

import argparse
import json
import math
import os
import statistics
import sys

SKIP_SECTIONS = {"OVERALL", "CLEANUP"}

# The share of each operation's measurements, in completion order, left out of the steady-state
# percentiles. After it the p99 no longer falls (measured: 1 thread, workload C, against both
# servers, the p99 without the first 10 % and without the first 50 % are within 10 %).
WARMUP_FRACTION = 0.2

# YCSB names an operation's sections after the measurement kind when it keeps two
# (`measurementtype=hdrhistogram+raw`): [HdrREAD] holds the histogram, [RawREAD] a count.
HDR_PREFIX, RAW_PREFIX = "Hdr", "Raw"


def parse_ycsb(path):
    """YCSB text output -> {'throughput', 'runtime_ms', 'ops': {OP: {...}}, 'errors'}."""
    overall, ops, errors = {}, {}, 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3 or not parts[0].startswith("[") or not parts[0].endswith("]"):
                continue
            section, metric, value = parts[0][1:-1], parts[1], parts[2]
            try:
                number = float(value)
            except ValueError:
                continue
            if section == "OVERALL":
                overall[metric] = number
                continue
            if section.startswith(RAW_PREFIX):
                continue
            section = section.removeprefix(HDR_PREFIX)
            if section in SKIP_SECTIONS or section.startswith("TOTAL_G") or "GC" in section:
                continue
            if section.endswith("-FAILED"):
                if metric == "Operations":
                    errors += int(number)
                continue
            op = ops.setdefault(section, {})
            if metric == "Operations":
                op["operations"] = int(number)
            elif metric == "50thPercentileLatency(us)":
                op["p50_us"] = number
            elif metric == "99thPercentileLatency(us)":
                op["p99_us"] = number
            elif metric == "99.9PercentileLatency(us)":
                op["p999_us"] = number
            elif metric == "AverageLatency(us)":
                op["avg_us"] = number
            elif metric.startswith("Return=") and metric != "Return=OK" and metric != "Return=BATCHED_OK":
                errors += int(number)
    if "Throughput(ops/sec)" not in overall:
        raise ValueError(f"{path}: no '[OVERALL], Throughput(ops/sec), X' line in the YCSB output")
    ops = {k: v for k, v in ops.items() if "operations" in v}
    return {
        "throughput": overall["Throughput(ops/sec)"],
        "runtime_ms": overall.get("RunTime(ms)"),
        "ops": ops,
        "errors": errors,
    }


def percentile(sorted_values, q):
    """HdrHistogram's definition: the smallest value with at least q of them at or below it."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def steady_percentiles(path, skip_fraction=WARMUP_FRACTION):
    """YCSB raw measurements (`RawOP,timestamp ms,latency us` per line) -> {OP: {...}}: the
    percentiles of each operation's latencies after its first `skip_fraction`, ordered by
    completion time."""
    by_op = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) != 3:
                continue
            try:
                done_ms, latency_us = int(parts[1]), int(parts[2])
            except ValueError:
                continue  # the header line of each operation
            op = parts[0].removeprefix(RAW_PREFIX)
            if op not in SKIP_SECTIONS:
                by_op.setdefault(op, []).append((done_ms, latency_us))
    steady = {}
    for op, points in by_op.items():
        points.sort(key=lambda p: p[0])  # stable: points of one millisecond keep their order
        kept = sorted(us for _, us in points[int(len(points) * skip_fraction):])
        if kept:
            steady[op] = {
                "operations": len(kept),
                "p50_us": percentile(kept, 0.50),
                "p99_us": percentile(kept, 0.99),
                "p999_us": percentile(kept, 0.999),
            }
    return steady


def steady_p(run, name, key):
    """A phase's steady-state percentile `key` of operation `name`, else its whole-phase one."""
    op = run["ops"].get(name, {})
    return op.get("steady", op).get(key)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# Systems in report order: HBase through YCSB's Java client, Cellar through the same client
# (its HBase-compatible front end), Cellar through `cellar bench` (native protocol over TCP),
# and the same over UCX (shared memory).
SYSTEMS = ("hbase", "cellar", "cellar-native", "cellar-ucx")
RATIO_LABEL = {"cellar": "C/H", "cellar-native": "Cn/H", "cellar-ucx": "Cu/H"}


def ratio(cellar, hbase):
    if cellar is None or hbase is None or hbase == 0:
        return None
    return cellar / hbase


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", required=True)
    ap.add_argument("--clk-tck", type=int, required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--meta", nargs="*", default=[])
    args = ap.parse_args()

    phases = []
    with open(args.phases, encoding="utf-8") as f:
        for line in f:
            sys_name, workload, threads, pass_no, ticks, path = line.rstrip("\n").split("\t")
            result = parse_ycsb(path)
            if os.path.exists(path + ".raw"):
                for name, steady in steady_percentiles(path + ".raw").items():
                    if name in result["ops"]:
                        result["ops"][name]["steady"] = steady
            total_ops = sum(op["operations"] for op in result["ops"].values())
            cpu_us = int(ticks) * 1e6 / args.clk_tck
            phases.append({
                "system": sys_name, "workload": workload, "threads": int(threads),
                "pass": int(pass_no), "operations": total_ops,
                "server_cpu_us": cpu_us,
                "server_cpu_us_per_op": cpu_us / total_ops if total_ops else None,
                **result, "raw": path,
            })

    wanted = args.workloads.split()
    keys = sorted({(p["workload"], p["threads"]) for p in phases if p["workload"] in wanted},
                  key=lambda k: (wanted.index(k[0]), k[1]))
    medians = []
    for workload, threads in keys:
        row = {"workload": workload, "threads": threads}
        for sys_name in SYSTEMS:
            runs = [p for p in phases if p["system"] == sys_name
                    and p["workload"] == workload and p["threads"] == threads]
            if not runs:
                continue
            op_names = sorted({name for r in runs for name in r["ops"]})
            row[sys_name] = {
                "passes": len(runs),
                "throughput": median([r["throughput"] for r in runs]),
                "server_cpu_us_per_op": median([r["server_cpu_us_per_op"] for r in runs]),
                "errors": sum(r["errors"] for r in runs),
                "ops": {name: {
                    **{key: median([r["ops"].get(name, {}).get(key) for r in runs])
                       for key in ("p50_us", "p99_us", "p999_us")},
                    "steady": {key: median([steady_p(r, name, key) for r in runs])
                               for key in ("p50_us", "p99_us", "p999_us")},
                } for name in op_names},
            }
        for sys_name in SYSTEMS[1:]:
            if "hbase" not in row or sys_name not in row:
                continue
            h, c = row["hbase"], row[sys_name]

            def op_ratios(pick):
                """{OP: pick(Cellar's op) / pick(HBase's op)} for each of Cellar's ops."""
                return {name: ratio(pick(v), pick(h["ops"].get(name, {"steady": {}})))
                        for name, v in c["ops"].items()}

            row[f"{sys_name}_over_hbase"] = {
                "throughput": ratio(c["throughput"], h["throughput"]),
                "server_cpu_us_per_op": ratio(c["server_cpu_us_per_op"],
                                              h["server_cpu_us_per_op"]),
                "p99_us": op_ratios(lambda op: op.get("p99_us")),
                "p999_us": op_ratios(lambda op: op.get("p999_us")),
                "steady_p99_us": op_ratios(lambda op: op["steady"].get("p99_us")),
            }
        medians.append(row)

    header = (f"{'workload':<8} {'thr':>3} {'system':<13} {'ops/s':>10} {'cpu us/op':>9} "
              f"{'errors':>6}  per-op p50/p99/p99.9 (us), steady-state p99 in brackets")
    print(header)
    print("-" * len(header))
    for row in medians:
        for sys_name in SYSTEMS:
            s = row.get(sys_name)
            if s is None:
                continue
            lat = "  ".join(f"{name} {fmt(v['p50_us'])}/{fmt(v['p99_us'])}/{fmt(v['p999_us'])}"
                            f" [{fmt(v['steady']['p99_us'])}]"
                            for name, v in s["ops"].items())
            print(f"{row['workload']:<8} {row['threads']:>3} {sys_name:<13} "
                  f"{fmt(s['throughput']):>10} {fmt(s['server_cpu_us_per_op'], 1):>9} "
                  f"{s['errors']:>6}  {lat}")
        for sys_name in SYSTEMS[1:]:
            r = row.get(f"{sys_name}_over_hbase")
            if r:
                p99 = "  ".join(f"{name} p99 {fmt(v, 2)} p99.9 {fmt(r['p999_us'][name], 2)}"
                                f" [{fmt(r['steady_p99_us'][name], 2)}]"
                                for name, v in r["p99_us"].items())
                print(f"{row['workload']:<8} {row['threads']:>3} {RATIO_LABEL[sys_name]:<13} "
                      f"{fmt(r['throughput'], 2):>10} {fmt(r['server_cpu_us_per_op'], 2):>9} "
                      f"{'':>6}  {p99}")

    meta = dict(m.split("=", 1) for m in args.meta if "=" in m)
    meta["clk_tck"] = args.clk_tck
    meta["steady_state"] = (f"percentiles without each operation's first {WARMUP_FRACTION:.0%} "
                            "of measurements, from YCSB's raw output; phases without it use "
                            "their whole-phase percentiles")
    if "floor_cpu_us_per_call" in meta:
        print(f"floor: a bare echo server spends {meta['floor_cpu_us_per_call']} us of CPU per "
              "1 KiB call over TCP on this machine (rpc_bench floor-cpu); no server's cpu us/op "
              "over TCP can be lower (cellar-ucx bypasses the kernel's sockets)")
    if "floor_p99_us" in meta:
        print(f"floor: its round trips take p50 {meta['floor_p50_us']} / p99 {meta['floor_p99_us']}"
              f" / p99.9 {meta['floor_p999_us']} us; no server's p99 over TCP at one thread can be "
              "lower")
    if "floor_one_cpu_cpu_us_per_call" in meta:
        print(f"floor with the echo server and its client on one CPU: "
              f"{meta['floor_one_cpu_cpu_us_per_call']} us of CPU per call, p99 "
              f"{meta.get('floor_one_cpu_p99_us', '?')} us (the rest of the floor above is "
              "wake-ups that cross CPUs)")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "medians": medians, "phases": phases}, f, indent=2)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        print(f"summarize: {e}", file=sys.stderr)
        sys.exit(1)
