#!/usr/bin/env bash
# HBase's own shell against Apache HBase and Cellar: runs the same shell command file
# (scripts/hbase/shell-smoke.rb: create with splits, put, scan, count, merge_region, snapshot,
# list_snapshots, clone_snapshot, restore_snapshot, delete_snapshot, disable, drop) with the
# unmodified `hbase shell` (scripts/hbase-shell.sh) against a real Apache HBase 2.6.4
# standalone and against a `cellar standalone` registered in a ZooKeeper of its own, each found
# through ZooKeeper as an HBase client finds a cluster, and compares the two runs' marker lines
# (KEY=value at the start of a line). HBase is the reference: an operator's shell scripts must
# do the same against Cellar. Only MERGING= (encoded region names, which depend on region ids
# and timestamps) may differ. Both shells run at once. Prints every marker (`=` when both
# sides agree, the two lines when they do not), then one last line
#   hbase-shell-parity: passed|failed (N markers equal, M differ)
# (the `NAME: passed` form scripts/hbase-compat.sh's move_in_test looks for) and exits non-zero
# when M > 0 or either shell run failed.
#
# Usage: scripts/hbase-shell-parity.sh [--port-offset N] [--cellar BIN] [--work DIR] [--keep]
#          [--file FILE]
#   --port-offset N  HBase's ports are 2181 and 16000-16030 plus N (default 1200), so it can run
#                    beside other standalones; Cellar and its ZooKeeper take free ports
#   --cellar BIN     the Cellar binary (default target/release/cellar)
#   --work DIR       the work directory (kept); default a new temporary one, removed at exit
#                    when the run passed (kept, with the servers' logs, when it did not)
#   --keep           keep the temporary work directory even when the run passed
#   --file FILE      another shell command file to run against both (default
#                    scripts/hbase/shell-smoke.rb); its markers are compared the same way
# Env: HBASE_HEAP (default here 1g) and HBASE_START_TIMEOUT as scripts/hbase/start.sh,
#   HBASE_SHELL_TIMEOUT seconds per shell run (default 300). Needs java 17, and mvn unless the
#   jars are cached (scripts/hbase/fetch.sh). Everything listens on 127.0.0.1 only.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name=hbase-shell-parity
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
offset=1200
work=""
keep=0
passed=0
smoke="$repo/scripts/hbase/shell-smoke.rb"
# Marker keys whose values legitimately differ between servers.
ignored='^MERGING='

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
# The summary line, printed last (by cleanup once it has stopped everything, when armed).
summary=""
armed=0
die() {
  echo "$name: $*" >&2
  summary="failed (0 markers equal, 0 differ; $*)"
  (( armed )) || echo "$name: $summary"
  exit 1
}
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --port-offset) need_value "$@"; offset="$2"; shift 2 ;;
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; keep=1; shift 2 ;;
    --keep) keep=1; shift ;;
    --file) need_value "$@"; smoke="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$offset" =~ ^[0-9]+$ ]] && (( offset < 40000 )) || die "--port-offset '$offset' is not a number below 40000"
[[ -f "$smoke" && -r "$smoke" ]] || die "command file '$smoke' is not a readable file"
smoke="$(cd "$(dirname "$smoke")" && pwd)/$(basename "$smoke")"
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN)"
command -v java >/dev/null 2>&1 || die "java (17+) is not installed"
shell_timeout="${HBASE_SHELL_TIMEOUT:-300}"
[[ "$shell_timeout" =~ ^[1-9][0-9]*$ ]] || die "HBASE_SHELL_TIMEOUT must be a positive number of seconds"

if [[ -z "$work" ]]; then
  work="$(mktemp -d -t cellar-hbase-shell-parity.XXXXXX)"
fi
mkdir -p "$work"
work="$(cd "$work" && pwd)"
echo "work dir: $work" >&2

# --- everything started here is stopped by its PID on every exit -----------------------------
# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
shell_pids=()
zk_started=0
cleanup() {
  local pid kids
  # A shell still running: hbase-shell.sh passes a TERM on to its JVM and ends once that has;
  # anything left after 15 s is SIGKILLed.
  for pid in "${shell_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${shell_pids[@]}"; do
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      kids="$(ps -o pid= --ppid "$pid" 2>/dev/null || true)"
      # shellcheck disable=SC2086
      kill -KILL "$pid" $kids 2>/dev/null || true
    fi
  done
  stop_standalone
  if (( zk_started )); then "$repo/scripts/zookeeper.sh" stop "$work/zk" >&2 || true; fi
  "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
  if (( keep || ! passed )); then
    echo "work dir kept: $work" >&2
  else
    rm -rf "$work"
  fi
  echo "$name: ${summary:-failed (0 markers equal, 0 differ; stopped early)}"
}
trap cleanup EXIT
trap 'summary="failed (0 markers equal, 0 differ; stopped by a signal)"; exit 130' INT TERM
armed=1

start=$SECONDS
# Fetched once before the two shells start together (they would race on an empty cache).
"$repo/scripts/hbase/fetch.sh" shell >/dev/null || die "fetching the shell's jars failed (scripts/hbase/fetch.sh shell)"

hbase_zk="127.0.0.1:$((2181 + offset))"
echo "starting Apache HBase 2.6.4 (ports +$offset, ZooKeeper $hbase_zk)..." >&2
# start.sh bounds its own wait (HBASE_START_TIMEOUT, 120 s) and stops HBase when it runs out.
HBASE_HEAP="${HBASE_HEAP:-1g}" HBASE_PORT_OFFSET="$offset" \
  "$repo/scripts/hbase/start.sh" "$work/hbase" >"$work/hbase-start.out" \
  || die "starting Apache HBase failed (scripts/hbase/start.sh; logs in $work/hbase/logs)"

echo "starting ZooKeeper and cellar standalone..." >&2
zk_started=1
zk_line="$("$repo/scripts/zookeeper.sh" start "$work/zk")" \
  || die "starting ZooKeeper failed (log: $work/zk/zookeeper.out)"
cellar_zk="${zk_line#zookeeper=}"
# Waits (at most 60 s) for its `listening hbase=` line.
start_standalone "$cellar_bin" "$work/cellar" --zk "$cellar_zk" \
  || die "cellar standalone did not start (log: $work/cellar/cellar.log)"
echo "HBase: ZooKeeper $hbase_zk; Cellar: ZooKeeper $cellar_zk, HBase front end $cellar_addr (pid $cellar_pid)" >&2

# --- the same command file against both, at once ----------------------------------------------
run_shell() { # SIDE ZK: the shell on the smoke file, its output in $work/SIDE-shell.{out,err}
  HBASE_SHELL_TIMEOUT="$shell_timeout" "$repo/scripts/hbase-shell.sh" --zk "$2" "$smoke" \
    >"$work/$1-shell.out" 2>"$work/$1-shell.err" </dev/null &
  shell_pids+=("$!")
}
echo "running HBase's shell on $(basename "$smoke") against both (at most ${shell_timeout}s each)..." >&2
run_shell hbase "$hbase_zk"
run_shell cellar "$cellar_zk"
failed_runs=()
hbase_status=0; wait "${shell_pids[0]}" || hbase_status=$?
cellar_status=0; wait "${shell_pids[1]}" || cellar_status=$?
shell_pids=()
for side in hbase cellar; do
  status_var="${side}_status"
  if (( ${!status_var} != 0 )); then
    failed_runs+=("$side")
    echo "$name: the shell failed against $side (exit status ${!status_var}); its last lines:" >&2
    tail -n 15 "$work/$side-shell.out" | sed "s/^/  $side out: /" >&2
    grep -v '^[0-9-]* [0-9:,]* WARN ' "$work/$side-shell.err" | tail -n 15 | sed "s/^/  $side err: /" >&2 || true
  fi
done

# --- the markers, side by side ---------------------------------------------------------------
markers() { grep -E '^[A-Z_]+=' "$1" | grep -Ev "$ignored" || true; }
markers "$work/hbase-shell.out" >"$work/hbase.markers"
markers "$work/cellar-shell.out" >"$work/cellar.markers"
# Matched by key (and occurrence), in the order they appear; a marker one side lacks differs.
echo "markers, Apache HBase 2.6.4 vs Cellar (not compared: ${ignored#^}):"
awk -v counts="$work/counts" '
  { key = $0; sub(/=.*/, "", key) }
  FILENAME == ARGV[1] { k = key "#" (++seen_h[key]); h[k] = $0; if (!(k in known)) { known[k] = 1; order[++n] = k }; next }
  { k = key "#" (++seen_c[key]); c[k] = $0; if (!(k in known)) { known[k] = 1; order[++n] = k } }
  function missing(k) { return "(no " substr(k, 1, index(k, "#") - 1) "= line)" }
  END {
    for (i = 1; i <= n; i++) {
      k = order[i]
      if ((k in h) && (k in c) && h[k] == c[k]) { equal++; print "  = " h[k] }
      else {
        differ++
        print "  hbase:  " ((k in h) ? h[k] : missing(k))
        print "  cellar: " ((k in c) ? c[k] : missing(k))
      }
    }
    print equal + 0, differ + 0 > counts
  }' "$work/hbase.markers" "$work/cellar.markers"
read -r equal differ <"$work/counts"
echo "elapsed: $((SECONDS - start))s" >&2

verdict=passed
(( differ == 0 && ${#failed_runs[@]} == 0 && equal > 0 )) || verdict=failed
note=""
(( ${#failed_runs[@]} == 0 )) || note="; the shell failed against ${failed_runs[*]}"
summary="$verdict ($equal markers equal, $differ differ$note)"
[[ "$verdict" == passed ]] || exit 1
passed=1
