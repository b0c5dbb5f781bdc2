#!/usr/bin/env bash
# A ZooKeeper server on 127.0.0.1 for tests and local clusters, from the system's installation
# (Debian's `zookeeper` package; installed with apt-get if missing and possible).
#
# Usage: scripts/zookeeper.sh start DIR [PORT]   starts it with its data and log in DIR, waits
#                                                 until it answers, prints zookeeper=127.0.0.1:PORT
#        scripts/zookeeper.sh stop DIR           stops the server started in DIR (by its PID)
# PORT defaults to a free one. Env: ZK_TICK_MS (default 500), ZK_START_TIMEOUT s (default 60).
set -euo pipefail
# shellcheck source=lib/pidfile.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/pidfile.sh"

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd="$1"
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
launcher="${CELLAR_ZOOKEEPER_SERVER:-/usr/share/zookeeper/bin/zkServer.sh}"

ruok() { # prints imok when the server at 127.0.0.1:$1 answers
  exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 1
  printf ruok >&3
  timeout 2 cat <&3 || true
  exec 3<&- 3>&-
}

case "$cmd" in
  start)
    if [[ -f "$dir/zookeeper.pid" ]] && kill -0 "$(cat "$dir/zookeeper.pid")" 2>/dev/null; then
      echo "zookeeper.sh: already running for $dir (pid $(cat "$dir/zookeeper.pid"))" >&2
      exit 1
    fi
    if [[ ! -x "$launcher" ]]; then
      sudo_cmd=""
      [[ "$(id -u)" -eq 0 ]] || sudo_cmd="sudo"
      echo "zookeeper.sh: installing ZooKeeper (apt-get install zookeeper)" >&2
      { $sudo_cmd apt-get update -q && $sudo_cmd apt-get install -y -q zookeeper; } >&2 \
        || { echo "zookeeper.sh: cannot install ZooKeeper with apt-get" >&2; exit 1; }
    fi
    port="${3:-}"
    if [[ -z "$port" ]]; then
      port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    fi
    tick="${ZK_TICK_MS:-500}"
    mkdir -p "$dir/data"
    cat > "$dir/zoo.cfg" <<CFG
tickTime=$tick
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
minSessionTimeout=$((2 * tick))
maxSessionTimeout=60000
4lw.commands.whitelist=ruok,srvr,stat
CFG
    # start-foreground execs the JVM, so $! is ZooKeeper's own PID.
    ZOO_LOG_DIR="$dir" JVMFLAGS="-Xmx256m -XX:+UseSerialGC" \
      setsid "$launcher" start-foreground "$dir/zoo.cfg" >"$dir/zookeeper.out" 2>&1 </dev/null &
    echo $! > "$dir/zookeeper.pid"
    deadline=$((SECONDS + ${ZK_START_TIMEOUT:-60}))
    until [[ "$(ruok "$port" 2>/dev/null)" == imok ]]; do
      if ! kill -0 "$(cat "$dir/zookeeper.pid")" 2>/dev/null; then
        tail -n 20 "$dir/zookeeper.out" >&2
        echo "zookeeper.sh: ZooKeeper exited at startup (log: $dir/zookeeper.out)" >&2
        exit 1
      fi
      if (( SECONDS >= deadline )); then
        echo "zookeeper.sh: no answer on 127.0.0.1:$port within ${ZK_START_TIMEOUT:-60} s" >&2
        kill -KILL "$(cat "$dir/zookeeper.pid")" 2>/dev/null || true
        exit 1
      fi
      sleep 0.2
    done
    echo "$port" > "$dir/zookeeper.port"
    echo "zookeeper=127.0.0.1:$port"
    ;;
  stop)
    stop_pidfile "$dir/zookeeper.pid" 10
    ;;
  *) usage ;;
esac
