#!/usr/bin/env bash
# avx512_objects_check.sh OBJDUMP ALLOWED_REGEX ARCHIVE...: fails if any object of the archives
# holds an AVX-512 instruction (a zmm register, an opmask register %k0-%k7, or xmm/ymm16-31, which
# only EVEX encodes) and its member name does not match ALLOWED_REGEX (an extended regex). Issue 31:
# AVX-512 code must stay in the register tiles of tape/kernels/ukernels/ (objects
# ukernels_<file>.<level>.o, cmake/tapeflow_isa.cmake), which run only when cpu_isa() is kAvx512,
# so no other object can run it on a CPU without it.
set -euo pipefail
objdump="$1"; allowed="$2"; shift 2
bad=0
for ar in "$@"; do
  # "In archive X:" then per member "<member>:     file format ..." (GNU objdump) or
  # "X(<member>):     file format ..." (llvm-objdump, in the clang build); count per member.
  while read -r member count; do
    if [[ "$member" =~ $allowed ]]; then
      echo "ok: $member: $count AVX-512 instructions (allowed)"
    else
      echo "FAIL: $ar($member): $count AVX-512 instructions outside the per-ISA kernel objects"; bad=1
    fi
  done < <("$objdump" -d --no-show-raw-insn "$ar" | awk '
    /file format/ { m = $1; sub(/:$/, "", m); if (match(m, /\([^()]*\)$/)) m = substr(m, RSTART + 1, RLENGTH - 2); next }
    /%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])/ { n[m]++ }
    END { for (k in n) print k, n[k] }')
done
exit $bad
