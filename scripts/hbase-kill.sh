#!/usr/bin/env bash
# `kill -9` of Cellar while the unmodified HBase Java client writes to it, several rounds on one
# data directory and one port. Each round: the writer (KillWorkload write: put, batch, delete,
# increment from several threads, every call logged before it is sent and when it returns)
# writes; after its first acknowledged call and a random 0.2-1.5 s more, Cellar is killed with
# SIGKILL by PID, restarted on the same data directory and HBase port, the writer (whose calls
# ride over to the restarted server through the client's retries) writes 0.5 s more and stops,
# and KillWorkload verify checks every round so far through the client. Ends with one line
#   hbase-kill: passed|failed (R rounds, ...)
# and exits non-zero on a failure. Called by scripts/hbase-compat.sh; see docs/hbase-compat-tests.md.
#
# Usage: scripts/hbase-kill.sh --cellar BIN --classpath CP --work DIR [--rounds N] [--threads N]
set -uo pipefail

cellar_bin=""
classpath=""
work=""
rounds=5
threads=4
fail() { echo "hbase-kill: $*" >&2; echo "hbase-kill: failed ($*)"; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || fail "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --classpath) need_value "$@"; classpath="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --rounds) need_value "$@"; rounds="$2"; shift 2 ;;
    --threads) need_value "$@"; threads="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) fail "unknown option '$1' (see --help)" ;;
  esac
done
[[ -x "$cellar_bin" ]] || fail "no Cellar binary at '$cellar_bin' (--cellar BIN)"
[[ -n "$classpath" ]] || fail "--classpath is needed (test-classes and the hbase-shaded-client jars)"
[[ -n "$work" ]] || fail "--work DIR is needed"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || fail "--rounds: '$rounds' is not a positive count"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || fail "--threads: '$threads' is not a positive count"
command -v java >/dev/null 2>&1 || fail "java (17+) is not installed"

mkdir -p "$work/data" "$work/logs"
rm -f "$work/kills" "$work/stop"
: > "$work/kills"
table=kill_t
# shellcheck source=lib/java-flags.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/java-flags.sh"
java_flags=("${hbase_client_java_flags[@]}")
# Small memstores and a small first split size: flushes and splits run while Cellar is killed.
cat > "$work/cellar.toml" <<TOML
[split]
initial_bytes = 1048576
check_interval_ms = 200

[storage]
memstore_flush_bytes = 262144
memstore_chunk_pool_bytes = 16777216
memstore_chunks_ready_bytes = 4194304
TOML

# --- the server and the writer, each stopped by PID on every exit ---------------------------
server_pid=""
writer_pid=""
cleanup() {
  if [[ -n "$writer_pid" ]] && kill -0 "$writer_pid" 2>/dev/null; then
    kill -KILL "$writer_pid" 2>/dev/null || true
  fi
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }

# Starts Cellar on the data directory with the HBase front end on port $1 (0: any), its
# output in cellar-$2.*; sets server_pid and port.
start_server() {
  local want="$1" n="$2" out="$work/cellar-$2.out"
  "$cellar_bin" standalone --data-dir "$work/data" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --hbase-listen "127.0.0.1:$want" --config "$work/cellar.toml" >"$out" 2>"$work/cellar-$n.log" &
  server_pid=$!
  local addr=""
  for _ in $(seq 1 1200); do
    addr="$(sed -n 's/^listening hbase=//p' "$out" | head -n1)"
    [[ -n "$addr" ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      tail -n 20 "$work/cellar-$n.log" >&2
      fail "cellar standalone (start $n) exited before listening (log: $work/cellar-$n.log)"
    fi
    sleep 0.05
  done
  [[ -n "$addr" ]] || fail "cellar standalone (start $n) printed no 'listening hbase=' line within 60 s"
  port="${addr##*:}"
  if [[ "$want" != 0 && "$port" != "$want" ]]; then
    fail "the restarted server listens on $addr, not port $want"
  fi
}

acked_calls() { cat "$work/logs/round-$1-thread-"*.log 2>/dev/null | grep -Ec '^DONE [0-9]+ [0-9]+ 1+( |$)'; }
# Writer threads whose last logged line is a TRY: a call sent and not yet answered.
in_flight() {
  local f n=0
  for f in "$work/logs/round-$1-thread-"*.log; do
    [[ "$(tail -n1 "$f" 2>/dev/null)" == TRY* ]] && n=$((n + 1))
  done
  echo "$n"
}

port=0
start_server 0 0
echo "cellar pid $server_pid, HBase front end at 127.0.0.1:$port" >&2
started=$(date +%s)
for round in $(seq 0 $((rounds - 1))); do
  rm -f "$work/stop"
  java "${java_flags[@]}" -Dcellar.hbase.bootstrap="127.0.0.1:$port" -cp "$classpath" \
    org.cellar.hbasecompat.KillWorkload write "$table" "$round" "$threads" "$work/logs" "$work/stop" 300 \
    >"$work/writer-$round.log" 2>&1 &
  writer_pid=$!
  # Writing has begun once a call is acknowledged (the first round also creates the table).
  for _ in $(seq 1 600); do
    [[ "$(acked_calls "$round")" -gt 0 ]] && break
    kill -0 "$writer_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ "$(acked_calls "$round")" -eq 0 ]]; then
    tail -n 30 "$work/writer-$round.log" >&2
    fail "round $round: the writer exited or acknowledged no call within 60 s (log: $work/writer-$round.log)"
  fi
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.2 + (r % 1301) / 1000 }')"
  # The kill lands while calls are in flight (bounded: about 5 s; verify checks it landed so).
  # The server is frozen (SIGSTOP) first, so no call can finish between the check and the
  # kill; the writer's log gets 50 ms to show the answers that came before the freeze.
  for _ in $(seq 1 80); do
    kill -STOP "$server_pid"
    kill_ms=$(now_ms)
    sleep 0.05
    busy=$(in_flight "$round")
    [[ "$busy" -gt 0 ]] && break
    kill -CONT "$server_pid"
    sleep 0.01
  done
  kill -KILL "$server_pid"
  wait "$server_pid" 2>/dev/null
  dead_ms=$(now_ms)
  before=$(acked_calls "$round")
  echo "round $round: SIGKILL to pid $server_pid with $busy calls in flight ($before acknowledged by the time it was reaped)" >&2
  start_server "$port" $((round + 1))
  echo "$round $kill_ms $dead_ms $(now_ms)" >> "$work/kills"
  sleep 0.5
  touch "$work/stop"
  writer_status=""
  for _ in $(seq 1 1500); do
    if ! kill -0 "$writer_pid" 2>/dev/null; then
      wait "$writer_pid"
      writer_status=$?
      break
    fi
    sleep 0.1
  done
  if [[ -z "$writer_status" ]]; then
    fail "round $round: the writer did not stop within 150 s of the stop file (log: $work/writer-$round.log)"
  fi
  writer_pid=""
  grep -E '^kill-workload' "$work/writer-$round.log" >&2
  if [[ "$writer_status" -ne 0 ]]; then
    tail -n 30 "$work/writer-$round.log" >&2
    fail "round $round: the writer exited with status $writer_status (log: $work/writer-$round.log)"
  fi
  if ! timeout 300 java "${java_flags[@]}" -Dcellar.hbase.bootstrap="127.0.0.1:$port" -cp "$classpath" \
       org.cellar.hbasecompat.KillWorkload verify "$table" "$work/logs" "$work/kills" \
       >"$work/verify-$round.log" 2>&1; then
    grep -E '^(kill-workload|PROBLEM)' "$work/verify-$round.log" >&2 || tail -n 30 "$work/verify-$round.log" >&2
    fail "round $round: verify found problems (logs, data and calls kept in $work)"
  fi
  grep -E "^kill-workload (round $round:|verify)" "$work/verify-$round.log" >&2
done
echo "hbase-kill: passed ($rounds rounds in $(( $(date +%s) - started )) s; data and logs in $work)"
