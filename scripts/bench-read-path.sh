#!/usr/bin/env bash
# Read-path features side by side: one `cellar standalone` per variant (a configuration, e.g.
# the region-level gate or the query cache on and off), all loaded with the same YCSB records,
# then YCSB run phases against each in turn, the order of the variants rotated from pass to
# pass. Reports per phase and variant the median over passes of throughput, p50/p99 read
# latency, the server's CPU time and bytes sent (native RPC, from /metrics) per operation, and
# each variant's ratio to the first.
#
# Phases (which keys the run's reads draw from; YCSB keys are hashed, so absent keys sort
# between present ones):
#   present  the loaded records
#   absent   records that were never loaded
#   mixed    both, half and half
#
# Usage: scripts/bench-read-path.sh [--records N] [--ops N] [--threads N] [--passes N]
#          [--phases "present absent mixed"] [--workload FILE] [--prop NAME=VALUE]...
#          [--variants "NAME:SETTING,... NAME:..."] [--transport tcp|ucx] [--flush]
#          [--rate RATE] [--out FILE.json] [--cellar BIN] [--work DIR]
# --rate: the servers run in a network namespace the script creates, reached over a veth pair
# limited to RATE each way (tc tbf, e.g. 1gbit: seed 003's network), instead of loopback.
# Needs root (ip netns, tc).
# --flush: after loading, flush the table and compact it to one file per region, so reads come
# from store files (through the block cache) rather than the memstore.
# A variant's settings are SECTION.KEY=VALUE (its server's cellar.toml) or ycsb.NAME=VALUE
# (a YCSB property of its load and runs, e.g. ycsb.querycache=true).
# Defaults: 100000 records, 200000 operations, 1 thread, 3 passes, workloads/workloadc, TCP,
# variants "gate-on:storage.region_gate=true gate-off:storage.region_gate=false".
# The query cache: --variants "cache-off:ycsb.querycache=false cache-on:ycsb.querycache=true".
# Results: docs/benchmarks.md ("Read path").
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
records=100000
ops=200000
threads=1
passes=3
phases="present absent mixed"
workload="$repo/workloads/workloadc"
variants="gate-on:storage.region_gate=true gate-off:storage.region_gate=false"
props=()
out=""
scheme="cellar"
flush=0
rate=""
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""

die() { echo "bench-read-path: $*" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --records) need_value "$@"; records="$2"; shift 2 ;;
    --ops) need_value "$@"; ops="$2"; shift 2 ;;
    --threads) need_value "$@"; threads="$2"; shift 2 ;;
    --passes) need_value "$@"; passes="$2"; shift 2 ;;
    --phases) need_value "$@"; phases="$2"; shift 2 ;;
    --workload) need_value "$@"; workload="$2"; shift 2 ;;
    --prop) need_value "$@"; props+=(-p "$2"); shift 2 ;;
    --variants) need_value "$@"; variants="$2"; shift 2 ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --flush) flush=1; shift ;;
    --rate) need_value "$@"; rate="$2"; shift 2 ;;
    --transport)
      need_value "$@"
      case "$2" in tcp) scheme="cellar" ;; ucx) scheme="cellar+ucx" ;; *) die "--transport: tcp or ucx" ;; esac
      shift 2 ;;
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for n in "$records" "$ops" "$threads" "$passes"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "'$n' is not a positive whole number"
done
[[ -x "$cellar_bin" ]] || die "no cellar binary at $cellar_bin (cargo build --release first)"
[[ -f "$workload" ]] || die "no workload file $workload"
for ph in $phases; do
  case "$ph" in present|absent|mixed) ;; *) die "unknown phase '$ph' (present, absent, mixed)" ;; esac
done
if [[ -z "$work" ]]; then work="$(mktemp -d /tmp/cellar-read-path.XXXXXX)"; fi
mkdir -p "$work"
[[ -n "$out" ]] || out="$work/read-path.json"
tck="$(getconf CLK_TCK)"

pids=()
ns=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n "$ns" ]]; then ip netns del "$ns" 2>/dev/null || true; fi
}
trap cleanup EXIT

# Where the servers run: loopback, or a namespace behind a rate-limited veth pair.
host=127.0.0.1
in_ns=()
if [[ -n "$rate" ]]; then
  [[ "$(id -u)" -eq 0 ]] || die "--rate needs root (ip netns, tc)"
  ns="cellar-rp-$$"
  va="crp$$a"; vb="crp$$b"
  ip netns add "$ns" || die "cannot create network namespace $ns"
  ip link add "$va" type veth peer name "$vb" || die "cannot create a veth pair"
  ip link set "$vb" netns "$ns"
  ip addr add 10.213.0.1/24 dev "$va" && ip link set "$va" up
  ip netns exec "$ns" ip addr add 10.213.0.2/24 dev "$vb"
  ip netns exec "$ns" ip link set "$vb" up
  ip netns exec "$ns" ip link set lo up
  tc qdisc add dev "$va" root tbf rate "$rate" burst 256kb latency 50ms \
    || die "tc refused rate '$rate'"
  ip netns exec "$ns" tc qdisc add dev "$vb" root tbf rate "$rate" burst 256kb latency 50ms
  host=10.213.0.2
  in_ns=(ip netns exec "$ns")
  echo "servers in namespace $ns at $host, link limited to $rate each way" >&2
fi

# --- one server per variant -----------------------------------------------------------------
names=()
declare -A addr pid vprops http
for v in $variants; do
  name="${v%%:*}"
  settings="${v#*:}"
  [[ -n "$name" && "$name" != "$v" ]] || die "variant '$v' is not NAME:SECTION.KEY=VALUE,..."
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || die "variant name '$name' may hold only letters, digits, '_', '-', '.'"
  names+=("$name")
  dir="$work/$name"
  rm -rf "$dir"; mkdir -p "$dir"
  # SECTION.KEY=VALUE pairs -> TOML, one table per section.
  python3 - "$settings" >"$dir/cellar.toml" <<'PY'
import sys
sections = {}
for pair in filter(None, sys.argv[1].split(",")):
    if pair.startswith("ycsb."):
        continue
    key, sep, value = pair.partition("=")
    section, dot, name = key.partition(".")
    if not sep or not dot or not name:
        sys.exit(f"bench-read-path: setting '{pair}' is not SECTION.KEY=VALUE")
    sections.setdefault(section, []).append((name, value))
for section, pairs in sections.items():
    print(f"[{section}]")
    for name, value in pairs:
        print(f"{name} = {value}")
PY
  vprops[$name]=""
  for pair in ${settings//,/ }; do
    [[ "$pair" == ycsb.* ]] && vprops[$name]+=" -p ${pair#ycsb.}"
  done
  "${in_ns[@]}" "$cellar_bin" standalone --listen "$host:0" --http-listen "$host:0" --hbase-listen off \
    --data-dir "$dir/data" --config "$dir/cellar.toml" >"$dir/server.out" 2>"$dir/server.log" &
  pid[$name]=$!
  pids+=("$!")
  a=""
  for _ in $(seq 1 3000); do
    a="$(sed -n 's/^listening native=//p' "$dir/server.out" | head -n1)"
    [[ -n "$a" ]] && break
    kill -0 "${pid[$name]}" 2>/dev/null || { tail -n 20 "$dir/server.log" >&2; die "server of '$name' exited at startup"; }
    sleep 0.02
  done
  [[ -n "$a" ]] || die "server of '$name' printed no 'listening native=' line within 60 s"
  addr[$name]="$a"
  http[$name]="$(sed -n 's/^listening http=//p' "$dir/server.out" | head -n1)"
  echo "variant $name: pid ${pid[$name]} at $a ($(tr '\n' ' ' <"$dir/cellar.toml")${vprops[$name]})" >&2
  # shellcheck disable=SC2086 # the variant's YCSB properties split into words on purpose
  "$cellar_bin" bench load -P "$workload" -p recordcount="$records" "${props[@]}" ${vprops[$name]} -threads 4 \
    --db "$scheme://$a" --json "$dir/load.json" >"$dir/load.out" 2>&1 \
    || { tail -n 20 "$dir/load.out" >&2; die "loading '$name' failed"; }
  if (( flush )); then
    table="$(sed -n 's/^table *= *//p' "$workload" | tail -n1)"
    "$cellar_bin" shell --connect "$a" -e "flush '${table:-usertable}'; major_compact '${table:-usertable}'" \
      >"$dir/flush.out" 2>&1 || { cat "$dir/flush.out" >&2; die "flushing '$name' failed"; }
  fi
done

sent_bytes() {
  curl -s "http://${http[$1]}/metrics" | sed -n 's/^cellar_rpc_sent_bytes_total //p'
}

cpu_ticks() {
  local stat rest
  stat="$(cat "/proc/$1/stat")" || die "server pid $1 is gone"
  rest="${stat##*) }"
  awk '{ print $12 + $13 }' <<<"$rest"
}

# --- passes -------------------------------------------------------------------------------
results="$work/results.jsonl"
: >"$results"
count=${#names[@]}
for pass in $(seq 1 "$passes"); do
  for ph in $phases; do
    case "$ph" in
      present) range=(-p insertstart=0 -p insertcount="$records" -p recordcount="$records") ;;
      absent) range=(-p insertstart="$records" -p insertcount="$records" -p recordcount=$((2 * records))) ;;
      mixed) range=(-p insertstart=0 -p insertcount=$((2 * records)) -p recordcount=$((2 * records))) ;;
    esac
    for i in $(seq 0 $((count - 1))); do
      name="${names[$(( (i + pass - 1) % count ))]}"
      json="$work/$name/run-$pass-$ph.json"
      before="$(cpu_ticks "${pid[$name]}")"
      sent_before="$(sent_bytes "$name")"
      # shellcheck disable=SC2086
      "$cellar_bin" bench run -P "$workload" "${range[@]}" -p operationcount="$ops" "${props[@]}" \
        ${vprops[$name]} -threads "$threads" --db "$scheme://${addr[$name]}" --json "$json" \
        >"$work/$name/run.out" 2>&1 \
        || { tail -n 20 "$work/$name/run.out" >&2; die "run of '$name' ($ph) failed"; }
      after="$(cpu_ticks "${pid[$name]}")"
      sent=$(( $(sent_bytes "$name") - sent_before ))
      python3 - "$json" "$name" "$ph" "$pass" "$((after - before))" "$tck" "$sent" >>"$results" <<'PY'
import json, sys
path, name, phase, pas, ticks, tck, sent = sys.argv[1:]
r = json.load(open(path))
ops = sum(o["count"] for o in r["operations"].values())
# YCSB counts a read of an absent record under READ-FAILED (status NOT_FOUND).
hit = r["operations"].get("READ", {})
miss = r["operations"].get("READ-FAILED", {})
pct = lambda o, k: o.get(k) if o.get("count") else None
print(json.dumps({
    "variant": name, "phase": phase, "pass": int(pas),
    "ops_per_sec": r["throughput"],
    "found_p50_us": pct(hit, "p50_us"), "found_p99_us": pct(hit, "p99_us"),
    "absent_p50_us": pct(miss, "p50_us"), "absent_p99_us": pct(miss, "p99_us"),
    "server_cpu_us_per_op": int(ticks) / int(tck) * 1e6 / max(ops, 1),
    "sent_bytes_per_op": int(sent) / max(ops, 1),
    "scan_p50_us": r["operations"].get("SCAN", {}).get("p50_us"),
    "scan_p99_us": r["operations"].get("SCAN", {}).get("p99_us"),
    "reads_found": hit.get("count", 0), "reads": hit.get("count", 0) + miss.get("count", 0),
}))
PY
      echo "pass $pass $ph $name: $(tail -n1 "$results")" >&2
    done
  done
done

# --- summary --------------------------------------------------------------------------------
python3 - "$results" "$out" "$records" "$ops" "$threads" "$passes" "$(basename "$workload")" \
  "${names[@]}" <<'PY'
import json, statistics, sys
results, out, records, ops, threads, passes, workload, *names = sys.argv[1:]
rows = [json.loads(l) for l in open(results)]
phases = list(dict.fromkeys(r["phase"] for r in rows))
def med(ph, v, k):
    xs = [r[k] for r in rows if r["phase"] == ph and r["variant"] == v and r[k] is not None]
    return statistics.median(xs) if xs else None
summary = []
print(f"YCSB {workload}, {records} records, {ops} operations, {threads} thread(s), "
      f"median of {passes} passes, variants rotated per pass")
print()
scans = any(r.get("scan_p50_us") is not None for r in rows)
if scans:
    print(f"| phase | variant | ops/s | vs {names[0]} | scan p50/p99 µs | bytes sent/op | vs {names[0]} | server CPU µs/op |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
else:
    print(f"| phase | variant | ops/s | vs {names[0]} | found p50/p99 µs | absent p50/p99 µs | server CPU µs/op | bytes sent/op | reads found |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
fmt = lambda a, b: "-" if a is None else f"{a:g} / {b:g}"
for ph in phases:
    base = med(ph, names[0], "ops_per_sec")
    for v in names:
        s = {k: med(ph, v, k) for k in
             ("ops_per_sec", "found_p50_us", "found_p99_us", "absent_p50_us", "absent_p99_us",
              "server_cpu_us_per_op", "reads_found", "reads", "sent_bytes_per_op",
              "scan_p50_us", "scan_p99_us")}
        s.update(phase=ph, variant=v, ratio=(s["ops_per_sec"] / base) if base else None)
        summary.append(s)
        found = f'{s["reads_found"] / s["reads"]:.0%}' if s["reads"] else "-"
        base_sent = med(ph, names[0], "sent_bytes_per_op")
        s["sent_ratio"] = s["sent_bytes_per_op"] / base_sent if base_sent else None
        if scans:
            print(f'| {ph} | {v} | {s["ops_per_sec"]:,.0f} | {s["ratio"]:.2f} | '
                  f'{fmt(s["scan_p50_us"], s["scan_p99_us"])} | {s["sent_bytes_per_op"]:,.0f} | '
                  f'{s["sent_ratio"]:.2f} | {s["server_cpu_us_per_op"]:.1f} |')
        else:
            print(f'| {ph} | {v} | {s["ops_per_sec"]:,.0f} | {s["ratio"]:.2f} | '
                  f'{fmt(s["found_p50_us"], s["found_p99_us"])} | {fmt(s["absent_p50_us"], s["absent_p99_us"])} | '
                  f'{s["server_cpu_us_per_op"]:.1f} | {s["sent_bytes_per_op"]:,.0f} | {found} |')
json.dump({"tool": "bench-read-path", "records": int(records), "operations": int(ops),
           "threads": int(threads), "passes": int(passes), "workload": workload,
           "variants": names, "summary": summary, "runs": rows}, open(out, "w"), indent=1)
print()
print(f"JSON: {out}")
PY
