# Sourced by the HBase-beside scripts with an --hdfs mode (hbase-replication.sh,
# hbase-snapshot-import.sh, hbase-bulk-load.sh): one MiniDFS of their own, started and stopped
# by scripts/minidfs.sh (which stops it by its PID).

minidfs_url=""

# start_minidfs DIR: starts a one-DataNode MiniDFS with its data and log in DIR and sets
# minidfs_url (hdfs://127.0.0.1:PORT). Returns 1 if it does not start.
start_minidfs() {
  local line
  echo "starting a MiniDFS in $1..." >&2
  line="$("$repo/scripts/minidfs.sh" start "$1" 1 | grep '^hdfs=')" || return 1
  minidfs_url="${line#hdfs=}"
}

# stop_minidfs DIR: stops the MiniDFS started in DIR, if one was (its PID file is there).
stop_minidfs() {
  [[ -f "$1/minidfs.pid" ]] && "$repo/scripts/minidfs.sh" stop "$1" >&2
  true
}
