#!/usr/bin/env bash
# Installs what is needed, builds everything, and runs the whole test suite with CTest. The build
# treats warnings as errors (TAPEFLOW_WERROR), so "the build prints no warnings" is checked here.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh -DTAPEFLOW_WERROR=ON
cd build
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
