#!/usr/bin/env bash
# Runs Apache HBase's own JRuby shell (`hbase shell`, the real one from Maven Central, not a
# reimplementation) non-interactively on a file of shell commands against a server, so the same
# commands can be run against Cellar and against a real Apache HBase and the outputs compared.
#
# Usage: scripts/hbase-shell.sh [--zk HOST:PORT [--znode-parent /x] | --bootstrap HOST:PORT] FILE
#   FILE                  shell commands (Ruby, as typed at the `hbase>` prompt), e.g.
#                         scripts/hbase/shell-smoke.rb. Runs as `hbase shell -n FILE`: each line
#                         is echoed after an `hbase:NNN:0>` prompt, then its output; the first
#                         failing command ends the run with a non-zero exit status.
#   --zk HOST:PORT        find the cluster through ZooKeeper (hbase.zookeeper.quorum); the default
#                         is 127.0.0.1:2181
#   --znode-parent /x     its zookeeper.znode.parent (default /hbase, where Cellar registers too)
#   --bootstrap HOST:PORT no ZooKeeper: ask the server at HOST:PORT (a master, or any Cellar or
#                         HBase 2.5+ server) for the cluster's addresses with the client's
#                         MasterRegistry (hbase.masters=HOST:PORT). The shell's 2.4.17 client has
#                         no RpcConnectionRegistry (hbase.client.bootstrap.servers is 2.5+); the
#                         MasterRegistry asks the same ClientMetaService RPCs.
# The shell's stdout is printed; its log (and errors the shell does not print) go to stderr.
# Env: HBASE_SHELL_TIMEOUT seconds for the whole JVM (default 300), HBASE_SHELL_HEAP (512m),
#   CELLAR_CACHE (where scripts/hbase/fetch.sh keeps the jars, default ~/.cache/cellar).
#
# The jars are hbase-shell 2.4.17 with its JRuby 9.2.13 and its HBase 2.4.17 client (the newest
# shell on Maven Central; it speaks to HBase 2.6 servers), fetched once by
# `scripts/hbase/fetch.sh shell` (needs mvn). Requires Java 17 (java on PATH).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "hbase-shell: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }

zk=""
znode_parent=""
bootstrap=""
file=""
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --zk) need_value "$@"; zk="$2"; shift 2 ;;
    --znode-parent) need_value "$@"; znode_parent="$2"; shift 2 ;;
    --bootstrap) need_value "$@"; bootstrap="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [[ -z "$file" ]] || die "only one command file, got '$file' and '$1'"; file="$1"; shift ;;
  esac
done
[[ -n "$file" ]] || { usage >&2; exit 2; }
[[ -f "$file" && -r "$file" ]] || die "command file '$file' is not a readable file"
[[ -z "$zk" || -z "$bootstrap" ]] || die "--zk and --bootstrap exclude each other"
[[ -z "$znode_parent" || -z "$bootstrap" ]] || die "--znode-parent goes with --zk, not --bootstrap"
hostport='^[A-Za-z0-9_.:-]+:[0-9]+$'
[[ -z "$zk" || "$zk" =~ $hostport ]] || die "--zk '$zk' is not HOST:PORT"
[[ -z "$bootstrap" || "$bootstrap" =~ $hostport ]] || die "--bootstrap '$bootstrap' is not HOST:PORT"
[[ -z "$znode_parent" || "$znode_parent" =~ ^/[^=[:space:]]*$ ]] \
  || die "--znode-parent '$znode_parent' is not a /path"
timeout_s="${HBASE_SHELL_TIMEOUT:-300}"
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || die "HBASE_SHELL_TIMEOUT must be a positive number of seconds"
command -v java >/dev/null 2>&1 || die "java (17+) is not installed"

lib="$("$repo/scripts/hbase/fetch.sh" shell)" \
  || die "fetching the shell's jars failed (scripts/hbase/fetch.sh shell)"

# Where the cluster is, as the shell's own -Dkey=value overrides of hbase-site.xml, with the
# retries the shell sets when given no configuration (a wrong --zk fails in about a minute).
conf=(-Dhbase.client.retries.number=7 -Dhbase.ipc.client.connect.max.retries=3)
if [[ -n "$bootstrap" ]]; then
  conf+=(-Dhbase.client.registry.impl=org.apache.hadoop.hbase.client.MasterRegistry
         "-Dhbase.masters=$bootstrap")
else
  conf+=("-Dhbase.zookeeper.quorum=${zk:-127.0.0.1:2181}")
  [[ -z "$znode_parent" ]] || conf+=("-Dzookeeper.znode.parent=$znode_parent")
fi

# Client logging to stderr only (WARN and up), so stdout is the shell's own output.
tmp="$(mktemp -d -t cellar-hbase-shell.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/log4j2.properties" <<'PROPS'
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger = WARN,err
PROPS

java_flags=(
  "-Xmx${HBASE_SHELL_HEAP:-512m}"
  # JRuby 9.2 bundles jffi 1.2; a system libjffi (Debian's libjffi-jni 1.3 in
  # /usr/lib/x86_64-linux-gnu/jni) found first on java.library.path breaks its native POSIX
  # support ("fstat unimplemented" when IRB opens stdin). No native library is needed otherwise.
  -Djava.library.path=/nonexistent
  # What JRuby and the HBase client reach into on Java 17.
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  -Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true
  "-Dlog4j2.configurationFile=file:$tmp/log4j2.properties"
)

# hbase-shell's jar holds jar-bootstrap.rb, which JarBootstrapMain runs (as bin/hbase shell
# does): -n runs FILE without IRB's prompt loop and exits non-zero on the first error. Standard
# input is empty, so the shell ends once FILE has run. It runs in the background so that a
# TERM or INT to this script stops the JVM too (timeout passes the signal on, and SIGKILLs it
# 10 s later): timeout puts itself in a process group of its own, which a signal to this
# script's group does not reach.
timeout --kill-after=10 "$timeout_s" \
  java "${java_flags[@]}" -cp "$lib/*" org.jruby.JarBootstrapMain -n "${conf[@]}" "$file" \
  </dev/null &
jvm=$!
trap 'kill -TERM "$jvm" 2>/dev/null || true; wait "$jvm" 2>/dev/null || true
      echo "hbase-shell: stopped by a signal (the shell too)" >&2; exit 143' INT TERM
status=0
wait "$jvm" || status=$?
trap - INT TERM
if (( status == 124 || status == 137 )); then
  die "the shell did not finish within ${timeout_s}s (HBASE_SHELL_TIMEOUT)"
elif (( status != 0 )); then
  die "the shell failed (exit status $status) on $file"
fi
