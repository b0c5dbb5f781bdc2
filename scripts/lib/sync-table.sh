# Sourced by scripts that verify a table against its source with HBase 2.6.4's own HashTable
# and SyncTable MapReduce jobs, run in Hadoop's local job runner (no YARN, no HDFS) by
# java/sync-table/SyncTableRunner.java (scripts/hbase-sync-table.sh; the move-in runbook test).
#
#   . "$repo/scripts/lib/sync-table.sh"
#   line="$(sync_table_run --source-zk 127.0.0.1:2881:/hbase --target-zk "$zk:/hbase" \
#             --table orders --work "$work/sync" --dryrun)" || fail
#   # line: synctable: hashes matched=A not-matched=B source-missing-rows=C
#   #   target-missing-rows=D source-missing-cells=E target-missing-cells=F different-cells=G
#   #   rows-with-diffs=H matching-rows=I matching-cells=J batches=K empty-batches=L dryrun=true
#   [[ "$(sync_table_differences "$line")" == 0 ]] || echo "tables differ: $line"
#   echo "hashes matched: $(sync_table_counter "$line" matched)"
#
# sync_table_run's arguments are SyncTableRunner's (see its header): --target-table T2,
# --reuse-hash (SyncTable again on the hashes of the last run in the same --work), --versions N,
# --batch-size BYTES, --num-hash-files N, --scan-batch N; without --dryrun the target is
# repaired. It prints the one result line (stdout) and returns non-zero if a job failed or
# ran past SYNC_TABLE_TIMEOUT seconds (default 600). Jobs' logs: WORK/logs/.
# Env: CELLAR_CACHE (default ~/.cache/cellar), SYNC_TABLE_HEAP (default 1g).

_sync_table_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# sync_table_fetch: the MapReduce client's jars (hbase-mapreduce 2.6.4, HBase 2.6.4-hadoop3 and
# Hadoop 3.4.2's local job runner), resolved once by `scripts/hbase/fetch.sh mapreduce`;
# prints their directory.
sync_table_fetch() {
  "$_sync_table_repo/scripts/hbase/fetch.sh" mapreduce
}

# sync_table_java PROGRAM.java ARGS...: runs a single-file program of java/sync-table/ on that
# classpath with the JVM flags HBase's client needs on Java 17.
# It runs in the directory of --work when given (Hadoop's local runner links job files into
# its working directory), else in the caller's.
sync_table_java() {
  local program="$1" lib dir="." prev="" arg args=()
  shift
  lib="$(sync_table_fetch)" || return 1
  for arg in "$@"; do
    if [[ "$prev" == --work ]]; then
      mkdir -p "$arg" || return 1
      dir="$(cd "$arg" && pwd)"
      arg="$dir"
    fi
    args+=("$arg")
    prev="$arg"
  done
  # shellcheck source=java-flags.sh
  . "$_sync_table_repo/scripts/lib/java-flags.sh"
  (cd "$dir" && timeout "${SYNC_TABLE_TIMEOUT:-600}" java "-Xmx${SYNC_TABLE_HEAP:-1g}" \
    -XX:+UseSerialGC "${hbase_client_java_flags[@]}" -cp "$lib/*" \
    "$_sync_table_repo/java/sync-table/$program" "${args[@]}")
}

# sync_table_run ARGS...: HashTable on the source, then SyncTable on the target; prints the
# "synctable: ..." line.
sync_table_run() {
  sync_table_java SyncTableRunner.java "$@"
}

# sync_table_counter LINE NAME: the number after NAME= in a "synctable:" (or "expected:") line.
sync_table_counter() {
  local v
  v="$(grep -oE "(^| )$2=[0-9]+" <<<"$1" | head -n1)"
  echo "${v##*=}"
}

# sync_table_differences LINE: the sum of the five difference counters and not-matched (0: the
# tables match; a hash that differs while no cell does would be a fault of the jobs).
sync_table_differences() {
  local sum=0 name v
  for name in source-missing-rows target-missing-rows source-missing-cells \
              target-missing-cells different-cells not-matched; do
    v="$(sync_table_counter "$1" "$name")"
    [[ -n "$v" ]] || { echo "sync-table: no $name= in '$1'" >&2; return 1; }
    sum=$((sum + v))
  done
  echo "$sum"
}
