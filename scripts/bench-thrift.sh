#!/usr/bin/env bash
# happybase side by side: Apache HBase 2.6's own Thrift server (on an HBase 2.6.4 standalone)
# and Cellar's Thrift gateway (`cellar standalone --thrift-listen`), same machine, same Python
# client (python/happybase/bench_happybase.py: YCSB-shaped rows of 10 x 100 B, one process
# per client), same data. Both are loaded first; a warm-up pass (not counted) lets HBase's JIT
# compile; then every pass runs get, put and scan (50 rows) on each system in turn, the order of
# the systems rotated between passes. Reports medians over passes: ops/s, p50/p99 (µs) and the
# servers' CPU per operation (HBase: its server and its Thrift server; Cellar: its one
# process), and Cellar/HBase ratios; a table on stdout, JSON in --out.
#
# Usage: scripts/bench-thrift.sh [--records N] [--ops N] [--clients N] [--passes N]
#          [--cellar BIN] [--work DIR] [--out FILE.json]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
records=100000
ops=20000
clients=4
passes=3
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
out=""
die() { echo "bench-thrift: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --records) records="$2"; shift 2 ;;
    --ops) ops="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --passes) passes="$2"; shift 2 ;;
    --cellar) cellar_bin="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for n in "$records" "$ops" "$clients" "$passes"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "'$n' is not a positive count"
done
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release -p cellar-cli)"
work="${work:-$(mktemp -d -t cellar-bench-thrift.XXXXXX)}"
mkdir -p "$work/raw"
out="${out:-$work/results.json}"
echo "work dir: $work" >&2

venv="$repo/target/happybase-venv"
# shellcheck source=lib/happybase-venv.sh
. "$repo/scripts/lib/happybase-venv.sh"
happybase_venv "$venv" >&2 || die "no happybase"
bench() { "$venv/bin/python" "$repo/python/happybase/bench_happybase.py" "$@"; }

cellar_pid=""
cleanup() {
  if [[ -n "$cellar_pid" ]] && kill -0 "$cellar_pid" 2>/dev/null; then
    kill -TERM "$cellar_pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$cellar_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$cellar_pid" 2>/dev/null || true
  fi
  "$repo/scripts/hbase/thrift.sh" stop "$work/hbase" >&2 2>/dev/null || true
  "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$repo/scripts/hbase/start.sh" "$work/hbase" >&2
hbase_port=9090
"$repo/scripts/hbase/thrift.sh" start "$work/hbase" "$hbase_port" >&2
hbase_pids="$(cat "$work/hbase/hbase.pid"),$(cat "$work/hbase/thrift.pid")"

"$cellar_bin" standalone --data-dir "$work/cellar-data" --listen 127.0.0.1:0 \
  --http-listen 127.0.0.1:0 --hbase-listen off --thrift-listen 127.0.0.1:0 \
  >"$work/cellar.out" 2>"$work/cellar.log" &
cellar_pid=$!
cellar_port=""
for _ in $(seq 1 240); do
  cellar_port="$(sed -n 's/^listening thrift=127.0.0.1://p' "$work/cellar.out")"
  [[ -n "$cellar_port" ]] && break
  kill -0 "$cellar_pid" 2>/dev/null || die "cellar exited: $(tail -5 "$work/cellar.log")"
  sleep 0.25
done
[[ -n "$cellar_port" ]] || die "cellar did not print its Thrift address"
echo "hbase pids $hbase_pids thrift :$hbase_port; cellar pid $cellar_pid thrift :$cellar_port" >&2

port_of() { if [[ "$1" == hbase ]]; then echo "$hbase_port"; else echo "$cellar_port"; fi; }
pids_of() { if [[ "$1" == hbase ]]; then echo "$hbase_pids"; else echo "$cellar_pid"; fi; }
# run SYSTEM PHASE OPS LABEL: one phase, its JSON line kept under raw/.
run() {
  local sys="$1" phase="$2" n="$3" label="$4" extra=()
  [[ "$phase" == load ]] && extra=(--create)
  echo "$label $sys $phase..." >&2
  bench --port "$(port_of "$sys")" --phase "$phase" --records "$records" --ops "$n" \
    --clients "$clients" --server-pids "$(pids_of "$sys")" "${extra[@]}" \
    | sed "s/^{/{\"system\": \"$sys\", \"pass\": \"$label\", /" >> "$work/raw/results.jsonl"
}

systems=(hbase cellar)
for sys in "${systems[@]}"; do run "$sys" load "$records" load; done
scan_ops=$(( ops / 10 > 0 ? ops / 10 : 1 ))
for sys in "${systems[@]}"; do
  run "$sys" get $(( ops / 2 )) warmup; run "$sys" put $(( ops / 2 )) warmup; run "$sys" scan "$scan_ops" warmup
done
for pass in $(seq 1 "$passes"); do
  order=("${systems[@]}")
  if (( pass % 2 == 0 )); then order=(cellar hbase); fi
  for phase in get put scan; do
    n="$ops"; [[ "$phase" == scan ]] && n="$scan_ops"
    for sys in "${order[@]}"; do run "$sys" "$phase" "$n" "$pass"; done
  done
done

python3 - "$work/raw/results.jsonl" "$out" "$records" "$ops" "$clients" "$passes" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out, records, ops, clients, passes = sys.argv[2], *sys.argv[3:]
med = {}
for sys_ in ("hbase", "cellar"):
    for phase in ("load", "get", "put", "scan"):
        rs = [r for r in rows if r["system"] == sys_ and r["phase"] == phase and r["pass"] != "warmup"]
        if rs:
            med[(sys_, phase)] = {k: statistics.median(r[k] for r in rs)
                                  for k in ("ops_per_sec", "p50_us", "p99_us", "server_cpu_us_per_op")}
print(f"happybase 1.3, {records} rows of 10 x 100 B, {clients} client processes, medians of {passes} passes (load: one)")
print("| op | HBase ops/s | Cellar ops/s | ratio | HBase p50/p99 µs | Cellar p50/p99 µs | server CPU µs/op HBase | Cellar | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
table = []
for phase in ("load", "get", "put", "scan"):
    h, c = med.get(("hbase", phase)), med.get(("cellar", phase))
    if not h or not c:
        continue
    row = {"op": phase, "hbase": h, "cellar": c,
           "throughput_ratio": round(c["ops_per_sec"] / h["ops_per_sec"], 2),
           "cpu_ratio": round(c["server_cpu_us_per_op"] / h["server_cpu_us_per_op"], 2)}
    table.append(row)
    print(f"| {phase} | {h['ops_per_sec']:.0f} | {c['ops_per_sec']:.0f} | {row['throughput_ratio']:.2f} | "
          f"{h['p50_us']:.0f}/{h['p99_us']:.0f} | {c['p50_us']:.0f}/{c['p99_us']:.0f} | "
          f"{h['server_cpu_us_per_op']:.0f} | {c['server_cpu_us_per_op']:.0f} | {row['cpu_ratio']:.2f} |")
json.dump({"records": int(records), "ops": int(ops), "clients": int(clients), "passes": int(passes),
           "rows": table, "raw": rows}, open(out, "w"), indent=1)
print(f"json: {out}")
PY
