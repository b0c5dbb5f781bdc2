#!/usr/bin/env bash
# The move-in's verification step: HBase 2.6.4's own HashTable and SyncTable MapReduce jobs, in
# Hadoop's local runner, between an Apache HBase 2.6.4 table (the source) and the same table in
# Cellar (the target). Starts a ZooKeeper (scripts/zookeeper.sh), `cellar standalone --zk` on
# it, and an HBase standalone (ports +700: ZooKeeper 2881, 16700-16730); creates table
# `synctest` on both (families f and g, 5 regions, several versions) and writes the same rows
# to both with HBase's client (java/sync-table/SyncTableFixture.java: binary keys, explicit
# timestamps, every kind of delete). Then, with java/sync-table/SyncTableRunner.java:
#   1. every region's size, as TableInputFormat sizes its split, is above 0 on both; HashTable
#      on HBase, SyncTable --dryrun on Cellar: 0 differences;
#   2. on Cellar only a row deleted, a cell changed, a row added: --dryrun counts exactly those;
#   3. SyncTable repairs Cellar, counting the same;
#   4. --dryrun: only the deleted row still differs (its delete markers hide the older cells
#      written back, as in HBase, until a major compaction);
#   5. flush + major compaction on Cellar, SyncTable again: the row comes back;
#   6. --dryrun: 0 differences;
#   7. the other way round (HashTable on the target, SyncTable --dryrun on the source): 0;
#      every version of every cell read from both sides is equal.
# Ends with one line
#   hbase-sync-table: passed|failed (...)
# and exits non-zero on failure. Every process is stopped by its PID on exit.
#
# Usage: scripts/hbase-sync-table.sh [--cellar BIN] [--work DIR] [--rows N] [--against-hbase]
#   --against-hbase  the target is a second table (synctest_target) on the same Apache HBase:
#                    what this test expects is HBase's own behaviour
#   --rows N         rows written (default 3000)
# Env: SYNC_TABLE_TIMEOUT seconds per job or fixture step (default 180), CELLAR_CACHE.
#
# As a step of another script (scripts/hbase-move-in.sh), source scripts/lib/sync-table.sh:
#   . "$repo/scripts/lib/sync-table.sh"
#   line="$(sync_table_run --source-zk 127.0.0.1:2881:/hbase --target-zk "$zk:/hbase" \
#            --table orders --work "$work/sync-table" --dryrun)" || die "SyncTable failed"
#   [[ "$(sync_table_differences "$line")" == 0 ]] || die "tables differ: $line"
# The line: "synctable: hashes matched=A not-matched=B source-missing-rows=C
# target-missing-rows=D source-missing-cells=E target-missing-cells=F different-cells=G
# rows-with-diffs=H matching-rows=I matching-cells=J batches=K empty-batches=L dryrun=true"
# (sync_table_counter "$line" NAME reads one). Options: scripts/lib/sync-table.sh's header.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
rows=3000
against_hbase=0
offset=700
started=$SECONDS
fail() {
  echo "hbase-sync-table: $*" >&2
  echo "hbase-sync-table: failed ($*; took $((SECONDS - started)) s; work dir ${work:-none})"
  exit 1
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) [[ $# -ge 2 ]] || fail "--cellar needs a value"; cellar_bin="$2"; shift 2 ;;
    --work) [[ $# -ge 2 ]] || fail "--work needs a value"; work="$2"; shift 2 ;;
    --rows) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || fail "--rows needs a number"; rows="$2"; shift 2 ;;
    --against-hbase) against_hbase=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) fail "unknown option '$1' (see --help)" ;;
  esac
done
(( against_hbase )) || [[ -x "$cellar_bin" ]] \
  || fail "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-sync-table.XXXXXX)}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
echo "work dir: $work" >&2
export SYNC_TABLE_TIMEOUT="${SYNC_TABLE_TIMEOUT:-180}"

# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
# shellcheck source=lib/sync-table.sh
. "$repo/scripts/lib/sync-table.sh"
cleanup() {
  "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
  stop_standalone
  (( against_hbase )) || "$repo/scripts/zookeeper.sh" stop "$work/zookeeper" >&2 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sync_table_fetch >/dev/null || fail "fetching hbase-mapreduce and Hadoop's local runner failed"

echo "starting Apache HBase 2.6.4, the source (ports +$offset)..." >&2
HBASE_HEAP="${HBASE_HEAP:-1g}" HBASE_PORT_OFFSET="$offset" "$repo/scripts/hbase/start.sh" "$work/hbase" >&2 \
  || fail "starting Apache HBase failed (logs in $work/hbase/logs)"
source_zk="127.0.0.1:$((2181 + offset)):/hbase"
table=synctest
if (( against_hbase )); then
  target_zk="$source_zk"
  target_table=synctest_target
  target_name="a second table on Apache HBase"
else
  zk_line="$("$repo/scripts/zookeeper.sh" start "$work/zookeeper")" \
    || fail "starting ZooKeeper failed (log: $work/zookeeper/zookeeper.out)"
  zk="${zk_line#zookeeper=}"
  start_standalone "$cellar_bin" "$work" --zk "$zk" \
    || fail "cellar standalone did not start (log: $work/cellar.log)"
  echo "cellar pid $cellar_pid at $cellar_addr, its ZooKeeper $zk" >&2
  target_zk="$zk:/hbase"
  target_table=synctest
  target_name="Cellar"
fi

fixture() { sync_table_java SyncTableFixture.java "$@" 2>>"$work/fixture.log"; }
# Small hash batches (many ranges), 3 cells per Result (rows split across Results) and 50
# Results per scanner call: range boundaries, batching and caching all come into play.
run_sync() {
  sync_table_run --source-zk "$source_zk" --target-zk "$target_zk" --table "$table" \
    --target-table "$target_table" --work "$work/sync-table" --batch-size 4000 --scan-batch 3 \
    --caching 50 "$@" 2>>"$work/sync-table.log"
}
# expect LINE NAME=VALUE...: every named counter of LINE has that value.
expect() {
  local line="$1" step="$2" kv name want got bad=""
  shift 2
  for kv in "$@"; do
    name="${kv%%=*}"; want="${kv#*=}"
    got="$(sync_table_counter "$line" "$name")"
    [[ "$got" == "$want" ]] || bad+=" $name=${got:-none} (expected $want)"
  done
  [[ -z "$bad" ]] || fail "$step:$bad"
}
zero=(source-missing-rows=0 target-missing-rows=0 source-missing-cells=0 target-missing-cells=0
      different-cells=0 not-matched=0 rows-with-diffs=0)

src_line="$(fixture setup --zk "$source_zk" --table "$table" --rows "$rows")" \
  || fail "writing the source table failed (log: $work/fixture.log)"
dst_line="$(fixture setup --zk "$target_zk" --table "$target_table" --rows "$rows")" \
  || fail "writing the target table on $target_name failed (log: $work/fixture.log)"
echo "source: $src_line; target ($target_name): $dst_line"
[[ "$src_line" == "$dst_line" ]] || fail "the two tables differ after the same writes: '$src_line' / '$dst_line'"

# TableInputFormat gives each split its region's size (RegionSizeCalculator): none may read
# as 0 (empty), as tools skip empty splits.
nonzero_sizes='^sizes:( [1-9][0-9]*)+$'
for side in "$source_zk $table" "$target_zk $target_table"; do
  read -r side_zk side_table <<<"$side"
  sizes="$(fixture sizes --zk "$side_zk" --table "$side_table")" \
    || fail "reading region sizes failed (log: $work/fixture.log)"
  echo "   region sizes of $side_table on $side_zk: ${sizes#sizes: }"
  [[ "$sizes" =~ $nonzero_sizes ]] || fail "a region of $side_table on $side_zk has size 0: $sizes"
done

line="$(run_sync --dryrun)" || fail "HashTable/SyncTable failed (log: $work/sync-table.log, $work/sync-table/logs)"
echo "1. equal tables:        $line"
expect "$line" "equal tables" "${zero[@]}"
(( $(sync_table_counter "$line" matched) > 0 )) || fail "equal tables: no hash compared"
batches="$(sync_table_counter "$line" batches)"

expected="$(fixture diverge --source-zk "$source_zk" --target-zk "$target_zk" --table "$table" \
  --target-table "$target_table")" || fail "changing the target failed (log: $work/fixture.log)"
echo "   target changed:      $expected"
gone_row="$(sed -n 's/.*deleted-row=\([0-9a-f]*\).*/\1/p' <<<"$expected")"
k="$(sync_table_counter "$expected" target-missing-cells)"
made=(source-missing-rows=1 target-missing-rows=1 source-missing-cells=2 target-missing-cells="$k"
      different-cells=1 not-matched=3 rows-with-diffs=3 batches="$batches")

line="$(run_sync --dryrun --reuse-hash)" || fail "SyncTable --dryrun failed (log: $work/sync-table.log)"
echo "2. differences made:    $line"
expect "$line" "differences made" "${made[@]}"

line="$(run_sync --reuse-hash)" || fail "SyncTable (repair) failed (log: $work/sync-table.log)"
echo "3. repair:              $line"
expect "$line" "repair" "${made[@]}"

hidden=(source-missing-rows=0 target-missing-rows=1 source-missing-cells=0 target-missing-cells="$k"
        different-cells=0 not-matched=1 rows-with-diffs=1)
line="$(run_sync --dryrun --reuse-hash)" || fail "SyncTable --dryrun failed (log: $work/sync-table.log)"
echo "4. after the repair:    $line"
expect "$line" "after the repair (the deleted row's markers hide what was written back)" "${hidden[@]}"

out="$(fixture compact --zk "$target_zk" --table "$target_table" --gone-row "$gone_row")" \
  || fail "major compaction of the target did not purge row $gone_row (log: $work/fixture.log)"
echo "   $out"
line="$(run_sync --reuse-hash)" || fail "SyncTable (repair) failed (log: $work/sync-table.log)"
echo "5. compacted, repaired: $line"
expect "$line" "repair after compaction" "${hidden[@]}"

line="$(run_sync --dryrun --reuse-hash)" || fail "SyncTable --dryrun failed (log: $work/sync-table.log)"
echo "6. repaired:            $line"
expect "$line" "repaired" "${zero[@]}"

# The other way round: HashTable on the target, SyncTable --dryrun on the source.
line="$(sync_table_run --source-zk "$target_zk" --target-zk "$source_zk" --table "$target_table" \
  --target-table "$table" --work "$work/sync-table-reverse" --num-hash-files 3 --batch-size 20000 \
  --caching 7 --dryrun 2>>"$work/sync-table.log")" \
  || fail "HashTable on the target / SyncTable on the source failed (log: $work/sync-table.log)"
echo "7. the other way:       $line"
expect "$line" "HashTable on the target, SyncTable on the source" "${zero[@]}"

cmp="$(fixture compare --source-zk "$source_zk" --target-zk "$target_zk" --table "$table" \
  --target-table "$target_table")" || fail "the tables differ after the repair: $cmp (log: $work/fixture.log)"
cells="$(grep -oE '^compare: [0-9]+' <<<"$cmp" | grep -oE '[0-9]+')"
runs="$(grep -c '^synctable: .* -> ' "$work/sync-table.log")"
echo "hbase-sync-table: passed ($target_name: $runs SyncTable runs over $batches hash ranges counted the differences exactly; $cells cells equal; took $((SECONDS - started)) s)"
