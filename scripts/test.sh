#!/usr/bin/env bash
# Cellar's test command: installs what the tests need, checks formatting and lints, runs every
# test, and ends with one summary line "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

# The pinned toolchain (rust-toolchain.toml) is installed by rustup on first use.
if ! command -v cargo >/dev/null 2>&1; then
    log "installing rustup"
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal || { echo "cannot install Rust"; exit 1; }
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

log "cargo fmt --check"
cargo fmt --all -- --check || { echo "0 passed, 1 failed"; exit 1; }

log "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings || { echo "0 passed, 1 failed"; exit 1; }

log "cargo test"
out=$(mktemp)
cargo test --workspace 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$out" | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed' "$out" | awk '{s+=$1} END {print s+0}')
rm -f "$out"
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo
echo "${passed} passed, ${failed} failed"
exit "$status"
