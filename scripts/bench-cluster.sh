#!/usr/bin/env bash
# Cluster benchmarks (docs/benchmarks.md, "Cluster"), all on this machine and 127.0.0.1:
#
# 1. YCSB load, A and C with the native client against a cluster of 1, 2 and 3 region
#    servers (local-disk root, scripts/cluster.sh), PASSES passes with the order of the sizes
#    rotated between passes: throughput, and the servers' CPU per operation (user + system
#    time of the master and every region server, from /proc, over each phase).
# 2. Failover: a cluster of 3 region servers; `cellar bench availability` probes every region
#    of a 10-region table every 50 ms while, every ROUND_S seconds, the region server holding
#    the most regions is killed with SIGKILL and a new one is started: how long each region
#    could not be written.
#
# Usage: scripts/bench-cluster.sh [OUT_DIR]   (default docs/bench/cluster)
# Env: PASSES (2), RECORDS (20000), OPS (20000), THREADS (8), ROUNDS (5), ROUND_S (20),
#      ZK_SESSION_TIMEOUT_MS (4000: how soon a dead region server is noticed).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/docs/bench/cluster}"
mkdir -p "$out"
passes="${PASSES:-2}" records="${RECORDS:-20000}" ops="${OPS:-20000}" threads="${THREADS:-8}"
rounds="${ROUNDS:-5}" round_s="${ROUND_S:-20}"
export ZK_SESSION_TIMEOUT_MS="${ZK_SESSION_TIMEOUT_MS:-4000}"
(cd "$repo" && cargo build --release -q --bin cellar)
bin="$repo/target/release/cellar"
export CELLAR_BIN="$bin" CLUSTER_ROOT=file
work="$(mktemp -d)"
export CLUSTER_DIR="$work/cluster"
trap '"$repo/scripts/cluster.sh" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# cpu_ticks: user + system clock ticks of every server process of the cluster.
cpu_ticks() {
  local total=0 f pid
  for f in "$CLUSTER_DIR"/master*.pid "$CLUSTER_DIR"/regionserver*.pid; do
    [[ -e "$f" ]] || continue
    pid="$(cat "$f")"
    [[ -r "/proc/$pid/stat" ]] || continue
    # Fields 14 and 15 (utime, stime), after the command name in parentheses.
    total=$((total + $(sed 's/^.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')))
  done
  echo "$total"
}
hz="$(getconf CLK_TCK)"

results="$out/ycsb.tsv"
echo -e "pass\tservers\tphase\tops_per_s\tserver_cpu_us_per_op" >"$results"
sizes=(1 2 3)
for pass in $(seq 1 "$passes"); do
  shift_by=$(( (pass - 1) % 3 ))
  order=("${sizes[@]:$shift_by}" "${sizes[@]:0:$shift_by}")
  for n in "${order[@]}"; do
    "$repo/scripts/cluster.sh" up "$n" >"$work/up.txt"
    master="$(sed -n 's/^master1 listening native=//p' "$work/up.txt")"
    for phase in load a c; do
      case "$phase" in
        load) cmd=(load -P "$repo/workloads/workloada" -p "recordcount=$records" -p presplit=12) ;;
        a) cmd=(run -P "$repo/workloads/workloada" -p "recordcount=$records" -p "operationcount=$ops") ;;
        c) cmd=(run -P "$repo/workloads/workloadc" -p "recordcount=$records" -p "operationcount=$ops") ;;
      esac
      before="$(cpu_ticks)"
      "$bin" bench "${cmd[@]}" -threads "$threads" --db "cellar://$master" >"$work/ycsb.txt" 2>/dev/null
      after="$(cpu_ticks)"
      tput="$(sed -n 's/^\[OVERALL\], Throughput(ops\/sec), //p' "$work/ycsb.txt")"
      count=$([[ "$phase" == load ]] && echo "$records" || echo "$ops")
      cpu_us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$count" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
      printf '%s\t%s\t%s\t%.0f\t%s\n' "$pass" "$n" "$phase" "$tput" "$cpu_us" | tee -a "$results"
    done
    "$repo/scripts/cluster.sh" down >/dev/null 2>&1
    rm -rf "$CLUSTER_DIR"
  done
done

# 2. Failover unavailability.
"$repo/scripts/cluster.sh" up 3 >"$work/up.txt"
master="$(sed -n 's/^master1 listening native=//p' "$work/up.txt")"
"$bin" bench availability --db "cellar://$master" --regions 10 \
  --duration $((rounds * round_s + round_s)) --json "$out/availability.json" \
  >"$out/availability.txt" 2>"$work/probe.log" &
probe=$!
for r in $(seq 1 "$rounds"); do
  sleep "$round_s"
  # The region server holding the most regions of the probe table.
  victim="$("$bin" shell --connect "$master" -e "status 'detailed'" 2>/dev/null \
    | awk '/^    [^ ].*region\(s\)/ { n = $2 + 0; split($0, a, "native "); split(a[2], b, ","); if (n > best) { best = n; addr = b[1] } } END { print addr }')"
  name=""
  for f in "$CLUSTER_DIR"/regionserver*.pid; do
    rs="$(basename "$f" .pid)"
    if grep -q "^listening native=$victim\$" "$CLUSTER_DIR/$rs.out"; then name="$rs"; fi
  done
  [[ -n "$name" ]] || { echo "bench-cluster.sh: no region server at '$victim'" >&2; break; }
  echo "round $r: kill -9 $name ($victim)" >&2
  "$repo/scripts/cluster.sh" kill "$name"
  "$repo/scripts/cluster.sh" add >/dev/null
done
wait "$probe"
cat "$out/availability.txt"
echo "results: $results, $out/availability.json" >&2
