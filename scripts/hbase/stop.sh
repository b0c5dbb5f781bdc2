#!/usr/bin/env bash
# Stops the HBase standalone started by start.sh for DATA_DIR, by the PID in DATA_DIR/hbase.pid:
# SIGTERM, wait up to HBASE_STOP_TIMEOUT seconds (default 60), then SIGKILL.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DATA_DIR" >&2
  exit 2
fi
pidfile="$1/hbase.pid"
timeout="${HBASE_STOP_TIMEOUT:-60}"

if [[ ! -f "$pidfile" ]]; then
  echo "stop.sh: no $pidfile; nothing to stop" >&2
  exit 0
fi
pid="$(cat "$pidfile")"
if ! [[ "$pid" =~ ^[0-9]+$ ]]; then
  echo "stop.sh: $pidfile holds '$pid', not a process id" >&2
  exit 1
fi
# Only signal the process if it is still our HMaster (the PID may have been reused).
if ! kill -0 "$pid" 2>/dev/null || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'hbase.master.HMaster'; then
  echo "stop.sh: HBase pid $pid is not running" >&2
  rm -f "$pidfile"
  exit 0
fi

kill -TERM "$pid"
deadline=$((SECONDS + timeout))
while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do
  sleep 0.5
done
if kill -0 "$pid" 2>/dev/null; then
  echo "stop.sh: HBase pid $pid still running after ${timeout}s; sending SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
fi
rm -f "$pidfile"
echo "stopped hbase pid $pid"
