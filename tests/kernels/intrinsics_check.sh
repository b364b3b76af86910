#!/usr/bin/env bash
# intrinsics_check.sh KERNELS_DIR: x86 intrinsics (immintrin.h and friends, _mm*_ calls, __m128/256/512
# types) appear only in KERNELS_DIR/ukernels/ (issue 31: the register tiles and the few intrinsics
# the drivers need live there; everything else is plain C++ or Eigen packets). Lists every offending
# line and fails if there is one.
set -euo pipefail
dir="$1"
[[ -d "$dir/ukernels" ]] || { echo "intrinsics_check.sh: no $dir/ukernels"; exit 2; }
hits=$(grep -rnE '#include <[a-z]*intrin\.h>|\b_mm[0-9]*_[a-z0-9_]+\(|\b__m(128|256|512)[dhi]?\b' "$dir" \
         --include='*.h' --include='*.cc' | grep -v "^$dir/ukernels/" || true)
if [[ -n "$hits" ]]; then
  echo "intrinsics_check.sh: x86 intrinsics outside $dir/ukernels/:"
  echo "$hits"
  exit 1
fi
echo "intrinsics_check.sh: intrinsics only under $dir/ukernels/"
