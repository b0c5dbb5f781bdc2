#!/usr/bin/env bash
# Writes HFiles with Apache HBase 2.6.4's own store file writer, one per data block encoding
# and compression, each with a listing of its cells as HBase's own reader reads them
# (java/hfile-fixtures/HFileFixtures.java). Cellar's HFile reader is tested against them
# (crates/hfile/tests/hbase_files.rs).
#
# Usage: scripts/hfile-fixtures.sh OUT_DIR [--large]
#   crates/hfile/tests/fixtures is what the tests read by default (committed); --large writes
#   files with a 6 MiB cell instead (not committed; scripts/test.sh writes them to a temporary
#   directory and points CELLAR_HFILE_FIXTURES at it).
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: $0 OUT_DIR [--large]" >&2
  exit 2
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lib="$("$repo/scripts/hbase/fetch.sh")"
codecs="${CELLAR_CACHE:-$HOME/.cache/cellar}/hfile-codecs"
if [[ ! -f "$codecs/.fetched" ]]; then
  mkdir -p "$codecs"
  mvn -B -q -f "$repo/scripts/hfile/codecs-pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$codecs" 1>&2 \
    || { echo "hfile-fixtures: resolving the codec jars from Maven Central failed" >&2; exit 1; }
  touch "$codecs/.fetched"
fi
mkdir -p "$1"
# Compression.Algorithm reads its codec classes from the hbase-site.xml on the classpath, not
# from the Configuration a writer is given: HBase's own zstd codec (Hadoop's needs libhadoop).
conf="$(mktemp -d)"
trap 'rm -rf "$conf"' EXIT
cat > "$conf/hbase-site.xml" <<XML
<?xml version="1.0"?>
<configuration>
  <property><name>hbase.io.compress.zstd.codec</name><value>org.apache.hadoop.hbase.io.compress.zstd.ZstdCodec</value></property>
</configuration>
XML
java -cp "$conf:$lib/*:$codecs/*" "$repo/java/hfile-fixtures/HFileFixtures.java" "$@" 2> >(grep -v -E "^(SLF4J|WARNING)|log4j" >&2)
