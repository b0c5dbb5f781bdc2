#!/usr/bin/env bash
# The move-in runbook (docs/migration.md) end to end, with HBase taking writes the whole time:
# starts a ZooKeeper (scripts/zookeeper.sh), `cellar standalone --zk --bulk-load-dir` on it,
# and an Apache HBase 2.6.4 standalone (ports +800, its root on local disk). Then, as an
# operator would:
#   1. on HBase: tables `usertable` (YCSB's) and `orders` (two families) with
#      REPLICATION_SCOPE => 1, and peer `cellar` (Cellar's ZooKeeper) added disabled
#      (java/move-in/MoveIn.java, HBase's own client);
#   2. writes start on HBase and run to the end: YCSB (load, then workload A for a while) on
#      usertable, and puts, increments, appends and every kind of delete on orders;
#   3. snapshots of both tables, taken during the writes, imported with `cellar import-hbase`;
#   4. the peer enabled: replication catches up while the writes go on; a few seconds in,
#      Cellar is killed with SIGKILL while the source's batches arrive and started again on
#      the same data and ports (--no-kill leaves it running): the source retries;
#   5. writes stop; `cellar verify-against` compares every version of every cell of both
#      tables (deletes applied: nothing lost, nothing applied twice across the kill),
#      re-reading ranges still in flight, and HBase's own
#      HashTable/SyncTable (scripts/lib/sync-table.sh) must report 0 differences;
#   6. HBase stopped; YCSB reads every record from Cellar (the clients switched).
# Ends with one line
#   hbase-move-in: passed|failed (...)
# and exits non-zero on failure. Every process is stopped by its PID on exit.
#
# Usage: scripts/hbase-move-in.sh [--cellar BIN] [--work DIR] [--records N] [--seconds S]
#                                 [--port-offset N] [--no-kill]
#   --records  YCSB records loaded while the snapshot is taken (default 20000)
#   --seconds  how long YCSB workload A runs after the load (default 30)
#   --port-offset  HBase's ports are 2181/16000-16030 plus N (default 800)
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
records=20000
seconds=30
offset=800
kill_sink=1
say() { echo "hbase-move-in: $*" >&2; }
die() { say "$*"; echo "hbase-move-in: failed ($*)"; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --records) need_value "$@"; records="$2"; shift 2 ;;
    --seconds) need_value "$@"; seconds="$2"; shift 2 ;;
    --no-kill) kill_sink=0; shift ;;
    --port-offset) need_value "$@"; offset="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$records" =~ ^[1-9][0-9]*$ ]] || die "--records: '$records' is not a positive number"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "--seconds: '$seconds' is not a positive number"
[[ "$offset" =~ ^[0-9]+$ ]] || die "--port-offset: '$offset' is not a number"
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-move-in.XXXXXX)}"
mkdir -p "$work/hbase/root"
work="$(cd "$work" && pwd)"
say "work dir: $work"
lib="$("$repo/scripts/hbase/fetch.sh")" || die "fetching HBase's jars failed"
# shellcheck source=lib/java-flags.sh
. "$repo/scripts/lib/java-flags.sh"
# shellcheck source=lib/sync-table.sh
. "$repo/scripts/lib/sync-table.sh"
# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"

bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${bg_pids[@]}"; do wait "$p" 2>/dev/null; done
  [[ -f "$work/hbase/hbase.pid" ]] && { "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true; }
  stop_standalone
  "$repo/scripts/zookeeper.sh" stop "$work/zookeeper" >&2 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the YCSB binding, built as hbase-compat.sh builds it ------------------------------------
binding="$repo/java/ycsb-hbase-binding"
mvn -B -q -Dstyle.color=never -f "$binding/pom.xml" package -DskipTests >&2 \
  && mvn -B -q -Dstyle.color=never -f "$binding/pom.xml" dependency:build-classpath -DincludeScope=runtime \
       -Dmdep.outputFile="$work/ycsb.classpath" >&2 \
  || die "building the YCSB binding failed"
ycsb_cp="$binding/target/cellar-ycsb-hbase-0.1.0.jar:$(cat "$work/ycsb.classpath")"
sync_table_fetch >/dev/null || die "fetching HBase's MapReduce jars failed"

# --- the servers ------------------------------------------------------------------------------
zk_line="$("$repo/scripts/zookeeper.sh" start "$work/zookeeper")" \
  || die "starting ZooKeeper failed (log: $work/zookeeper/zookeeper.out)"
zk="${zk_line#zookeeper=}"
start_standalone "$cellar_bin" "$work" --zk "$zk" --bulk-load-dir "$work/hbase/root" \
  || die "cellar standalone did not start (log: $work/cellar.log)"
native="$(sed -n 's/^listening native=//p' "$work/cellar.out" | head -n1)"
http="$(sed -n 's/^listening http=//p' "$work/cellar.out" | head -n1)"
say "cellar pid $cellar_pid: HBase port $cellar_addr, native $native, ZooKeeper $zk"
hb_line="$(HBASE_HEAP="${HBASE_HEAP:-1g}" HBASE_PORT_OFFSET="$offset" \
  HBASE_SITE_PROPERTIES="replication.source.sleepforretries=200 replication.source.maxretriesmultiplier=10" \
  "$repo/scripts/hbase/start.sh" "$work/hbase")" \
  || die "starting Apache HBase failed (logs in $work/hbase/logs)"
hbase_addr="${hb_line#listening hbase=}"
hbase_zk="127.0.0.1:$((2181 + offset)):/hbase"
say "Apache HBase 2.6.4 at $hbase_addr (ZooKeeper $hbase_zk)"

move_in() { # MoveIn.java COMMAND ARGS... against HBase
  timeout 300 java "${hbase_client_java_flags[@]}" -Xmx512m -cp "$lib/*" \
    "$repo/java/move-in/MoveIn.java" "$1" "$hbase_addr" "${@:2}" 2>>"$work/move-in-java.log"
}
ycsb() { # PHASE WORKLOAD ADDR OUT [PROPS...]
  local phase="$1" wl="$2" addr="$3" out="$4"
  shift 4
  timeout 900 java "${hbase_client_java_flags[@]}" -Xmx512m -cp "$ycsb_cp" site.ycsb.Client "$phase" \
    -db org.cellar.ycsb.HBaseClient -P "$repo/workloads/$wl" -threads 2 \
    -p hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry \
    -p "hbase.client.bootstrap.servers=$addr" -p hbase.client.retries.number=10 \
    -p columnfamily=family -p recordcount="$records" "$@" >"$out" 2>"$out.err"
}
ycsb_failures() { # OUT: failed operations, if any
  grep -E -- '-FAILED\]|Return=(ERROR|NOT_FOUND|UNEXPECTED_STATE|BAD_REQUEST|FORBIDDEN|SERVICE_UNAVAILABLE)' "$1"
}

# --- 1. tables and the disabled peer on HBase ------------------------------------------------
move_in setup "$zk:/hbase" >&2 || die "creating the tables and the peer on HBase failed ($work/move-in-java.log)"

# --- 2. writes on HBase, from now to the end --------------------------------------------------
started=$(date +%s)
(
  ycsb -load workloada "$hbase_addr" "$work/ycsb-load.txt" -p operationcount="$records" \
    && ycsb -t workloada "$hbase_addr" "$work/ycsb-a.txt" -p operationcount=100000000 \
         -p maxexecutiontime="$seconds"
) &
ycsb_pid=$!
bg_pids+=("$ycsb_pid")
move_in churn "$work/stop-churn" 900 >"$work/churn.txt" &
churn_pid=$!
bg_pids+=("$churn_pid")

# --- 3. snapshots during the writes, imported ------------------------------------------------
sleep 8
for t in usertable orders; do
  move_in snapshot "$t" "$t-move" >&2 || die "snapshot of $t failed ($work/move-in-java.log)"
done
for t in usertable orders; do
  "$cellar_bin" import-hbase --snapshot "$t-move" --hbase-root "$work/hbase/root" --connect "$native" \
    >"$work/import-$t.txt" 2>&1 || { tail -n 20 "$work/import-$t.txt" >&2; die "import-hbase of $t-move failed"; }
  tail -n 1 "$work/import-$t.txt" >&2
done

# --- 4. the peer enabled while the writes go on ---------------------------------------------
move_in enable-peer >&2 || die "enabling the peer failed ($work/move-in-java.log)"
enabled=$(date +%s)
# Cellar's sink lag (now minus the source's write time of the last edit applied), sampled
# twice a second while the writes go on.
(
  while [[ ! -e "$work/stop-churn" ]]; do
    curl -s --max-time 2 "http://$http/metrics" | awk '$1 == "cellar_replication_sink_lag_ms" {print $2}'
    sleep 0.5
  done
) >"$work/lag-samples.txt" &
sampler_pid=$!
bg_pids+=("$sampler_pid")
if (( kill_sink )); then
  # The sink dies while batches arrive: wait until it has applied some, then SIGKILL it.
  batches_total() {
    curl -s --max-time 2 "http://$http/metrics" \
      | awk '$1 == "cellar_replication_sink_batches_total" {print $2}'
  }
  for _ in $(seq 1 60); do
    [[ "$(batches_total)" =~ ^[0-9]+$ ]] && (( $(batches_total) >= 5 )) && break
    sleep 0.5
  done
  before="$(batches_total)"
  kill9_restart_standalone "$cellar_bin" "$work" --zk "$zk" --bulk-load-dir "$work/hbase/root" \
    || die "cellar standalone did not start again after kill -9 (log: $work/cellar.log)"
  say "Cellar killed with SIGKILL after ${before:-no} replicated batches, and started again (pid $cellar_pid)"
  summary_kill="sink killed with SIGKILL after ${before:-0} batches"
fi

# --- 5. writes stop; replication catches up; both tables compared ---------------------------
wait "$ycsb_pid"
ycsb_status=$?
touch "$work/stop-churn"
wait "$churn_pid" || die "the writer of orders failed ($work/move-in-java.log)"
wait "$sampler_pid"
bg_pids=()
(( ycsb_status == 0 )) || { tail -n 20 "$work/ycsb-a.txt.err" >&2; die "YCSB on HBase exited $ycsb_status"; }
for f in "$work/ycsb-load.txt" "$work/ycsb-a.txt"; do
  if ycsb_failures "$f" >&2; then die "YCSB on HBase had failed operations ($f)"; fi
done
say "writes stopped after $(( $(date +%s) - started )) s ($(( $(date +%s) - enabled )) s with the peer enabled): $(cat "$work/churn.txt")"
grep -hE '^\[(INSERT|UPDATE)\], Operations' "$work/ycsb-load.txt" "$work/ycsb-a.txt" >&2

summary=()
[[ -n "${summary_kill:-}" ]] && summary+=("$summary_kill")
for t in usertable orders; do
  "$cellar_bin" verify-against --hbase "$hbase_addr" --cellar "$cellar_addr" --table "$t" \
    --recheck 20 --recheck-pause 3 >"$work/verify-$t.txt" 2>"$work/verify-$t.err"
  status=$?
  line="$(grep '^verify-against:' "$work/verify-$t.txt")"
  say "$t: $line"
  if (( status != 0 )); then
    head -n 40 "$work/verify-$t.txt" >&2
    die "verify-against $t: ${line:-no result (see $work/verify-$t.err)}"
  fi
  summary+=("$t $(echo "$line" | grep -oE '[0-9]+ rows, [0-9]+ cells') equal")
done
# Every record YCSB loaded was compared, not fewer.
grep -q "verify-against: equal: $records rows" "$work/verify-usertable.txt" \
  || die "verify-against compared another number of usertable rows than the $records loaded"
sink="$(curl -s "http://$http/metrics" | grep -E '^cellar_replication_sink_(entries_total|cells_total|failed_batches_total) ' | tr '\n' ' ')"
lag="$(sort -n "$work/lag-samples.txt" | awk '{v[NR] = $1} END {
  if (NR == 0) { print "no samples"; exit }
  i50 = int(NR * 0.50); if (i50 < 1) i50 = 1
  i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
  printf "p50 %d ms, p99 %d ms, max %d ms over %d samples", v[i50], v[i99], v[NR], NR }')"
say "Cellar's sink while HBase took writes: lag $lag; totals: $sink"
summary+=("sink lag $lag")

for t in usertable orders; do
  line="$(sync_table_run --source-zk "$hbase_zk" --target-zk "$zk:/hbase" --table "$t" \
    --work "$work/sync-$t" --dryrun)" || die "SyncTable on $t failed (logs in $work/sync-$t/logs)"
  say "$t: $line"
  diffs="$(sync_table_differences "$line")"
  [[ "$diffs" == 0 ]] || die "SyncTable finds $diffs differences in $t: $line"
  summary+=("SyncTable $t: $(sync_table_counter "$line" matched) hashes matched, 0 differences")
done

# --- 6. HBase stopped; the clients read from Cellar ------------------------------------------
"$repo/scripts/hbase/stop.sh" "$work/hbase" >&2
ycsb -t workloadc "$cellar_addr" "$work/ycsb-c-cellar.txt" -p operationcount="$records" \
  || { tail -n 20 "$work/ycsb-c-cellar.txt.err" >&2; die "YCSB workload C on Cellar failed"; }
if ycsb_failures "$work/ycsb-c-cellar.txt" >&2; then die "YCSB reads on Cellar failed after the switch"; fi
reads="$(grep -E '^\[READ\], Return=OK, [0-9]+' "$work/ycsb-c-cellar.txt" | awk -F', ' '{print $3}')"
[[ "$reads" == "$records" ]] || die "YCSB read ${reads:-0} of $records records from Cellar"
summary+=("$reads YCSB reads on Cellar after HBase stopped")

echo "hbase-move-in: passed ($(IFS=';'; echo "${summary[*]}" | sed 's/;/; /g'))"
