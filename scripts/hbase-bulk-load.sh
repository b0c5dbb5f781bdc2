#!/usr/bin/env bash
# HBase's own bulk load tool (BulkLoadHFilesTool, what `completebulkload` runs) against Cellar:
# starts `cellar standalone --bulk-load-dir WORK/input`, then runs
# java/hfile-fixtures/BulkLoadToCellar.java with Apache HBase 2.6.4's jars: HFiles written by
# HBase's own writer, split by the tool at the table's region boundaries, loaded through
# PrepareBulkLoad/BulkLoadHFile/CleanupBulkLoad, every cell read back and compared. Ends with
#   hbase-bulk-load: passed|failed (N cells compared)
# and exits non-zero on failure. The server is stopped by its PID on exit.
#
# Usage: scripts/hbase-bulk-load.sh [--cellar BIN] [--work DIR] [--against-hbase]
#   --against-hbase  the same program against an Apache HBase 2.6.4 standalone instead (ports
#                    +500): what it checks holds on HBase itself
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
against_hbase=0
die() { echo "hbase-bulk-load: $*" >&2; echo "hbase-bulk-load: failed (0 cells compared)"; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) [[ $# -ge 2 ]] || die "--cellar needs a value"; cellar_bin="$2"; shift 2 ;;
    --work) [[ $# -ge 2 ]] || die "--work needs a value"; work="$2"; shift 2 ;;
    --against-hbase) against_hbase=1; shift ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
(( against_hbase )) || [[ -x "$cellar_bin" ]] \
  || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-bulk-load.XXXXXX)}"
mkdir -p "$work/input"
work="$(cd "$work" && pwd)"
lib="$("$repo/scripts/hbase/fetch.sh")" || die "fetching HBase's jars failed"

# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
cleanup() {
  stop_standalone
  (( against_hbase )) && "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2
  true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if (( against_hbase )); then
  hb_line="$(HBASE_HEAP="${HBASE_HEAP:-1g}" HBASE_PORT_OFFSET=500 "$repo/scripts/hbase/start.sh" "$work/hbase")" \
    || die "starting Apache HBase failed (logs in $work/hbase/logs)"
  cellar_addr="${hb_line#listening hbase=}"
  echo "Apache HBase at $cellar_addr" >&2
else
  start_standalone "$cellar_bin" "$work" --bulk-load-dir "$work/input" \
    || die "cellar standalone did not start (log: $work/cellar.log)"
  echo "cellar pid $cellar_pid at $cellar_addr" >&2
fi

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
