#!/usr/bin/env bash
# Builds the library, apps and test suite with -fsanitize=address,undefined (TAPEFLOW_SANITIZE) into
# ./build-sanitize and runs the tests. Any sanitizer report fails the test that caused it (UBSan
# halts on error). LeakSanitizer suppresses only HDF5's own leaks on the error paths of damaged
# files (scripts/lsan.supp) and the allocations Open MPI's MPI_Init_thread / MPI_Finalize never free
# (scripts/lsan-openmpi.supp, matched through those frames only). Extra arguments go to ctest
# (e.g. -R 'HostileCheckpoint|Hostile\.' for the file-fuzzing tests only).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS="${JOBS:-$(nproc)}"
# -O1 -g1: the sanitizers' usual optimisation level, with line tables for the reports; a cold build
# takes about a third less than RelWithDebInfo's -O2 -g on 2 cores.
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DTAPEFLOW_SANITIZE=ON -DTAPEFLOW_BUILD_BENCH=OFF >/dev/null
cmake --build build-sanitize -j "$JOBS"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Two named suppression files: HDF5's leaks on damaged files, and Open MPI's own (see each file).
cat scripts/lsan.supp scripts/lsan-openmpi.supp > build-sanitize/lsan.supp
export LSAN_OPTIONS="suppressions=$PWD/build-sanitize/lsan.supp:print_suppressions=0"
cd build-sanitize
ctest --output-on-failure -j "$JOBS" --timeout 1800 "$@"
