#!/usr/bin/env bash
# Cellar as a replication peer of an unmodified Apache HBase 2.6.4: starts a ZooKeeper
# (scripts/zookeeper.sh), `cellar standalone --zk` on it (which publishes HBase's znodes
# there), and an HBase standalone with its own ZooKeeper (ports moved by --port-offset), then
# runs the JUnit test ReplicationSinkTest (java/hbase-compat-tests): the table created on
# both, `add_peer` on HBase with Cellar's ZooKeeper as the cluster key, a workload written to
# HBase, every version of every replicated cell compared. Then replicated bulk loads: HBase runs
# with hbase.replication.bulkload.enabled=true (and a replication cluster id), Cellar with
# --bulk-load-dir on HBase's root directory, and java/hfile-fixtures/ReplicatedBulkLoadToCellar.java
# bulk loads HFiles written by HBase's own writer into a replicated HBase table and compares
# every cell read back from both (Cellar's replication_sink hfiles metric checked too).
# With --hdfs, HBase's root is on a MiniDFS (scripts/minidfs.sh) and Cellar's bulk-load dir is
# that HDFS directory: the bulk-loaded files are read over HDFS.
# Ends with one line
#   hbase-replication[ (hdfs root)]: passed|failed (N cells compared)
# and exits non-zero on failure. Every process is stopped by its PID on exit.
#
# Usage: scripts/hbase-replication.sh [--cellar BIN] [--port-offset N] [--work DIR] [--hdfs]
#   --port-offset  HBase's ports are 2181/16000-16030 plus N (default 300)
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
cellar_bin="$target/release/cellar"
offset=300
work=""
hdfs=0
label="hbase-replication"
die() { echo "$label: $*" >&2; echo "$label: failed (0 cells compared)"; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --port-offset) need_value "$@"; offset="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --hdfs) hdfs=1; label="hbase-replication (hdfs root)"; shift ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$offset" =~ ^[0-9]+$ ]] || die "--port-offset: '$offset' is not a number"
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-replication.XXXXXX)}"
mkdir -p "$work"
echo "work dir: $work" >&2
suite="$repo/java/hbase-compat-tests"

# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
# shellcheck source=lib/minidfs.sh
. "$repo/scripts/lib/minidfs.sh"
cleanup() {
  "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
  stop_standalone
  "$repo/scripts/zookeeper.sh" stop "$work/zookeeper" >&2 || true
  stop_minidfs "$work/dfs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

zk_line="$("$repo/scripts/zookeeper.sh" start "$work/zookeeper")" \
  || die "starting ZooKeeper failed (scripts/zookeeper.sh, log: $work/zookeeper/zookeeper.out)"
zk="${zk_line#zookeeper=}"
# HBase's root directory (scripts/hbase/start.sh keeps it in WORK/hbase/root): the only place
# Cellar may read replicated bulk-loaded files from.
hbase_root="$work/hbase/root"
mkdir -p "$hbase_root"
site=""
if (( hdfs )); then
  start_minidfs "$work/dfs" || die "the MiniDFS did not start (scripts/minidfs.sh, log in $work/dfs)"
  hbase_root="$minidfs_url/hbase"
  site=" hbase.rootdir=$hbase_root"
fi
start_standalone "$cellar_bin" "$work" --zk "$zk" --bulk-load-dir "$hbase_root" \
  || die "cellar standalone did not start (log: $work/cellar.log)"
echo "cellar pid $cellar_pid at $cellar_addr, its ZooKeeper $zk" >&2

# The source ships soon after each write: short waits between its reads of the WAL.
echo "starting Apache HBase 2.6.4 as the replication source (ports +$offset)..." >&2
hb_line="$(HBASE_HEAP="${HBASE_HEAP:-1g}" HBASE_PORT_OFFSET="$offset" \
  HBASE_SITE_PROPERTIES="replication.source.sleepforretries=200 replication.source.maxretriesmultiplier=10 hbase.replication.bulkload.enabled=true hbase.replication.cluster.id=hbase-source$site" \
  "$repo/scripts/hbase/start.sh" "$work/hbase")" \
  || die "starting Apache HBase failed (scripts/hbase/start.sh, logs in $work/hbase/logs)"
source_addr="${hb_line#listening hbase=}"

props=("-Dcellar.hbase.bootstrap=$cellar_addr" "-Dcellar.replication.source=$source_addr"
       "-Dcellar.replication.peer=$zk:/hbase")
timeout 900 mvn -B -f "$suite/pom.xml" test -Dtest=ReplicationSinkTest "${props[@]}" \
  >"$work/junit.log" 2>&1
status=$?
ok=$(grep -cE 'Tests run: 1, Failures: 0, Errors: 0, Skipped: 0' "$work/junit.log")
cells="$(grep -hoE 'replication: [0-9]+ cells on HBase' "$work/junit.log" \
  "$suite"/target/surefire-reports/*ReplicationSinkTest*-output.txt 2>/dev/null | head -n1 | grep -oE '[0-9]+' || true)"
failed=0
if (( status != 0 || ok == 0 )); then
  tail -n 40 "$work/junit.log" >&2
  echo "$label: ReplicationSinkTest failed (log: $work/junit.log)" >&2
  failed=1
fi

# Replicated bulk loads, with HBase's own writer and bulk load tool (HBase's server jars).
lib="$("$repo/scripts/hbase/fetch.sh")" || die "fetching HBase's jars failed"
bulk_out="$(cd "$work" && timeout 600 java -Xmx512m -cp "$lib/*" \
  "$repo/java/hfile-fixtures/ReplicatedBulkLoadToCellar.java" "$source_addr" "$cellar_addr" "$zk:/hbase" "$work" \
  2>"$work/bulk-load.log")"
bulk_status=$?
[[ -n "$bulk_out" ]] && echo "$bulk_out" >&2
bulk_cells="$(echo "$bulk_out" | sed -n 's/^replicated-bulk-load: \([0-9]*\) cells compared$/\1/p' | head -n1)"
if (( bulk_status != 0 )) || [[ -z "$bulk_cells" ]]; then
  grep -v -E "^(SLF4J|WARNING)" "$work/bulk-load.log" | tail -n 40 >&2
  echo "$label: the replicated bulk load failed (exit $bulk_status; log: $work/bulk-load.log)" >&2
  failed=1
else
  # Cellar counted the files it read (cellar_replication_sink_hfiles_total).
  http="$(sed -n 's/^listening http=//p' "$work/cellar.out" | head -n1)"
  hfiles="$(curl -fsS --max-time 10 "http://$http/metrics" 2>/dev/null \
    | sed -n 's/^cellar_replication_sink_hfiles_total \([0-9]*\).*/\1/p' | head -n1)"
  echo "cellar_replication_sink_hfiles_total ${hfiles:-none}" >&2
  if [[ -z "$hfiles" ]] || (( hfiles < 1 )); then
    echo "$label: Cellar's metrics count no replicated bulk-loaded file" >&2
    failed=1
  fi
fi
total=$(( ${cells:-0} + ${bulk_cells:-0} ))
if (( failed == 0 )); then
  echo "$label: passed ($total cells compared)"
  exit 0
fi
echo "$label: failed ($total cells compared; logs: $work/junit.log, $work/bulk-load.log, HBase: $work/hbase/logs, Cellar: $work/cellar.log)"
exit 1
