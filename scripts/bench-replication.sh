#!/usr/bin/env bash
# Cellar as a replication sink beside Apache HBase as one, in the same run, fed by the same
# source: an Apache HBase 2.6.4 standalone (the source, ports +1000) ships `usertable` to two
# peers at once, `cellar` (a `cellar standalone --zk`) and `hbase` (a second HBase 2.6.4
# standalone, ports +1100), while YCSB writes to the source as fast as it can (load, then
# workload A). Both sinks are measured the same way (java/move-in/ReplicationProbe.java): a
# probe row written to the source every 250 ms, read on each sink until it is there; the lag
# is acknowledgement to first read. Reports each sink's lag p50/p99/max, the source's write
# rate, and the edits each sink applied per second; writes the table to
# docs/bench/replication-DATE.md. Ends with one line
#   bench-replication: cellar lag p50 A ms p99 B ms; hbase lag p50 C ms p99 D ms; ...
# Every process is stopped by its PID on exit.
#
# Usage: scripts/bench-replication.sh [--cellar BIN] [--work DIR] [--records N] [--seconds S]
#        [--threads T] [--no-doc]
#   --records  YCSB records loaded (default 50000)
#   --seconds  how long workload A runs after the load (default 60)
#   --threads  YCSB client threads (default 4)
#   --no-doc   print the table only, write nothing under docs/
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
records=50000
seconds=60
threads=4
write_doc=1
say() { echo "bench-replication: $*" >&2; }
die() { say "$*"; echo "bench-replication: failed ($*)"; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --records) need_value "$@"; records="$2"; shift 2 ;;
    --seconds) need_value "$@"; seconds="$2"; shift 2 ;;
    --threads) need_value "$@"; threads="$2"; shift 2 ;;
    --no-doc) write_doc=0; shift ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for v in records seconds threads; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "--$v: '${!v}' is not a positive number"
done
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-bench-replication.XXXXXX)}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
say "work dir: $work"
lib="$("$repo/scripts/hbase/fetch.sh")" || die "fetching HBase's jars failed"
# shellcheck source=lib/java-flags.sh
. "$repo/scripts/lib/java-flags.sh"
# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"

bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${bg_pids[@]}"; do wait "$p" 2>/dev/null; done
  for d in source sink; do
    [[ -f "$work/$d/hbase.pid" ]] && { "$repo/scripts/hbase/stop.sh" "$work/$d" >&2 || true; }
  done
  stop_standalone
  "$repo/scripts/zookeeper.sh" stop "$work/zookeeper" >&2 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

binding="$repo/java/ycsb-hbase-binding"
mvn -B -q -Dstyle.color=never -f "$binding/pom.xml" package -DskipTests >&2 \
  && mvn -B -q -Dstyle.color=never -f "$binding/pom.xml" dependency:build-classpath -DincludeScope=runtime \
       -Dmdep.outputFile="$work/ycsb.classpath" >&2 \
  || die "building the YCSB binding failed"
ycsb_cp="$binding/target/cellar-ycsb-hbase-0.1.0.jar:$(cat "$work/ycsb.classpath")"

zk_line="$("$repo/scripts/zookeeper.sh" start "$work/zookeeper")" || die "starting ZooKeeper failed"
zk="${zk_line#zookeeper=}"
start_standalone "$cellar_bin" "$work" --zk "$zk" || die "cellar standalone did not start (log: $work/cellar.log)"
http="$(sed -n 's/^listening http=//p' "$work/cellar.out" | head -n1)"
props="replication.source.sleepforretries=200 replication.source.maxretriesmultiplier=10"
line="$(HBASE_HEAP=1g HBASE_PORT_OFFSET=1000 HBASE_SITE_PROPERTIES="$props" \
  "$repo/scripts/hbase/start.sh" "$work/source")" || die "starting the source HBase failed ($work/source/logs)"
source_addr="${line#listening hbase=}"
line="$(HBASE_HEAP=1g HBASE_PORT_OFFSET=1100 "$repo/scripts/hbase/start.sh" "$work/sink")" \
  || die "starting the sink HBase failed ($work/sink/logs)"
sink_addr="${line#listening hbase=}"
# The sink's counters (HBase's MetricsReplicationSinkSource), on either of its info servers
# (a standalone runs its master and region server in one JVM).
sink_info=("http://127.0.0.1:$((16030 + 1100))/jmx" "http://127.0.0.1:$((16010 + 1100))/jmx")
say "source HBase $source_addr; sinks: Cellar $cellar_addr (ZooKeeper $zk), HBase $sink_addr"

move_in() { # MoveIn.java COMMAND ADDR ARGS...
  timeout 300 java "${hbase_client_java_flags[@]}" -Xmx256m -cp "$lib/*" \
    "$repo/java/move-in/MoveIn.java" "$@" 2>>"$work/java.log"
}
move_in create-usertable "$source_addr" replicated >&2 || die "creating usertable on the source failed"
move_in create-usertable "$sink_addr" >&2 || die "creating usertable on the HBase sink failed"
move_in create-usertable "$cellar_addr" >&2 || die "creating usertable on Cellar failed"
move_in add-peer "$source_addr" cellar "$zk:/hbase" >&2 || die "adding the Cellar peer failed"
move_in add-peer "$source_addr" hbase "127.0.0.1:$((2181 + 1100)):/hbase" >&2 || die "adding the HBase peer failed"

ycsb() { # PHASE OUT PROPS...
  local phase="$1" out="$2"
  shift 2
  timeout 1800 java "${hbase_client_java_flags[@]}" -Xmx512m -cp "$ycsb_cp" site.ycsb.Client "$phase" \
    -db org.cellar.ycsb.HBaseClient -P "$repo/workloads/workloada" -threads "$threads" \
    -p hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry \
    -p "hbase.client.bootstrap.servers=$source_addr" -p columnfamily=family \
    -p recordcount="$records" "$@" >"$out" 2>"$out.err"
}
sink_ops() { # edits applied so far: Cellar's and the HBase sink's
  local c h
  c="$(curl -s --max-time 5 "http://$http/metrics" | awk '$1 == "cellar_replication_sink_entries_total" {print $2}')"
  h="$(curl -s --max-time 5 "${sink_info[@]}" | grep -oE '"sink.appliedOps" ?: ?[0-9]+' | head -n1 | grep -oE '[0-9]+$')"
  echo "${c:-0} ${h:-0}"
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
say "YCSB on the source: load $records records, then workload A for $seconds s, $threads threads"
started=$(date +%s.%N)
read -r c0 h0 <<<"$(sink_ops)"
(
  ycsb -load "$work/ycsb-load.txt" -p operationcount="$records" \
    && ycsb -t "$work/ycsb-a.txt" -p operationcount=1000000000 -p maxexecutiontime="$seconds"
) &
ycsb_pid=$!
bg_pids+=("$ycsb_pid")
# The probe writes while YCSB does (it stops when YCSB is done) and measures only then.
timeout 3600 java "${hbase_client_java_flags[@]}" -Xmx256m -cp "$lib/*" \
  "$repo/java/move-in/ReplicationProbe.java" "$source_addr" 3000 "$work/ycsb-done" \
  "cellar=$cellar_addr" "hbase=$sink_addr" >"$work/probe.txt" 2>>"$work/java.log" &
probe_pid=$!
bg_pids+=("$probe_pid")
wait "$ycsb_pid" || { tail -n 20 "$work/ycsb-a.txt.err" "$work/ycsb-load.txt.err" >&2; die "YCSB failed"; }
wrote=$(date +%s.%N)
touch "$work/ycsb-done"
wait "$probe_pid" || die "the probe failed ($work/java.log)"
bg_pids=()
# Both sinks drain what is left; their applied edits over the writing time are the rate.
for _ in $(seq 1 120); do
  read -r c1 h1 <<<"$(sink_ops)"
  sleep 1
  read -r c2 h2 <<<"$(sink_ops)"
  [[ "$c1" == "$c2" && "$h1" == "$h2" ]] && break
done
# Kept for a look at where time went (per-call durations of the sink's calls).
curl -s --max-time 5 "http://$http/metrics" >"$work/cellar-metrics.txt"
secs="$(awk -v a="$started" -v b="$wrote" 'BEGIN {printf "%.1f", b - a}')"
ops="$(grep -hE '^\[(INSERT|UPDATE)\], Operations' "$work/ycsb-load.txt" "$work/ycsb-a.txt" | awk -F', ' '{s += $3} END {print s + 0}')"
rate() { awk -v n="$1" -v s="$secs" 'BEGIN {printf "%d", n / s}'; }
source_rate="$(rate "$ops")"
cellar_rate="$(rate $((c2 - c0)))"
hbase_rate="$(rate $((h2 - h0)))"
# Calls each sink answered (a batch of WAL entries each): how the source cut its shipments.
cellar_batches="$(awk '$1 == "cellar_replication_sink_batches_total" {print $2}' "$work/cellar-metrics.txt")"
hbase_batches="$(curl -s --max-time 5 "${sink_info[@]}" | grep -oE '"sink.appliedBatches" ?: ?[0-9]+' | head -n1 | grep -oE '[0-9]+$')"
cellar_probe="$(sed -n 's/^probe cellar: //p' "$work/probe.txt")"
hbase_probe="$(sed -n 's/^probe hbase: //p' "$work/probe.txt")"
[[ -n "$cellar_probe" && -n "$hbase_probe" ]] || die "the probe printed no result ($work/probe.txt, $work/java.log)"

table="| sink | edits applied | edits/s over the run | batches | probe lag (ack → first read on the sink) |
|---|---:|---:|---:|---|
| Cellar | $((c2 - c0)) | $cellar_rate | ${cellar_batches:-?} | $cellar_probe |
| Apache HBase 2.6.4 | $((h2 - h0)) | $hbase_rate | ${hbase_batches:-?} | $hbase_probe |"
echo "$table"
echo
echo "source: Apache HBase 2.6.4 standalone, YCSB load $records + workload A ${seconds} s, $threads threads: $ops writes in ${secs%.*} s ($source_rate/s)"
if (( write_doc )); then
  doc="$repo/docs/bench/replication-$(date +%Y-%m-%d).md"
  {
    echo "# Replication sink: Cellar beside Apache HBase 2.6.4 ($(date +%Y-%m-%d))"
    echo
    echo "\`scripts/bench-replication.sh --records $records --seconds $seconds --threads $threads\` on $(nproc) cores, load before the run: $load_before."
    echo
    echo "$table"
    echo
    echo "Source: Apache HBase 2.6.4 standalone; YCSB load then workload A at full speed: $ops writes in ${secs%.*} s ($source_rate/s). Both sinks are peers of the same source in the same run; an edit is one WAL entry (HBase's sink counts \`sink.appliedOps\`, Cellar \`cellar_replication_sink_entries_total\`). The probe writes a row to the source every 250 ms and reads it on each sink until it is there."
  } >"$doc"
  say "wrote $doc"
fi
echo "bench-replication: cellar ${cellar_probe}; hbase ${hbase_probe}; source $source_rate writes/s; applied/s cellar $cellar_rate, hbase $hbase_rate"
