#!/usr/bin/env bash
# HBase's own bulk load tool (BulkLoadHFilesTool, what `completebulkload` runs) against Cellar:
# starts `cellar standalone --bulk-load-dir WORK/input --bulk-load-dir WORK/mr`, then runs with
# Apache HBase 2.6.4's jars
#  1. java/hfile-fixtures/BulkLoadToCellar.java: HFiles written by HBase's own writer, split by
#     the tool at the table's region boundaries, loaded through PrepareBulkLoad/BulkLoadHFile/
#     CleanupBulkLoad, every cell read back and compared;
#  2. java/hfile-fixtures/MapReduceBulkLoad.java: a MapReduce job in Hadoop's local runner
#     writing HFiles through HFileOutputFormat2.configureIncrementalLoad (the table's descriptor
#     and regions read from the server; versions, a 1.5 MiB cell, delete markers of every kind),
#     loaded by the tool from WORK/mr/hfiles, read back raw and plain and compared cell for cell
#     (jars: scripts/hbase/fetch.sh mapreduce).
# With --hdfs, step 1 writes its HFiles to a MiniDFS (scripts/minidfs.sh) and Cellar's bulk-load
# dir is that HDFS directory: the tool names files on HDFS and Cellar reads them over HDFS
# (step 2 is left out).
# Ends with
#   hbase-bulk-load[ (hdfs input)]: passed|failed (N cells compared)
# N summed over both, and exits non-zero if either fails. The server is stopped by its PID on
# exit.
#
# Usage: scripts/hbase-bulk-load.sh [--cellar BIN] [--work DIR] [--against-hbase] [--hdfs]
#   --against-hbase  the same programs against an Apache HBase 2.6.4 standalone instead (ports
#                    +500): what they check holds on HBase itself
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
against_hbase=0
hdfs=0
label="hbase-bulk-load"
die() { echo "$label: $*" >&2; echo "$label: failed (0 cells compared)"; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) [[ $# -ge 2 ]] || die "--cellar needs a value"; cellar_bin="$2"; shift 2 ;;
    --work) [[ $# -ge 2 ]] || die "--work needs a value"; work="$2"; shift 2 ;;
    --against-hbase) against_hbase=1; shift ;;
    --hdfs) hdfs=1; label="hbase-bulk-load (hdfs input)"; shift ;;
    -h|--help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
(( against_hbase && hdfs )) && die "--hdfs runs against Cellar only"
(( against_hbase )) || [[ -x "$cellar_bin" ]] \
  || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-bulk-load.XXXXXX)}"
mkdir -p "$work/input" "$work/mr"
work="$(cd "$work" && pwd)"
lib="$("$repo/scripts/hbase/fetch.sh")" || die "fetching HBase's jars failed"
mrlib="$("$repo/scripts/hbase/fetch.sh" mapreduce)" || die "fetching HBase's MapReduce jars failed"

# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
# shellcheck source=lib/minidfs.sh
. "$repo/scripts/lib/minidfs.sh"
cleanup() {
  stop_standalone
  (( against_hbase )) && "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2
  stop_minidfs "$work/dfs"
  true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if (( against_hbase )); then
  hb_line="$(HBASE_HEAP="${HBASE_HEAP:-1g}" HBASE_PORT_OFFSET=500 "$repo/scripts/hbase/start.sh" "$work/hbase")" \
    || die "starting Apache HBase failed (logs in $work/hbase/logs)"
  cellar_addr="${hb_line#listening hbase=}"
  echo "Apache HBase at $cellar_addr" >&2
elif (( hdfs )); then
  start_minidfs "$work/dfs" || die "the MiniDFS did not start (scripts/minidfs.sh, log in $work/dfs)"
  input_url="$minidfs_url/bulk-input"
  start_standalone "$cellar_bin" "$work" --bulk-load-dir "$input_url" \
    || die "cellar standalone did not start (log: $work/cellar.log)"
else
  start_standalone "$cellar_bin" "$work" --bulk-load-dir "$work/input" --bulk-load-dir "$work/mr" \
    || die "cellar standalone did not start (log: $work/cellar.log)"
  echo "cellar pid $cellar_pid at $cellar_addr" >&2
fi

total=0
failed=0
# run_check NAME PREFIX CLASSPATH PROGRAM: runs the Java program against $cellar_addr, its
# stderr in $work/NAME.log; adds the cells its "PREFIX: N cells compared" line counts to total.
run_check() {
  local name="$1" prefix="$2" cp="$3" program="$4" out status cells
  shift 4
  # In WORK: the local job runner links its distributed cache into the working directory.
  out="$(cd "$work" && timeout 300 java -Xmx1g -cp "$cp" "$program" "$cellar_addr" "$work" "$@" 2>"$work/$name.log")"
  status=$?
  [[ -n "$out" ]] && echo "$out"
  cells="$(echo "$out" | sed -n "s/^$prefix: \([0-9]*\) cells compared.*\$/\1/p" | head -n1)"
  total=$(( total + ${cells:-0} ))
  if (( status != 0 )) || ! echo "$out" | grep -q -x "$prefix: [0-9]* cells compared"; then
    grep -v -E "^(SLF4J|WARNING)" "$work/$name.log" | tail -n 40 >&2
    echo "$label: $name failed (exit $status; log: $work/$name.log)" >&2
    failed=1
  fi
}
if (( hdfs )); then
  run_check java bulk-load "$lib/*" "$repo/java/hfile-fixtures/BulkLoadToCellar.java" "$input_url"
else
  run_check java bulk-load "$lib/*" "$repo/java/hfile-fixtures/BulkLoadToCellar.java"
  run_check mapreduce mapreduce-bulk-load "$mrlib/*" "$repo/java/hfile-fixtures/MapReduceBulkLoad.java"
fi

if (( failed == 0 )); then
  echo "$label: passed ($total cells compared)"
  exit 0
fi
if (( against_hbase )); then
  echo "hbase-bulk-load: failed ($total cells compared; logs: $work/java.log, $work/mapreduce.log, HBase: $work/hbase/logs)"
else
  echo "$label: failed ($total cells compared; logs: $work/java.log, $work/mapreduce.log, Cellar: $work/cellar.log)"
fi
exit 1
