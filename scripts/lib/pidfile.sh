# Sourced by the service scripts (zookeeper.sh, minidfs.sh): stopping a process by its PID file.

# stop_pidfile FILE SECONDS: SIGTERM the process FILE names, wait up to SECONDS for it to exit,
# then SIGKILL it; removes FILE. Nothing to do if FILE is missing or the process is gone.
stop_pidfile() {
  local file="$1" seconds="$2" pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((seconds * 4))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}
