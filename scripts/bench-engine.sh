#!/usr/bin/env bash
# The storage engine beside RocksDB (`engine_bench --engine both`), from a fresh machine: installs
# what building RocksDB needs (a C++ compiler, and libclang for its bindings) with apt-get,
# builds `engine_bench` with the `rocksdb` feature (RocksDB compiles once: about 20 minutes on
# two cores), and runs it RUNS times, printing each run's table and writing its JSON to
# OUT-DIR/engine-REV-runN.json. Arguments after `--` go to engine_bench.
#
# Usage: scripts/bench-engine.sh [--runs N] [--out DIR] [-- ENGINE_BENCH_ARGS...]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3
out="$repo/results/engine"
extra=()
die() { echo "bench-engine: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive count"; runs="$2"; shift 2 ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a directory"; out="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

need=()
command -v c++ >/dev/null 2>&1 || need+=(g++)
# bindgen (in librocksdb-sys) loads libclang at build time, by the unversioned names
# libclang.so or libclang-N.so that libclang-dev installs (libclang-cpp.so, which compilers
# bring along, is another library and does not do).
has_libclang() {
  local d
  for d in /usr/lib/llvm-*/lib /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib; do
    compgen -G "$d/libclang.so" >/dev/null || compgen -G "$d/libclang-[0-9]*.so" >/dev/null && return 0
  done
  return 1
}
has_libclang || need+=(libclang-dev)
if [[ ${#need[@]} -gt 0 ]]; then
  echo "bench-engine: installing ${need[*]}" >&2
  sudo_cmd=""
  [[ "$(id -u)" -eq 0 ]] || sudo_cmd=sudo
  $sudo_cmd apt-get update -q && $sudo_cmd apt-get install -y -q "${need[@]}" \
    || die "cannot install ${need[*]} with apt-get (not Debian/Ubuntu, no sudo, or no network)"
fi

echo "bench-engine: building engine_bench with RocksDB (the first build takes about 20 minutes)" >&2
(cd "$repo" && cargo build --release -p cellar-bench --bin engine_bench --features rocksdb)
bin="${CARGO_TARGET_DIR:-$repo/target}/release/engine_bench"
rev="$(git -C "$repo" rev-parse --short HEAD)"
mkdir -p "$out"
for i in $(seq 1 "$runs"); do
  # Odd runs Cellar first, even runs RocksDB first: the engine that writes last finds more of
  # its files in the page cache when the reads begin.
  order=()
  (( i % 2 == 0 )) && order=(--rocksdb-first)
  echo "bench-engine: run $i/$runs${order:+ (RocksDB first)}" >&2
  "$bin" --engine both "${order[@]}" --json "$out/engine-$rev-run$i.json" "${extra[@]}"
done
echo "bench-engine: results in $out" >&2
