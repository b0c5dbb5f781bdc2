#!/usr/bin/env bash
# Write latency and throughput of Cellar on HDFS beside Cellar on local disk, in one run:
# a MiniDFS (3 DataNodes, scripts/minidfs.sh) and two `cellar standalone` servers, one with
# --root hdfs://.../cellar and one with a local data directory, loaded by `cellar bench load`
# (YCSB inserts, 1 field of 100 bytes) at SYNC_WAL and FSYNC_WAL with 1 and 8 threads. The
# two servers are measured interleaved, the order swapped every pass. Prints a Markdown table
# of median ops/s and insert p50/p99 (µs) per cell, and the HDFS/local ratios.
#
# Usage: scripts/bench-hdfs.sh [--passes N] [--records N] [--work DIR]
set -euo pipefail

passes=3
records=20000
work=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --passes) passes="$2"; shift 2 ;;
    --records) records="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-hdfs: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
[[ -x "$cellar" ]] || (cd "$repo" && cargo build --release -p cellar-cli >&2)
work="${work:-$(mktemp -d -t cellar-bench-hdfs.XXXXXX)}"
mkdir -p "$work"
echo "work dir: $work" >&2

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$p" 2>/dev/null || true
  done
  "$repo/scripts/minidfs.sh" stop "$work/minidfs" >&2 || true
}
trap cleanup EXIT

hdfs="$("$repo/scripts/minidfs.sh" start "$work/minidfs")"
hdfs="${hdfs#hdfs=}"
echo "MiniDFS at $hdfs" >&2

start_server() { # name, then the root arguments; prints the native address
  local name="$1"; shift
  "$cellar" standalone --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --hbase-listen off "$@" \
    >"$work/$name.out" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 1 240); do
    local addr
    addr="$(sed -n 's/^listening native=//p' "$work/$name.out" | head -n1)"
    if [[ -n "$addr" ]]; then echo "$addr"; return; fi
    sleep 0.25
  done
  echo "bench-hdfs: $name did not start (log: $work/$name.log)" >&2
  exit 1
}
local_addr="$(start_server local --data-dir "$work/local-data")"
hdfs_addr="$(start_server hdfs --root "$hdfs/cellar")"

run() { # system addr durability threads pass
  local out="$work/$1-$3-t$4-p$5.txt"
  "$cellar" bench load -P "$repo/workloads/workloada" -p "recordcount=$records" \
    -p fieldcount=1 -p fieldlength=100 -p "durability=$3" -threads "$4" \
    --db "cellar://$2" >"$out" 2>>"$work/bench.log"
  local tput p50 p99
  tput="$(sed -n 's/^\[OVERALL\], Throughput(ops\/sec), //p' "$out")"
  p50="$(sed -n 's/^\[INSERT\], 50thPercentileLatency(us), //p' "$out")"
  p99="$(sed -n 's/^\[INSERT\], 99thPercentileLatency(us), //p' "$out")"
  echo "$1 $3 $4 ${tput%.*} $p50 $p99" >> "$work/results.txt"
}

: > "$work/results.txt"
for pass in $(seq 1 "$passes"); do
  for durability in SYNC_WAL FSYNC_WAL; do
    for threads in 1 8; do
      if (( pass % 2 )); then order=(local hdfs); else order=(hdfs local); fi
      for system in "${order[@]}"; do
        if [[ "$system" == local ]]; then addr="$local_addr"; else addr="$hdfs_addr"; fi
        echo "pass $pass: $system $durability $threads threads" >&2
        run "$system" "$addr" "$durability" "$threads" "$pass"
      done
    done
  done
done

python3 - "$work/results.txt" "$passes" "$records" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(system, dur, t, col):
    v = [float(r[col]) for r in rows if r[0] == system and r[1] == dur and r[2] == t]
    return statistics.median(v) if v else float("nan")
print(f"Median of {sys.argv[2]} interleaved passes, {sys.argv[3]} inserts of 100 bytes each.\n")
print("| durability | threads | local ops/s | HDFS ops/s | HDFS/local | local p50 / p99 µs | HDFS p50 / p99 µs |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for dur in ("SYNC_WAL", "FSYNC_WAL"):
    for t in ("1", "8"):
        l, h = med("local", dur, t, 3), med("hdfs", dur, t, 3)
        print(f"| {dur} | {t} | {l:,.0f} | {h:,.0f} | {h / l:.2f} | "
              f"{med('local', dur, t, 4):,.0f} / {med('local', dur, t, 5):,.0f} | "
              f"{med('hdfs', dur, t, 4):,.0f} / {med('hdfs', dur, t, 5):,.0f} |")
PY
