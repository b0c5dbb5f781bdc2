#!/usr/bin/env bash
# Apache HBase's own Thrift (version 1) server, next to the standalone HBase that start.sh runs
# for DATA_DIR: `org.apache.hadoop.hbase.thrift.ThriftServer` from Maven Central (hbase-thrift,
# libthrift; thrift-pom.xml) on the standalone's jars and configuration, as `hbase thrift start`
# runs it: the default thread-pool server, unframed transport, binary protocol.
#
# Usage: scripts/hbase/thrift.sh start DATA_DIR [PORT [OPTION...]]   (default 9090; prints
#          `listening thrift=127.0.0.1:PORT`); OPTIONs go to the server: -f framed transport,
#          -c compact protocol (one server serves one transport and one protocol)
#        scripts/hbase/thrift.sh stop DATA_DIR [PORT]
# Writes DATA_DIR/thrift.pid and logs to DATA_DIR/logs/thrift.out; a server started with
# OPTIONs is another process beside it: DATA_DIR/thrift-PORT.pid, DATA_DIR/logs/thrift-PORT.out
# (stop it with its PORT).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -ge 2 ]] || { echo "usage: $0 start|stop DATA_DIR [PORT]" >&2; exit 2; }
cmd="$1"
data="$(cd "$2" && pwd)"
port="${3:-9090}"
shift $(( $# < 3 ? $# : 3 ))
options=("$@")
pidfile="$data/thrift.pid"
log="$data/logs/thrift.out"
if [[ ${#options[@]} -gt 0 || ( "$cmd" == stop && -f "$data/thrift-$port.pid" ) ]]; then
  pidfile="$data/thrift-$port.pid"
  log="$data/logs/thrift-$port.out"
fi
. "$here/../lib/pidfile.sh"

case "$cmd" in
  stop) stop_pidfile "$pidfile" 30; exit 0 ;;
  start) ;;
  *) echo "thrift.sh: unknown command '$cmd' (start or stop)" >&2; exit 2 ;;
esac

[[ -f "$data/conf/hbase-site.xml" ]] || { echo "thrift.sh: no HBase started in $data (scripts/hbase/start.sh DATA_DIR)" >&2; exit 1; }
lib="$("$here/fetch.sh")"
home="$(dirname "$lib")"
tlib="$home/thrift-lib"
if [[ ! -f "$tlib/.fetched" ]]; then
  all="$home/thrift-deps"
  mkdir -p "$all" "$tlib"
  mvn -B -q -f "$here/thrift-pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$all" 1>&2 \
    || { echo "thrift.sh: resolving hbase-thrift from Maven Central failed" >&2; exit 1; }
  # Only the Thrift server and libthrift: everything else comes from the server's own jars.
  cp "$all"/hbase-thrift-*.jar "$all"/libthrift-*.jar "$tlib/"
  touch "$tlib/.fetched"
fi

if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  echo "thrift.sh: already running (pid $(cat "$pidfile"))" >&2
  exit 1
fi
. "$here/../lib/java-flags.sh"
conf="$data/conf"
nohup java -Xms1g -Xmx1g -XX:+UseG1GC "${hbase_client_java_flags[@]}" \
  "-Dlog4j2.configurationFile=file:$conf/log4j2.properties" \
  -cp "$conf:$home/webapps:$lib/*:$tlib/*" org.apache.hadoop.hbase.thrift.ThriftServer \
  -p "$port" --bind 127.0.0.1 --infoport -1 ${options[@]+"${options[@]}"} start >"$log" 2>&1 </dev/null &
pid=$!
echo "$pid" > "$pidfile"
for _ in $(seq 1 240); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "thrift.sh: the Thrift server exited; its output:" >&2
    tail -n 20 "$log" >&2
    rm -f "$pidfile"
    exit 1
  fi
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "listening thrift=127.0.0.1:$port"
    exit 0
  fi
  sleep 0.25
done
echo "thrift.sh: not listening on $port after 60 s" >&2
stop_pidfile "$pidfile" 10
exit 1
