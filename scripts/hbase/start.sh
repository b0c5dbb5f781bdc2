#!/usr/bin/env bash
# Starts an Apache HBase 2.6.4 standalone (master + region server + embedded ZooKeeper in one
# JVM) bound to 127.0.0.1 with its data under DATA_DIR. Writes DATA_DIR/hbase.pid, waits until
# the master reports an active region server, then prints `listening hbase=127.0.0.1:16020`.
#
# Usage: scripts/hbase/start.sh DATA_DIR
# Env: HBASE_HEAP (default 2g), HBASE_START_TIMEOUT seconds (default 120), CELLAR_CACHE,
#   HBASE_CLEANER_MS (unset: HBase's defaults): how long compacted store files (archive/) and
#   old WAL segments (oldWALs/) are kept, and how often the master's cleaners run, for runs
#   whose data would otherwise fill the disk (docs/hbase-side-by-side.md),
#   HBASE_PORT_OFFSET (default 0): added to every port (ZooKeeper 2181, master 16000 and
#   16010, region server 16020 and 16030), so a second standalone can run beside another,
#   HBASE_SITE_PROPERTIES: more hbase-site.xml settings, "name=value" separated by spaces
#   (e.g. "replication.source.sleepforretries=100"),
#   HBASE_CODECS=1: LZ4 and ZSTD on the server too (`fetch.sh codecs`; HBase's own ZSTD codec,
#   as Hadoop's needs libhadoop), for tables that use them.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DATA_DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
data="$(cd "$1" && pwd)"
heap="${HBASE_HEAP:-2g}"
cleaner_ms="${HBASE_CLEANER_MS:-}"
[[ -z "$cleaner_ms" || "$cleaner_ms" =~ ^[1-9][0-9]*$ ]] \
  || { echo "start.sh: HBASE_CLEANER_MS must be a positive number of milliseconds" >&2; exit 2; }
cleaner_props=""
if [[ -n "$cleaner_ms" ]]; then
  for key in hbase.master.hfilecleaner.ttl hbase.master.logcleaner.ttl hbase.master.cleaner.interval; do
    cleaner_props+="  <property><name>$key</name><value>$cleaner_ms</value></property>"$'\n'
  done
fi
codecs_cp=""
if [[ "${HBASE_CODECS:-0}" == 1 ]]; then
  codecs_cp=":$("$here/fetch.sh" codecs)/*"
  cleaner_props+="  <property><name>hbase.io.compress.zstd.codec</name><value>org.apache.hadoop.hbase.io.compress.zstd.ZstdCodec</value></property>"$'\n'
fi
for kv in ${HBASE_SITE_PROPERTIES:-}; do
  [[ "$kv" =~ ^[A-Za-z0-9_.-]+=[^\<\>\&]*$ ]] \
    || { echo "start.sh: HBASE_SITE_PROPERTIES: '$kv' is not name=value (no < > &)" >&2; exit 2; }
  cleaner_props+="  <property><name>${kv%%=*}</name><value>${kv#*=}</value></property>"$'\n'
done
timeout="${HBASE_START_TIMEOUT:-120}"
offset="${HBASE_PORT_OFFSET:-0}"
[[ "$offset" =~ ^[0-9]+$ ]] && (( offset < 40000 )) \
  || { echo "start.sh: HBASE_PORT_OFFSET must be a number below 40000" >&2; exit 2; }
zk_port=$((2181 + offset)); master_port=$((16000 + offset)); master_info=$((16010 + offset))
rs_port=$((16020 + offset)); rs_info=$((16030 + offset))

if [[ -f "$data/hbase.pid" ]] && kill -0 "$(cat "$data/hbase.pid")" 2>/dev/null; then
  echo "start.sh: HBase already running for $data (pid $(cat "$data/hbase.pid")); run stop.sh first" >&2
  exit 1
fi

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in "$zk_port" "$master_port" "$master_info" "$rs_port" "$rs_info"; do
  if port_busy "$port"; then
    echo "start.sh: 127.0.0.1:$port is already in use; HBase standalone needs ports $zk_port and $master_port-$rs_info (HBASE_PORT_OFFSET moves them)" >&2
    exit 1
  fi
done

lib="$("$here/fetch.sh")"
home="$(dirname "$lib")"
conf="$data/conf"
mkdir -p "$conf" "$data/logs" "$data/tmp" "$data/zookeeper" "$data/root"

# Everything bound to 127.0.0.1, data in DATA_DIR. On a local file system the WAL cannot
# hflush/hsync through HDFS, so stream-capability enforcement is off (as in HBase's standalone
# config): a WAL append is acknowledged once it is handed to the OS.
cat > "$conf/hbase-site.xml" <<XML
<?xml version="1.0"?>
<configuration>
  <property><name>hbase.cluster.distributed</name><value>false</value></property>
  <property><name>hbase.rootdir</name><value>file://$data/root</value></property>
  <property><name>hbase.tmp.dir</name><value>$data/tmp</value></property>
  <property><name>hbase.zookeeper.property.dataDir</name><value>$data/zookeeper</value></property>
  <property><name>hbase.zookeeper.quorum</name><value>127.0.0.1</value></property>
  <property><name>hbase.zookeeper.property.clientPort</name><value>$zk_port</value></property>
  <property><name>hbase.master.port</name><value>$master_port</value></property>
  <property><name>hbase.master.info.port</name><value>$master_info</value></property>
  <property><name>hbase.regionserver.port</name><value>$rs_port</value></property>
  <property><name>hbase.regionserver.info.port</name><value>$rs_info</value></property>
  <property><name>hbase.zookeeper.property.clientPortAddress</name><value>127.0.0.1</value></property>
  <property><name>hbase.master.hostname</name><value>127.0.0.1</value></property>
  <property><name>hbase.unsafe.regionserver.hostname</name><value>127.0.0.1</value></property>
  <property><name>hbase.master.ipc.address</name><value>127.0.0.1</value></property>
  <property><name>hbase.regionserver.ipc.address</name><value>127.0.0.1</value></property>
  <property><name>hbase.master.info.bindAddress</name><value>127.0.0.1</value></property>
  <property><name>hbase.regionserver.info.bindAddress</name><value>127.0.0.1</value></property>
  <property><name>hbase.unsafe.stream.capability.enforce</name><value>false</value></property>
${cleaner_props}</configuration>
XML

cat > "$conf/log4j2.properties" <<PROPS
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $data/logs/hbase.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger = INFO,file
PROPS

# The flags bin/hbase adds for Java 17 (netty and HBase reach into JDK internals).
java_flags=(
  "-Xms$heap" "-Xmx$heap" -XX:+UseG1GC
  -Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true
  --add-modules jdk.unsupported
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
  --add-opens java.base/java.util.concurrent=ALL-UNNAMED
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports java.security.jgss/sun.security.krb5=ALL-UNNAMED
  --add-exports java.base/sun.net.dns=ALL-UNNAMED
  --add-exports java.base/sun.net.util=ALL-UNNAMED
  "-Dlog4j2.configurationFile=file:$conf/log4j2.properties"
  "-Dhbase.log.dir=$data/logs" -Dzookeeper.admin.enableServer=false
)
# conf first (hbase-site.xml), then the empty hbase-webapps folders, then the jars.
classpath="$conf:$home/webapps:$lib/*$codecs_cp"

nohup java "${java_flags[@]}" -cp "$classpath" org.apache.hadoop.hbase.master.HMaster start \
  >"$data/logs/hbase.out" 2>&1 </dev/null &
pid=$!
echo "$pid" > "$data/hbase.pid"

# Ready = the active master counts one live region server (meta is assigned shortly after;
# clients retry until it is).
jmx="http://127.0.0.1:$master_info/jmx?qry=Hadoop:service=HBase,name=Master,sub=Server"
deadline=$((SECONDS + timeout))
while :; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "start.sh: HBase (pid $pid) exited during startup; last log lines:" >&2
    tail -n 20 "$data/logs/hbase.out" "$data/logs/hbase.log" >&2 2>/dev/null || true
    rm -f "$data/hbase.pid"
    exit 1
  fi
  if body="$(curl -fsS --max-time 2 "$jmx" 2>/dev/null)" \
     && grep -q '"tag.isActiveMaster" *: *"true"' <<<"$body" \
     && grep -Eq '"numRegionServers" *: *[1-9]' <<<"$body"; then
    break
  fi
  if (( SECONDS >= deadline )); then
    echo "start.sh: HBase (pid $pid) not ready after ${timeout}s; stopping it. Log: $data/logs/hbase.log" >&2
    "$here/stop.sh" "$data" >&2 || true
    exit 1
  fi
  sleep 1
done
echo "listening hbase=127.0.0.1:$rs_port"
