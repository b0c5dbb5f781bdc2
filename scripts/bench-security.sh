#!/usr/bin/env bash
# What security costs, side by side: three `cellar standalone` servers, the same but for
#   plain  no TLS, no permission checks;
#   tls    TLS on every port (`--tls-cert/--tls-key/--tls-client-ca` from `cellar cert create`,
#          clients presenting a certificate);
#   acl    no TLS, `security.authorization` on: every call checked, the benchmark's user
#          granted READ and WRITE on the table (not a superuser, so every check runs);
# loaded with the same YCSB records. Then, per pass, Gets (workloadc) and Puts (update-only)
# from the native client (`cellar bench run`) and from the unmodified HBase 2.6 Java client
# (the real YCSB core with Cellar's HBase binding, HBase's own TLS settings) against each
# server in turn, the order rotated from pass to pass. Reports per client, operation and
# server the median over passes of throughput, p50 and p99 latency and the server's CPU time
# per operation (/proc/PID/stat), and each server's ratio to plain.
#
# Usage: scripts/bench-security.sh [--records N] [--ops N] [--threads N] [--passes N] [--no-java]
#          [--out FILE.json] [--cellar BIN] [--work DIR]
# Defaults: 100000 records, 100000 operations per run, 4 threads, 3 passes.
# Results: docs/benchmarks.md ("Security").
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
records=100000
ops=100000
threads=4
passes=3
java=1
out=""
cellar_bin="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
die() { echo "bench-security: $*" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --records) need_value "$@"; records="$2"; shift 2 ;;
    --ops) need_value "$@"; ops="$2"; shift 2 ;;
    --threads) need_value "$@"; threads="$2"; shift 2 ;;
    --passes) need_value "$@"; passes="$2"; shift 2 ;;
    --no-java) java=0; shift ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for n in "$records" "$ops" "$threads" "$passes"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "'$n' is not a positive count"
done
[[ -x "$cellar_bin" ]] || die "no Cellar binary at $cellar_bin (cargo build --release, or --cellar BIN)"
work="${work:-$(mktemp -d -t cellar-bench-security.XXXXXX)}"
mkdir -p "$work"
out="${out:-$work/bench-security.json}"
tck="$(getconf CLK_TCK)"
echo "work dir: $work" >&2

pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

certs="$work/certs"
rm -rf "$certs"
"$cellar_bin" cert create --dir "$certs" --user bench >"$work/cert.log" 2>&1 \
  || { cat "$work/cert.log" >&2; die "cellar cert create failed"; }

# --- the two servers ---------------------------------------------------------------------------
declare -A native hbase pid
start() {
  local name="$1"; shift
  rm -rf "$work/$name"; mkdir -p "$work/$name"
  "$cellar_bin" standalone --data-dir "$work/$name/data" --listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --hbase-listen 127.0.0.1:0 "$@" \
    >"$work/$name/server.out" 2>"$work/$name/server.log" &
  pid[$name]=$!
  pids+=("$!")
  for _ in $(seq 1 600); do
    native[$name]="$(sed -n 's/^listening native=//p' "$work/$name/server.out" | head -n1)"
    hbase[$name]="$(sed -n 's/^listening hbase=//p' "$work/$name/server.out" | head -n1)"
    [[ -n "${native[$name]}" && -n "${hbase[$name]}" ]] && return 0
    kill -0 "${pid[$name]}" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$work/$name/server.log" >&2
  die "server '$name' did not start"
}
start plain
start tls --tls-cert "$certs/server.pem" --tls-key "$certs/server.key" --tls-client-ca "$certs/ca.pem"
printf '[security]\nauthorization = true\nsuperusers = ["loader"]\n' >"$work/acl.toml"
start acl --config "$work/acl.toml"
names=(plain tls acl)
declare -A nprops jprops
nprops[plain]=""
nprops[tls]="-p tls.ca=$certs/ca.pem -p tls.cert=$certs/bench.pem -p tls.key=$certs/bench.key"
jprops[plain]=""
nprops[acl]="-p user=bench"
jprops[acl]=""
jprops[tls]="-p hbase.client.netty.tls.enabled=true -p hbase.rpc.tls.truststore.location=$certs/ca.pem
  -p hbase.rpc.tls.truststore.type=PEM -p hbase.rpc.tls.keystore.location=$certs/bench.keystore.pem
  -p hbase.rpc.tls.keystore.type=PEM"
for name in "${names[@]}"; do
  echo "loading $name ($records records)..." >&2
  load_props="${nprops[$name]}"
  [[ "$name" == acl ]] && load_props="-p user=loader"
  # shellcheck disable=SC2086 # the properties split into words on purpose
  "$cellar_bin" bench load -P "$repo/workloads/workloada" -p recordcount="$records" $load_props \
    -threads 4 --db "cellar://${native[$name]}" >"$work/$name/load.out" 2>&1 \
    || { tail -n 20 "$work/$name/load.out" >&2; die "loading '$name' failed"; }
done
"$cellar_bin" shell --connect "${native[acl]}" --user loader -e "grant 'bench', 'RW', 'usertable'" \
  >"$work/acl/grant.out" 2>&1 || { cat "$work/acl/grant.out" >&2; die "granting the benchmark's user failed"; }

# --- the Java client ---------------------------------------------------------------------------
cp=""
if (( java )); then
  command -v java >/dev/null 2>&1 || die "java (17+) is not installed (or --no-java)"
  binding="$repo/java/ycsb-hbase-binding"
  mvn -B -q -f "$binding/pom.xml" package -DskipTests >&2 \
    && mvn -B -q -f "$binding/pom.xml" dependency:build-classpath -DincludeScope=runtime \
         -Dmdep.outputFile="$work/ycsb.classpath" >&2 \
    || die "building the YCSB binding failed (mvn)"
  cp="$binding/target/cellar-ycsb-hbase-0.1.0.jar:$(cat "$work/ycsb.classpath")"
  # shellcheck source=lib/java-flags.sh
  . "$repo/scripts/lib/java-flags.sh"
fi

cpu_ticks() {
  local stat rest
  stat="$(cat "/proc/$1/stat")" || die "server pid $1 is gone"
  rest="${stat##*) }"
  awk '{ print $12 + $13 }' <<<"$rest"
}

# run CLIENT OP NAME PASS: one run; appends its result line.
results="$work/results.jsonl"
: >"$results"
run() {
  local client="$1" op="$2" name="$3" pass="$4" before after file mix
  if [[ "$op" == get ]]; then mix=(-p readproportion=1 -p updateproportion=0); else mix=(-p readproportion=0 -p updateproportion=1); fi
  file="$work/$name/$client-$op-$pass"
  before="$(cpu_ticks "${pid[$name]}")"
  if [[ "$client" == native ]]; then
    # shellcheck disable=SC2086
    "$cellar_bin" bench run -P "$repo/workloads/workloadc" "${mix[@]}" -p recordcount="$records" \
      -p operationcount="$ops" ${nprops[$name]} -threads "$threads" --db "cellar://${native[$name]}" \
      --json "$file.json" >"$file.out" 2>&1 || { tail -n 20 "$file.out" >&2; die "native $op on '$name' failed"; }
  else
    # shellcheck disable=SC2086
    HADOOP_USER_NAME=bench timeout 900 java "${hbase_client_java_flags[@]}" -cp "$cp" site.ycsb.Client -t \
      -db org.cellar.ycsb.HBaseClient -P "$repo/workloads/workloadc" "${mix[@]}" \
      -p recordcount="$records" -p operationcount="$ops" -p columnfamily=family \
      -p hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry \
      -p "hbase.client.bootstrap.servers=${hbase[$name]}" -p hdrhistogram.percentiles=50,99 \
      ${jprops[$name]} -threads "$threads" >"$file.out" 2>"$file.err" \
      || { tail -n 20 "$file.err" >&2; die "java $op on '$name' failed"; }
  fi
  after="$(cpu_ticks "${pid[$name]}")"
  python3 - "$client" "$op" "$name" "$pass" "$file" "$((after - before))" "$tck" >>"$results" <<'PY'
import json, re, sys
client, op, name, pas, file, ticks, tck = sys.argv[1:]
kind = "READ" if op == "get" else "UPDATE"
if client == "native":
    r = json.load(open(file + ".json"))
    o = r["operations"].get(kind, {})
    ops, tput, p50, p99 = o.get("count", 0), r["throughput"], o.get("p50_us"), o.get("p99_us")
    failed = sum(v["count"] for k, v in r["operations"].items() if k.endswith("-FAILED"))
else:
    text = open(file + ".out").read()
    val = lambda sec, key: float(re.search(rf"^\[{sec}\], {re.escape(key)}, ([0-9.]+)", text, re.M).group(1))
    ops, tput = int(val(kind, "Operations")), val("OVERALL", "Throughput(ops/sec)")
    p50, p99 = val(kind, "50thPercentileLatency(us)"), val(kind, "99thPercentileLatency(us)")
    failed = len(re.findall(rf"^\[{kind}-FAILED\]", text, re.M))
if failed or not ops:
    sys.exit(f"bench-security: {client} {op} on {name}: {failed} failed operations, {ops} done ({file})")
print(json.dumps({"client": client, "op": op, "variant": name, "pass": int(pas),
                  "ops_per_sec": tput, "p50_us": p50, "p99_us": p99,
                  "server_cpu_us_per_op": int(ticks) / int(tck) * 1e6 / ops}))
PY
  echo "pass $pass $client $op $name: $(tail -n1 "$results")" >&2
}

clients=(native)
(( java )) && clients+=(java)
for pass in $(seq 1 "$passes"); do
  for client in "${clients[@]}"; do
    for op in get put; do
      for i in 0 1 2; do
        run "$client" "$op" "${names[$(( (i + pass - 1) % 3 ))]}" "$pass"
      done
    done
  done
done

python3 - "$results" "$out" "$records" "$ops" "$threads" "$passes" <<'PY'
import json, statistics, sys
results, out, records, ops, threads, passes = sys.argv[1:]
rows = [json.loads(l) for l in open(results)]
def med(c, o, v, k):
    return statistics.median(r[k] for r in rows if (r["client"], r["op"], r["variant"]) == (c, o, v))
print(f"{records} records, {ops} operations per run, {threads} threads, median of {passes} passes, "
      "the servers in turn, order rotated per pass")
print()
print("| client | op | server | ops/s | p50 µs | p99 µs | server CPU µs/op | ops/s vs plain | CPU vs plain |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
summary = []
for c in dict.fromkeys(r["client"] for r in rows):
    for o in ("get", "put"):
        base = {k: med(c, o, "plain", k) for k in ("ops_per_sec", "server_cpu_us_per_op")}
        for v in ("plain", "tls", "acl"):
            s = {k: med(c, o, v, k) for k in ("ops_per_sec", "p50_us", "p99_us", "server_cpu_us_per_op")}
            s.update(client=c, op=o, variant=v)
            summary.append(s)
            ratio = "" if v == "plain" else f'{s["ops_per_sec"] / base["ops_per_sec"]:.2f}'
            cpu = "" if v == "plain" else f'{s["server_cpu_us_per_op"] / base["server_cpu_us_per_op"]:.2f}'
            print(f'| {c} | {o} | {v} | {s["ops_per_sec"]:,.0f} | {s["p50_us"]:g} | {s["p99_us"]:g} | '
                  f'{s["server_cpu_us_per_op"]:.1f} | {ratio} | {cpu} |')
json.dump({"tool": "bench-security", "records": int(records), "operations": int(ops),
           "threads": int(threads), "passes": int(passes), "summary": summary, "runs": rows},
          open(out, "w"), indent=1)
print()
print(f"JSON: {out}")
PY
