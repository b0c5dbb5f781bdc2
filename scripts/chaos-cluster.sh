#!/usr/bin/env bash
# Chaos run on a cluster (scripts/cluster.sh: ZooKeeper, a MiniDFS or a local root, a master,
# N region servers): at random intervals a region server is killed with SIGKILL and a new one
# started, or paused (SIGSTOP) — briefly, within its ZooKeeper session, or past it, so that the
# master fences it and moves its regions; woken (SIGCONT), a fenced server must exit without
# acknowledging anything more, and a new one is started — while
#   - `cellar bench linkedlist generate` writes circular linked lists (lost acknowledged
#     writes show up as missing nodes), and
#   - `cellar bench linearizability run` calls registers concurrently (checked).
# At the end `linkedlist verify` scans the lists and the register history is checked.
#
# Usage: scripts/chaos-cluster.sh [--duration S] [--kill-every MIN-MAX] [--pauses PCT]
#                                 [--servers N] [--root file|hdfs] [--out DIR]
#   --duration S          seconds of workload and faults (default 300)
#   --kill-every MIN-MAX  seconds between faults (default 15-30)
#   --pauses PCT          percent of faults that are pauses instead of kills (default 0; half
#                         of the pauses outlast the session)
#   --servers N           region servers (default 3)
#   --root file|hdfs      the cluster's root (default file; hdfs starts a MiniDFS)
#   --out DIR             where the cluster, logs and history go (default: a new /tmp dir)
# Env: ZK_SESSION_TIMEOUT_MS (default 4000). Exits 0 only when no node was lost and the
# history is linearizable. Every process is stopped by PID on any exit.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
duration=300 kill_every=15-30 servers=3 root=file out="" pauses=0
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration=$2; shift 2 ;;
        --kill-every) kill_every=$2; shift 2 ;;
        --pauses) pauses=$2; shift 2 ;;
        --servers) servers=$2; shift 2 ;;
        --root) root=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "chaos-cluster: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
kill_min=${kill_every%-*} kill_max=${kill_every#*-}
if ! [[ "$duration" =~ ^[0-9]+$ && "$kill_min" =~ ^[0-9]+$ && "$kill_max" =~ ^[0-9]+$ && "$servers" =~ ^[0-9]+$ && "$pauses" =~ ^[0-9]+$ ]] \
    || [ "$pauses" -gt 100 ] \
    || [ "$kill_min" -lt 1 ] || [ "$kill_max" -lt "$kill_min" ] || [ "$servers" -lt 2 ]; then
    echo "chaos-cluster: whole numbers, --kill-every MIN-MAX with 1 <= MIN <= MAX, --pauses 0-100, --servers >= 2" >&2
    exit 2
fi
[ "$root" = file ] || [ "$root" = hdfs ] || { echo "chaos-cluster: --root file or hdfs" >&2; exit 2; }
if [ -z "$out" ]; then out=$(mktemp -d /tmp/cellar-chaos-cluster.XXXXXX); fi
mkdir -p "$out"
export CLUSTER_DIR="$out/cluster" CLUSTER_ROOT="$root"
export ZK_SESSION_TIMEOUT_MS="${ZK_SESSION_TIMEOUT_MS:-4000}"
(cd "$repo" && nice cargo build --release -q --bin cellar) || exit 1
bin="$repo/target/release/cellar"
export CELLAR_BIN="$bin"

generate_pid="" lin_pid=""
cleanup() {
    for pid in "$generate_pid" "$lin_pid"; do
        [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    "$repo/scripts/cluster.sh" down >/dev/null 2>&1
}
trap cleanup EXIT
trap 'echo "chaos-cluster: interrupted"; exit 130' INT TERM

"$repo/scripts/cluster.sh" up "$servers" >"$out/up.txt" || { cat "$out/up.txt"; exit 1; }
master1="$(sed -n 's/^master1 listening native=//p' "$out/up.txt")"
db="cellar://$master1"
echo "chaos-cluster: cluster in $CLUSTER_DIR, workloads against $db"

"$bin" bench linkedlist generate --db "$db" --create --writers 4 --rate 2000 \
    --duration "$duration" --summary "$out/generate.json" >"$out/generate.out" 2>"$out/generate.log" &
generate_pid=$!
"$bin" bench linearizability run --db "$db" --clients 6 --duration "$duration" \
    --history "$out/history.jsonl" >"$out/linearizability.out" 2>"$out/linearizability.log" &
lin_pid=$!

session_s=$(( (ZK_SESSION_TIMEOUT_MS + 999) / 1000 ))
began=$(date +%s) kills=0 short_pauses=0 long_pauses=0 unfenced=0
while true; do
    wait_s=$((kill_min + RANDOM % (kill_max - kill_min + 1)))
    left=$((began + duration - $(date +%s)))
    if [ "$left" -le $((wait_s + 2 * session_s + 12)) ]; then break; fi
    sleep "$wait_s"
    live=("$CLUSTER_DIR"/regionserver*.pid)
    victim="$(basename "${live[$((RANDOM % ${#live[@]}))]}" .pid)"
    pid="$(cat "$CLUSTER_DIR/$victim.pid")"
    at=$(( $(date +%s) - began ))
    if [ $((RANDOM % 100)) -lt "$pauses" ]; then
        if [ $((RANDOM % 2)) -eq 0 ]; then
            # Within the session: it must go on serving.
            short_pauses=$((short_pauses + 1))
            hold=$(( (session_s + 1) / 2 ))
            echo "chaos-cluster: $at s: pause $victim for ${hold} s (session ${session_s} s)"
            kill -STOP "$pid"; sleep "$hold"; kill -CONT "$pid"
        else
            # Past the session: fenced; woken, it must exit by itself.
            long_pauses=$((long_pauses + 1))
            hold=$((2 * session_s + 2))
            echo "chaos-cluster: $at s: pause $victim for ${hold} s (past its ${session_s} s session)"
            kill -STOP "$pid"; sleep "$hold"; kill -CONT "$pid"
            for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
            if kill -0 "$pid" 2>/dev/null; then
                unfenced=$((unfenced + 1))
                echo "chaos-cluster: $victim still runs 10 s after waking fenced; killing it" >&2
            fi
            "$repo/scripts/cluster.sh" kill "$victim" 2>/dev/null
            "$repo/scripts/cluster.sh" add >/dev/null || { echo "chaos-cluster: a new region server did not start" >&2; exit 1; }
        fi
        continue
    fi
    kills=$((kills + 1))
    echo "chaos-cluster: $at s: kill -9 $victim, starting another"
    "$repo/scripts/cluster.sh" kill "$victim"
    "$repo/scripts/cluster.sh" add >/dev/null || { echo "chaos-cluster: a new region server did not start" >&2; exit 1; }
done

echo "chaos-cluster: faults done; waiting for the workloads"
wait "$generate_pid"; generate_status=$?; generate_pid=""
wait "$lin_pid"; lin_status=$?; lin_pid=""
"$bin" bench linkedlist verify --db "$db" --expect "$out/generate.json" >"$out/verify.out" 2>"$out/verify.log"
verify_status=$?

field() { sed -nE "s/(^|.* )$1=([0-9.]+).*/\2/p" "$2" | head -n1; }
undefined=$(field UNDEFINED "$out/verify.out")
violations=$(field violations "$out/linearizability.out")
echo
echo "== chaos-cluster summary ($out)"
echo "duration:        ${duration} s, $servers region servers, root $root, a fault every ${kill_every} s (${pauses} % pauses)"
echo "faults:          $kills kill -9, $short_pauses pauses within the session, $long_pauses past it ($unfenced fenced servers still running 10 s after waking)"
echo "linked list:     acknowledged $(field acknowledged "$out/generate.out"), REFERENCED=$(field REFERENCED "$out/verify.out") UNREFERENCED=$(field UNREFERENCED "$out/verify.out") UNDEFINED=${undefined:-?}"
echo "registers:       operations $(field operations "$out/linearizability.out"), violations ${violations:-?}, undecided $(field undecided "$out/linearizability.out")"
if [ "$verify_status" -eq 0 ] && [ "$generate_status" -eq 0 ] && [ "$lin_status" -eq 0 ] \
    && [ "${undefined:-1}" = 0 ] && [ "${violations:-1}" = 0 ] && [ "$unfenced" = 0 ]; then
    echo "result:          PASS"
    exit 0
fi
echo "result:          FAIL (see $out/*.out, *.log and $CLUSTER_DIR/*.log)"
exit 1
