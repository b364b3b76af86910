#!/usr/bin/env bash
# Configures and builds tapeflow (Release) into ./build. Extra arguments go to CMake; TARGETS
# (space-separated) limits the build to those targets (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j "$JOBS" "${targets[@]}"
