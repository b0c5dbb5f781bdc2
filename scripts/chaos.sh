#!/usr/bin/env bash
# Chaos run: a `cellar standalone` server is killed with SIGKILL at random intervals and
# restarted on the same data directory while two workloads run against it:
#   - `cellar bench linkedlist generate` (circular linked lists; finds lost acknowledged writes),
#   - `cellar bench linearizability run` (concurrent register calls, checked for linearizability).
# At the end `linkedlist verify` scans the lists and the register history is checked.
#
# Usage: scripts/chaos.sh [--duration S] [--kill-every MIN-MAX] [--records N]
#                         [--node-rate N] [--writers N] [--clients N] [--mix separate|mixed]
#                         [--port P] [--out DIR] [--no-build]
#   --duration S         seconds of workload and kills (default 600)
#   --kill-every MIN-MAX seconds between a restart and the next kill (default 10-40)
#   --records N          stop the linked-list writers after N nodes (default 0: no limit)
#   --node-rate N        linked-list nodes per second (default 5000; 0: as fast as acknowledged;
#                        the faster, the longer a killed server replays its WAL)
#   --writers N          linked-list writers (default 4)
#   --clients N          register clients (default 8)
#   --mix M              register call mix, see `cellar bench linearizability run --help`
#   --port P             native port; P+10 is the HTTP port (default 26200: below the usual
#                        ephemeral range, so no client socket takes it while the server is down)
#   --out DIR            where the data, logs and history go (default: a new /tmp directory)
#   --no-build           use target/release/cellar as it is
# Exits 0 only when no node was lost, the history is linearizable and the server never died
# on its own. Every process it starts is stopped by PID on any exit.
set -uo pipefail
cd "$(dirname "$0")/.."

duration=600
kill_every=10-40
records=0
node_rate=5000
writers=4
clients=8
mix=mixed
port=26200
out=""
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration=$2; shift 2 ;;
        --kill-every) kill_every=$2; shift 2 ;;
        --records) records=$2; shift 2 ;;
        --node-rate) node_rate=$2; shift 2 ;;
        --writers) writers=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --mix) mix=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "chaos: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
kill_min=${kill_every%-*}
kill_max=${kill_every#*-}
if ! [[ "$duration" =~ ^[0-9]+$ && "$kill_min" =~ ^[0-9]+$ && "$kill_max" =~ ^[0-9]+$ && "$records" =~ ^[0-9]+$ && "$node_rate" =~ ^[0-9]+$ ]] \
    || [ "$kill_min" -lt 1 ] || [ "$kill_max" -lt "$kill_min" ]; then
    echo "chaos: --duration, --records, --node-rate need whole numbers and --kill-every MIN-MAX with 1 <= MIN <= MAX" >&2
    exit 2
fi

if [ "$build" = 1 ]; then
    echo "chaos: building (cargo build --release -p cellar-cli)"
    nice cargo build --release -p cellar-cli || { echo "chaos: build failed" >&2; exit 1; }
fi
bin=$(pwd)/target/release/cellar
[ -x "$bin" ] || { echo "chaos: $bin is missing (build it, or drop --no-build)" >&2; exit 1; }

if [ -z "$out" ]; then out=$(mktemp -d /tmp/cellar-chaos.XXXXXX); fi
mkdir -p "$out"
data="$out/data"
if [ -e "$data" ]; then echo "chaos: $data exists; give a fresh --out" >&2; exit 2; fi
native="127.0.0.1:$port"
http="127.0.0.1:$((port + 10))"
db="cellar://$native"
for p in "$port" "$((port + 10))"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        echo "chaos: 127.0.0.1:$p is already in use; pick another --port" >&2
        exit 2
    fi
done

server_pid=""
generate_pid=""
lin_pid=""
cleanup() {
    for pid in "$generate_pid" "$lin_pid"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null
            sleep 1
            kill -KILL "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
        fi
    done
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'echo "chaos: interrupted"; exit 130' INT TERM

starts=0
start_times=()
# Starts the server on the data directory and waits until it listens (up to 300 s: a server
# killed under heavy writes replays a long WAL). A start that fails because a port is taken
# (another process may grab it while the server is down) is tried again, up to 5 times.
start_server() {
    local began attempt log waited
    began=$(date +%s%N)
    for attempt in 1 2 3 4 5; do
        starts=$((starts + 1))
        log="$out/server-$starts.log"
        "$bin" standalone --data-dir "$data" --listen "$native" --http-listen "$http" \
            --hbase-listen off >"$log" 2>&1 &
        server_pid=$!
        waited=0
        while ! grep -q "listening native=" "$log" 2>/dev/null; do
            if ! kill -0 "$server_pid" 2>/dev/null; then
                wait "$server_pid" 2>/dev/null
                break
            fi
            if [ "$waited" -ge 3000 ]; then
                echo "chaos: the server (start $starts) did not listen within 300 s" >&2
                return 1
            fi
            sleep 0.1
            waited=$((waited + 1))
        done
        if grep -q "listening native=" "$log" 2>/dev/null; then
            start_times+=("$(( ($(date +%s%N) - began) / 1000000 ))")
            return 0
        fi
        if grep -q "Address already in use" "$log"; then
            echo "chaos: start $starts: a port is taken (attempt $attempt); trying again in 5 s"
            sleep 5
            continue
        fi
        echo "chaos: the server (start $starts) exited before listening; its log:" >&2
        tail -n 30 "$log" >&2
        return 1
    done
    echo "chaos: the server could not get its ports in 5 attempts" >&2
    return 1
}

echo "chaos: data, logs and history in $out"
start_server || exit 1

gen_args=(bench linkedlist generate --db "$db" --create --writers "$writers"
    --rate "$node_rate" --duration "$duration" --summary "$out/generate.json")
if [ "$records" -gt 0 ]; then gen_args+=(--nodes "$records"); fi
"$bin" "${gen_args[@]}" >"$out/generate.out" 2>"$out/generate.log" &
generate_pid=$!
"$bin" bench linearizability run --db "$db" --clients "$clients" --mix "$mix" \
    --duration "$duration" --history "$out/history.jsonl" \
    >"$out/linearizability.out" 2>"$out/linearizability.log" &
lin_pid=$!

began=$(date +%s)
kills=0
died=0
while true; do
    wait_s=$((kill_min + RANDOM % (kill_max - kill_min + 1)))
    left=$((began + duration - $(date +%s)))
    # No kill in the last seconds: the run ends with the server up.
    if [ "$left" -le $((wait_s + 2)) ]; then break; fi
    sleep "$wait_s"
    if ! kill -0 "$server_pid" 2>/dev/null; then
        died=$((died + 1))
        echo "chaos: the server died on its own (start $starts); see $out/server-$starts.log"
        wait "$server_pid" 2>/dev/null
    else
        kill -KILL "$server_pid"
        wait "$server_pid" 2>/dev/null
        kills=$((kills + 1))
    fi
    echo "chaos: $(( $(date +%s) - began )) s: kill $kills (SIGKILL pid $server_pid), restarting"
    start_server || exit 1
done

echo "chaos: kills done; waiting for the workloads to finish"
wait "$generate_pid"; generate_status=$?; generate_pid=""
wait "$lin_pid"; lin_status=$?; lin_pid=""
if ! kill -0 "$server_pid" 2>/dev/null; then
    died=$((died + 1))
    echo "chaos: the server died on its own before the end; restarting it to verify"
    start_server || exit 1
fi

echo "chaos: verifying the linked lists"
"$bin" bench linkedlist verify --db "$db" --expect "$out/generate.json" \
    >"$out/verify.out" 2>"$out/verify.log"
verify_status=$?

field() { sed -nE "s/(^|.* )$1=([0-9.]+).*/\2/p" "$2" | head -n1; }
acked=$(field acknowledged "$out/generate.out")
unsettled=$(field unsettled "$out/generate.out")
resent=$(field resent "$out/generate.out")
referenced=$(field REFERENCED "$out/verify.out")
unreferenced=$(field UNREFERENCED "$out/verify.out")
undefined=$(field UNDEFINED "$out/verify.out")
ops=$(field operations "$out/linearizability.out")
ok=$(field ok "$out/linearizability.out")
fail=$(field fail "$out/linearizability.out")
unknown=$(field unknown "$out/linearizability.out")
keys=$(field keys "$out/linearizability.out")
violations=$(field violations "$out/linearizability.out")
undecided=$(field undecided "$out/linearizability.out")
restart_max=$(printf '%s\n' "${start_times[@]:1}" | sort -n | tail -n1)

echo
echo "== chaos summary ($out)"
echo "duration:        ${duration} s, kill every ${kill_every} s, ${node_rate} nodes/s asked"
echo "kills survived:  $kills (server died on its own: $died; slowest restart: ${restart_max:-none} ms)"
echo "linked list:     written (acknowledged) ${acked:-?}, unsettled ${unsettled:-?}, resent ${resent:-?}"
echo "                 verified REFERENCED=${referenced:-?} UNREFERENCED=${unreferenced:-?} UNDEFINED=${undefined:-?}"
echo "lost (UNDEFINED): ${undefined:-?}   (verify exit $verify_status, generate exit $generate_status)"
echo "registers:       operations ${ops:-?} (ok ${ok:-?}, fail ${fail:-?}, unknown ${unknown:-?})"
echo "histories checked: ${keys:-?} keys, violations ${violations:-?}, undecided ${undecided:-?} (exit $lin_status)"
if [ "$verify_status" -eq 0 ] && [ "$generate_status" -eq 0 ] && [ "$lin_status" -eq 0 ] \
    && [ "$died" -eq 0 ] && [ "${undefined:-1}" = 0 ] && [ "${violations:-1}" = 0 ]; then
    echo "result:          PASS"
    exit 0
fi
echo "result:          FAIL (see $out/*.out and *.log; witnesses: $out/history.jsonl.witness.jsonl)"
exit 1
