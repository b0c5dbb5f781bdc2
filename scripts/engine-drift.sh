#!/usr/bin/env bash
# Has Cellar's storage engine drifted between two commits? Builds `engine_bench` at BASE (in a
# git worktree) and at the working tree, runs Cellar alone on the same workloads with both,
# alternating which goes first, and prints each workload's median ops/s, every run's value and
# the ratio new ÷ base. Only ratios from one run of this script count: the machine's noise is
# larger than most single changes (docs/benchmarks.md, "Did Cellar's engine drift").
#
# Usage: scripts/engine-drift.sh [--base REV] [--runs N] [--benchmarks LIST] [-- ENGINE_BENCH_ARGS...]
#   --base REV        the commit to compare with (default: the last one docs/benchmarks.md's
#                     engine table was measured at, 0682a30)
#   --runs N          runs of each binary (default 5)
#   --benchmarks LIST engine_bench workloads (default fillrandom,readrandom,readrandom-hot,seekrandom)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base=0682a30
runs=5
benchmarks=fillrandom,readrandom,readrandom-hot,seekrandom
extra=()
die() { echo "engine-drift: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) [[ $# -ge 2 ]] || die "--base needs a commit"; base="$2"; shift 2 ;;
    --runs) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive count"; runs="$2"; shift 2 ;;
    --benchmarks) [[ $# -ge 2 ]] || die "--benchmarks needs a list"; benchmarks="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
git -C "$repo" rev-parse --verify -q "$base^{commit}" >/dev/null || die "'$base' is not a commit"

work="$(mktemp -d /tmp/cellar-engine-drift.XXXXXX)"
cleanup() {
  git -C "$repo" worktree remove --force "$work/base" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "building engine_bench at $base and at the working tree..." >&2
git -C "$repo" worktree add -q --detach "$work/base" "$base"
(cd "$work/base" && CARGO_TARGET_DIR="$work/target-base" cargo build --release -q -p cellar-bench --bin engine_bench)
(cd "$repo" && cargo build --release -q -p cellar-bench --bin engine_bench)
cp "$work/target-base/release/engine_bench" "$work/engine_bench-base"
cp "${CARGO_TARGET_DIR:-$repo/target}/release/engine_bench" "$work/engine_bench-new"
new_rev="$(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo '+dirty')"

for i in $(seq 1 "$runs"); do
  if (( i % 2 )); then order="base new"; else order="new base"; fi
  for v in $order; do
    echo "run $i/$runs: $v" >&2
    (cd "$work" && "$work/engine_bench-$v" --engine cellar --benchmarks "$benchmarks" "${extra[@]}") 2>&1 \
      | grep -E '^\| [a-z-]+ \| [0-9]' >> "$work/$v.txt" || die "engine_bench ($v) printed no results"
  done
done

python3 - "$work" "$base" "$new_rev" <<'EOF'
import collections, statistics, sys
work, base, new = sys.argv[1:]
def read(v):
    d = collections.defaultdict(list)
    for line in open(f"{work}/{v}.txt"):
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        d[cols[0]].append(float(cols[1].replace(",", "")))
    return d
b, n = read("base"), read("new")
print(f"| workload | {base} ops/s | {new} ops/s | {new} / {base} |")
print("| --- | ---: | ---: | ---: |")
for w in b:
    if w not in n:
        continue
    mb, mn = statistics.median(b[w]), statistics.median(n[w])
    span = lambda xs: f"{min(xs):,.0f}-{max(xs):,.0f}"
    print(f"| {w} | {mb:,.0f} ({span(b[w])}) | {mn:,.0f} ({span(n[w])}) | {mn / mb:.2f} |")
EOF
