#!/usr/bin/env bash
# Runs Cellar's fuzz targets (fuzz/, cargo-fuzz on nightly) and reports, per target,
# executions, exec/s, corpus size and crashes; ends with "fuzz: N targets ran, M crashed" and
# exits non-zero if any target crashed (or the build failed).
#
#   scripts/fuzz.sh [--time SECONDS] [--runs N] [--jobs N] [--sanitizer none|address] [TARGET...]
#
# --time: seconds per target (default 30); --runs: stop each target after N executions
# instead; --jobs: targets run at the same time (default 1); --sanitizer: libFuzzer build
# (default none: twice as fast; the targets' own allocation guard still turns any allocation
# above 512 MiB into a crash). Every target also replays fuzz/regressions/<target>/.
# Crash inputs go to fuzz/artifacts/<target>/ (gitignored); the script prints how to replay one.
set -uo pipefail
cd "$(dirname "$0")/.."

time_s=30
runs=""
jobs=1
sanitizer=none
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --time) time_s="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --sanitizer) sanitizer="$2"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done

log() { printf '\n== %s\n' "$*"; }
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi

# What cargo-fuzz needs: a nightly toolchain, cargo-fuzz itself, and a C++ compiler (libFuzzer).
if ! command -v c++ >/dev/null 2>&1; then
    log "installing g++"
    $sudo_cmd apt-get update -q && $sudo_cmd apt-get install -y -q g++ \
        || echo "cannot install g++ with apt-get"
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    log "installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal || { echo "fuzz: cannot install nightly"; exit 1; }
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo +nightly install cargo-fuzz --locked || { echo "fuzz: cannot install cargo-fuzz"; exit 1; }
fi

cd fuzz
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

log "cargo fuzz build (sanitizer $sanitizer)"
build_start=$(date +%s)
# -a: debug assertions, so arithmetic overflow is a crash too.
cargo +nightly fuzz build -s "$sanitizer" -a 2>&1 | tail -n 3
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    echo "fuzz: build failed"
    echo "fuzz: 0 targets ran, 0 crashed"
    exit 1
fi
echo "built in $(( $(date +%s) - build_start )) s"
bin_dir="${CARGO_TARGET_DIR:-target}/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"

logs=$(mktemp -d)
run_one() {
    local t="$1" limit
    if [ -n "$runs" ]; then limit="-runs=$runs"; else limit="-max_total_time=$time_s"; fi
    # Input size bounds where large inputs only slow a target down: replay searches every
    # offset past damage (linear for version 2 segments, whose headers carry a checksum of
    # their own; quadratic for version 1 ones), and filter strings and config files spend their
    # time compiling regular expressions and parsing TOML, not finding new paths.
    local max_len=()
    case "$t" in
        wal_segment) max_len=(-max_len=16384) ;;
        filter_lang) max_len=(-max_len=512) ;;
        config) max_len=(-max_len=1024) ;;
    esac
    mkdir -p "corpus/$t" "artifacts/$t"
    local dirs=("corpus/$t")
    [ -d "regressions/$t" ] && dirs+=("regressions/$t")
    "$bin_dir/$t" "${dirs[@]}" "$limit" "${max_len[@]}" -rss_limit_mb=2048 -malloc_limit_mb=512 \
        -timeout=10 -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"$logs/$t.log" 2>&1
    echo $? >"$logs/$t.rc"
}

log "running ${#targets[@]} targets ($( [ -n "$runs" ] && echo "$runs runs" || echo "$time_s s") each, $jobs at a time)"
running=0
for t in "${targets[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

crashed=0
ran=0
printf '%-18s %12s %8s %7s %8s\n' target executions exec/s corpus crashes
for t in "${targets[@]}"; do
    ran=$((ran + 1))
    rc=$(cat "$logs/$t.rc" 2>/dev/null || echo 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -n1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logs/$t.log" | tail -n1)
    corpus=$(find "corpus/$t" -type f | wc -l)
    crash_files=$(grep -o "Test unit written to [^ ]*" "$logs/$t.log" | sed 's/Test unit written to //')
    n=0
    if [ "$rc" -ne 0 ]; then n=1; fi
    printf '%-18s %12s %8s %7s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$n"
    if [ "$n" -ne 0 ]; then
        crashed=$((crashed + 1))
        grep -E 'panicked at|allocation of|ERROR: libFuzzer|SUMMARY' -A2 "$logs/$t.log" | head -n 12 | sed 's/^/    /'
        for f in $crash_files; do
            echo "    crash input: fuzz/$f"
            echo "    reproduce:   (cd fuzz && cargo +nightly fuzz run -s $sanitizer -a $t $f)"
        done
    fi
done
rm -rf "$logs"
echo "fuzz: $ran targets ran, $crashed crashed"
[ "$crashed" -eq 0 ]
