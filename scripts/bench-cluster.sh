#!/usr/bin/env bash
# Cluster benchmarks (docs/benchmarks.md, "Cluster"), all on this machine and 127.0.0.1:
#
# 1. YCSB load, A and C with the native client (`cellar bench`) and the Java client (YCSB 0.17
#    with the HBase 2.6 client, given only the ZooKeeper quorum) against a cluster of 1, 2
#    and 3 region servers (local-disk root, scripts/cluster.sh), PASSES passes with the order
#    of the sizes rotated between passes: throughput, and the servers' CPU per operation (user
#    + system time of the master and every region server, from /proc, over each phase).
# 2. Failover: a cluster of 3 region servers; `cellar bench availability` probes every region
#    of a 10-region table every 50 ms while, every ROUND_S seconds, the region server holding
#    the most regions is killed with SIGKILL and a new one is started: how long each region
#    could not be written.
#
# Usage: scripts/bench-cluster.sh [OUT_DIR]   (default docs/bench/cluster)
# Env: PASSES (2), RECORDS (20000), OPS (20000), THREADS (8), ROUNDS (5), ROUND_S (20),
#      CLIENTS ("native java"; the Java one needs Java 17 and Maven),
#      ZK_SESSION_TIMEOUT_MS (4000: how soon a dead region server is noticed).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/docs/bench/cluster}"
mkdir -p "$out"
passes="${PASSES:-2}" records="${RECORDS:-20000}" ops="${OPS:-20000}" threads="${THREADS:-8}"
rounds="${ROUNDS:-5}" round_s="${ROUND_S:-20}" clients="${CLIENTS:-native java}"
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

# The Java client: YCSB 0.17's core with the HBase binding (java/ycsb-hbase-binding), the
# unmodified HBase 2.6 client finding the cluster through ZooKeeper alone.
java_cp=""
if [[ " $clients " == *" java "* ]]; then
  binding="$repo/java/ycsb-hbase-binding"
  echo "building the YCSB HBase binding..." >&2
  mvn -B -q -f "$binding/pom.xml" package -DskipTests >&2
  mvn -B -q -f "$binding/pom.xml" dependency:build-classpath -DincludeScope=runtime \
    -Dmdep.outputFile="$work/ycsb.classpath" >&2
  java_cp="$binding/target/cellar-ycsb-hbase-0.1.0.jar:$(cat "$work/ycsb.classpath")"
fi
# shellcheck source=lib/java-flags.sh
. "$repo/scripts/lib/java-flags.sh"
java_flags=("${hbase_client_java_flags[@]}")
# The 12-region layout `cellar bench load -p presplit=12` creates, for the Java client's table.
split_list="$(awk 'BEGIN { for (i = 1; i < 12; i++) printf "%s\x27user%d\x27", (i > 1 ? ", " : ""), 1000 + int(i * 8999 / 12) }')"

# ycsb CLIENT PHASE: one YCSB phase against the cluster up now; output in $work/ycsb.txt.
ycsb() {
  local client="$1" phase="$2" wl common
  wl="$repo/workloads/workload$([[ "$phase" == c ]] && echo c || echo a)"
  common=(-P "$wl" -p "recordcount=$records" -p "operationcount=$ops" -threads "$threads")
  if [[ "$client" == native ]]; then
    local kind=run extra=()
    [[ "$phase" == load ]] && kind=load extra=(-p presplit=12)
    "$bin" bench "$kind" "${common[@]}" "${extra[@]}" --db "cellar://$master" >"$work/ycsb.txt" 2>"$work/ycsb.err"
  else
    local flag=-t
    if [[ "$phase" == load ]]; then
      flag=-load
      "$bin" shell --connect "$master" -e "create 'usertable_java', 'family', {SPLITS => [$split_list]}" >/dev/null
    fi
    java "${java_flags[@]}" -cp "$java_cp" site.ycsb.Client "$flag" -db org.cellar.ycsb.HBaseClient \
      "${common[@]}" -p table=usertable_java -p columnfamily=family \
      -p "hbase.zookeeper.quorum=$zk" >"$work/ycsb.txt" 2>"$work/ycsb.err"
  fi || { tail -n 20 "$work/ycsb.err" >&2; echo "bench-cluster.sh: YCSB $phase ($client) failed" >&2; exit 1; }
}

results="$out/ycsb.tsv"
echo -e "pass\tservers\tclient\tphase\tops_per_s\tserver_cpu_us_per_op" >"$results"
sizes=(1 2 3)
for pass in $(seq 1 "$passes"); do
  shift_by=$(( (pass - 1) % 3 ))
  order=("${sizes[@]:$shift_by}" "${sizes[@]:0:$shift_by}")
  for n in "${order[@]}"; do
    "$repo/scripts/cluster.sh" up "$n" >"$work/up.txt"
    master="$(sed -n 's/^master1 listening native=//p' "$work/up.txt")"
    zk="$(sed -n 's/^zookeeper=//p' "$work/up.txt")"
    for client in $clients; do
      for phase in load a c; do
        before="$(cpu_ticks)"
        ycsb "$client" "$phase"
        after="$(cpu_ticks)"
        tput="$(sed -n 's/^\[OVERALL\], Throughput(ops\/sec), //p' "$work/ycsb.txt")"
        count=$([[ "$phase" == load ]] && echo "$records" || echo "$ops")
        cpu_us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$count" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
        printf '%s\t%s\t%s\t%s\t%.0f\t%s\n' "$pass" "$n" "$client" "$phase" "$tput" "$cpu_us" | tee -a "$results"
      done
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
