#!/usr/bin/env bash
# The HBase compatibility check: starts a `cellar standalone` with its HBase front end (or, with
# --against-hbase, a real Apache HBase 2.6.4 to validate the tests themselves), runs the JUnit
# suite in java/hbase-compat-tests through the unmodified hbase-client — once through the
# ZooKeeper-free RPC registry, once more against a Cellar cluster (`cellar master` and two
# `cellar regionserver`s on a ZooKeeper this script starts, scripts/zookeeper.sh) with nothing
# but `hbase.zookeeper.quorum` and `zookeeper.znode.parent` — then the `kill -9` test
# (scripts/hbase-kill.sh: the Java client writes while Cellar is killed and restarted; counted as
# one test), then the Java client over TLS and with access control (scripts/hbase-security.sh:
# each case one test), then replication from an unmodified Apache HBase 2.6.4 into Cellar
# (scripts/hbase-replication.sh: HBase's add_peer with Cellar's ZooKeeper, every replicated cell
# compared; one test; again with HBase's root on a MiniDFS, its bulk loads read over HDFS: one
# more), then a snapshot import (scripts/hbase-snapshot-import.sh: an HBase 2.6.4
# snapshot brought in with `cellar import-hbase`, every cell compared; one test; again with HBase's
# root on a MiniDFS, read over HDFS: one more), then HBase's bulk
# load tool loading HBase-written HFiles into Cellar, and a MapReduce job's HFileOutputFormat2
# output (scripts/hbase-bulk-load.sh; one test), HBase's HashTable/SyncTable jobs between HBase and
# Cellar (scripts/hbase-sync-table.sh; one test), the whole move-in runbook with HBase taking writes
# (scripts/hbase-move-in.sh; one test), HBase's own JRuby shell running one command file against
# HBase and Cellar with equal results (scripts/hbase-shell-parity.sh: merge_region and the
# snapshot commands among them; one test), then the real YCSB core with Cellar's HBase binding (load, workloads A and C). Ends with one summary line
#   hbase-compat: N tests passed, M failed; ycsb: ok|failed|skipped
# and exits non-zero on any failure. See docs/hbase-compat-tests.md.
#
# Usage: scripts/hbase-compat.sh [--cellar BIN] [--build] [--against-hbase] [--skip-ycsb]
#          [--skip-kill] [--kill-rounds N] [--records N] [--work DIR]
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
build=0
against_hbase=0
with_ycsb=1
with_kill=1
kill_rounds=5
records=2000
work=""

die() { echo "hbase-compat: $*" >&2; echo "hbase-compat: 0 tests passed, 1 failed; ycsb: failed"; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --build) build=1; shift ;;
    --against-hbase) against_hbase=1; shift ;;
    --skip-ycsb) with_ycsb=0; shift ;;
    --skip-kill) with_kill=0; shift ;;
    --kill-rounds) need_value "$@"; kill_rounds="$2"; shift 2 ;;
    --records) need_value "$@"; records="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$records" =~ ^[1-9][0-9]*$ ]] || die "--records: '$records' is not a positive count"
[[ "$kill_rounds" =~ ^[1-9][0-9]*$ ]] || die "--kill-rounds: '$kill_rounds' is not a positive count"
command -v java >/dev/null 2>&1 || die "java (17+) is not installed"
command -v mvn >/dev/null 2>&1 || die "mvn (Maven 3) is not installed"

work="${work:-$(mktemp -d -t cellar-hbase-compat.XXXXXX)}"
mkdir -p "$work"
echo "work dir: $work" >&2

# --- the server under test, stopped by PID on every exit ------------------------------------
server_pid=""
cleanup() {
  for pidfile in "$work"/cluster-*.pid; do
    [[ -e "$pidfile" ]] || continue
    pid="$(cat "$pidfile")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  if (( against_hbase )); then
    "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
  fi
  "$repo/scripts/zookeeper.sh" stop "$work/zookeeper" >&2 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if (( against_hbase )); then
  "$repo/scripts/hbase/start.sh" "$work/hbase" >&2 || die "starting Apache HBase failed (scripts/hbase/start.sh)"
  addr="127.0.0.1:16020"
  autosplit=false
else
  if (( build )) || [[ ! -x "$cellar_bin" ]]; then
    echo "building the release CLI (cargo build --release -p cellar-cli)..." >&2
    (cd "$repo" && cargo build --release -p cellar-cli) >&2 || die "cargo build --release -p cellar-cli failed"
  fi
  [[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (--cellar BIN or --build)"
  # A small split size, so the split test sees regions split within seconds.
  cat > "$work/cellar.toml" <<TOML
[split]
initial_bytes = 262144
check_interval_ms = 200

[storage]
memstore_flush_bytes = 131072
TOML
  mkdir -p "$work/cellar-data"
  zk_line="$("$repo/scripts/zookeeper.sh" start "$work/zookeeper")" \
    || die "starting ZooKeeper failed (scripts/zookeeper.sh, log: $work/zookeeper/zookeeper.out)"
  zk="${zk_line#zookeeper=}"
  echo "ZooKeeper at $zk" >&2
  "$cellar_bin" standalone --data-dir "$work/cellar-data" --listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --hbase-listen 127.0.0.1:0 --config "$work/cellar.toml" \
    --zk "$zk" >"$work/cellar.out" 2>"$work/cellar.log" &
  server_pid=$!
  addr=""
  for _ in $(seq 1 120); do
    addr="$(sed -n 's/^listening hbase=//p' "$work/cellar.out" | head -n1)"
    [[ -n "$addr" ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      tail -n 20 "$work/cellar.log" >&2
      die "cellar standalone exited at startup (log: $work/cellar.log)"
    fi
    sleep 0.5
  done
  [[ -n "$addr" ]] || die "cellar standalone printed no 'listening hbase=' line within 60 s"
  autosplit=true
  echo "cellar pid $server_pid, HBase front end at $addr" >&2
fi

# --- the JUnit suite -------------------------------------------------------------------------
suite="$repo/java/hbase-compat-tests"
echo "running the JUnit suite against $addr..." >&2
timeout 1200 mvn -B -f "$suite/pom.xml" test "-Dcellar.hbase.bootstrap=$addr" \
  "-Dcellar.autosplit=$autosplit" 2>&1 | tee "$work/junit.log" >&2
mvn_status=${PIPESTATUS[0]}
# Surefire's aggregate line is the last "Tests run:" line without a "Time elapsed" part.
summary="$(grep -E 'Tests run: [0-9]+, Failures: [0-9]+, Errors: [0-9]+, Skipped: [0-9]+ *$' "$work/junit.log" | tail -n1)"
if [[ -n "$summary" ]]; then
  read -r run fails errs skipped < <(sed -E 's/.*Tests run: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+), Skipped: ([0-9]+).*/\1 \2 \3 \4/' <<<"$summary")
  passed=$((run - fails - errs - skipped))
  failed=$((fails + errs))
else
  passed=0
  failed=0
fi
# Maven failed without a test failing (compile error, timeout, crash): count it.
if (( mvn_status != 0 && failed == 0 )); then failed=1; fi

# The same suite again against a cluster, the client told only where ZooKeeper is (its default
# registry) and the cluster's parent znode.
# start_cluster_server NAME ROLE: one cluster process, its address lines in $work/cluster-NAME.out.
start_cluster_server() {
  "$cellar_bin" "$2" --zk "$zk" --root "file://$work/cluster-root" --config "$work/cluster.toml" \
    --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --hbase-listen 127.0.0.1:0 \
    >"$work/cluster-$1.out" 2>"$work/cluster-$1.log" &
  echo $! >"$work/cluster-$1.pid"
}
# wait_cluster_server NAME: its HBase address, once it serves.
wait_cluster_server() {
  local a=""
  for _ in $(seq 1 120); do
    a="$(sed -n 's/^listening hbase=//p' "$work/cluster-$1.out" | head -n1)"
    if [[ -n "$a" ]] && grep -q '^coordination=' "$work/cluster-$1.out"; then echo "$a"; return 0; fi
    kill -0 "$(cat "$work/cluster-$1.pid")" 2>/dev/null || break
    sleep 0.5
  done
  tail -n 20 "$work/cluster-$1.log" >&2
  return 1
}
if (( ! against_hbase )); then
  { cat "$work/cellar.toml"; printf '\n[cluster]\nznode_parent = "/cellar-cluster"\n'; } >"$work/cluster.toml"
  start_cluster_server master master
  master_addr="$(wait_cluster_server master)" || die "cellar master did not start (log: $work/cluster-master.log)"
  start_cluster_server rs1 regionserver
  start_cluster_server rs2 regionserver
  wait_cluster_server rs1 >/dev/null || die "cellar regionserver did not start (log: $work/cluster-rs1.log)"
  wait_cluster_server rs2 >/dev/null || die "cellar regionserver did not start (log: $work/cluster-rs2.log)"
  echo "running the JUnit suite again against a cluster (master $master_addr, two region servers) with only hbase.zookeeper.quorum=$zk..." >&2
  timeout 1200 mvn -B -f "$suite/pom.xml" test "-Dcellar.hbase.bootstrap=$master_addr" \
    "-Dcellar.hbase.zookeeper=$zk" "-Dcellar.hbase.znode.parent=/cellar-cluster" \
    "-Dcellar.autosplit=$autosplit" 2>&1 | tee "$work/junit-zk.log" >&2
  zk_status=${PIPESTATUS[0]}
  summary="$(grep -E 'Tests run: [0-9]+, Failures: [0-9]+, Errors: [0-9]+, Skipped: [0-9]+ *$' "$work/junit-zk.log" | tail -n1)"
  zk_failed=0
  if [[ -n "$summary" ]]; then
    read -r run fails errs skipped < <(sed -E 's/.*Tests run: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+), Skipped: ([0-9]+).*/\1 \2 \3 \4/' <<<"$summary")
    passed=$((passed + run - fails - errs - skipped))
    zk_failed=$((fails + errs))
  fi
  if (( zk_status != 0 && zk_failed == 0 )); then zk_failed=1; fi
  failed=$((failed + zk_failed))
fi

# --- kill -9 while the Java client writes (Cellar only: it kills and restarts its own server) --
if (( with_kill && ! against_hbase )); then
  echo "running the kill -9 test ($kill_rounds rounds, scripts/hbase-kill.sh)..." >&2
  kill_result=""
  if mvn -B -q -f "$suite/pom.xml" dependency:build-classpath -Dmdep.includeScope=test \
       -Dmdep.outputFile="$work/kill.classpath" >&2 && [[ -d "$suite/target/test-classes" ]]; then
    timeout 900 "$repo/scripts/hbase-kill.sh" --cellar "$cellar_bin" --work "$work/kill" \
      --rounds "$kill_rounds" --classpath "$suite/target/test-classes:$(cat "$work/kill.classpath")" \
      2>&1 | tee "$work/kill.log" >&2
    kill_result="$(grep -E '^hbase-kill: (passed|failed)' "$work/kill.log" | tail -n1)"
  else
    echo "hbase-kill: the compiled suite or its classpath is missing" >&2
  fi
  # One test: passed only when the script says so (a crash or a timeout prints no such line).
  if [[ "$kill_result" == "hbase-kill: passed"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
fi

# --- Security: the Java client over TLS and with access control (Cellar only: it starts its
# own servers) ---
if (( ! against_hbase )); then
  echo "running the TLS and access-control cases (scripts/hbase-security.sh)..." >&2
  tls_result=""
  if [[ -s "$work/kill.classpath" ]] || mvn -B -q -f "$suite/pom.xml" dependency:build-classpath \
       -Dmdep.includeScope=test -Dmdep.outputFile="$work/kill.classpath" >&2; then
    timeout 900 "$repo/scripts/hbase-security.sh" --cellar "$cellar_bin" --work "$work/security" \
      --classpath "$suite/target/test-classes:$(cat "$work/kill.classpath")" \
      2>&1 | tee "$work/security.log" >&2
    tls_result="$(grep -E '^hbase-security: [0-9]+ passed, [0-9]+ failed' "$work/security.log" | tail -n1)"
  fi
  if [[ -n "$tls_result" ]]; then
    read -r tls_passed tls_failed < <(sed -E 's/^hbase-security: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/' <<<"$tls_result")
    passed=$((passed + tls_passed))
    failed=$((failed + tls_failed))
  else
    echo "hbase-security: no result" >&2
    failed=$((failed + 1))
  fi
fi

# --- Moving in from an unmodified Apache HBase (Cellar only: each script starts its own
# servers, HBase on ports +300 to +1200) ---
# move_in_test SCRIPT TIMEOUT WHAT [OPTION]: one test, passed only when SCRIPT's last line
# says so; OPTION (e.g. --hdfs) is passed on and names its own work directory and log.
move_in_test() {
  local script="$1" limit="$2" what="$3" option="${4:-}" name="${1%.sh}"
  local run="$name${option:+-${option#--}}"
  echo "running $what (scripts/$script $option)..." >&2
  timeout "$limit" "$repo/scripts/$script" --cellar "$cellar_bin" --work "$work/$run" \
    ${option:+"$option"} 2>&1 | tee "$work/$run.log" >&2
  if grep -Eq "^$name( \([^)]*\))?: passed" "$work/$run.log"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
}
if (( ! against_hbase )); then
  move_in_test hbase-replication.sh 1200 "replication from Apache HBase into Cellar"
  move_in_test hbase-replication.sh 1200 "replication from an HBase whose root is on HDFS" --hdfs
  move_in_test hbase-snapshot-import.sh 1200 "a snapshot import from Apache HBase into Cellar"
  move_in_test hbase-snapshot-import.sh 1200 "a snapshot import from an HBase root on HDFS" --hdfs
  move_in_test hbase-bulk-load.sh 900 "HBase's bulk load tool against Cellar"
  move_in_test hbase-bulk-load.sh 900 "HBase's bulk load tool with its HFiles on HDFS" --hdfs
  move_in_test hbase-sync-table.sh 900 "HBase's HashTable/SyncTable against Cellar"
  move_in_test hbase-move-in.sh 1200 "the move-in runbook with HBase taking writes"
  move_in_test hbase-shell-parity.sh 600 "HBase's own shell against HBase and Cellar"
fi

# --- YCSB: the real core with Cellar's binding -----------------------------------------------
ycsb=skipped
ycsb_check() {
  local file="$1" what="$2" expect="$3" ops
  if grep -Eq -- '-FAILED\]|Return=(ERROR|NOT_FOUND|UNEXPECTED_STATE|BAD_REQUEST|FORBIDDEN|SERVICE_UNAVAILABLE)' "$file"; then
    echo "ycsb $what: failed operations:" >&2
    grep -E -- '-FAILED\]|Return=' "$file" | grep -v 'Return=OK' >&2
    return 1
  fi
  ops="$(grep -E "^\[($what)\], Return=OK, [0-9]+" "$file" | awk -F', ' '{s += $3} END {print s + 0}')"
  if [[ "$ops" != "$expect" ]]; then
    echo "ycsb: $what Return=OK counts add up to $ops, expected $expect ($file)" >&2
    return 1
  fi
}
if (( with_ycsb )); then
  ycsb=ok
  binding="$repo/java/ycsb-hbase-binding"
  # shellcheck source=lib/java-flags.sh
  . "$repo/scripts/lib/java-flags.sh"
  java_flags=("${hbase_client_java_flags[@]}")
  client_props=(
    hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry
    "hbase.client.bootstrap.servers=$addr"
    hbase.client.retries.number=10 hbase.client.operation.timeout=60000
  )
  ycsb_props=()
  for p in "${client_props[@]}"; do ycsb_props+=(-p "$p"); done
  ycsb_props+=(-p columnfamily=family -p recordcount="$records" -p operationcount="$records")
  if ! mvn -B -q -f "$binding/pom.xml" package -DskipTests >&2 \
     || ! mvn -B -q -f "$binding/pom.xml" dependency:build-classpath -DincludeScope=runtime \
            -Dmdep.outputFile="$work/ycsb.classpath" >&2; then
    echo "building the YCSB binding failed" >&2
    ycsb=failed
  fi
  if [[ "$ycsb" == ok ]]; then
    cp="$binding/target/cellar-ycsb-hbase-0.1.0.jar:$(cat "$work/ycsb.classpath")"
    if ! timeout 300 java "${java_flags[@]}" -cp "$cp" org.cellar.ycsb.CreateTable table=usertable \
         columnfamily=family splits=user1,user3,user5,user7 "${client_props[@]}" >"$work/createtable.log" 2>&1; then
      tail -n 20 "$work/createtable.log" >&2
      echo "ycsb: creating usertable failed" >&2
      ycsb=failed
    fi
  fi
  if [[ "$ycsb" == ok ]]; then
    for phase in load a c; do
      if [[ "$phase" == load ]]; then flag=-load; wl=workloada; else flag=-t; wl="workload$phase"; fi
      out="$work/ycsb-$phase.txt"
      echo "ycsb $phase ($records records/operations)..." >&2
      if ! timeout 600 java "${java_flags[@]}" -cp "$cp" site.ycsb.Client "$flag" \
           -db org.cellar.ycsb.HBaseClient -P "$repo/workloads/$wl" "${ycsb_props[@]}" -threads 2 \
           >"$out" 2>"$out.err"; then
        tail -n 20 "$out.err" >&2
        echo "ycsb $phase: the client exited non-zero" >&2
        ycsb=failed
        break
      fi
      grep -E '^\[(OVERALL|INSERT|READ|UPDATE)\], (Throughput|Return)' "$out" >&2
      if [[ "$phase" == load ]]; then
        ycsb_check "$out" INSERT "$records" || { ycsb=failed; break; }
      else
        ycsb_check "$out" 'READ|UPDATE' "$records" || { ycsb=failed; break; }
      fi
    done
  fi
fi

echo "hbase-compat: ${passed} tests passed, ${failed} failed; ycsb: ${ycsb}"
if (( failed > 0 )) || [[ "$ycsb" == failed ]]; then
  exit 1
fi
