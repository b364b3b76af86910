#!/usr/bin/env bash
# run_at_isa.sh LEVEL BINARY [ARGS...]: runs a test binary with the kernels capped at LEVEL
# (TAPEFLOW_MAX_CPU_ISA, tape/core/cpu_isa.h). A level this CPU lacks exits 77, which CTest
# reports as skipped (SKIP_RETURN_CODE), never as passed. The check reads /proc/cpuinfo's flags,
# which the kernel clears for state the OS does not save (the library checks CPUID + XGETBV).
set -euo pipefail
level="$1"; shift
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
need=""
case "$level" in
  baseline) need="sse4_2" ;;
  avx2) need="avx2 fma" ;;
  avx512) need="avx2 fma avx512f avx512bw avx512vl" ;;
  *) echo "run_at_isa.sh: unknown level \"$level\" (baseline, avx2, avx512)"; exit 2 ;;
esac
for f in $need; do
  if [[ "$flags" != *" $f "* ]]; then
    echo "run_at_isa.sh: this CPU lacks $f: level $level not tested here"
    exit 77
  fi
done
TAPEFLOW_MAX_CPU_ISA="$level" exec "$@"
