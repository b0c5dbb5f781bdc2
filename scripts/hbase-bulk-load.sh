#!/usr/bin/env bash
# HBase's own bulk load tool (BulkLoadHFilesTool, what `completebulkload` runs) against Cellar:
# starts `cellar standalone --bulk-load-dir WORK/input`, then runs
# java/hfile-fixtures/BulkLoadToCellar.java with Apache HBase 2.6.4's jars: HFiles written by
# HBase's own writer, split by the tool at the table's region boundaries, loaded through
# PrepareBulkLoad/BulkLoadHFile/CleanupBulkLoad, every cell read back and compared. Ends with
#   hbase-bulk-load: passed|failed (N cells compared)
# and exits non-zero on failure. The server is stopped by its PID on exit.
#
# Usage: scripts/hbase-bulk-load.sh [--cellar BIN] [--work DIR]
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
die() { echo "hbase-bulk-load: $*" >&2; echo "hbase-bulk-load: failed (0 cells compared)"; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) [[ $# -ge 2 ]] || die "--cellar needs a value"; cellar_bin="$2"; shift 2 ;;
    --work) [[ $# -ge 2 ]] || die "--work needs a value"; work="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-bulk-load.XXXXXX)}"
mkdir -p "$work/input"
work="$(cd "$work" && pwd)"
lib="$("$repo/scripts/hbase/fetch.sh")" || die "fetching HBase's jars failed"

# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
trap stop_standalone EXIT
trap 'exit 130' INT TERM
start_standalone "$cellar_bin" "$work" --bulk-load-dir "$work/input" \
  || die "cellar standalone did not start (log: $work/cellar.log)"
echo "cellar pid $cellar_pid at $cellar_addr" >&2

out="$(timeout 600 java -cp "$lib/*" "$repo/java/hfile-fixtures/BulkLoadToCellar.java" "$cellar_addr" "$work" 2>"$work/java.log")"
status=$?
echo "$out"
cells="$(echo "$out" | sed -n 's/^bulk-load: \([0-9]*\) cells compared$/\1/p')"
if (( status == 0 )) && [[ -n "$cells" ]]; then
  echo "hbase-bulk-load: passed ($cells cells compared)"
  exit 0
fi
grep -v -E "^(SLF4J|WARNING)" "$work/java.log" | tail -n 40 >&2
echo "hbase-bulk-load: failed (${cells:-0} cells compared; log: $work/java.log, Cellar: $work/cellar.log)"
exit 1
