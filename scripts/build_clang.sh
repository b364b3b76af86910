#!/usr/bin/env bash
# Builds the library, apps and test suite with clang 16 (clang++-16, Debian's clang-16, which
# scripts/setup.sh installs) into ./build-clang and runs the tests: the code must mean the same under
# both compilers (e.g. Tensor({x}) is a [1] tensor on both). CI stays on GCC but for the kernel
# library and its tests, which it also builds with clang 16 and runs at every instruction-set level
# (CTest kernels.clang16, tests/kernels/clang_kernels.sh). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
CXX_CLANG="$(command -v clang++-16 || true)"
if [[ -z "$CXX_CLANG" ]]; then
  echo "build_clang: clang++-16 not found (scripts/setup.sh installs Debian's clang-16)"
  exit 1
fi
CC_CLANG="${CXX_CLANG/clang++/clang}"
JOBS="${JOBS:-$(nproc)}"
echo "build_clang: $("$CXX_CLANG" --version | head -1)"
start=$(date +%s)
# Warnings are errors here too; the interoperability tests use the venv scripts/setup.sh made.
venv="$(cd "$(dirname "${TAPEFLOW_VENV:-build/venv}")" && pwd)/$(basename "${TAPEFLOW_VENV:-build/venv}")"
cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAPEFLOW_BUILD_BENCH=OFF -DTAPEFLOW_WERROR=ON \
  -DTAPEFLOW_VENV="$venv" -DCMAKE_C_COMPILER="$CC_CLANG" -DCMAKE_CXX_COMPILER="$CXX_CLANG" >/dev/null
cmake --build build-clang -j "$JOBS"
echo "build_clang: built in $(( $(date +%s) - start )) s"
cd build-clang
ctest --output-on-failure -j "$JOBS" --timeout 600 "$@"
