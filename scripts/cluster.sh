#!/usr/bin/env bash
# A whole Cellar cluster on this machine, on 127.0.0.1: ZooKeeper, a MiniDFS (4 DataNodes:
# writes go on when one dies), one master and N region servers, each with a PID file and log.
#
# Usage: scripts/cluster.sh up [N] [--fresh]
#                                        starts it (N region servers, default 3), prints
#                                        zookeeper=HOST:PORT, hdfs=URL and every process's
#                                        `listening ...` lines, returns once it serves; after a
#                                        `down` it brings the same cluster back with its data
#                                        (--fresh: a new, empty one)
#        scripts/cluster.sh down        stops every process it started (by PID)
#        scripts/cluster.sh status      shows which processes run
#        scripts/cluster.sh add         starts one more region server, prints its lines
#        scripts/cluster.sh kill NAME   kill -9 of one process (e.g. regionserver2, master1)
# Env: CLUSTER_DIR (default ./cellar-cluster), CELLAR_BIN (the cellar binary; default: builds
#      target/release/cellar with cargo first),
#      CLUSTER_ROOT=file (a local root instead of MiniDFS), MASTERS (default 1; more wait as
#      backups), ZK_SESSION_TIMEOUT_MS (default 6000: how soon a dead server is noticed),
#      CLUSTER_EXTRA_CONFIG (more cellar.toml text for every server, e.g. "[split]...").
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/pidfile.sh
. "$repo/scripts/lib/pidfile.sh"

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 1 ]] || usage
cmd="$1"
dir="${CLUSTER_DIR:-$PWD/cellar-cluster}"

# wait_line FILE PATTERN SECONDS PID: waits until FILE has a line matching PATTERN.
wait_line() {
  local file="$1" pattern="$2" seconds="$3" pid="$4"
  for _ in $(seq 1 $((seconds * 10))); do
    grep -q "$pattern" "$file" 2>/dev/null && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "cluster.sh: process $pid exited; its log:" >&2
      tail -20 "${file%.out}.log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "cluster.sh: no '$pattern' in $file after ${seconds}s" >&2
  return 1
}

# start_server NAME ROLE: starts `cellar ROLE` logging to NAME.out/.log.
start_server() {
  local name="$1" role="$2"
  # Emptied before the start (the redirection happens later, in the child): a wait for its
  # lines must never read an earlier process's.
  : >"$dir/$name.out"
  "$bin" "$role" --zk "$zk" --root "$root" --config "$dir/cellar.toml" \
    --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --hbase-listen 127.0.0.1:0 \
    >"$dir/$name.out" 2>"$dir/$name.log" </dev/null &
  echo $! >"$dir/$name.pid"
}

case "$cmd" in
  up)
    n=3 fresh=0
    for a in "${@:2}"; do
      case "$a" in
        --fresh) fresh=1 ;;
        *) n="$a" ;;
      esac
    done
    [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 ]] || { echo "cluster.sh: N must be a positive number" >&2; exit 2; }
    if ls "$dir"/*.pid >/dev/null 2>&1; then
      echo "cluster.sh: a cluster already runs in $dir; run 'scripts/cluster.sh down' first" >&2
      exit 1
    fi
    if [[ "$fresh" == 1 ]]; then
      # ZooKeeper's data and the root go together: one without the other is two clusters.
      rm -rf "$dir/zookeeper/data" "$dir/minidfs/dfs" "$dir/root"
    elif [[ -d "$dir/zookeeper/data" ]]; then
      echo "cluster.sh: bringing back the cluster in $dir with its data (up --fresh: a new one)" >&2
    fi
    mkdir -p "$dir"
    bin="${CELLAR_BIN:-}"
    if [[ -z "$bin" ]]; then
      echo "cluster.sh: building target/release/cellar (CELLAR_BIN=PATH uses a binary instead)" >&2
      (cd "$repo" && cargo build --release -q --bin cellar) >&2
      bin="$repo/target/release/cellar"
    fi
    zk_line="$("$repo/scripts/zookeeper.sh" start "$dir/zookeeper")"
    zk="${zk_line#zookeeper=}"
    echo "$zk_line"
    if [[ "${CLUSTER_ROOT:-hdfs}" == file ]]; then
      root="file://$dir/root"
    else
      hdfs_line="$(MINIDFS_KEEP=1 "$repo/scripts/minidfs.sh" start "$dir/minidfs" 4)"
      echo "$hdfs_line"
      root="${hdfs_line#hdfs=}/cellar"
    fi
    cat >"$dir/cellar.toml" <<CFG
[cluster]
zookeeper_session_timeout_ms = ${ZK_SESSION_TIMEOUT_MS:-6000}
${CLUSTER_EXTRA_CONFIG:-}
CFG
    echo "$zk" >"$dir/zookeeper.addr"
    echo "$root" >"$dir/root.url"
    echo "$bin" >"$dir/cellar.bin"
    for m in $(seq 1 "${MASTERS:-1}"); do
      start_server "master$m" master
      if [[ "$m" -eq 1 ]]; then
        wait_line "$dir/master1.out" '^coordination=' 120 "$(cat "$dir/master1.pid")"
        grep '^listening' "$dir/master1.out" | sed 's/^/master1 /'
      fi
    done
    for i in $(seq 1 "$n"); do start_server "regionserver$i" regionserver; done
    for i in $(seq 1 "$n"); do
      wait_line "$dir/regionserver$i.out" '^coordination=' 120 "$(cat "$dir/regionserver$i.pid")"
      grep '^listening' "$dir/regionserver$i.out" | sed "s/^/regionserver$i /"
    done
    echo "cluster.sh: up in $dir; try: cellar shell --connect $(sed -n 's/^listening native=//p' "$dir/master1.out")" >&2
    ;;
  down)
    [[ -d "$dir" ]] || exit 0
    for f in "$dir"/regionserver*.pid "$dir"/master*.pid; do
      [[ -e "$f" ]] && stop_pidfile "$f" 30
    done
    [[ -d "$dir/minidfs" ]] && "$repo/scripts/minidfs.sh" stop "$dir/minidfs"
    [[ -d "$dir/zookeeper" ]] && "$repo/scripts/zookeeper.sh" stop "$dir/zookeeper"
    echo "cluster.sh: down" >&2
    ;;
  add)
    [[ -f "$dir/zookeeper.addr" ]] || { echo "cluster.sh: no cluster in $dir" >&2; exit 1; }
    zk="$(cat "$dir/zookeeper.addr")"
    root="$(cat "$dir/root.url")"
    bin="$(cat "$dir/cellar.bin")"
    i=1
    while [[ -e "$dir/regionserver$i.pid" || -e "$dir/regionserver$i.killed" ]]; do i=$((i + 1)); done
    start_server "regionserver$i" regionserver
    wait_line "$dir/regionserver$i.out" '^coordination=' 120 "$(cat "$dir/regionserver$i.pid")"
    grep '^listening' "$dir/regionserver$i.out" | sed "s/^/regionserver$i /"
    ;;
  kill)
    [[ $# -ge 2 && -f "$dir/$2.pid" ]] || { echo "cluster.sh: no process $2 in $dir" >&2; exit 2; }
    kill -KILL "$(cat "$dir/$2.pid")" 2>/dev/null || true
    mv "$dir/$2.pid" "$dir/$2.killed"
    echo "cluster.sh: killed $2" >&2
    ;;
  status)
    for f in "$dir"/*.pid "$dir"/zookeeper/zookeeper.pid "$dir"/minidfs/minidfs.pid; do
      [[ -e "$f" ]] || continue
      if kill -0 "$(cat "$f")" 2>/dev/null; then state=running; else state=gone; fi
      echo "$(basename "$f" .pid) pid $(cat "$f") $state"
    done
    ;;
  *) usage ;;
esac
