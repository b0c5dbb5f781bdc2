#!/usr/bin/env bash
# Snapshot time against table size: a `cellar standalone` is loaded with N rows (YCSB's load
# phase through `cellar bench load`, one 100-byte field per row, 8 threads), then `snapshot`
# is taken twice (the first flushes what the load left in the memstores, the second finds
# them empty) and cloned once, each timed by the shell's own "Took" line. A snapshot copies
# no data, so the times should be flat in N. Writes the table to docs/bench/snapshot-DATE.md
# and ends with one line
#   bench-snapshot: ROWS rows: snapshot A s (then B s), clone C s; ...
# Every process is stopped by its PID on exit.
#
# Usage: scripts/bench-snapshot.sh [--cellar BIN] [--work DIR] [--rows "N N ..."] [--no-doc]
#   --rows    table sizes, in rows (default "100000 1000000 10000000")
#   --no-doc  print the table only, write nothing under docs/
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
sizes="100000 1000000 10000000"
write_doc=1
say() { echo "bench-snapshot: $*" >&2; }
die() { say "$*"; echo "bench-snapshot: failed ($*)"; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --rows) need_value "$@"; sizes="$2"; shift 2 ;;
    --no-doc) write_doc=0; shift ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for n in $sizes; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "--rows: '$n' is not a positive number"
done
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-bench-snapshot.XXXXXX)}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
say "work dir: $work"
# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
trap 'stop_standalone' EXIT
trap 'exit 130' INT TERM

# took ADDR COMMANDS: the seconds the shell reports for the last command.
took() {
  local out
  out="$("$cellar_bin" shell --connect "$1" -e "$2" 2>&1)" || { say "$out"; return 1; }
  sed -n 's/^Took \([0-9.]*\) seconds.*/\1/p' <<<"$out" | tail -n1
}

rows_md=""
summary=""
for n in $sizes; do
  dir="$work/rows-$n"
  rm -rf "$dir"
  mkdir -p "$dir"
  start_standalone "$cellar_bin" "$dir" || die "cellar standalone did not start (log: $dir/cellar.log)"
  native="$(sed -n 's/^listening native=//p' "$dir/cellar.out" | head -n1)"
  say "$n rows: loading into $native..."
  load_start=$(date +%s)
  "$cellar_bin" bench load -P "$repo/workloads/workloada" -p "recordcount=$n" \
    -p fieldcount=1 -p fieldlength=100 -p presplit=8 -threads 8 --db "cellar://$native" \
    >"$dir/load.out" 2>&1 || die "the load of $n rows failed (see $dir/load.out)"
  load_s=$(( $(date +%s) - load_start ))
  first="$(took "$native" "snapshot 'usertable', 'first'")" || die "snapshot failed at $n rows"
  second="$(took "$native" "snapshot 'usertable', 'second'")" || die "second snapshot failed"
  clone="$(took "$native" "clone_snapshot 'second', 'usertable_clone'")" || die "clone failed"
  count="$("$cellar_bin" shell --connect "$native" -e "count 'usertable_clone'" 2>&1 | sed -n 's/^\([0-9][0-9]*\) row(s).*/\1/p' | tail -n1)"
  [[ "$count" == "$n" ]] || die "the clone of $n rows counted ${count:-nothing}"
  bytes="$(du -sb "$dir/cellar-data/data" | cut -f1)"
  stop_standalone
  say "$n rows ($bytes bytes, loaded in ${load_s}s): snapshot ${first}s, again ${second}s, clone ${clone}s; the clone counts $count rows"
  rows_md+="| $n | $((bytes / 1048576)) MiB | $first | $second | $clone |"$'\n'
  summary+="$n rows: snapshot $first s (then $second s), clone $clone s; "
  rm -rf "$dir/cellar-data"
done

table="| rows | data on disk | snapshot (with flush) s | snapshot again s | clone s |
|---:|---:|---:|---:|---:|
${rows_md}"
echo "$table"
if (( write_doc )); then
  out="$repo/docs/bench/snapshot-$(date +%Y-%m-%d).md"
  {
    echo "# Snapshot time against table size"
    echo
    echo "\`scripts/bench-snapshot.sh --rows \"$sizes\"\` at $(git -C "$repo" rev-parse --short HEAD), $(nproc) cores."
    echo "Each row: a fresh \`cellar standalone\`, YCSB's load of N rows (one 100-byte field, 8"
    echo "regions, 8 threads), then \`snapshot\` twice and \`clone_snapshot\` once, as timed by the"
    echo "shell. The first snapshot flushes what the load left in memory; the second finds"
    echo "nothing to flush. The clone is counted whole before the row is kept."
    echo
    echo "$table"
  } >"$out"
  say "wrote $out"
fi
echo "bench-snapshot: ${summary%; }"
