#!/usr/bin/env bash
# CTest `stage_headers`: cmake/stage_headers.cmake on a small tree — public headers staged under
# tapeflow/ with project includes rewritten, internal/ headers only when included, stale headers
# removed, and a public header that includes <hdf5.h> (or Eigen, oneTBB, spdlog, nlohmann-json or any
# other third-party header) fails naming it; only a bridge header (json.h) may include nlohmann-json.
# Usage: stage_headers_test.sh SOURCE_DIR WORK_DIR [CMAKE]
set -euo pipefail
src=$1 work=$2 cmake=${3:-cmake}
fail() { echo "stage_headers: $*" >&2; exit 1; }
stage() { "$cmake" -DSOURCE_DIR="$work/src" -DOUTPUT_DIR="$work/out" "-DFOLDERS=tape;models" "-DTOP_HEADERS=top.h;bridge.h" \
                   -DBRIDGE_HEADERS=bridge.h \
                   -DSTAMP="$work/stamp" -P "$src/cmake/stage_headers.cmake"; }
rm -rf "$work"
mkdir -p "$work/src/tape/internal" "$work/src/tape/core/internal" "$work/src/models"
printf '#include "models/m.h"\n' > "$work/src/top.h"
printf '#pragma once\n#include <nlohmann/json.hpp>\n#include "tape/a.h"\n' > "$work/src/bridge.h"
printf '#pragma once\n#include <vector>\n#include "tape/internal/used.h"\n' > "$work/src/tape/a.h"
printf '#pragma once\n' > "$work/src/tape/internal/used.h"
printf '#pragma once\n#include <Eigen/Core>\n' > "$work/src/tape/core/internal/private.h"
printf '#pragma once\n#include "tape/a.h"\n' > "$work/src/models/m.h"
stage > "$work/log" 2>&1 || { cat "$work/log"; fail "staging a clean tree failed"; }
[ -f "$work/out/tapeflow/top.h" ] && [ -f "$work/out/tapeflow/tape/a.h" ] || fail "public headers not staged"
[ -f "$work/out/tapeflow/tape/internal/used.h" ] || fail "an included internal/ header was not staged"
[ ! -e "$work/out/tapeflow/tape/core/internal/private.h" ] || fail "an unused internal/ header was staged"
grep -qx '#include "tapeflow/tape/a.h"' "$work/out/tapeflow/models/m.h" || fail "include not rewritten"
grep -qx '#include "tapeflow/models/m.h"' "$work/out/tapeflow/top.h" || fail "top-level include not rewritten"
grep -qx '#include <vector>' "$work/out/tapeflow/tape/a.h" || fail "a standard include was changed"
[ -f "$work/stamp" ] || fail "no stamp"
# A deleted header disappears from the staged tree.
rm "$work/src/models/m.h"; printf '\n' > "$work/src/top.h"
stage > "$work/log" 2>&1 || { cat "$work/log"; fail "restaging failed"; }
[ ! -e "$work/out/tapeflow/models/m.h" ] || fail "a deleted header stayed staged"
# A public header with a private third-party include fails, naming the header and the include.
printf '#pragma once\n#include <hdf5.h>\n' > "$work/src/tape/bad.h"
if stage > "$work/log" 2>&1; then fail "a public header including <hdf5.h> was staged"; fi
grep -q "the public header tape/bad.h has '#include <hdf5.h>'" "$work/log" || { cat "$work/log"; fail "message"; }
# nlohmann-json only in the bridge header (staged above, with its include kept); in any other public
# header it is refused like any other third-party include.
grep -qx '#include <nlohmann/json.hpp>' "$work/out/tapeflow/bridge.h" || fail "the bridge header was not staged as is"
for bad in '<nlohmann/json_fwd.hpp>' '<nlohmann/json.hpp>' '<boost/any.hpp>'; do
  printf '#pragma once\n#include %s\n#include <cstdint>\n' "$bad" > "$work/src/tape/bad.h"
  if stage > "$work/log" 2>&1; then fail "a public header including $bad was staged"; fi
  tr -s ' \n' '  ' < "$work/log" | grep -qF "the public header tape/bad.h has '#include $bad'" ||
    { cat "$work/log"; fail "message for $bad"; }
done
echo "stage_headers: ok"
