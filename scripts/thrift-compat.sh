#!/usr/bin/env bash
# happybase, unmodified from PyPI, against a real `cellar standalone --thrift-listen`: every
# python/happybase test on the buffered and framed transports and the binary and compact
# protocols, bad input, and a connection pool under threads.
#
#   scripts/thrift-compat.sh [--cellar target/release/cellar] [--work DIR] [--against-hbase]
#
# --against-hbase runs the same suite against Apache HBase 2.6's own Thrift server instead (a
# standalone HBase, scripts/hbase/start.sh, and one Thrift server per transport and protocol,
# scripts/hbase/thrift.sh, on 127.0.0.1:9090-9093; HBase's ports 2181 and 16000-16030 must be
# free), checking that the tests hold for HBase itself; minutes, so not in the test command.
# Installs happybase into target/happybase-venv on first use (python3 -m venv; Debian's
# python3-venv is installed with apt-get when venv is missing). Ends with the summary line
# "thrift-compat: N tests passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."

cellar=target/release/cellar
work=""
against_hbase=0
while [ $# -gt 0 ]; do
    case "$1" in
        --cellar) cellar="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --against-hbase) against_hbase=1; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (try --help)"; exit 2 ;;
    esac
done

fail() { echo "$*"; echo "thrift-compat: 0 tests passed, 1 failed"; exit 1; }

# summarize FILE: "RAN BAD" from a unittest run's output.
summarize() {
    local ran bad
    ran=$(sed -nE 's/^Ran ([0-9]+) tests? in .*/\1/p' "$1" | tail -n1)
    bad=$(grep -Eo '(failures|errors)=[0-9]+' "$1" | awk -F= '{s+=$2} END {print s+0}')
    if [ -z "$ran" ]; then ran=0; bad=1; fi
    echo "$ran $bad"
}

venv=target/happybase-venv
# shellcheck source=lib/happybase-venv.sh
. scripts/lib/happybase-venv.sh

if [ "$against_hbase" = 1 ]; then
    command -v java >/dev/null || fail "java (17+) is needed for Apache HBase"
    happybase_venv "$venv" || fail "no happybase"
    own_work=0
    if [ -z "$work" ]; then work=$(mktemp -d); own_work=1; fi
    mkdir -p "$work/hbase"
    hbase_dir="$(cd "$work/hbase" && pwd)"
    # The Thrift servers: PORT and HBase's options for each transport and protocol.
    servers=("9090 BUFFERED_BINARY" "9091 FRAMED_BINARY -f" "9092 BUFFERED_COMPACT -c" "9093 FRAMED_COMPACT -f -c")
    stop_hbase() {
        for s in "${servers[@]}"; do
            scripts/hbase/thrift.sh stop "$hbase_dir" "${s%% *}" 2>/dev/null
        done
        scripts/hbase/stop.sh "$hbase_dir" >/dev/null 2>&1
        if [ "$own_work" = 1 ]; then rm -rf "$work"; fi
    }
    trap stop_hbase EXIT
    for s in "${servers[@]}"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/${s%% *}") 2>/dev/null; then
            fail "127.0.0.1:${s%% *} is in use; --against-hbase needs ports 9090-9093"
        fi
    done
    scripts/hbase/start.sh "$hbase_dir" || fail "Apache HBase did not start (scripts/hbase/start.sh)"
    env_args=(THRIFT_TARGET=hbase)
    for s in "${servers[@]}"; do
        read -r port mode options <<<"$s"
        # shellcheck disable=SC2086 # the options are words
        scripts/hbase/thrift.sh start "$hbase_dir" "$port" $options \
            || fail "HBase's Thrift server ($mode) did not start (scripts/hbase/thrift.sh)"
        env_args+=("THRIFT_$mode=127.0.0.1:$port")
    done
    echo "hbase pid $(cat "$hbase_dir/hbase.pid"), thrift servers on 127.0.0.1:9090-9093"
    env "${env_args[@]}" CELLAR_THRIFT=127.0.0.1:9090 timeout 1800 "$venv/bin/python" \
        -m unittest discover -v -s python/happybase -p 'test_*.py' 2>&1 | tee "$work/unittest.out"
    status=${PIPESTATUS[0]}
    read -r ran bad < <(summarize "$work/unittest.out")
    if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
    echo "thrift-compat: $((ran > bad ? ran - bad : 0)) tests passed, ${bad} failed"
    [ "$bad" -eq 0 ]
    exit
fi

if [ ! -x "$cellar" ]; then
    cargo build --release -p cellar-cli || fail "cannot build $cellar"
fi
happybase_venv "$venv" || fail "no happybase"

own_work=0
if [ -z "$work" ]; then work=$(mktemp -d); own_work=1; fi
mkdir -p "$work"
"$cellar" standalone --data-dir "$work/data" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --hbase-listen off --thrift-listen 127.0.0.1:0 >"$work/server.out" 2>"$work/server.log" &
pid=$!
apid=""
cleanup() {
    if [ -n "$apid" ]; then kill -KILL "$apid" 2>/dev/null; wait "$apid" 2>/dev/null; fi
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if [ "$own_work" = 1 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

addr=""
for _ in $(seq 1 480); do
    addr=$(sed -n 's/^listening thrift=//p' "$work/server.out")
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/server.log"; fail "cellar exited before listening"; }
    sleep 0.25
done
[ -n "$addr" ] || { cat "$work/server.log"; fail "cellar did not print its Thrift address"; }
echo "cellar pid $pid, thrift $addr"

CELLAR_THRIFT="$addr" timeout 900 "$venv/bin/python" -m unittest discover -v \
    -s python/happybase -p 'test_*.py' 2>&1 | tee "$work/unittest.out"
status=${PIPESTATUS[0]}
read -r ran bad < <(summarize "$work/unittest.out")
if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
kill -0 "$pid" 2>/dev/null || { echo "cellar died during the tests:"; tail -20 "$work/server.log"; bad=$((bad + 1)); }

# Authorization on: happybase callers act as thrift.user with its grants, not the server's.
mkdir -p "$work/auth"
printf '[security]\nauthorization = true\nsuperusers = ["admin"]\n\n[thrift]\nuser = "thrifty"\n' >"$work/auth/cellar.toml"
"$cellar" standalone --config "$work/auth/cellar.toml" --data-dir "$work/auth/data" --listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --hbase-listen off --thrift-listen 127.0.0.1:0 \
    >"$work/auth/server.out" 2>"$work/auth/server.log" &
apid=$!
auth_addr=""
for _ in $(seq 1 480); do
    auth_addr=$(sed -n 's/^listening thrift=//p' "$work/auth/server.out")
    [ -n "$auth_addr" ] && break
    kill -0 "$apid" 2>/dev/null || break
    sleep 0.25
done
auth_native=$(sed -n 's/^listening native=//p' "$work/auth/server.out")
if [ -n "$auth_addr" ] && [ -n "$auth_native" ]; then
    CELLAR_THRIFT="$auth_addr" CELLAR_NATIVE="$auth_native" CELLAR_DATA="$work/auth/data" \
        CELLAR_BIN="$cellar" timeout 300 "$venv/bin/python" python/happybase/auth_happybase.py -v 2>&1 | tee "$work/auth/unittest.out"
    if [ "${PIPESTATUS[0]}" -eq 0 ]; then ran=$((ran + 1)); else ran=$((ran + 1)); bad=$((bad + 1)); fi
else
    echo "the authorization server did not start:"; tail -20 "$work/auth/server.log"
    ran=$((ran + 1)); bad=$((bad + 1))
fi
kill -TERM "$apid" 2>/dev/null
for _ in $(seq 1 120); do kill -0 "$apid" 2>/dev/null || break; sleep 0.25; done
kill -KILL "$apid" 2>/dev/null
wait "$apid" 2>/dev/null
apid=""
echo "thrift-compat: $((ran > bad ? ran - bad : 0)) tests passed, ${bad} failed"
[ "$bad" -eq 0 ]
