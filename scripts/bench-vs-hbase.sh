#!/usr/bin/env bash
# Side-by-side YCSB: Apache HBase 2.6.4 standalone and Cellar standalone, same workload files,
# same machine, interleaved: for every pass, thread count and workload, the systems in turn:
#   hbase          the real YCSB 0.17 core + Cellar's binding (java/ycsb-hbase-binding) -> HBase
#   cellar         the same YCSB core + binding -> Cellar's HBase-compatible front end
#   cellar-native  `cellar bench load|run` (Cellar's native protocol over TCP) -> Cellar
#   cellar-ucx     the same over UCX shared memory (`cellar+ucx://`), where libucp is installed
# The order of the systems rotates from pass to pass.
# Reports throughput, p50/p99/p99.9 per operation (over the whole phase, and the steady-state
# p99 without each Java client's JIT warm-up: see scripts/hbase/summarize.py) and the SERVER's
# CPU time per operation (from /proc/PID/stat), medians over passes, as a table and JSON.
# See docs/hbase-side-by-side.md.
# First, with nothing else running, the kernel's floor for one call on this machine
# (`rpc_bench floor-cpu`: a bare echo server's CPU per 1 KiB ping-pong and its round trips'
# latency, on any CPU and on one), when rpc_bench is built next to the Cellar binary.
#
# --server-memory SIZE (e.g. 6G) puts each server in a memory cgroup of its own and, after the
# load, caps it (its process plus the page cache of its files) at SIZE, so that when the data
# outgrows memory both servers read from the disk alike instead of competing for one page
# cache (needs root or a delegated cgroup; see docs/hbase-side-by-side.md).
#
# Before every run phase both servers are let go idle (no compaction or flush running): each
# must spend under --idle-cpu PCT of a core (default 5) over 3 s, waiting at most --idle-wait S
# (default 1800); the wait, and a server that never went idle, are printed.
#
# Usage: scripts/bench-vs-hbase.sh [--records N] [--ops N] [--threads "1 8"] [--passes N]
#          [--workloads "load a c"] [--out FILE.json] [--cellar BIN] [--work DIR] [--no-cellar]
#          [--no-native] [--no-ucx] [--server-memory SIZE] [--idle-cpu PCT] [--idle-wait S]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
records=100000
ops=100000
threads="1 8"
passes=3
workloads="load a c"
out=""
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
with_cellar=1
with_native=1
with_ucx=1
idle_cpu=5
idle_wait=1800

die() { echo "bench-vs-hbase: $*" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --records) need_value "$@"; records="$2"; shift 2 ;;
    --ops) need_value "$@"; ops="$2"; shift 2 ;;
    --threads) need_value "$@"; threads="$2"; shift 2 ;;
    --passes) need_value "$@"; passes="$2"; shift 2 ;;
    --workloads) need_value "$@"; workloads="$2"; shift 2 ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --no-cellar) with_cellar=0; shift ;;
    --no-native) with_native=0; shift ;;
    --no-ucx) with_ucx=0; shift ;;
    --idle-cpu) need_value "$@"; idle_cpu="$2"; shift 2 ;;
    --idle-wait) need_value "$@"; idle_wait="$2"; shift 2 ;;
    --server-memory) need_value "$@"
      server_memory="$(numfmt --from=iec "${2%[bB]}" 2>/dev/null)" || die "--server-memory: '$2' is not a size (e.g. 6G)"
      shift 2 ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$idle_cpu" =~ ^[0-9]+$ && "$idle_wait" =~ ^[0-9]+$ ]] || die "--idle-cpu and --idle-wait take whole numbers"
for n in "$records" "$ops" "$passes"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "'$n' is not a positive count (--records/--ops/--passes)"
done
for t in $threads; do [[ "$t" =~ ^[1-9][0-9]*$ ]] || die "--threads: '$t' is not a positive count"; done
for w in $workloads; do
  [[ "$w" =~ ^(load|[a-f])$ ]] || die "--workloads: '$w' is not load or a..f"
done
if (( with_cellar )) && [[ ! -x "$cellar_bin" ]]; then
  die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli, or --cellar BIN, or --no-cellar)"
fi

work="${work:-$(mktemp -d -t cellar-vs-hbase.XXXXXX)}"
mkdir -p "$work/raw"
out="${out:-$work/results.json}"
clk_tck="$(getconf CLK_TCK)"
echo "work dir: $work" >&2

# --- processes we start, stopped by PID on any exit -------------------------------------
cellar_pid=""
cleanup() {
  if [[ -n "$cellar_pid" ]] && kill -0 "$cellar_pid" 2>/dev/null; then
    kill -TERM "$cellar_pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$cellar_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$cellar_pid" 2>/dev/null || true
  fi
  "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
  local g
  for g in "${memory_groups[@]}"; do
    for _ in $(seq 1 40); do rmdir "$g" 2>/dev/null && break; sleep 0.25; done
    if [[ -d "$g" ]]; then echo "note: could not remove the memory cgroup $g" >&2; fi
  done
}
memory_groups=()
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- YCSB core + the HBase binding -------------------------------------------------------
binding="$repo/java/ycsb-hbase-binding"
echo "building the YCSB HBase binding..." >&2
mvn -B -q -f "$binding/pom.xml" package -DskipTests >&2 || die "building $binding failed"
mvn -B -q -f "$binding/pom.xml" dependency:build-classpath -DincludeScope=runtime \
  -Dmdep.outputFile="$work/ycsb.classpath" >&2 || die "resolving YCSB core + hbase-shaded-client failed"
ycsb_cp="$binding/target/cellar-ycsb-hbase-0.1.0.jar:$(cat "$work/ycsb.classpath")"
# shellcheck source=lib/java-flags.sh
. "$repo/scripts/lib/java-flags.sh"
java_flags=("${hbase_client_java_flags[@]}")
# hbase_props BOOTSTRAP: the binding's client settings for the server at BOOTSTRAP.
hbase_props() {
  printf '%s\n' -p hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry \
    -p "hbase.client.bootstrap.servers=$1" -p columnfamily=family
}

# --- workload files: the repo's, else YCSB's standard values ------------------------------
wl_dir="$work/workloads"
mkdir -p "$wl_dir"
standard_workload() {
  local common="workload=site.ycsb.workloads.CoreWorkload
recordcount=1000
operationcount=1000
readallfields=true
requestdistribution=zipfian
insertproportion=0
scanproportion=0"
  case "$1" in
    a) printf '%s\nreadproportion=0.5\nupdateproportion=0.5\n' "$common" ;;
    b) printf '%s\nreadproportion=0.95\nupdateproportion=0.05\n' "$common" ;;
    c) printf '%s\nreadproportion=1\nupdateproportion=0\n' "$common" ;;
    *) return 1 ;;
  esac
}
for w in $(printf '%s\n' a $workloads | sort -u); do
  [[ "$w" == load ]] && continue
  if [[ -f "$repo/workloads/workload$w" ]]; then
    cp "$repo/workloads/workload$w" "$wl_dir/workload$w"
  else
    standard_workload "$w" > "$wl_dir/workload$w" \
      || die "no workloads/workload$w in the repo and no built-in standard values for it"
    echo "note: workloads/workload$w not in the repo; using YCSB's standard values" >&2
  fi
done

# --- the floor: what the kernel alone costs a server per call, before any server runs -------
floor_meta=()
rpc_bench="$(dirname "$cellar_bin")/rpc_bench"
if [[ -x "$rpc_bench" ]]; then
  "$rpc_bench" --ops 50000 --value-size 1024 --json "$work/floor.json" floor-cpu >&2 \
    || die "rpc_bench floor-cpu failed"
  # Any CPU (as the servers run), then both on one CPU: the difference is a cross-CPU wake-up.
  floor_lines="$(python3 - "$work/floor.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
one = f["one_cpu"]
print(f"floor_cpu_us_per_call={f['server_cpu_us_per_call']:.1f}")
print(f"floor_p50_us={f['p50_us']:.0f}")
print(f"floor_p99_us={f['p99_us']:.0f}")
print(f"floor_p999_us={f['p999_us']:.0f}")
print(f"floor_one_cpu_cpu_us_per_call={one['server_cpu_us_per_call']:.1f}")
print(f"floor_one_cpu_p99_us={one['p99_us']:.0f}")
PY
  )" || die "cannot read $work/floor.json"
  mapfile -t floor_meta <<< "$floor_lines"
else
  echo "note: no $rpc_bench (cargo build --release -p cellar-bench); the floor is not measured" >&2
fi

# --- --server-memory: a memory cgroup per server -------------------------------------------
# memory_group NAME: makes a group beside this script's own memory cgroup (cgroup v1's
# memory hierarchy, or v2 with the memory controller) and adds it to memory_groups. A server is
# started inside its group (join_group in the subshell that starts it), so that everything
# it ever allocates is charged there.
memory_limit_file=""
memory_group() {
  local base="" line path
  while IFS= read -r line; do
    if [[ "$line" =~ ^[0-9]+:([^:]*,)?memory(,[^:]*)?:(.*)$ ]] && [[ -d /sys/fs/cgroup/memory ]]; then
      base="/sys/fs/cgroup/memory${BASH_REMATCH[3]}"; memory_limit_file=memory.limit_in_bytes; break
    fi
  done </proc/self/cgroup
  if [[ -z "$base" ]] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    path="$(sed -n 's/^0:://p' /proc/self/cgroup)"
    base="/sys/fs/cgroup${path}"; memory_limit_file=memory.max
  fi
  [[ -n "$base" ]] || die "--server-memory needs a memory cgroup (cgroup v1 memory, or v2 with memory enabled)"
  local dir="${base%/}/cellar-vs-hbase-$$-$1"
  mkdir "$dir" || die "--server-memory: cannot create $dir (needs root or a delegated cgroup)"
  memory_groups+=("$dir")
  [[ -f "$dir/$memory_limit_file" ]] || die "--server-memory: $dir has no $memory_limit_file"
}
# join_group DIR: moves the calling (sub)shell into DIR (nothing when DIR is empty).
join_group() {
  [[ -z "$1" ]] || echo "$BASHPID" > "$1/cgroup.procs" || die "--server-memory: cannot join $1"
}
# cap_memory: caps every server's group at --server-memory (once; after the first load).
memory_capped=0
cap_memory() {
  (( server_memory > 0 && ! memory_capped )) || return 0
  sync
  local g
  for g in "${memory_groups[@]}"; do
    echo "$server_memory" > "$g/$memory_limit_file" \
      || die "--server-memory: the kernel could not reclaim $g down to $server_memory bytes (a server's own memory is larger?)"
    echo "memory: $(basename "$g") capped at $(numfmt --to=iec "$server_memory"), using $(numfmt --to=iec "$(cat "$g/memory.usage_in_bytes" 2>/dev/null || cat "$g/memory.current")")" >&2
  done
  memory_capped=1
}
hbase_group=""
cellar_group=""
if (( server_memory > 0 )); then
  memory_group hbase; hbase_group="${memory_groups[-1]}"
  memory_group cellar; cellar_group="${memory_groups[-1]}"
fi


# --- servers --------------------------------------------------------------------------------
now_ms() { date +%s%3N; }
# Startup: from launch until the server answers (HBase: start.sh returns once the master sees
# an active region server; Cellar: its `listening hbase=` line, printed once it serves).
t0="$(now_ms)"
( join_group "$hbase_group"; exec "$repo/scripts/hbase/start.sh" "$work/hbase" ) >&2
hbase_startup_ms=$(( $(now_ms) - t0 ))
hbase_pid="$(cat "$work/hbase/hbase.pid")"
hbase_addr=127.0.0.1:16020
echo "hbase pid $hbase_pid, ready after ${hbase_startup_ms} ms" >&2

cellar_addr=""
cellar_hbase_addr=""
cellar_startup_ms=""
if (( with_cellar )); then
  mkdir -p "$work/cellar-data"
  t0="$(now_ms)"
  ( join_group "$cellar_group"
    exec "$cellar_bin" standalone --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --hbase-listen 127.0.0.1:0 \
      --data-dir "$work/cellar-data" ) >"$work/cellar.out" 2>"$work/cellar.log" &
  cellar_pid=$!
  for _ in $(seq 1 6000); do
    cellar_hbase_addr="$(sed -n 's/^listening hbase=//p' "$work/cellar.out" | head -n1)"
    [[ -n "$cellar_hbase_addr" ]] && break
    kill -0 "$cellar_pid" 2>/dev/null || { tail -n 20 "$work/cellar.log" >&2; die "cellar standalone exited at startup"; }
    sleep 0.01
  done
  cellar_startup_ms=$(( $(now_ms) - t0 ))
  [[ -n "$cellar_hbase_addr" ]] || die "cellar standalone printed no 'listening hbase=' line within 60 s"
  cellar_addr="$(sed -n 's/^listening native=//p' "$work/cellar.out" | head -n1)"
  echo "cellar pid $cellar_pid at $cellar_addr (hbase $cellar_hbase_addr), ready after ${cellar_startup_ms} ms" >&2
fi

# --- one phase ------------------------------------------------------------------------------
# CPU ticks (user + system) of a process; fields after the ')' that closes the command name.
cpu_ticks() {
  local stat rest
  stat="$(cat "/proc/$1/stat")" || die "server pid $1 is gone"
  rest="${stat##*) }"
  awk '{ print $12 + $13 }' <<<"$rest"
}

splits="user1,user2,user3,user4,user5,user6,user7,user8,user9"
# create_hbase_table BOOTSTRAP: (re)creates usertable, pre-split, through the HBase client.
create_hbase_table() {
  java "${java_flags[@]}" -cp "$ycsb_cp" org.cellar.ycsb.CreateTable table=usertable \
    columnfamily=family splits="$splits" \
    hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry \
    hbase.client.bootstrap.servers="$1" >&2 2>"$work/createtable.log" \
    || { tail -n 20 "$work/createtable.log" >&2; die "creating usertable through $1 failed"; }
}
recreate_tables() {
  create_hbase_table "$hbase_addr"
  if (( with_cellar )); then
    create_hbase_table "$cellar_hbase_addr"
    local native
    for native in usertable_native usertable_ucx; do
      [[ "$native" == usertable_native ]] && (( ! with_native )) && continue
      [[ "$native" == usertable_ucx ]] && (( ! with_ucx )) && continue
      "$cellar_bin" shell --connect "$cellar_addr" -e "disable '$native'; drop '$native'" >/dev/null 2>&1 || true
      local quoted="'${splits//,/\', \'}'"
      "$cellar_bin" shell --connect "$cellar_addr" \
        -e "create '$native', 'family', {SPLITS => [$quoted]}" >&2 \
        || die "creating the Cellar table $native failed"
    done
  fi
}

# run_phase SYSTEM WORKLOAD THREADS PASS: runs one YCSB phase, records CPU and raw output.
run_phase() {
  local sys="$1" w="$2" t="$3" pass="$4" pid file phase wlfile before after
  file="$work/raw/$sys-$w-t$t-p$pass.txt"
  if [[ "$w" == load ]]; then phase=load; wlfile="$wl_dir/workloada"; else phase=run; wlfile="$wl_dir/workload$w"; fi
  local common=(-P "$wlfile" -p recordcount="$records" -p operationcount="$ops"
                -p hdrhistogram.percentiles=50,99,99.9 -threads "$t")
  if [[ "$sys" == hbase ]]; then pid="$hbase_pid"; else pid="$cellar_pid"; fi
  before="$(cpu_ticks "$pid")"
  if [[ "$sys" == hbase || "$sys" == cellar ]]; then
    local addr="$hbase_addr" flag=-t props
    [[ "$sys" == cellar ]] && addr="$cellar_hbase_addr"
    [[ "$phase" == load ]] && flag=-load
    mapfile -t props < <(hbase_props "$addr")
    # Every operation's latency too, for the steady-state percentiles.
    props+=(-p measurementtype=hdrhistogram+raw -p "measurement.raw.output_file=$file.raw"
            -p measurement.raw.no_summary=true)
    java "${java_flags[@]}" -cp "$ycsb_cp" site.ycsb.Client "$flag" -db org.cellar.ycsb.HBaseClient \
      "${common[@]}" "${props[@]}" >"$file" 2>"$file.err" \
      || { tail -n 20 "$file.err" >&2; die "YCSB $phase of workload $w against $sys failed"; }
  elif [[ "$sys" == cellar-native ]]; then
    "$cellar_bin" bench "$phase" "${common[@]}" -p columnfamily=family -p table=usertable_native \
      --db "cellar://$cellar_addr" >"$file" 2>"$file.err" \
      || { tail -n 20 "$file.err" >&2; die "cellar bench $phase of workload $w failed"; }
  else
    "$cellar_bin" bench "$phase" "${common[@]}" -p columnfamily=family -p table=usertable_ucx \
      --db "cellar+ucx://$cellar_addr" >"$file" 2>"$file.err" \
      || { tail -n 20 "$file.err" >&2; die "cellar bench $phase of workload $w over UCX failed"; }
  fi
  after="$(cpu_ticks "$pid")"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sys" "$w" "$t" "$pass" "$((after - before))" "$file" >> "$work/phases.tsv"
  echo "  $sys $w threads=$t pass=$pass: $(grep -m1 'Throughput(ops/sec)' "$file" || echo 'no throughput line')" >&2
}

: > "$work/phases.tsv"
if (( with_ucx )) && ! ldconfig -p 2>/dev/null | grep -q 'libucp\.so\.0'; then
  echo "no UCX library (libucp.so.0, Debian libucx0): cellar-ucx is left out" >&2
  with_ucx=0
fi
systems=(hbase); (( with_cellar )) && systems+=(cellar); (( with_cellar && with_native )) && systems+=(cellar-native)
(( with_cellar && with_ucx )) && systems+=(cellar-ucx)
# rotated SHIFT: the systems in turn, starting with the SHIFT-th (the order changes each pass,
# so no system always runs first on a cold machine or last on a warm one).
rotated() {
  local n=${#systems[@]} i
  for ((i = 0; i < n; i++)); do echo "${systems[$(( (i + $1) % n ))]}"; done
}

# Idle baseline: each server's own CPU use over 5 s with no client, so a reader can see how
# much of the per-operation figure is background work (JIT, chores, GC) at small counts.
# Measured after startup (WHEN=start) and again after the last phase (WHEN=end): a JVM's
# first seconds are mostly JIT compilation, not its steady background rate.
idle_meta=()
measure_idle() {
  local when="$1" sys pid before after
  for sys in hbase cellar; do
    [[ "$sys" == cellar ]] && (( ! with_cellar )) && continue
    if [[ "$sys" == hbase ]]; then pid="$hbase_pid"; else pid="$cellar_pid"; fi
    before="$(cpu_ticks "$pid")"; sleep 5; after="$(cpu_ticks "$pid")"
    idle_meta+=("idle_${when}_cpu_ms_per_s_$sys=$(( (after - before) * 1000 / clk_tck / 5 ))")
    echo "idle $sys ($when): ${idle_meta[-1]#*=} ms CPU per second" >&2
  done
}
# wait_idle: until each server spends under idle_cpu % of a core over 3 s (its compactions
# and flushes done), at most idle_wait seconds; so no phase pays for another's leftovers.
wait_idle() {
  local started now sys pid before after pct busy
  started=$(date +%s)
  while true; do
    busy=""
    for sys in hbase cellar; do
      [[ "$sys" == cellar ]] && (( ! with_cellar )) && continue
      if [[ "$sys" == hbase ]]; then pid="$hbase_pid"; else pid="$cellar_pid"; fi
      before="$(cpu_ticks "$pid")"; sleep 3; after="$(cpu_ticks "$pid")"
      pct=$(( (after - before) * 100 / clk_tck / 3 ))
      (( pct >= idle_cpu )) && busy="$busy $sys=${pct}%"
    done
    now=$(date +%s)
    if [[ -z "$busy" ]]; then
      echo "  idle after $((now - started)) s" >&2
      return 0
    fi
    if (( now - started >= idle_wait )); then
      echo "  still busy after $((now - started)) s:$busy (running anyway)" >&2
      return 0
    fi
  done
}

measure_idle start
for pass in $(seq 1 "$passes"); do
  for t in $threads; do
    echo "pass $pass, threads $t" >&2
    recreate_tables
    # The load always runs (the other workloads read what it wrote); it is reported if asked.
    mapfile -t order < <(rotated $((pass - 1)))
    for sys in "${order[@]}"; do run_phase "$sys" load "$t" "$pass"; done
    cap_memory
    for w in $workloads; do
      [[ "$w" == load ]] && continue
      for sys in "${order[@]}"; do wait_idle; run_phase "$sys" "$w" "$t" "$pass"; done
    done
  done
done

measure_idle end

python3 "$repo/scripts/hbase/summarize.py" --phases "$work/phases.tsv" --clk-tck "$clk_tck" \
  --workloads "$workloads" --out "$out" \
  --meta "records=$records" "ops=$ops" "passes=$passes" "threads=$threads" "${idle_meta[@]}" \
    "server_memory_bytes=$server_memory" \
    "${floor_meta[@]}" \
    "startup_ms_hbase=$hbase_startup_ms" "startup_ms_cellar=$cellar_startup_ms"
echo "startup: hbase ${hbase_startup_ms} ms, cellar ${cellar_startup_ms} ms" >&2
echo "results: $out" >&2
