# Sourced by the scripts that run a `cellar standalone` of their own beside Apache HBase
# (hbase-closest-row.sh, hbase-replication.sh): starting it and stopping it by its PID.

cellar_pid=""
cellar_addr=""

# start_standalone BIN DIR [ARGS...]: starts `BIN standalone ARGS` on loopback ports picked by
# the OS, its data in DIR/cellar-data and its output in DIR/cellar.out and DIR/cellar.log;
# sets cellar_pid, and cellar_addr (its HBase front end) once it serves. Returns 1, with the
# log's last lines, if it exits or prints no address within 60 s.
start_standalone() {
  local bin="$1" dir="$2"
  shift 2
  mkdir -p "$dir/cellar-data"
  "$bin" standalone --data-dir "$dir/cellar-data" --listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --hbase-listen 127.0.0.1:0 --thrift-listen off "$@" \
    >"$dir/cellar.out" 2>"$dir/cellar.log" &
  cellar_pid=$!
  cellar_addr=""
  for _ in $(seq 1 120); do
    cellar_addr="$(sed -n 's/^listening hbase=//p' "$dir/cellar.out" | head -n1)"
    [[ -n "$cellar_addr" ]] && return 0
    kill -0 "$cellar_pid" 2>/dev/null || break
    sleep 0.5
  done
  tail -n 20 "$dir/cellar.log" >&2
  return 1
}

# kill9_restart_standalone BIN DIR [ARGS...]: SIGKILLs the server start_standalone started
# (a crash: nothing flushed, nothing closed), then starts `BIN standalone ARGS` again on the
# same data directory and the same native, HTTP and HBase addresses, so that clients and
# replication sources find it where it was. Sets cellar_pid; returns 1 as start_standalone does.
kill9_restart_standalone() {
  local bin="$1" dir="$2" native http hbase
  shift 2
  native="$(sed -n 's/^listening native=//p' "$dir/cellar.out" | head -n1)"
  http="$(sed -n 's/^listening http=//p' "$dir/cellar.out" | head -n1)"
  hbase="$(sed -n 's/^listening hbase=//p' "$dir/cellar.out" | head -n1)"
  [[ -n "$native" && -n "$http" && -n "$hbase" ]] || { echo "no addresses in $dir/cellar.out" >&2; return 1; }
  kill -KILL "$cellar_pid" 2>/dev/null
  wait "$cellar_pid" 2>/dev/null
  mv "$dir/cellar.out" "$dir/cellar.out.killed"
  mv "$dir/cellar.log" "$dir/cellar.log.killed"
  "$bin" standalone --data-dir "$dir/cellar-data" --listen "$native" \
    --http-listen "$http" --hbase-listen "$hbase" --thrift-listen off "$@" \
    >"$dir/cellar.out" 2>"$dir/cellar.log" &
  cellar_pid=$!
  for _ in $(seq 1 120); do
    [[ -n "$(sed -n 's/^listening hbase=//p' "$dir/cellar.out" | head -n1)" ]] && return 0
    kill -0 "$cellar_pid" 2>/dev/null || break
    sleep 0.5
  done
  tail -n 20 "$dir/cellar.log" >&2
  return 1
}

# stop_standalone: SIGTERM the server start_standalone started, wait up to 10 s, SIGKILL it.
stop_standalone() {
  if [[ -n "$cellar_pid" ]] && kill -0 "$cellar_pid" 2>/dev/null; then
    kill -TERM "$cellar_pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$cellar_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$cellar_pid" 2>/dev/null || true
  fi
}
