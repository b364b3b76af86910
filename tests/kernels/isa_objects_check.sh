#!/usr/bin/env bash
# isa_objects_check.sh TAG OBJECT...: fails if an object compiled above the baseline still defines
# a weak symbol, or has a COMDAT group, whose name lacks TAG (cmake/isa_localize.sh renames them):
# the linker could then merge it with a baseline object's copy and run AVX2 code for baseline
# callers. Seen failing on the objects before renaming.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tag="$1"; shift
bad=0
for obj in "$@"; do
  shared=$(bash "$here/../../cmake/isa_localize.sh" list nm "$tag" "$obj")
  if [[ -n "$shared" ]]; then
    echo "$obj: $(echo "$shared" | wc -l) names shared with baseline code, e.g.:"; echo "$shared" | head -10; bad=1
  else
    echo "$obj: every weak symbol and COMDAT group is tagged $tag"
  fi
done
exit $bad
