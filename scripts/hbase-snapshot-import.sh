#!/usr/bin/env bash
# An HBase table brought into Cellar from one of its snapshots, checked against the real thing:
# starts an Apache HBase 2.6.4 standalone (its root on local disk) and `cellar standalone
# --bulk-load-dir` on that root, then runs the JUnit test SnapshotImportTest
# (java/hbase-compat-tests): a table written on HBase (split keys, versions, every delete kind,
# a 6 MiB cell, two flushes, a region split whose daughters still read their parent's files),
# snapshotted, imported with `cellar import-hbase`, and compared cell for cell (raw, every
# version) with HBase's clone of the same snapshot; a damaged HFile and a missing one refused
# before anything is created, and so is a clone's snapshot whose HFileLink target is gone; a
# family's TTL and another's KEEP_DELETED_CELLS with their effects; a MOB family refused with HBase's steps out of MOB, and imported
# once they are done. With --hdfs, HBase's root is on a MiniDFS (scripts/minidfs.sh),
# Cellar is given the HDFS directory as its bulk-load dir, and the import reads the snapshot
# and its HFiles over HDFS (the damaged-file case, which edits files in place, is local only).
# Ends with one line
#   hbase-snapshot-import[ (hdfs root)]: passed|failed (N cells compared)
# and exits non-zero on failure. Every process is stopped by its PID on exit.
#
# Usage: scripts/hbase-snapshot-import.sh [--cellar BIN] [--port-offset N] [--work DIR] [--hdfs]
#   --port-offset  HBase's ports are 2181/16000-16030 plus N (default 400)
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
cellar_bin="$target/release/cellar"
offset=400
work=""
hdfs=0
label="hbase-snapshot-import"
die() { echo "$label: $*" >&2; echo "$label: failed (0 cells compared)"; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --port-offset) need_value "$@"; offset="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --hdfs) hdfs=1; label="hbase-snapshot-import (hdfs root)"; shift ;;
    -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$offset" =~ ^[0-9]+$ ]] || die "--port-offset: '$offset' is not a number"
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-snapshot-import.XXXXXX)}"
mkdir -p "$work/hbase/root"
work="$(cd "$work" && pwd)"
echo "work dir: $work" >&2
suite="$repo/java/hbase-compat-tests"

# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
# shellcheck source=lib/minidfs.sh
. "$repo/scripts/lib/minidfs.sh"
cleanup() {
  "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
  stop_standalone
  stop_minidfs "$work/dfs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

root="$work/hbase/root"
site=""
if (( hdfs )); then
  start_minidfs "$work/dfs" || die "the MiniDFS did not start (scripts/minidfs.sh, log in $work/dfs)"
  root="$minidfs_url/hbase"
  site="hbase.rootdir=$root"
fi
start_standalone "$cellar_bin" "$work" --bulk-load-dir "$root" \
  || die "cellar standalone did not start (log: $work/cellar.log)"
native="$(sed -n 's/^listening native=//p' "$work/cellar.out" | head -n1)"
echo "cellar pid $cellar_pid at $cellar_addr (native $native)" >&2

echo "starting Apache HBase 2.6.4 (ports +$offset)..." >&2
hb_line="$(HBASE_HEAP="${HBASE_HEAP:-1g}" HBASE_PORT_OFFSET="$offset" HBASE_CODECS=1 \
  HBASE_SITE_PROPERTIES="$site${HBASE_SITE_PROPERTIES:+ $HBASE_SITE_PROPERTIES}" \
  "$repo/scripts/hbase/start.sh" "$work/hbase")" \
  || die "starting Apache HBase failed (scripts/hbase/start.sh, logs in $work/hbase/logs)"
source_addr="${hb_line#listening hbase=}"

props=("-Dcellar.hbase.bootstrap=$cellar_addr" "-Dcellar.snapshot.source=$source_addr"
       "-Dcellar.snapshot.root=$root" "-Dcellar.snapshot.cellar=$cellar_bin"
       "-Dcellar.snapshot.native=$native")
timeout 900 mvn -B -f "$suite/pom.xml" test -Dtest=SnapshotImportTest "${props[@]}" \
  >"$work/junit.log" 2>&1
status=$?
skipped=$(( hdfs ? 1 : 0 ))
ok=$(grep -cE "Tests run: 4, Failures: 0, Errors: 0, Skipped: $skipped" "$work/junit.log")
cells="$(grep -ahoE 'snapshot-import: [0-9]+ cells compared' "$work/junit.log" \
  "$suite"/target/surefire-reports/*SnapshotImportTest*-output.txt 2>/dev/null | head -n1 | grep -oE '[0-9]+' || true)"
if (( status == 0 && ok > 0 )); then
  echo "$label: passed (${cells:-0} cells compared)"
  exit 0
fi
tail -n 60 "$work/junit.log" >&2
echo "$label: failed (${cells:-0} cells compared; log: $work/junit.log, HBase: $work/hbase/logs, Cellar: $work/cellar.log)"
exit 1
