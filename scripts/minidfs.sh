#!/usr/bin/env bash
# A MiniDFS (Hadoop's NameNode and DataNodes in one JVM, java/minidfs) on 127.0.0.1, for
# benchmarks and local clusters. Built with Maven on first use.
#
# Usage: scripts/minidfs.sh start DIR [DATANODES]   starts it with its data and log in DIR,
#                                                     waits until it serves, prints hdfs=URL
#        scripts/minidfs.sh stop DIR                stops the MiniDFS started in DIR (by PID)
# DATANODES defaults to 3. Env: MINIDFS_HEAP (default 768m), MINIDFS_START_TIMEOUT s (default 180),
# MINIDFS_CONF=KEY=VALUE[,KEY=VALUE...] extra Hadoop settings (e.g. dfs.client-write-packet-size),
# MINIDFS_KEEP=1 starts again on the data (and port) an earlier start in DIR left, instead of
# a fresh file system.
set -euo pipefail
# shellcheck source=lib/pidfile.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/pidfile.sh"

usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd="$1"
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
project="$repo/java/minidfs"

case "$cmd" in
  start)
    if [[ -f "$dir/minidfs.pid" ]] && kill -0 "$(cat "$dir/minidfs.pid")" 2>/dev/null; then
      echo "minidfs.sh: already running for $dir (pid $(cat "$dir/minidfs.pid"))" >&2
      exit 1
    fi
    command -v java >/dev/null && command -v mvn >/dev/null \
      || { echo "minidfs.sh: needs Java 17 and Maven (apt-get install openjdk-17-jdk-headless maven)" >&2; exit 1; }
    jar="$project/target/minidfs-0.1.0.jar"
    if [[ ! -f "$project/target/classpath.txt" || ! -f "$jar" || "$project/src/main/java/org/cellar/minidfs/Main.java" -nt "$jar" ]]; then
      echo "minidfs.sh: building the launcher (mvn package in java/minidfs)" >&2
      mvn -B -q -f "$project/pom.xml" package dependency:build-classpath \
        "-Dmdep.outputFile=$project/target/classpath.txt" >&2 \
        || { echo "minidfs.sh: building java/minidfs failed" >&2; exit 1; }
    fi
    port=0
    if [[ "${MINIDFS_KEEP:-0}" == 1 ]] && compgen -G "$dir/dfs/name*" >/dev/null; then
      # The same file system again: its data, and its port (the root URL clients were given).
      port="$(cat "$dir/port" 2>/dev/null || echo 0)"
    else
      rm -rf "$dir/dfs"
    fi
    # Emptied here, not only by the redirection below (which happens in the child, later):
    # the wait loop must never read an earlier run's Ready! line.
    : >"$dir/minidfs.out"
    MINIDFS_DAEMON=1 setsid java "-Xmx${MINIDFS_HEAP:-768m}" -XX:+UseSerialGC \
      -cp "$jar:$(cat "$project/target/classpath.txt")" org.cellar.minidfs.Main \
      "$dir/dfs" "$port" "${3:-3}" >"$dir/minidfs.out" 2>"$dir/minidfs.log" </dev/null &
    echo $! > "$dir/minidfs.pid"
    deadline=$((SECONDS + ${MINIDFS_START_TIMEOUT:-180}))
    until grep -q '^Ready!' "$dir/minidfs.out" 2>/dev/null; do
      if ! kill -0 "$(cat "$dir/minidfs.pid")" 2>/dev/null; then
        tail -n 20 "$dir/minidfs.log" >&2
        echo "minidfs.sh: MiniDFS exited at startup (log: $dir/minidfs.log)" >&2
        exit 1
      fi
      if (( SECONDS >= deadline )); then
        echo "minidfs.sh: not ready within ${MINIDFS_START_TIMEOUT:-180} s (log: $dir/minidfs.log)" >&2
        kill -KILL "$(cat "$dir/minidfs.pid")" 2>/dev/null || true
        exit 1
      fi
      sleep 0.5
    done
    line="$(grep '^hdfs=' "$dir/minidfs.out" | head -n1)"
    echo "${line##*:}" >"$dir/port"
    echo "$line"
    ;;
  stop)
    stop_pidfile "$dir/minidfs.pid" 15
    ;;
  *) usage ;;
esac
