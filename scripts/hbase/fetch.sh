#!/usr/bin/env bash
# Resolves the Apache HBase 2.6.4 standalone server jars from Maven Central into
# $CELLAR_CACHE/hbase-2.6.4/lib (default ~/.cache/cellar). Idempotent: a completed fetch
# leaves a marker and later calls return at once. Prints the lib directory.
#
# Usage: scripts/hbase/fetch.sh [server|mapreduce|codecs|shell]
#   server     (the default) the server's jars (server-pom.xml), in .../hbase-2.6.4/lib
#   mapreduce  a MapReduce client's: the same HBase and Hadoop, hbase-mapreduce and Hadoop's
#              local job runner (mapreduce-pom.xml), in .../hbase-2.6.4/mapreduce-lib
#   codecs     the LZ4 and ZSTD codecs a server or writer adds to the jars above
#              (scripts/hfile/codecs-pom.xml), in .../hbase-2.6.4/codecs-lib
#   shell      HBase's own JRuby shell: hbase-shell 2.4.17 with its JRuby and its HBase 2.4.17
#              client (shell-pom.xml), in .../hbase-shell-2.4.17/lib
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${CELLAR_CACHE:-$HOME/.cache/cellar}"
home="$cache/hbase-2.6.4"
case "${1:-server}" in
  server) pom="$here/server-pom.xml"; lib="$home/lib"; marker="$home/.fetched" ;;
  mapreduce) pom="$here/mapreduce-pom.xml"; lib="$home/mapreduce-lib"; marker="$home/.fetched-mapreduce" ;;
  codecs) pom="$here/../hfile/codecs-pom.xml"; lib="$home/codecs-lib"; marker="$home/.fetched-codecs" ;;
  shell) pom="$here/shell-pom.xml"; lib="$cache/hbase-shell-2.4.17/lib"; marker="$cache/hbase-shell-2.4.17/.fetched" ;;
  *) echo "fetch.sh: unknown set '$1' (server, mapreduce, codecs or shell)" >&2; exit 2 ;;
esac

if [[ -f "$marker" && -d "$lib" ]]; then
  echo "$lib"
  exit 0
fi

command -v mvn >/dev/null || { echo "fetch.sh: mvn (Maven 3) is required to resolve HBase jars" >&2; exit 1; }

mkdir -p "$lib"
# Maven writes progress to stdout; keep our stdout for the lib path only.
if ! mvn -B -q -f "$pom" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$lib" -DoverWriteIfNewer=true 1>&2; then
  echo "fetch.sh: resolving the jars of $(basename "$pom") from Maven Central failed (see Maven output above)" >&2
  exit 1
fi

# One logging backend only: refuse to finish if a second one slipped in transitively.
for dup in reload4j slf4j-reload4j slf4j-log4j12 log4j-1.2.17; do
  if compgen -G "$lib/${dup}*.jar" >/dev/null; then
    echo "fetch.sh: duplicate logging backend $dup in $lib; extend the exclusions in $(basename "$pom")" >&2
    exit 1
  fi
done

# The Maven jars lack the tarball's web-UI folders and the server refuses to start without
# them; empty ones on the classpath are enough for the info servers and /jmx.
if [[ "$lib" == "$home/lib" ]]; then
  mkdir -p "$home/webapps/hbase-webapps/master" "$home/webapps/hbase-webapps/regionserver" \
           "$home/webapps/hbase-webapps/static"
fi

touch "$marker"
echo "$lib"
