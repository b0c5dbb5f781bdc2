#!/usr/bin/env bash
# Before and after: two Cellar builds side by side on one machine, so that a change that
# should not cost anything (a restructuring) is shown to be within noise.
#
# Both builds run as standalone servers at once; every phase runs against each in turn, the
# order rotated from pass to pass:
#   java     the real YCSB 0.17 core + Cellar's binding (java/ycsb-hbase-binding) over HBase's
#            protocol (the Java client), as scripts/bench-vs-hbase.sh runs it
#   native   `cellar bench load|run` of that build over the native protocol
# and then `rpc_bench` (Get/Put against a ping-pong floor) with --cellar-bin of each build,
# alternating. Reports throughput per phase (median over passes) and after/before ratios.
#
# Usage: scripts/bench-before-after.sh --before DIR --after DIR [--records N] [--ops N]
#          [--threads T] [--passes N] [--workloads "load a c"] [--rpc-ops N] [--work DIR]
# DIR is a build's binary directory holding `cellar` and `rpc_bench` (target/release).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
before="" after="" records=100000 ops=100000 threads=8 passes=2 workloads="load a c"
rpc_ops=20000 work=""
die() { echo "bench-before-after: $*" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --before) need_value "$@"; before="$2"; shift 2 ;;
    --after) need_value "$@"; after="$2"; shift 2 ;;
    --records) need_value "$@"; records="$2"; shift 2 ;;
    --ops) need_value "$@"; ops="$2"; shift 2 ;;
    --threads) need_value "$@"; threads="$2"; shift 2 ;;
    --passes) need_value "$@"; passes="$2"; shift 2 ;;
    --workloads) need_value "$@"; workloads="$2"; shift 2 ;;
    --rpc-ops) need_value "$@"; rpc_ops="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ -n "$before" && -n "$after" ]] || die "--before DIR and --after DIR are required (see --help)"
for d in "$before" "$after"; do
  [[ -x "$d/cellar" ]] || die "no cellar binary in $d (cargo build --release -p cellar-cli -p cellar-bench)"
  [[ -x "$d/rpc_bench" ]] || die "no rpc_bench binary in $d (cargo build --release -p cellar-bench)"
done
for n in "$records" "$ops" "$passes" "$threads" "$rpc_ops"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "'$n' is not a positive count"
done
for w in $workloads; do [[ "$w" =~ ^(load|[a-f])$ ]] || die "--workloads: '$w' is not load or a..f"; done

work="${work:-$(mktemp -d -t cellar-before-after.XXXXXX)}"
mkdir -p "$work/raw"
echo "work dir: $work" >&2

declare -A pid native_addr hbase_addr bin
bin[before]="$before/cellar"
bin[after]="$after/cellar"
cleanup() {
  local v p
  for v in before after; do
    p="${pid[$v]:-}"
    [[ -n "$p" ]] || continue
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

binding="$repo/java/ycsb-hbase-binding"
echo "building the YCSB HBase binding..." >&2
mvn -B -q -f "$binding/pom.xml" package -DskipTests >&2 || die "building $binding failed"
mvn -B -q -f "$binding/pom.xml" dependency:build-classpath -DincludeScope=runtime \
  -Dmdep.outputFile="$work/ycsb.classpath" >&2 || die "resolving YCSB core + hbase-shaded-client failed"
ycsb_cp="$binding/target/cellar-ycsb-hbase-0.1.0.jar:$(cat "$work/ycsb.classpath")"
. "$repo/scripts/lib/java-flags.sh"
java_flags=("${hbase_client_java_flags[@]}")

wl_dir="$work/workloads"
mkdir -p "$wl_dir"
for w in a $workloads; do
  [[ "$w" == load ]] && continue
  [[ -f "$repo/workloads/workload$w" ]] || die "no workloads/workload$w in the repo"
  cp "$repo/workloads/workload$w" "$wl_dir/workload$w"
done

for v in before after; do
  mkdir -p "$work/$v-data"
  "${bin[$v]}" standalone --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --hbase-listen 127.0.0.1:0 \
    --data-dir "$work/$v-data" >"$work/$v.out" 2>"$work/$v.log" &
  pid[$v]=$!
  for _ in $(seq 1 6000); do
    hbase_addr[$v]="$(sed -n 's/^listening hbase=//p' "$work/$v.out" | head -n1)"
    [[ -n "${hbase_addr[$v]}" ]] && break
    kill -0 "${pid[$v]}" 2>/dev/null || { tail -n 20 "$work/$v.log" >&2; die "the $v server exited at startup"; }
    sleep 0.01
  done
  [[ -n "${hbase_addr[$v]}" ]] || die "the $v server printed no 'listening hbase=' line within 60 s"
  native_addr[$v]="$(sed -n 's/^listening native=//p' "$work/$v.out" | head -n1)"
  echo "$v: pid ${pid[$v]}, native ${native_addr[$v]}, hbase ${hbase_addr[$v]}" >&2
done

splits="user1,user2,user3,user4,user5,user6,user7,user8,user9"
recreate_tables() {
  local v t quoted="'${splits//,/\', \'}'"
  for v in before after; do
    for t in usertable usertable_native; do
      "${bin[$v]}" shell --connect "${native_addr[$v]}" -e "disable '$t'; drop '$t'" >/dev/null 2>&1 || true
      "${bin[$v]}" shell --connect "${native_addr[$v]}" -e "create '$t', 'family', {SPLITS => [$quoted]}" >&2 \
        || die "creating $t on the $v server failed"
    done
  done
}

# phase CLIENT VERSION WORKLOAD PASS
phase() {
  local client="$1" v="$2" w="$3" pass="$4" file kind wlfile
  file="$work/raw/$client-$v-$w-p$pass.txt"
  if [[ "$w" == load ]]; then kind=load; wlfile="$wl_dir/workloada"; else kind=run; wlfile="$wl_dir/workload$w"; fi
  local common=(-P "$wlfile" -p recordcount="$records" -p operationcount="$ops"
                -p hdrhistogram.percentiles=50,99,99.9 -threads "$threads")
  if [[ "$client" == java ]]; then
    local flag=-t
    [[ "$kind" == load ]] && flag=-load
    java "${java_flags[@]}" -cp "$ycsb_cp" site.ycsb.Client "$flag" -db org.cellar.ycsb.HBaseClient \
      "${common[@]}" -p hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry \
      -p "hbase.client.bootstrap.servers=${hbase_addr[$v]}" -p columnfamily=family \
      >"$file" 2>"$file.err" || { tail -n 20 "$file.err" >&2; die "YCSB $kind $w against $v failed"; }
  else
    "${bin[$v]}" bench "$kind" "${common[@]}" -p columnfamily=family -p table=usertable_native \
      --db "cellar://${native_addr[$v]}" >"$file" 2>"$file.err" \
      || { tail -n 20 "$file.err" >&2; die "cellar bench $kind $w against $v failed"; }
  fi
  local tput
  tput="$(sed -n 's/.*Throughput(ops\/sec), *//p' "$file" | head -n1)"
  [[ -n "$tput" ]] || die "no throughput line in $file"
  printf '%s\t%s\t%s\t%s\t%s\n' "$client" "$v" "$w" "$pass" "$tput" >> "$work/phases.tsv"
  echo "  $client $v $w pass $pass: $tput ops/s" >&2
}

# The load always runs first (the other workloads read what it wrote).
phases=(load)
for w in $workloads; do [[ "$w" == load ]] || phases+=("$w"); done
: > "$work/phases.tsv"
for pass in $(seq 1 "$passes"); do
  echo "pass $pass" >&2
  recreate_tables
  if (( pass % 2 )); then order=(before after); else order=(after before); fi
  for w in "${phases[@]}"; do
    for client in java native; do
      for v in "${order[@]}"; do phase "$client" "$v" "$w" "$pass"; done
    done
  done
done
cleanup
pid=()

# rpc_bench: the after build's rpc_bench drives each build's server in turn.
: > "$work/rpc.tsv"
for pass in $(seq 1 "$passes"); do
  if (( pass % 2 )); then order=(before after); else order=(after before); fi
  for v in "${order[@]}"; do
    "$after/rpc_bench" --cellar-bin "${bin[$v]}" --ops "$rpc_ops" --placement split \
      --json "$work/raw/rpc-$v-p$pass.json" >"$work/raw/rpc-$v-p$pass.txt" 2>&1 \
      || { tail -n 20 "$work/raw/rpc-$v-p$pass.txt" >&2; die "rpc_bench against $v failed"; }
    printf '%s\t%s\t%s\n' "$v" "$pass" "$work/raw/rpc-$v-p$pass.json" >> "$work/rpc.tsv"
    echo "  rpc_bench $v pass $pass done" >&2
  done
done

python3 - "$work" <<'EOF'
import json, statistics, sys, collections
work = sys.argv[1]
by = collections.defaultdict(list)
for line in open(f"{work}/phases.tsv"):
    client, v, w, _, tput = line.rstrip("\n").split("\t")
    by[(client, w, v)].append(float(tput))
print(f"{'client':8} {'phase':6} {'before ops/s':>14} {'after ops/s':>14} {'after/before':>13}")
for client in ("java", "native"):
    for w in sorted({k[1] for k in by if k[0] == client}, key=lambda x: (x != "load", x)):
        b = statistics.median(by[(client, w, "before")])
        a = statistics.median(by[(client, w, "after")])
        print(f"{client:8} {w:6} {b:14.0f} {a:14.0f} {a / b:13.3f}")
rows = collections.defaultdict(list)
for line in open(f"{work}/rpc.tsv"):
    v, _, path = line.rstrip("\n").split("\t")
    try:
        runs = json.load(open(path))
    except (OSError, ValueError):
        continue
    for run in runs:
        place = run.get("placement", "")
        for r in run.get("latency", []):
            rows[(f"{place} {r['op']} latency", "p50_us", v)].append(float(r["p50_us"]))
        for r in run.get("throughput", []):
            rows[(f"{place} {r['op']} x{r['connections']}", "ops_per_sec", v)].append(float(r["ops_per_sec"]))
print()
print(f"{'rpc_bench':28} {'metric':12} {'before':>12} {'after':>12} {'after/before':>13}")
for key, metric in sorted({(k[0], k[1]) for k in rows}):
    b, a = rows.get((key, metric, "before")), rows.get((key, metric, "after"))
    if b and a:
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{key:28} {metric:12} {mb:12.1f} {ma:12.1f} {ma / mb:13.3f}")
EOF
echo "raw results: $work" >&2
