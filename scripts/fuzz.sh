#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang (-fsanitize=fuzzer,address,undefined on the
# readers' code) into ./build-fuzz and runs each for a bounded time. Not part of CI.
#   bash scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]
# SECONDS defaults to 60; harnesses: model_json tfjs h5_model h5_weights keras idx (default: all).
# Corpora grow in build-fuzz/corpus/<harness> (seeded by fuzz_make_seeds from files tapeflow writes);
# a crash, leak, sanitizer report or timeout (> 10 s) leaves build-fuzz/findings/<harness>/crash-*
# (or leak-*, timeout-*, oom-*), and the script exits 1 naming them. Reproduce one with
# build-fuzz/fuzz/fuzz_<harness> FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(model_json tfjs h5_model h5_weights keras idx)
bash scripts/setup.sh
CXX_CLANG="$(command -v clang++-16 || true)"
if [[ -z "$CXX_CLANG" ]]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-16 libclang-rt-16-dev
  CXX_CLANG="$(command -v clang++-16)"
fi
JOBS="${JOBS:-$(nproc)}"
# tape/ (tensors, kernels) is not instrumented: link the ordinary build's libtape.a when it is there
# (scripts/build.sh; same sources, GCC and clang share libstdc++'s ABI), else compile it with clang.
tape_lib=""
[ -f build/tape/libtape.a ] && tape_lib="$PWD/build/tape/libtape.a"
cmake -S . -B build-fuzz -DTAPEFLOW_FUZZ_TAPE_LIBRARY="$tape_lib" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="${CXX_CLANG/clang++/clang}" \
  -DCMAKE_CXX_COMPILER="$CXX_CLANG" -DTAPEFLOW_FUZZ=ON -DTAPEFLOW_BUILD_TESTS=OFF -DTAPEFLOW_BUILD_APPS=OFF \
  -DTAPEFLOW_BUILD_BENCH=OFF -DTAPEFLOW_WITH_MPI=OFF >/dev/null
targets=(--target fuzz_make_seeds)
for h in "${harnesses[@]}"; do targets+=(--target "fuzz_$h"); done
cmake --build build-fuzz -j "$JOBS" "${targets[@]}"
cd build-fuzz
# HDF5 leaks on the error paths of damaged files (scripts/lsan.supp, as the sanitizer build).
export LSAN_OPTIONS="suppressions=$PWD/../scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="detect_leaks=1"
[ -d seeds ] || ./fuzz/fuzz_make_seeds seeds
status=0
for h in "${harnesses[@]}"; do
  mkdir -p "corpus/$h" "findings/$h"
  echo "fuzz: $h for ${seconds}s"
  if ! ./fuzz/fuzz_$h -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="findings/$h/" "corpus/$h" "seeds/$h" > "findings/$h/log.txt" 2>&1; then
    status=1
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)|^#[0-9]+.*DONE" "findings/$h/log.txt" || true
  if ls "findings/$h"/{crash,leak,timeout,oom}-* >/dev/null 2>&1; then
    echo "fuzz: $h found: $(ls "findings/$h" | grep -v log.txt | tr '\n' ' ') (log: build-fuzz/findings/$h/log.txt)"
    status=1
  fi
done
exit "$status"
