#!/usr/bin/env bash
# clang_kernels.sh SOURCE_DIR BUILD_DIR: builds the kernel library (tapeflow::tape) and its tests
# (test_kernels) with clang 16, warnings as errors, into BUILD_DIR and runs them at every
# instruction-set level (tests/run_at_isa.sh): the kernels must build and compute the same under
# both compilers (issue 31; scripts/build_clang.sh builds and runs everything with clang). The
# CTest kernels.clang16 of the GCC build runs it; scripts/setup.sh installs Debian's clang-16.
# Cold: about 260 CPU-seconds (2.2 minutes on 2 idle cores); warm (ccache): about 10 s. A level
# this CPU lacks is reported and left out, as in the per-level CTests; any other failure fails.
set -euo pipefail
src="$1"; dir="$2"
cxx="$(command -v clang++-16 || true)"
if [[ -z "$cxx" ]]; then
  echo "clang_kernels.sh: clang++-16 not found (scripts/setup.sh installs Debian's clang-16)"
  exit 1
fi
cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_C_COMPILER="${cxx/clang++/clang}" -DTAPEFLOW_WERROR=ON -DTAPEFLOW_BUILD_BENCH=OFF \
  -DTAPEFLOW_BUILD_APPS=OFF -DTAPEFLOW_BUILD_EXAMPLES=OFF -DTAPEFLOW_WITH_MPI=OFF >/dev/null
start=$(date +%s)
cmake --build "$dir" -j "${JOBS:-2}" --target test_kernels
echo "clang_kernels.sh: $("$cxx" --version | head -1): built in $(( $(date +%s) - start )) s"
ran=0
for level in baseline avx2 avx512; do
  rc=0
  bash "$src/tests/run_at_isa.sh" "$level" "$dir/tests/test_kernels" --gtest_brief=1 || rc=$?
  if (( rc == 77 )); then continue; fi
  if (( rc != 0 )); then
    echo "clang_kernels.sh: test_kernels built with clang failed at level $level (exit $rc)"
    exit 1
  fi
  echo "clang_kernels.sh: level $level passed"
  ran=$((ran + 1))
done
(( ran > 0 )) || { echo "clang_kernels.sh: no level ran"; exit 1; }
