#!/usr/bin/env bash
# Write latency and throughput of Cellar on HDFS beside Cellar on local disk, in one run:
# a MiniDFS (3 DataNodes, scripts/minidfs.sh) and two `cellar standalone` servers, one with
# --root hdfs://.../cellar and one with a local data directory, loaded by `cellar bench load`
# (YCSB inserts, 1 field of 100 bytes) at SYNC_WAL and FSYNC_WAL with 1 and 8 threads. The
# two servers are measured interleaved, the order swapped every pass. Prints a Markdown table
# of median ops/s and insert p50/p99 (µs) per cell, and the HDFS/local ratios.
#
# With --sweep instead (seed 001: the pipeline's packet size matters per network): WAL and
# flush throughput on HDFS by the NameNode's packet size (dfs.client-write-packet-size, a
# MiniDFS started per size) and Cellar's write buffer (storage.hdfs_write_buffer_bytes),
# measured by the hdfs_bench binary on the engine's real WAL (8 writers, SYNC_WAL group
# commit, 1 KiB records) and store-file writer (a 128 MiB flush). Packet sizes are visited in
# a rotated order each pass; prints a Markdown table of medians.
#
# Usage: scripts/bench-hdfs.sh [--passes N] [--records N] [--work DIR]
#        scripts/bench-hdfs.sh --sweep [--passes N] [--packets 16k,64k,256k,1m]
#                              [--buffers 64k,1m,8m] [--work DIR]
set -euo pipefail

passes=3
records=20000
work=""
sweep=0
packets="16k,64k,256k,1m"
buffers="64k,1m,8m"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --passes) passes="$2"; shift 2 ;;
    --records) records="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --sweep) sweep=1; shift ;;
    --packets) packets="$2"; shift 2 ;;
    --buffers) buffers="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

bytes_of() { # 16k -> 16384
  local v="${1,,}"
  case "$v" in
    *k) echo $(( ${v%k} * 1024 )) ;;
    *m) echo $(( ${v%m} * 1024 * 1024 )) ;;
    *) echo "$v" ;;
  esac
}

if (( sweep )); then
  bench="${CARGO_TARGET_DIR:-$repo/target}/release/hdfs_bench"
  (cd "$repo" && cargo build --release -q -p cellar-bench --bin hdfs_bench >&2)
  IFS=, read -r -a sizes <<<"$packets"
  : > "$work/sweep.jsonl"
  for pass in $(seq 1 "$passes"); do
    shift_by=$(( (pass - 1) % ${#sizes[@]} ))
    for packet in "${sizes[@]:$shift_by}" "${sizes[@]:0:$shift_by}"; do
      echo "pass $pass: packet size $packet" >&2
      url="$(MINIDFS_CONF="dfs.client-write-packet-size=$(bytes_of "$packet")" \
        "$repo/scripts/minidfs.sh" start "$work/minidfs")"
      "$bench" --hdfs "${url#hdfs=}" --write-buffers "$buffers" --label "$packet" \
        >>"$work/sweep.jsonl"
      "$repo/scripts/minidfs.sh" stop "$work/minidfs" >&2
    done
  done
  python3 - "$work/sweep.jsonl" "$passes" "$packets" "$buffers" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
packets, buffers = sys.argv[3].split(","), sys.argv[4].split(",")
def size(s):
    s = s.lower()
    return int(s[:-1]) * {"k": 1024, "m": 1 << 20}[s[-1]] if s[-1] in "km" else int(s)
def med(packet, buffer, phase, key):
    v = [r[key] for r in rows if r["label"] == packet and r["write_buffer"] == size(buffer)
         and r["phase"] == phase]
    return statistics.median(v) if v else float("nan")
print(f"Medians of {sys.argv[2]} passes. WAL: 8 writers, SYNC_WAL, 1 KiB records (records/s, "
      "p99 µs). Flush: one 128 MiB store file (MiB/s).\n")
print("| packet | write buffer | WAL records/s | WAL p99 µs | records per hsync | flush MiB/s |")
print("| ---: | ---: | ---: | ---: | ---: | ---: |")
for p in packets:
    for b in buffers:
        print(f"| {p} | {b} | {med(p, b, 'wal', 'records_per_s'):,.0f} | "
              f"{med(p, b, 'wal', 'p99_us'):,.0f} | {med(p, b, 'wal', 'records_per_write_round'):.1f} | "
              f"{med(p, b, 'flush', 'mib_per_s'):,.0f} |")
PY
  exit 0
fi

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
