#!/usr/bin/env bash
# The old-style region lookup (a Get of hbase:meta with closest_row_before, as pre-1.0 Java
# clients and OpenTSDB's AsyncHBase send it) against a real Apache HBase 2.6.4 standalone and
# against `cellar standalone`, with the same JUnit test (java/hbase-compat-tests
# ClosestRowBeforeTest: HBase's own protobuf classes and RPC stub; Get, Multi, then the
# reversed meta scan AsyncHBase falls back to). Prints what each server answered and
#   closest-row: hbase=CLASS cellar=CLASS same|DIFFERENT
# and exits non-zero when a run fails or the answers differ.
#
# Usage: scripts/hbase-closest-row.sh [--cellar BIN] [--port-offset N] [--work DIR]
#   --port-offset: HBase's ports are 2181/16000-16030 plus N (default 100), so it can run
#   beside another standalone. Env as scripts/hbase/start.sh (HBASE_HEAP, default here 1g).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
cellar_bin="$target/release/cellar"
[[ -x "$cellar_bin" ]] || cellar_bin="$target/debug/cellar"
offset=100
work=""
die() { echo "hbase-closest-row: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) [[ $# -ge 2 ]] || die "--cellar needs a value"; cellar_bin="$2"; shift 2 ;;
    --port-offset) [[ $# -ge 2 ]] || die "--port-offset needs a value"; offset="$2"; shift 2 ;;
    --work) [[ $# -ge 2 ]] || die "--work needs a value"; work="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$offset" =~ ^[0-9]+$ ]] || die "--port-offset: '$offset' is not a number"
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build -p cellar-cli, or --cellar BIN)"
command -v mvn >/dev/null 2>&1 || die "mvn (Maven 3) is not installed"
work="${work:-$(mktemp -d -t cellar-closest-row.XXXXXX)}"
mkdir -p "$work"
echo "work dir: $work" >&2
suite="$repo/java/hbase-compat-tests"

# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
cleanup() {
  "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
  stop_standalone
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_suite NAME ADDR AUTOSPLIT: the test against ADDR; prints the Get's answered class.
run_suite() {
  timeout 600 mvn -B -f "$suite/pom.xml" test -Dtest=ClosestRowBeforeTest \
    "-Dcellar.hbase.bootstrap=$2" "-Dcellar.autosplit=$3" >"$work/$1.log" 2>&1
  local status=$?
  grep -h 'closest_row_before .* answered' "$work/$1.log" \
    "$suite"/target/surefire-reports/*ClosestRowBeforeTest*-output.txt 2>/dev/null | sort -u | sed "s/^/$1: /" >&2
  local class
  class="$(grep -h 'closest_row_before Get answered' "$work/$1.log" | head -n1 | sed -E 's/.*answered: ([^:]+):.*/\1/')"
  echo "${class:-none}"
  return $status
}

failed=0
echo "starting Apache HBase 2.6.4 (ports +$offset)..." >&2
hb_line="$(HBASE_HEAP="${HBASE_HEAP:-1g}" HBASE_PORT_OFFSET="$offset" "$repo/scripts/hbase/start.sh" "$work/hbase")" \
  || die "starting Apache HBase failed (scripts/hbase/start.sh, logs in $work/hbase/logs)"
hbase_addr="${hb_line#listening hbase=}"
hbase_class="$(run_suite hbase "$hbase_addr" false)" || { echo "the test failed against HBase (log: $work/hbase.log)" >&2; failed=1; }
"$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true

start_standalone "$cellar_bin" "$work" \
  || die "cellar standalone did not start (log: $work/cellar.log)"
cellar_class="$(run_suite cellar "$cellar_addr" true)" || { echo "the test failed against Cellar (log: $work/cellar.log)" >&2; failed=1; }

verdict=same
[[ "$hbase_class" == "$cellar_class" && "$hbase_class" != none ]] || { verdict=DIFFERENT; failed=1; }
echo "closest-row: hbase=$hbase_class cellar=$cellar_class $verdict"
exit "$failed"
