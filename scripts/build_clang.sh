#!/usr/bin/env bash
# Builds the library, apps and test suite with clang (clang++-16 from Debian when installed, else
# the default clang++) into ./build-clang and runs the tests: the code must mean the same under
# both compilers (e.g. Tensor({x}) is a [1] tensor on both). CI stays on GCC.
# Installs clang-16 with apt when no clang++ is found. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
CXX_CLANG="$(command -v clang++-16 || command -v clang++ || true)"
if [[ -z "$CXX_CLANG" ]]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-16
  CXX_CLANG="$(command -v clang++-16)"
fi
CC_CLANG="${CXX_CLANG/clang++/clang}"
JOBS="${JOBS:-$(nproc)}"
echo "build_clang: $("$CXX_CLANG" --version | head -1)"
start=$(date +%s)
cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAPEFLOW_BUILD_BENCH=OFF \
  -DCMAKE_C_COMPILER="$CC_CLANG" -DCMAKE_CXX_COMPILER="$CXX_CLANG" >/dev/null
cmake --build build-clang -j "$JOBS"
echo "build_clang: built in $(( $(date +%s) - start )) s"
cd build-clang
ctest --output-on-failure -j "$JOBS" --timeout 600 "$@"
