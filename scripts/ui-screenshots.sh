#!/usr/bin/env bash
# Screenshots of the web UI for docs/ui/: the browser test (crates/cli/tests/web_ui.rs) run with
# CELLAR_UI_SCREENSHOTS, so the pictures are of the pages the test checks, on a real standalone
# server and a real cluster's master. Needs Debian's chromium (apt-get install chromium) and
# ZooKeeper (apt-get install zookeeper), as scripts/test.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/ui}"
mkdir -p "$out"
CELLAR_UI_SCREENSHOTS="$(cd "$out" && pwd)" cargo test --release -p cellar-cli --test web_ui -- --test-threads=1
ls -l "$out"
