#!/usr/bin/env bash
# make demo: the loom pipeline on data bundled in share/, one stage at a time.
# Each stage prints its summary line; outputs land in $DEMO_OUT (demo-out/).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${DEMO_OUT:-demo-out}
rm -rf "$OUT"
mkdir -p "$OUT"
stage() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

stage "build: $(ls build/bin 2>/dev/null | wc -l) tools in build/bin"
